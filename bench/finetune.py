#!/usr/bin/env python3
"""Fine-tuning on the CPU backend: full training against LoRA, memory and step time side by side.

One GPT of GPT-2-small's shape (12 layers, width 768, 12 heads, vocab
50257; examples/onnx/make_gpt.py --gpt2-small) at context --context
(default 128) and batch --batch (default 1), AdamW, compiled as:

  full          every parameter trains
  lora          --lora r=8,alpha=16,targets=qkv (the fused attention
                projection, GPT-2's c_attn), the rest frozen
  lora-mlp      the same on qkv, proj and both MLP layers
  lora bf16     lora with --precision bf16
  full 8bit     every parameter trains, --optimizer adamw8bit (bitsandbytes'
                8-bit states)
  lora 8bit     lora with --optimizer adamw8bit
  qlora         lora with --base-dtype nf4: every frozen projection's weight
                in bitsandbytes' 4-bit NormalFloat (QLoRA), dequantized
                tile by tile inside its products
  qlora bf16    qlora with --precision bf16 (QLoRA's usual compute type)

One table: parameters trained, planned memory per rank (ztc inspect's
total), parameters, gradients, optimizer state and the arena, and the
peak resident memory of the training process as the kernel measured it
(getrusage), and the step time (a run of --steps + 1 steps less a run of
one, over --steps; best of --repeat rounds in which the variants take
turns) relative to full.
The "base" column is the frozen weights' bytes per element of the
frozen weights held in NF4 (QLoRA) or float32.

    .venv/bin/python bench/finetune.py [--build build] [--steps 5] [--repeat 2]
        [--layers 12] [--context 128] [--batch 1] [--only lora,qlora,...]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent

VARIANTS = {
    "full": [],
    "lora": ["--lora", "r=8,alpha=16,targets=qkv"],
    "lora-mlp": ["--lora", "r=8,alpha=16,targets=qkv|proj|mlp\\.[02]"],
    "lora bf16": ["--lora", "r=8,alpha=16,targets=qkv", "--precision", "bf16"],
    "full 8bit": ["--optimizer", "adamw8bit"],
    "lora 8bit": ["--lora", "r=8,alpha=16,targets=qkv", "--optimizer", "adamw8bit"],
    "qlora": ["--lora", "r=8,alpha=16,targets=qkv", "--base-dtype", "nf4"],
    "qlora bf16": ["--lora", "r=8,alpha=16,targets=qkv", "--base-dtype", "nf4",
                   "--precision", "bf16"],
}


def nf4_base(report):
    """Bytes per element of the weights held in NF4 (their parts included),
    or None without any."""
    weights = report["weights"]
    elements = sum(int(np.prod(w["nf4_shape"])) for w in weights if "nf4_shape" in w)
    size = {"i8": 1, "f32": 4}
    stored = sum(int(np.prod(w["shape"])) * size[w["dtype"]] for w in weights
                 if "nf4_shape" in w or "nf4_of" in w)
    return stored / elements if elements else None


def step_seconds(trainer, art, data, steps):
    """Seconds per step and the peak resident memory (bytes) of the run:
    the wall time of a run of steps + 1 steps less that of a run of one,
    over steps (so process start, loading the weights and the first step's
    page faults do not count; the trainer's own rates are printed to one
    decimal, too coarse at a step or two per second). `trainer` is
    ztc-train itself: `ztc train` first checks that the artifact is up to
    date with its model, mapping the model's files, and a process's peak
    RSS keeps that phase across the exec into the trainer."""
    def run(count):
        start = time.perf_counter()
        child = subprocess.Popen([trainer, str(art), "--data", str(data), "--steps",
                                  str(count)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise SystemExit("ztc train %s failed (%d)" % (art, child.returncode))
        return time.perf_counter() - start, usage.ru_maxrss * 1024
    seconds, peak = run(steps + 1)
    return (seconds - run(1)[0]) / steps, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--only", help="comma-separated variants to run besides full")
    args = parser.parse_args()
    variants = {name: flags for name, flags in VARIANTS.items()
                if not args.only or name == "full" or name in args.only.split(",")}
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    trainer = str(pathlib.Path(args.build) / "bin" / "ztc-train")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="ztc-bench-finetune-") as tmp:
        work = pathlib.Path(tmp)
        subprocess.run([sys.executable, str(ROOT / "examples/onnx/make_gpt.py"), "--out",
                        str(work), "--quiet", "--gpt2-small", "--name", "gpt",
                        "--context", str(args.context), "--layers", str(args.layers)],
                       check=True)
        data = work / "text"
        data.mkdir()
        rows = 4 * args.batch
        np.save(data / "tokens.npy",
                rng.integers(0, 50257, (rows, args.context)).astype(np.int64))
        np.save(data / "labels.npy",
                rng.integers(0, 50257, (rows, args.context)).astype(np.int64))
        arts, reports, trained = {}, {}, {}
        for name, flags in variants.items():
            art = work / ("gpt-%s.ztc" % name.replace(" ", "-"))
            done = subprocess.run([ztc, "compile", str(work / "gpt.onnx"), "-o", str(art),
                                   "--batch-size", str(args.batch), "--loss", "cross_entropy",
                                   *([] if "--optimizer" in flags else ["--optimizer", "adamw"]),
                                   *flags],
                                  capture_output=True, text=True, check=True)
            arts[name] = art
            reports[name] = json.loads((art / "memory.json").read_text())
            trained[name] = sum(int(np.prod(w["shape"])) for w in reports[name]["weights"]
                                if w["role"] == "trained")
            print("compiled %s: %s" % (name, done.stderr.strip().splitlines()[-1]),
                  flush=True)
        best = {name: float("inf") for name in arts}
        peak = {name: 0 for name in arts}
        for _ in range(args.repeat):
            for name, art in arts.items():
                seconds, rss = step_seconds(trainer, art, data, args.steps)
                best[name] = min(best[name], seconds)
                peak[name] = max(peak[name], rss)
        print("\nGPT-2-small shape, %d layers, context %d, batch %d, AdamW (8bit: AdamW8bit), CPU"
              % (args.layers, args.context, args.batch))
        print("%-10s %12s %10s %10s %10s %10s %10s %9s %10s %9s %8s" % (
            "variant", "trained", "memory", "params", "gradients", "opt state", "arena",
            "base", "peak RSS", "ms/step", "vs full"))
        for name in arts:
            r = reports[name]
            base = nf4_base(r)
            print("%-10s %12d %7.1f MB %7.1f MB %7.1f MB %7.1f MB %7.1f MB %9s %7.1f MB "
                  "%9.0f %7.2fx" % (
                      name, trained[name], r["total_bytes"] / 1e6,
                      r["bindings"]["params"] / 1e6, r["gradient_bytes"] / 1e6,
                      r["bindings"]["optimizer_state"] / 1e6, r["arena_bytes"] / 1e6,
                      "%.3f B" % base if base else "4 B", peak[name] / 1e6,
                      1e3 * best[name], best[name] / best["full"]))


if __name__ == "__main__":
    sys.exit(main())
