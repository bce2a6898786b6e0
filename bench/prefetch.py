#!/usr/bin/env python3
"""Background batch gathering (ztc-train's default) against --no-prefetch.

The example MLP on scikit-learn's digits (batch 32, SGD): a data-bound run,
whose step is short next to gathering its batch. Each round trains it with
and without the background reader, in turns; the table shows the best
wall time of --repeat rounds per mode and the ratio, and the run checks
that both modes log the same losses, bit for bit.

    .venv/bin/python bench/prefetch.py [--build build] [--epochs 30] [--repeat 3]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ztc = os.path.join(args.build, "bin", "ztc")
    with tempfile.TemporaryDirectory(prefix="ztc-bench-prefetch-") as tmp:
        subprocess.run([sys.executable, str(ROOT / "examples/onnx/make_mlp.py"), "--out", tmp,
                        "--quiet"], check=True)
        subprocess.run([sys.executable, str(ROOT / "examples/onnx/prepare_digits.py"), "--out",
                        os.path.join(tmp, "digits")], check=True, capture_output=True)
        art = os.path.join(tmp, "mlp.ztc")
        subprocess.run([ztc, "compile", os.path.join(tmp, "mlp.onnx"), "-o", art,
                        "--batch-size", "32", "--loss", "cross_entropy", "--lr", "3e-3"],
                       check=True, capture_output=True)
        modes = {"prefetch": [], "--no-prefetch": ["--no-prefetch"]}
        best, logs = {m: float("inf") for m in modes}, {}
        for _ in range(args.repeat):
            for mode, flags in modes.items():
                start = time.perf_counter()
                done = subprocess.run([ztc, "train", art, "--data",
                                       os.path.join(tmp, "digits", "train"), "--epochs",
                                       str(args.epochs), "--log-every", "10", *flags],
                                      check=True, capture_output=True, text=True)
                best[mode] = min(best[mode], time.perf_counter() - start)
                logs[mode] = re.findall(r"loss ([0-9.]+)", done.stderr)
        steps = int(re.findall(r"steps 1\.\.([0-9]+)", done.stderr)[0])
        print("MLP on digits, %d steps of batch 32" % steps)
        for mode in modes:
            print("  %-14s %8.3f s  %7.3f ms/step  %.2fx" % (
                mode, best[mode], 1e3 * best[mode] / steps, best[mode] / best["--no-prefetch"]))
        same = logs["prefetch"] == logs["--no-prefetch"] and logs["prefetch"]
        print("losses %s (%d log lines)" % ("identical" if same else "DIFFER",
                                            len(logs["prefetch"])))
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
