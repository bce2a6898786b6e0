#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (scripts/fuzz.sh runs it).

  make_seeds.py OUT_DIR [--repo ROOT]

OUT_DIR/<target>/ gets, for each target:
  onnx-binary  the small models of ONNX's backend node tests (Debian's
               libonnx-testdata) and the text models of the lit tests,
               serialized;
  onnx-text    the same models printed in the ONNX text format;
  npy          arrays of every dtype the reader takes, .npy versions 1-3,
               and the variants it must refuse (Fortran order, big-endian);
  checkpoint   checkpoints for the manifest CheckpointFuzzer.cpp declares;
  token-dataset  the datasets of test/fixtures/datasets (megatron-core's
               .idx/.bin pairs, tools/ztc_dataset.py's .npy pair) in the
               layout TokenDatasetFuzzer.cpp reads;
  manifest     nothing here: scripts/fuzz.sh adds the compiled artifact's.
"""
import argparse
import glob
import io
import json
import os
import struct
import sys

import numpy as np
import onnx
import onnx.parser
import onnx.printer

NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
# Inputs above this size slow the fuzzers more than they add coverage.
MAX_MODEL_BYTES = 4096


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def onnx_seeds(out, repo):
    models = []
    for path in sorted(glob.glob(os.path.join(NODE_TESTS, "*", "model.onnx"))):
        if os.path.getsize(path) <= MAX_MODEL_BYTES:
            models.append((os.path.basename(os.path.dirname(path)),
                           onnx.load(path)))
    for path in sorted(glob.glob(os.path.join(repo, "test", "lit", "**",
                                              "*.onnxtxt"), recursive=True)):
        with open(path) as f:
            text = f.read()
        write(os.path.join(out, "onnx-text", "lit-" + os.path.basename(path)),
              text.encode())
        try:
            models.append(("lit-" + os.path.basename(path),
                           onnx.parser.parse_model(text)))
        except Exception:  # some lit inputs are malformed on purpose
            pass
    for name, model in models:
        write(os.path.join(out, "onnx-binary", name + ".onnx"),
              model.SerializeToString())
        try:
            text = onnx.printer.to_text(model)
        except Exception:
            continue
        write(os.path.join(out, "onnx-text", name + ".onnxtxt"), text.encode())
    return len(models)


def npy_seeds(out):
    arrays = {
        "f4": np.arange(6, dtype="<f4").reshape(2, 3),
        "f8": np.array([1.5, -2.0], dtype="<f8"),
        "f2": np.ones((2, 2), dtype="<f2"),
        "i8": np.arange(4, dtype="<i8"),
        "i4": np.arange(3, dtype="<i4").reshape(3, 1),
        "i1": np.array([-1, 0, 1], dtype="i1"),
        "b1": np.array([True, False]),
        "scalar": np.array(3.0, dtype="<f4"),
        "empty": np.zeros((0, 4), dtype="<f4"),
        "fortran": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
        "bigendian": np.arange(3, dtype=">f4"),
        "u8": np.arange(3, dtype="u1"),
    }
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, array)
        write(os.path.join(out, "npy", name + ".npy"), buffer.getvalue())
    # Versions 2.0 and 3.0 (4-byte header length).
    array = arrays["f4"]
    header = np.lib.format.header_data_from_array_1_0(array)
    for major in (2, 3):
        buffer = io.BytesIO()
        np.lib.format._write_array_header(buffer, header, (major, 0))
        buffer.write(array.tobytes())
        write(os.path.join(out, "npy", "v%d.npy" % major), buffer.getvalue())
    return len(arrays) + 2


def safetensors(tensors, metadata):
    header = {}
    offset = 0
    blobs = []
    for name, array in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": {"float32": "F32", "float16": "F16",
                                  "int64": "I64"}[str(array.dtype)],
                        "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def checkpoint_seeds(out):
    """Matches the manifest of CheckpointFuzzer.cpp: params w [3,2] and
    b [2], state w.exp_avg [3,2], 10 batches per epoch."""
    tensors = {"w": np.ones((3, 2), np.float32),
               "b": np.zeros(2, np.float32),
               "w.exp_avg": np.full((3, 2), 0.5, np.float32)}
    metadata = {"format": "ztc-checkpoint-1", "step": "7", "epoch": "1",
                "batch": "3", "seed": "0", "batch_size": "4",
                "num_samples": "40"}
    seeds = {
        "valid": safetensors(tensors, metadata),
        "no-metadata": safetensors(tensors, {}),
        "wrong-shape": safetensors(dict(tensors, b=np.zeros(3, np.float32)),
                                   metadata),
        "half": safetensors({"h": np.ones(4, np.float16),
                             "i": np.arange(2, dtype=np.int64)}, {}),
        "empty": safetensors({}, {}),
    }
    for name, data in seeds.items():
        write(os.path.join(out, "checkpoint", name + ".safetensors"), data)
    return len(seeds)


def token_dataset_seeds(out, repo):
    """Each fixture dataset as one input: a layout byte (0 Megatron, 1
    ztc), the first file's length (u32), the first file, the second."""
    fixtures = os.path.join(repo, "test", "fixtures", "datasets")
    count = 0
    for name, layout, first, second in (
            ("megatron_int32", 0, "megatron_int32.idx", "megatron_int32.bin"),
            ("megatron_uint16", 0, "megatron_uint16.idx", "megatron_uint16.bin"),
            ("hf", 1, "hf/offsets.npy", "hf/tokens.npy")):
        with open(os.path.join(fixtures, first), "rb") as f:
            a = f.read()
        with open(os.path.join(fixtures, second), "rb") as f:
            b = f.read()
        write(os.path.join(out, "token-dataset", name),
              bytes([layout]) + struct.pack("<I", len(a)) + a + b)
        count += 1
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--repo", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = parser.parse_args()
    counts = {"onnx models": onnx_seeds(args.out, args.repo),
              "npy": npy_seeds(args.out),
              "checkpoint": checkpoint_seeds(args.out),
              "token-dataset": token_dataset_seeds(args.out, args.repo)}
    print("seeds: " + ", ".join("%s %d" % kv for kv in counts.items()))


if __name__ == "__main__":
    sys.exit(main())
