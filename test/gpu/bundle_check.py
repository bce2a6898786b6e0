#!/usr/bin/env python3
"""gpu_check.py's two halves on a machine that may have no GPU.

Prepares a bundle of two cases (the GPT under --comm nccl and the CNN with
training-mode BatchNorm) and checks what the GPU node will get: the CUDA
artifacts with their step libraries packed, the CPU references, ztc-train
and the libraries it needs. Then runs the node's half on it: with a GPU
every check must pass; without one, every case must fail with the
backend's "no usable CUDA device" (or nccl's "sees no CUDA device")
message and nothing else, which exercises the unpacking and the library
path the node relies on.

Usage: bundle_check.py --ztc ZTC --ztc-train ZTC_TRAIN
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "training"))
from checks import check, summary  # noqa: E402

CASES = ["gpt", "cnn-batchnorm"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train", required=True)
    args = parser.parse_args()
    script = os.path.join(HERE, "gpu_check.py")
    with tempfile.TemporaryDirectory(prefix="ztc-gpu-bundle-") as tmp:
        bundle = os.path.join(tmp, "bundle")
        prepared = subprocess.run([sys.executable, script, "prepare", bundle, "--ztc", args.ztc,
                                   "--ztc-train", args.ztc_train, "--cases", ",".join(CASES)],
                                  capture_output=True, text=True)
        check(prepared.returncode == 0, "gpu_check.py prepare --cases %s: exit %d%s" % (
            ",".join(CASES), prepared.returncode,
            "" if prepared.returncode == 0 else ": " + prepared.stderr.strip()[-1500:]))
        if prepared.returncode != 0:
            return summary()
        with open(os.path.join(bundle, "cases.json")) as f:
            names = [case["name"] for case in json.load(f)]
        check(names == CASES, "cases.json lists %s" % names)
        for name in CASES:
            art = os.path.join(bundle, "art", name + "-cuda.ztc")
            with open(os.path.join(art, "manifest.json")) as f:
                target = json.load(f)["target"]
            packed = os.path.join(art, "step.so.xz")
            check(target == "cuda" and os.path.getsize(packed) > 0 and
                  not os.path.exists(os.path.join(art, "step.so")),
                  "%s: a CUDA artifact whose step travels packed (%d bytes)"
                  % (name, os.path.getsize(packed)))
            ref = os.path.join(bundle, "ref", name)
            with open(os.path.join(ref, "metrics.jsonl")) as f:
                steps = sum(1 for line in f if line.strip())
            grads = glob.glob(os.path.join(ref, "grads", "grad", "*.npy"))
            check(steps > 0 and grads and os.path.exists(
                os.path.join(ref, "ckpt", "checkpoint.safetensors")),
                "%s: CPU references: %d logged steps, %d first-step gradients, a checkpoint"
                % (name, steps, len(grads)))
            check(not os.path.exists(os.path.join(bundle, "art", name + "-cpu.ztc")),
                  "%s: the CPU artifact stays home" % name)
        train = os.path.join(bundle, "bin", "ztc-train")
        libs = glob.glob(os.path.join(bundle, "lib", "*.xz"))
        check(os.access(train, os.X_OK) and libs,
              "the bundle's ztc-train, and %d packed libraries" % len(libs))

        ran = subprocess.run([sys.executable, script, "run", bundle, "--out",
                              os.path.join(tmp, "out"), "--no-sanitizer"],
                             capture_output=True, text=True, timeout=900)
        lines = ran.stdout.splitlines()
        failures = [line for line in lines if line.startswith("FAIL")]
        no_device = re.compile(r"no usable CUDA device|sees no CUDA device")
        if ran.returncode == 0:
            check(not failures, "a GPU is here: every check of the run passed")
        else:
            trains = [line for line in failures if "ztc-train on CUDA exited" in line]
            check(len(trains) == len(CASES) and all(no_device.search(line) for line in trains),
                  "no GPU: each case fails with the missing device's message (%s)"
                  % (trains[0][5:200] if trains else ran.stderr.strip()[-600:]))
        unpacked = all(os.path.exists(os.path.join(bundle, "art", name + "-cuda.ztc",
                                                   "step.so")) for name in CASES)
        check(unpacked, "the run unpacked each step library before loading it")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
