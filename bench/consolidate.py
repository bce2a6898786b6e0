#!/usr/bin/env python3
"""Consolidating a sharded checkpoint of a 124M-parameter GPT in bounded memory.

A GPT of GPT-2-small shape (examples/onnx/make_gpt.py --gpt2-small: 12
layers, width 768, vocab 50257; context --context, default 128) is
compiled for --ranks ranks (default 4) at ZeRO stage 3 with every
parameter sharded, trained --steps steps (default 1) under mpirun on
random tokens with a sharded checkpoint, then `ztc consolidate` writes the
whole weights. Printed, measured in this run:
  - the checkpoint's size on disk and the largest tensor of the model;
  - the peak resident memory of `ztc consolidate` (GNU time's maximum
    resident set size), against the bound the issue sets: the largest
    tensor plus 64 MB;
  - that the output opens with the safetensors package and holds every
    parameter in its whole shape.
Exit status 1 when the bound or the check fails.

    .venv/bin/python bench/consolidate.py [--build build] [--ranks 4] [--steps 1]
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1")


def run(*command):
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        sys.exit("consolidate.py: %s failed (exit %d):\n%s%s" % (
            " ".join(map(str, command)), done.returncode, done.stdout, done.stderr[-3000:]))
    return done


def mib(n):
    return "%.1f MiB" % (n / 2**20)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--context", type=int, default=128)
    args = parser.parse_args()
    ztc = pathlib.Path(args.build) / "bin" / "ztc"
    train = pathlib.Path(args.build) / "bin" / "ztc-train"
    mpirun, gnu_time = shutil.which("mpirun"), shutil.which("time") or "/usr/bin/time"
    if not mpirun or not os.path.exists(gnu_time):
        sys.exit("consolidate.py: needs mpirun and GNU time (/usr/bin/time)")
    with tempfile.TemporaryDirectory(prefix="ztc-bench-consolidate-") as tmp:
        tmp = pathlib.Path(tmp)
        run(sys.executable, ROOT / "examples" / "onnx" / "make_gpt.py", "--gpt2-small",
            "--out", tmp, "--context", args.context, "--quiet")
        model = tmp / "gpt2_small.onnx"
        art = tmp / "gpt2.ztc"
        run(ztc, "compile", model, "-o", art, "--loss", "cross_entropy", "--batch-size", 1,
            "--world-size", args.ranks, "--zero", 3, "--param-persistence-threshold", 0)
        data = tmp / "data"
        data.mkdir()
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, 50257, size=(4 * args.ranks, args.context), dtype=np.int64)
        np.save(data / "tokens.npy", tokens)
        np.save(data / "labels.npy", np.roll(tokens, -1, axis=1))
        ckpt = tmp / "ckpt"
        run(mpirun, "-np", args.ranks, train, art, "--data", data, "--steps", args.steps,
            "--save", ckpt)
        size = sum(f.stat().st_size for f in ckpt.rglob("*") if f.is_file())
        out = tmp / "model.safetensors"
        done = run(gnu_time, "-v", ztc, "consolidate", ckpt, "-o", out)
        peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                             done.stderr).group(1)) * 1024
        from safetensors.numpy import load_file
        weights = load_file(str(out))
        largest = max(w.nbytes for w in weights.values())
        count = sum(w.size for w in weights.values())
        bound = largest + 64 * 2**20
        print("GPT-2-small shape, %d parameters, %d ranks at ZeRO stage 3, %d step(s)"
              % (count, args.ranks, args.steps))
        print("checkpoint on disk:            %s (%d rank files)" % (
            mib(size), args.ranks))
        print("largest tensor:                %s" % mib(largest))
        print("ztc consolidate, peak RSS:     %s" % mib(peak))
        print("bound (largest tensor + 64 MB): %s  -> %s" % (
            mib(bound), "within" if peak <= bound else "EXCEEDED"))
        print(done.stderr.strip().splitlines()[0])
        return 0 if peak <= bound and len(weights) > 100 else 1


if __name__ == "__main__":
    sys.exit(main())
