#!/usr/bin/env python3
"""Background batch gathering (ztc-train's default) against --no-prefetch.

Two runs of the example MLP (SGD), each trained with and without the
background reader, in turns, best wall time of --repeat rounds:
  - on scikit-learn's digits, batch 32: a data-bound run whose 8 KiB
    batches are below the reader's threshold (256 KiB), so both modes
    gather inline: it must not be slower;
  - on 65,536 random samples, batch 4,096 (1 MiB batches): the reader
    gathers the next batch while the step runs.
Both modes must log the same losses, bit for bit.

    .venv/bin/python bench/prefetch.py [--build build] [--repeat 3]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent


def compare(ztc, name, model, data, batch, epochs, repeat, work):
    art = os.path.join(work, "%s.ztc" % name)
    subprocess.run([ztc, "compile", model, "-o", art, "--batch-size", str(batch), "--loss",
                    "cross_entropy", "--lr", "3e-3"], check=True, capture_output=True)
    modes = {"prefetch": [], "--no-prefetch": ["--no-prefetch"]}
    best, logs = {m: float("inf") for m in modes}, {}
    for _ in range(repeat):
        for mode, flags in modes.items():
            start = time.perf_counter()
            done = subprocess.run([ztc, "train", art, "--data", data, "--epochs", str(epochs),
                                   "--log-every", "10", *flags],
                                  check=True, capture_output=True, text=True)
            best[mode] = min(best[mode], time.perf_counter() - start)
            logs[mode] = re.findall(r"loss ([0-9.]+)", done.stderr)
    steps = int(re.findall(r"steps 1\.\.([0-9]+)", done.stderr)[0])
    print("%s: %d steps of batch %d" % (name, steps, batch))
    for mode in modes:
        print("  %-14s %8.3f s  %7.3f ms/step  %.2fx" % (
            mode, best[mode], 1e3 * best[mode] / steps, best[mode] / best["--no-prefetch"]))
    same = logs["prefetch"] == logs["--no-prefetch"] and bool(logs["prefetch"])
    print("  losses %s (%d log lines)" % ("identical" if same else "DIFFER",
                                          len(logs["prefetch"])))
    return same


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ztc = os.path.join(args.build, "bin", "ztc")
    with tempfile.TemporaryDirectory(prefix="ztc-bench-prefetch-") as tmp:
        subprocess.run([sys.executable, str(ROOT / "examples/onnx/make_mlp.py"), "--out", tmp,
                        "--quiet"], check=True)
        subprocess.run([sys.executable, str(ROOT / "examples/onnx/prepare_digits.py"), "--out",
                        os.path.join(tmp, "digits")], check=True, capture_output=True)
        rng = np.random.default_rng(0)
        big = os.path.join(tmp, "random")
        os.makedirs(big)
        np.save(os.path.join(big, "x.npy"), rng.standard_normal((65536, 64)).astype(np.float32))
        np.save(os.path.join(big, "labels.npy"), rng.integers(0, 10, 65536).astype(np.int64))
        model = os.path.join(tmp, "mlp.onnx")
        ok = compare(ztc, "MLP on digits", model, os.path.join(tmp, "digits", "train"), 32, 30,
                     args.repeat, tmp)
        ok &= compare(ztc, "MLP on random data", model, big, 4096, 10, args.repeat, tmp)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
