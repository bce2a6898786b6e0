#!/usr/bin/env python3
"""Makes binary ONNX files from ONNX text for lit tests of the importer.

  onnx_tool.py binary IN.onnxtxt OUT.onnx        text -> binary protobuf
  onnx_tool.py truncate IN.onnxtxt OUT.onnx      the first half of the binary
  onnx_tool.py external IN.onnxtxt OUT.onnx      initializers moved to
                                                 OUT.onnx.data
  onnx_tool.py npy OUT.npy DTYPE D0xD1...        an .npy of 0, 1, 2, ...
  onnx_tool.py metadata FILE.safetensors K=V...  sets metadata entries of a
                                                 safetensors file in place
                                                 (-K removes entry K)
  onnx_tool.py relocate IN.onnx OUT.onnx K=V...  sets external_data entries
                                                 (location, offset, length)
                                                 of every external initializer
"""
import json
import os
import struct
import sys

import onnx
import onnx.numpy_helper
import onnx.parser


def load(path):
    with open(path) as f:
        return onnx.parser.parse_model(f.read())


def main():
    if sys.argv[1] == "npy":
        import numpy as np
        path, dtype, dims = sys.argv[2:5]
        shape = [int(d) for d in dims.split("x")] if dims else []
        np.save(path, np.arange(int(np.prod(shape))).astype(dtype).reshape(shape))
        return
    if sys.argv[1] == "metadata":
        path = sys.argv[2]
        with open(path, "rb") as f:
            data = f.read()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        for entry in sys.argv[3:]:
            if entry.startswith("-"):
                header.setdefault("__metadata__", {}).pop(entry[1:], None)
                continue
            key, value = entry.split("=", 1)
            header.setdefault("__metadata__", {})[key] = value
        text = json.dumps(header).encode()
        text += b" " * ((8 - len(text) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data[8 + length:])
        return
    if sys.argv[1] == "relocate":
        src, dst = sys.argv[2:4]
        model = onnx.load_model(src, load_external_data=False)
        for init in model.graph.initializer:
            for entry in sys.argv[4:]:
                key, value = entry.split("=", 1)
                found = [e for e in init.external_data if e.key == key]
                (found[0] if found else init.external_data.add()).key = key
                (found[0] if found else init.external_data[-1]).value = value
        with open(dst, "wb") as f:
            f.write(model.SerializeToString())
        return
    command, src, dst = sys.argv[1:4]
    model = load(src)
    if command == "binary":
        onnx.save_model(model, dst)
    elif command == "truncate":
        data = model.SerializeToString()
        with open(dst, "wb") as f:
            f.write(data[: len(data) // 2])
    elif command == "external":
        # Only raw_data tensors move out; the text parser fills typed fields.
        for init in model.graph.initializer:
            init.CopyFrom(onnx.numpy_helper.from_array(
                onnx.numpy_helper.to_array(init), init.name))
        onnx.save_model(model, dst, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=os.path.basename(dst) + ".data",
                        size_threshold=0)
    else:
        sys.exit("unknown command " + command)


if __name__ == "__main__":
    main()
