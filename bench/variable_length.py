#!/usr/bin/env python3
"""Variable-length text on the CPU backend: real tokens per second of each batching mode, side by side.

A GPT with a dynamic sequence axis (examples/onnx/make_gpt.py
--dynamic-length: --layers 2, width 128, 4 heads, vocabulary 256, context
512) trains with batches of 8 on a corpus of --documents documents of
skewed lengths (log-normal, median about 90 tokens, clipped to 16..512),
written by tools/ztc_dataset.py, for one epoch (--steps). The modes:

  fixed      --batching pad on a step compiled for 512 alone: every row
             padded to 512, as without ztc's variable-length support
  pad        --batching pad, --seq-buckets 64,128,256,512: each batch at
             the shortest length that holds it
  group      --batching group (the Trainer's group_by_length) on the
             512-only step: similar lengths together, padded to 512
  group+b    --batching group with the buckets
  pack       --batching pack: documents end to end in rows of 512

For each: real tokens per second (labels that count, from --metrics:
the sum of real tokens over the sum of step times, the first step
excluded), the padding share, and the ratio to fixed. pad and group+b run
the same batches as fixed and group, so their losses must agree (the
largest difference per step is printed; the test token-datasets asserts
1e-5 on a smaller model).

    .venv/bin/python bench/variable_length.py [--build build] [--steps N]
        [--documents 1000]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONTEXT, VOCAB, BATCH = 512, 256, 8
BUCKETS = "64,128,256,512"


def train(ztc, art, corpus, mode, steps, metrics):
    subprocess.run([ztc, "train", str(art), "--data", str(corpus), "--batching", mode,
                    "--steps", str(steps), "--log-every", "1", "--metrics", str(metrics)],
                   check=True, capture_output=True, text=True)
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if '"loss"' in line]
    timed = lines[1:]
    seconds = sum(line["real_tokens"] / line["tokens_per_second"] for line in timed)
    rate = sum(line["real_tokens"] for line in timed) / seconds
    padding = float(np.mean([line["padding_fraction"] for line in lines]))
    return rate, padding, [line["loss"] for line in lines]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--steps", type=int, default=0,
                        help="steps per mode (default: one epoch of pad)")
    parser.add_argument("--documents", type=int, default=1000)
    args = parser.parse_args()
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    # A whole epoch by default: group's order runs from the longest
    # documents to the shortest within each megabatch, so a part of an
    # epoch is no fair sample of it.
    args.steps = args.steps or args.documents // BATCH
    with tempfile.TemporaryDirectory(prefix="ztc-varlen-") as tmp:
        tmp = pathlib.Path(tmp)
        rng = np.random.default_rng(0)
        lengths = np.clip(rng.lognormal(np.log(90), 0.9, args.documents), 16, CONTEXT)
        with open(tmp / "corpus.jsonl", "w") as f:
            for length in lengths.astype(int):
                start = int(rng.integers(1, VOCAB))
                f.write(json.dumps([(start + 3 * i) % VOCAB for i in range(length)]) + "\n")
        subprocess.run([sys.executable, str(ROOT / "tools" / "ztc_dataset.py"), "--jsonl",
                        str(tmp / "corpus.jsonl"), "-o", str(tmp / "corpus")], check=True,
                       capture_output=True)
        subprocess.run([sys.executable, str(ROOT / "examples" / "onnx" / "make_gpt.py"),
                        "--out", str(tmp), "--quiet", "--name", "gpt", "--layers", "2",
                        "--width", "128", "--heads", "4", "--context", str(CONTEXT), "--vocab",
                        str(VOCAB), "--dynamic-length"], check=True)
        common = ["--batch-size", str(BATCH), "--loss", "cross_entropy", "--lr", "1e-3"]
        whole, buckets = tmp / "whole.ztc", tmp / "buckets.ztc"
        subprocess.run([ztc, "compile", str(tmp / "gpt.onnx"), "-o", str(whole),
                        "--input-shape", "tokens=%dx%d" % (BATCH, CONTEXT), *common],
                       check=True, capture_output=True)
        subprocess.run([ztc, "compile", str(tmp / "gpt.onnx"), "-o", str(buckets),
                        "--seq-buckets", BUCKETS, *common], check=True, capture_output=True)
        runs = {}
        for name, art, mode in (("fixed", whole, "pad"), ("pad", buckets, "pad"),
                                ("group", whole, "group"), ("group+b", buckets, "group"),
                                ("pack", whole, "pack")):
            runs[name] = train(ztc, art, tmp / "corpus", mode, args.steps,
                               tmp / ("%s.jsonl" % name))
        print("%d documents, %d..%d tokens (median %d); batches of %d; %d steps each"
              % (args.documents, lengths.min(), lengths.max(), np.median(lengths), BATCH,
                 args.steps))
        print("%-8s %14s %9s %9s" % ("mode", "real tokens/s", "padding", "vs fixed"))
        for name, (rate, padding, _) in runs.items():
            print("%-8s %14.0f %8.1f%% %8.2fx" % (name, rate, 100 * padding,
                                                  rate / runs["fixed"][0]))
        for bucketed, plain in (("pad", "fixed"), ("group+b", "group")):
            worst = max(abs(a - b) for a, b in zip(runs[bucketed][2], runs[plain][2]))
            print("losses of %s against %s (the same batches): largest difference %.1e"
                  % (bucketed, plain, worst))


if __name__ == "__main__":
    main()
