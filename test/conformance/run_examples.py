#!/usr/bin/env python3
"""Runs the PyTorch-exported example models through `ztc run` on the CPU.

For the MLP, the CNN (with BatchNorm) and the small GPT made by
examples/onnx, compares ztc's outputs with PyTorch's reference outputs
(max |ztc - torch| / max |torch| at most 1e-5), and checks the memory plan
of the GPT: the arena is at most half the bytes of all its intermediate
tensors. Usage: run_examples.py --ztc PATH
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = {"mlp": "x", "cnn": "x", "cnn_train": "x", "gpt": "tokens"}


def header_bytes(source, label):
    match = re.search(r"^// %s: (\d+) bytes" % re.escape(label), source, re.M)
    return int(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ztc-examples-") as tmp:
        models = os.path.join(tmp, "models")
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"), models],
                       check=True)
        for name in MODELS:
            model = os.path.join(models, name + ".onnx")
            out = os.path.join(tmp, name + "_out")
            subprocess.run([args.ztc, "run", model, "--data",
                            os.path.join(models, name + "_data"), "--output-dir", out],
                           check=True)
            ref_dir = os.path.join(models, name + "_ref")
            for file in sorted(os.listdir(ref_dir)):
                expected = np.load(os.path.join(ref_dir, file))
                actual = np.load(os.path.join(out, file))
                scale = max(float(np.abs(expected).max()), 1e-30)
                error = float(np.abs(actual.astype(np.float64) - expected).max()) / scale
                ok = actual.shape == expected.shape and error <= 1e-5
                failures += not ok
                print("%s %s/%s: shape %s, max relative error %.2e"
                      % ("ok  " if ok else "FAIL", name, file, list(actual.shape), error))

        shape = "%s=4x16" % MODELS["gpt"]
        source = subprocess.run([args.ztc, "emit", os.path.join(models, "gpt.onnx"),
                                 "--input-shape", shape],
                                check=True, capture_output=True, text=True).stdout
        arena = header_bytes(source, "Arena")
        tensors = header_bytes(source, "Intermediate tensors before fusion")
        ok = 2 * arena <= tensors
        failures += not ok
        print("%s gpt memory plan: arena %d bytes, intermediate tensors %d bytes (%.1f%%)"
              % ("ok  " if ok else "FAIL", arena, tensors, 100.0 * arena / tensors))
    print("%d passed, %d failed" % (4 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
