#!/usr/bin/env python3
"""The fused cross entropy on the CPU backend: step time, arena and losses, side by side.

For GPTs whose logits are the step's largest buffer (2 layers, width 256,
4 heads, context 256, batch 4, vocabularies of 8,192 and 32,768), the step
is compiled with `--fuse-cross-entropy off` and `on`, in f32 and with
`--precision bf16` (the head's product in bf16, its loss in f32), and
trained on the CPU backend on the same data. One row per model, precision
and setting: the planned
arena, the step time relative to `off` (the difference between runs of 2
and 2 + --steps steps, best of --repeat rounds in which the settings take
turns), and the largest relative difference of the `on` run's losses from
`off`'s over 2 + --steps steps.

    .venv/bin/python bench/fused_loss.py [--build build] [--steps 10] [--repeat 3]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from recompute import parse_args, run_steps  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
SETTINGS = ("off", "on")
VOCABULARIES = (8192, 32768)
PRECISIONS = ("fp32", "bf16")


def make_model(work, vocab, rng):
    """The GPT as work/gpt-VOCAB.onnx and 64 windows of text whose labels
    follow from the tokens (so the loss falls) in work/text-VOCAB."""
    name = "gpt-%d" % vocab
    subprocess.run([sys.executable, str(ROOT / "examples/onnx/make_gpt.py"), "--out",
                    str(work), "--quiet", "--name", name, "--layers", "2", "--width", "256",
                    "--heads", "4", "--context", "256", "--vocab", str(vocab)], check=True)
    text = work / ("text-%d" % vocab)
    text.mkdir()
    tokens = rng.integers(0, vocab, (64, 256)).astype(np.int64)
    np.save(text / "tokens.npy", tokens)
    np.save(text / "labels.npy", (7 * tokens + 3) % vocab)
    return work / (name + ".onnx"), text


def losses(ztc, art, data, steps, work):
    metrics = work / (art.name + ".jsonl")
    subprocess.run([ztc, "train", str(art), "--data", str(data), "--steps", str(steps),
                    "--log-every", "1", "--metrics", str(metrics)], check=True,
                   capture_output=True)
    return [json.loads(line)["loss"] for line in metrics.read_text().splitlines()
            if '"loss"' in line]


def measure(ztc, args, work, model, text, vocab, precision):
    """Compiles, trains and times both settings; prints their rows."""
    arts, arenas = {}, {}
    for setting in SETTINGS:
        art = work / ("gpt-%d-%s-%s.ztc" % (vocab, precision, setting))
        subprocess.run([ztc, "compile", str(model), "-o", str(art), "--batch-size", "4",
                        "--loss", "cross_entropy", "--precision", precision,
                        "--fuse-cross-entropy", setting], check=True, capture_output=True)
        arts[setting] = art
        arenas[setting] = json.loads((art / "manifest.json").read_text())["arena_bytes"]
    curves = {s: losses(ztc, arts[s], text, 2 + args.steps, work) for s in SETTINGS}
    gap = max(abs(a - b) / abs(b) for a, b in zip(curves["on"], curves["off"]))
    best = {setting: float("inf") for setting in SETTINGS}
    for _ in range(args.repeat):
        for setting in SETTINGS:
            short = run_steps(ztc, arts[setting], text, 2)
            long = run_steps(ztc, arts[setting], text, 2 + args.steps)
            best[setting] = min(best[setting], (long - short) / args.steps)
    for setting in SETTINGS:
        print("%-22s %-4s %-4s %9.1f MB %10.1f %9.2fx %22s" % (
            "vocab %d, 1024 tokens" % vocab, precision, setting, arenas[setting] / 1e6,
            1e3 * best[setting], best[setting] / best["off"],
            "%.1e" % gap if setting == "on" else ""), flush=True)


def main():
    args = parse_args(__doc__)
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    rng = np.random.default_rng(0)
    print("%-22s %-4s %-4s %12s %10s %10s %22s" % (
        "model", "prec", "fuse", "arena", "ms/step", "vs off", "losses vs off (rel.)"))
    with tempfile.TemporaryDirectory(prefix="ztc-bench-fused-loss-") as tmp:
        work = pathlib.Path(tmp)
        for vocab in VOCABULARIES:
            model, text = make_model(work, vocab, rng)
            for precision in PRECISIONS:
                measure(ztc, args, work, model, text, vocab, precision)


if __name__ == "__main__":
    sys.exit(main())
