#!/usr/bin/env python3
"""CPU forward time of GPT models: ztc against onnxruntime, side by side.

Generates (once, cached under build/bench/) the example GPT and a medium GPT
with examples/onnx/make_gpt.py, then times the forward step on the same
inputs with `ztc run --repeat N` (the compiled step alone, compile time
excluded) and with an onnxruntime CPU session, and prints the ratio.

Usage: bench/forward_gpt.py [--ztc PATH] [--repeat N]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(REPO, "build", "bench")
CONFIGS = {
    # name: make_gpt.py overrides
    "gpt": [],
    "gpt_medium": ["--vocab", "1024", "--context", "128", "--width", "256",
                   "--heads", "4", "--layers", "4", "--batch", "8"],
}


def ensure_model(name, overrides):
    path = os.path.join(CACHE, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"),
                        "--out", CACHE, "--name", name, "--quiet"] + overrides, check=True)
    return path


def time_ztc(ztc, model, data, repeat):
    with tempfile.TemporaryDirectory() as out:
        err = subprocess.run([ztc, "run", model, "--data", data, "--output-dir", out,
                              "--repeat", str(repeat)],
                             check=True, capture_output=True, text=True).stderr
    return float(re.search(r"median ([0-9.]+) ms", err).group(1))


def time_ort(model, data, repeat):
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(os.path.join(data, i.name + ".npy")) for i in session.get_inputs()}
    session.run(None, feeds)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ztc", default=os.path.join(REPO, "build", "bin", "ztc"))
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args()
    print("%-12s %12s %12s %10s" % ("model", "ztc ms", "ort ms", "ztc/ort"))
    for name, overrides in CONFIGS.items():
        model = ensure_model(name, overrides)
        data = os.path.join(CACHE, name + "_data")
        ztc_ms = time_ztc(args.ztc, model, data, args.repeat)
        ort_ms = time_ort(model, data, args.repeat)
        print("%-12s %12.3f %12.3f %10.2f" % (name, ztc_ms, ort_ms, ztc_ms / ort_ms),
              flush=True)


if __name__ == "__main__":
    main()
