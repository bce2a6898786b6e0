#!/usr/bin/env python3
"""Training on token datasets: variable-length documents, packed or padded.

A corpus of 400 documents of skewed (log-normal) lengths, 2 to 120 tokens,
each counting up from a random token (modulo the vocabulary), so that the
next token is learnable; written by tools/ztc_dataset.py (JSON lines in) and
as a Megatron .bin/.idx pair. A 1-layer GPT (context 16, vocabulary 64,
batch 4) trains on it:

  - --batching pack: the loss falls (60 steps, last logged loss under half
    the first), and the rows waste under 1% of the stream's tokens;
  - the Megatron pair trains to the same losses, bit for bit, as the ztc
    layout of the same documents (pack and pad);
  - resuming mid-epoch gives the uninterrupted run's losses, bit for bit,
    for pack and pad, on 1 rank and (with --mpirun) on 2;
  - --batching pad trains too, and every flag error is one line;
  - --seq-buckets: a GPT with a dynamic sequence axis (context 32) compiled
    for lengths 8, 16 and 32 trains under pad and group to the losses of
    the same GPT compiled for 32 alone (the same batches, each padded to
    32), within 1e-5 per step, with less padding (the logs' and --metrics'
    real tokens per second and padding share); group batches similar
    lengths (less padding than pad); resuming mid-epoch with buckets gives
    the uninterrupted run's losses on 1 and 2 ranks; --seq-buckets
    auto=CORPUS,32 picks the corpus's length percentiles; the compile
    errors (a static sequence, lengths out of order) are one line;
  - --token-weighted-loss: a step of 2 micro-batches of 2 padded documents,
    or of 2 ranks with 2 each, trains to the losses of one batch of 4 (the
    mean over the step's real tokens), within 1e-5 per step for 20 steps;
    without it, the mean of the micro-batches' means differs;
  - a BERT sequence classifier with an attention mask
    (test/fixtures/classifier, test/models/make_classifier.py) trains on
    documents with labels (tools/ztc_dataset.py --label-column) under
    --batching pad --sampler sequential to PyTorch's losses with the
    Trainer's DataCollatorWithPadding on the same batches, within 1e-5 for
    20 AdamW steps, padded to one length or to buckets.

Usage: tokens_check.py --ztc PATH [--ztc-train PATH --mpirun PATH]
"""

import argparse
import json
import math
import os
import re
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402
from zero_check import losses_of, run  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB, CONTEXT = 64, 16


def write_megatron(prefix, documents):
    """The documents as a Megatron indexed dataset (one sequence each),
    int32 tokens: the layout megatron-core writes (its own files are
    test/fixtures/datasets)."""
    sizes = [len(d) for d in documents]
    with open(prefix + ".bin", "wb") as f:
        for document in documents:
            f.write(np.asarray(document, np.int32).tobytes())
    pointers = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) * 4
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + bytes([4]))
        f.write(struct.pack("<QQ", len(documents), len(documents) + 1))
        f.write(np.asarray(sizes, np.int32).tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(len(documents) + 1, dtype=np.int64).tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train")
    parser.add_argument("--mpirun")
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory(prefix="ztc-tokens-") as tmp:
        documents = []
        for _ in range(400):
            length = int(np.clip(rng.lognormal(3.0, 0.9), 2, 120))
            start = int(rng.integers(1, VOCAB))
            documents.append([(start + i) % VOCAB for i in range(length)])
        jsonl = os.path.join(tmp, "corpus.jsonl")
        with open(jsonl, "w") as f:
            for document in documents:
                f.write(json.dumps(document) + "\n")
        corpus = os.path.join(tmp, "corpus")
        run(sys.executable, os.path.join(REPO, "tools", "ztc_dataset.py"), "--jsonl", jsonl,
            "-o", corpus)
        megatron = os.path.join(tmp, "corpus_megatron")
        write_megatron(megatron, documents)
        run(sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"), "--out", tmp,
            "--quiet", "--name", "gpt", "--layers", "1", "--width", "32", "--heads", "2",
            "--context", str(CONTEXT), "--vocab", str(VOCAB))
        art = os.path.join(tmp, "gpt.ztc")
        run(args.ztc, "compile", os.path.join(tmp, "gpt.onnx"), "-o", art, "--batch-size", "4",
            "--loss", "cross_entropy", "--lr", "1e-2")

        def train(data, *flags, art=art, launcher=()):
            command = [*launcher, args.ztc_train] if launcher else [args.ztc, "train"]
            log = run(*command, art, "--data", data, "--log-every", "1", *flags).stderr
            return losses_of(log), log

        # 1. pack: learns, wastes little.
        losses, log = train(corpus, "--steps", "60", "--eos-token", "0")
        rows = re.search(r"(\d+) rows packed from", log)
        stream = sum(len(d) + 1 for d in documents)
        used = int(rows.group(1)) * CONTEXT if rows else 0
        check(rows and used >= 0.99 * (stream - 1),
              "pack: %s rows of %d labels use %d of the stream's %d tokens (%.2f%% wasted)"
              % (rows.group(1) if rows else "?", CONTEXT, used, stream,
                 100.0 * (stream - 1 - used) / (stream - 1)))
        check(len(losses) == 60 and losses[-1] < 0.5 * losses[0],
              "pack: 60 steps, loss %.4f -> %.4f" % (losses[0], losses[-1]))

        # 2. The Megatron pair is the same data.
        for mode in ("pack", "pad"):
            ours, _ = train(corpus, "--steps", "8", "--batching", mode)
            theirs, _ = train(megatron, "--steps", "8", "--batching", mode)
            check(ours == theirs and len(ours) == 8,
                  "%s: the Megatron .bin/.idx trains to the ztc layout's losses, bit for "
                  "bit (%s)" % (mode, ours == theirs))

        # 3. Resume mid-epoch (step 10 of epochs of about 180 batches packed,
        # 100 padded).
        worlds = [(1, art, ())]
        if args.mpirun and args.ztc_train:
            art2 = os.path.join(tmp, "gpt2ranks.ztc")
            run(args.ztc, "compile", os.path.join(tmp, "gpt.onnx"), "-o", art2,
                "--batch-size", "2", "--loss", "cross_entropy", "--lr", "1e-2",
                "--world-size", "2", "--zero", "1")
            worlds.append((2, art2, (args.mpirun, "-np", "2")))
        for world, artifact, launcher in worlds:
            for mode in ("pack", "pad", "group"):
                ckpt = os.path.join(tmp, "ckpt-%s-%d" % (mode, world))
                whole, _ = train(corpus, "--steps", "20", "--batching", mode, art=artifact,
                                 launcher=launcher)
                train(corpus, "--steps", "10", "--batching", mode, "--save", ckpt,
                      art=artifact, launcher=launcher)
                resumed, log = train(corpus, "--steps", "20", "--batching", mode, "--resume",
                                     ckpt, art=artifact, launcher=launcher)
                check(resumed == whole[10:] and len(resumed) == 10,
                      "%s on %d rank%s: resumed at step 10, steps 11-20 are the "
                      "uninterrupted run's, bit for bit (%s)"
                      % (mode, world, "s" if world > 1 else "", resumed == whole[10:]))

        # 4. pad learns too; flag errors.
        padded, _ = train(corpus, "--steps", "60", "--batching", "pad")
        check(len(padded) == 60 and padded[-1] < 0.6 * padded[0],
              "pad: 60 steps, loss %.4f -> %.4f" % (padded[0], padded[-1]))
        for flags, message in (
                (["--batching", "sorted"],
                 "--batching expects pack, pad or group, got 'sorted'"),
                (["--batching", "pad", "--eos-token", "0"],
                 "--eos-token applies to --batching pack")):
            result = run(args.ztc, "train", art, "--data", corpus, *flags, ok=False)
            check(result.returncode == 1 and message in result.stderr
                  and len(result.stderr.strip().splitlines()) == 1,
                  "ztc train %s: exit %d, %s" % (" ".join(flags), result.returncode,
                                                 result.stderr.strip()))

        buckets(args, tmp, corpus, train)
        token_weighted(args, tmp, corpus, train)
        classifier(args, tmp, train)
    return summary()


def classifier(args, tmp, train):
    """A masked classifier against PyTorch with dynamic padding."""
    fixture = os.path.join(REPO, "test", "fixtures", "classifier")
    with open(os.path.join(fixture, "losses.json")) as f:
        reference = json.load(f)
    data = os.path.join(tmp, "classified")
    run(sys.executable, os.path.join(REPO, "tools", "ztc_dataset.py"), "--jsonl",
        os.path.join(fixture, "corpus.jsonl"), "--label-column", "label", "-o", data)
    common = ["--batch-size", str(reference["batch_size"]), "--loss", "cross_entropy",
              "--lr", str(reference["lr"]), "--weight-decay", str(reference["weight_decay"])]
    for name, flags in (("one length 32", ["--input-shape", "input_ids=4x32",
                                           "--input-shape", "attention_mask=4x32"]),
                        ("--seq-buckets 8,16,32", ["--seq-buckets", "8,16,32"])):
        art = os.path.join(tmp, "classifier-%d.ztc" % len(flags))
        run(args.ztc, "compile", os.path.join(fixture, "model.onnx"), "-o", art, *common,
            *flags)
        losses, _ = train(data, "--steps", str(len(reference["losses"])), "--batching", "pad",
                          "--sampler", "sequential", art=art)
        worst = max(abs(a - b) for a, b in zip(losses, reference["losses"])) if losses else 1
        check(len(losses) == len(reference["losses"]) and worst <= 1e-5,
              "BERT classifier with an attention mask, pad to %s: %d losses within %.1e of "
              "PyTorch's with DataCollatorWithPadding (batches padded to %s; at most 1e-5)"
              % (name, len(losses), worst, sorted(set(reference["padded_lengths"]))))


def token_weighted(args, tmp, corpus, train):
    """The step's loss is the mean over its real tokens however the step's
    rows are split into micro-batches and ranks."""
    model = os.path.join(tmp, "gpt.onnx")
    common = ["--loss", "cross_entropy", "--lr", "1e-2"]

    def compiled(name, *flags):
        art = os.path.join(tmp, name + ".ztc")
        run(args.ztc, "compile", model, "-o", art, *common, *flags)
        return art

    one = compiled("tw-one", "--batch-size", "4", "--token-weighted-loss")
    reference, _ = train(corpus, "--steps", "20", "--batching", "pad", art=one)
    cases = [("2 micro-batches of 2", compiled("tw-accum", "--batch-size", "2", "--grad-accum",
                                               "2", "--token-weighted-loss"), ()),
             ("2 micro-batches of 2, unweighted",
              compiled("tw-plain", "--batch-size", "2", "--grad-accum", "2"), ())]
    if args.mpirun and args.ztc_train:
        cases.append(("2 ranks of 2 (ZeRO 2)",
                      compiled("tw-ranks", "--batch-size", "2", "--world-size", "2", "--zero",
                               "2", "--token-weighted-loss"), (args.mpirun, "-np", "2")))
    for name, art, launcher in cases:
        losses, _ = train(corpus, "--steps", "20", "--batching", "pad", art=art,
                          launcher=launcher)
        worst = max(abs(a - b) for a, b in zip(losses, reference)) if losses else 1.0
        weighted = "unweighted" not in name
        check(len(losses) == 20 and ((worst <= 1e-5) if weighted else (worst > 1e-4)),
              "--batching pad, %s: 20 losses within %.1e of one batch of 4 with "
              "--token-weighted-loss (%s)" % (name, worst, "at most 1e-5" if weighted else
                                              "must differ: each micro-batch's mean weighs "
                                              "the same"))


def documents_of(corpus):
    """The documents of a ztc token dataset directory."""
    tokens = np.load(os.path.join(corpus, "tokens.npy"))
    offsets = np.load(os.path.join(corpus, "offsets.npy"))
    return [tokens[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def metrics_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f if '"loss"' in line]


def buckets(args, tmp, corpus, train):
    """--seq-buckets against one length: the same losses, less padding."""
    run(sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"), "--out", tmp,
        "--quiet", "--name", "dgpt", "--layers", "1", "--width", "32", "--heads", "2",
        "--context", "32", "--vocab", str(VOCAB), "--dynamic-length")
    model = os.path.join(tmp, "dgpt.onnx")
    common = ["--batch-size", "4", "--loss", "cross_entropy", "--lr", "1e-2"]
    whole = os.path.join(tmp, "dgpt32.ztc")
    run(args.ztc, "compile", model, "-o", whole, "--input-shape", "tokens=4x32", *common)
    # Token-weighted, so that a step split over ranks is the same step (on
    # one rank without accumulation the weight is exactly 1).
    bucketed = os.path.join(tmp, "dgpt-buckets.ztc")
    log = run(args.ztc, "compile", model, "-o", bucketed, "--seq-buckets", "8,16,32",
              "--token-weighted-loss", *common).stderr
    arenas = [int(a) for a in re.findall(r"arena (\d+) bytes", log)]
    check(os.path.isdir(os.path.join(bucketed, "buckets", "seq-8")) and
          len(arenas) == 4 and arenas[0] == arenas[-1] == max(arenas),
          "ztc compile --seq-buckets 8,16,32: steps for 3 lengths in one artifact, arenas "
          "%s bytes; the artifact's is the largest" % arenas[1:])
    padding = {}
    for mode in ("pad", "group"):
        losses = {}
        for name, art in (("32", whole), ("buckets", bucketed)):
            metrics = os.path.join(tmp, "metrics-%s-%s.jsonl" % (mode, name))
            _, log = train(corpus, "--steps", "40", "--batching", mode, "--metrics", metrics,
                           art=art)
            lines = metrics_of(metrics)
            losses[name] = [line["loss"] for line in lines]
            shares = [float(p) for p in re.findall(r"tokens/s \((\S+)% padding\)", log)]
            padding[mode, name] = (
                sum(line["padding_fraction"] for line in lines) / max(len(lines), 1),
                len(shares) == len(lines) and
                all(line["tokens_per_second"] > 0 for line in lines))
        worst = max(abs(a - b) for a, b in zip(losses["32"], losses["buckets"]))
        check(len(losses["32"]) == 40 and worst <= 1e-5,
              "%s: 40 steps with --seq-buckets 8,16,32 give the losses of one length 32 "
              "within %.1e (at most 1e-5); padding %.1f%% instead of %.1f%%; real tokens/s "
              "and padding in the log and --metrics: %s"
              % (mode, worst, 100 * padding[mode, "buckets"][0], 100 * padding[mode, "32"][0],
                 padding[mode, "buckets"][1] and padding[mode, "32"][1]))
    check(padding["group", "buckets"][0] < padding["pad", "buckets"][0],
          "group batches similar lengths: %.1f%% padding with buckets, pad %.1f%%"
          % (100 * padding["group", "buckets"][0], 100 * padding["pad", "buckets"][0]))

    # Resume mid-epoch with buckets, on 1 and 2 ranks.
    worlds = [(1, bucketed, ())]
    if args.mpirun and args.ztc_train:
        two = os.path.join(tmp, "dgpt-buckets-2.ztc")
        run(args.ztc, "compile", model, "-o", two, "--seq-buckets", "8,16,32",
            "--batch-size", "2", "--loss", "cross_entropy", "--lr", "1e-2", "--world-size",
            "2", "--zero", "2", "--token-weighted-loss")
        worlds.append((2, two, (args.mpirun, "-np", "2")))
    # One order however the global batch is split: 2 ranks of 2 train as
    # one of 4, grouped too (token-weighted: each rank's share of the real
    # tokens weighs its loss).
    if len(worlds) > 1:
        for mode in ("pad", "group"):
            one, _ = train(corpus, "--steps", "20", "--batching", mode, art=bucketed)
            two, _ = train(corpus, "--steps", "20", "--batching", mode, art=worlds[1][1],
                           launcher=worlds[1][2])
            worst = max(abs(a - b) for a, b in zip(one, two)) if one else 1.0
            check(len(two) == 20 and worst <= 1e-5,
                  "--seq-buckets --token-weighted-loss, %s: 2 ranks with batches of 2 train "
                  "as one rank with 4, losses within %.1e (the same global batches)"
                  % (mode, worst))
    for world, art, launcher in worlds:
        for mode in ("pad", "group"):
            ckpt = os.path.join(tmp, "bucket-ckpt-%s-%d" % (mode, world))
            whole_run, _ = train(corpus, "--steps", "20", "--batching", mode, art=art,
                                 launcher=launcher)
            train(corpus, "--steps", "10", "--batching", mode, "--save", ckpt, art=art,
                  launcher=launcher)
            resumed, _ = train(corpus, "--steps", "20", "--batching", mode, "--resume", ckpt,
                               art=art, launcher=launcher)
            check(resumed == whole_run[10:] and len(resumed) == 10,
                  "--seq-buckets, %s on %d rank%s: resumed at step 10, steps 11-20 are the "
                  "uninterrupted run's, bit for bit (%s)"
                  % (mode, world, "s" if world > 1 else "", resumed == whole_run[10:]))

    # auto: the corpus's length percentiles, at most the model's 32.
    chosen = os.path.join(tmp, "dgpt-auto.ztc")
    log = run(args.ztc, "compile", model, "-o", chosen, "--seq-buckets",
              "auto=%s,32" % corpus, *common).stderr
    lengths = sorted(len(d) for d in documents_of(corpus))
    expected = []
    for share in (0.5, 0.75, 0.9, 1.0):
        at = min(len(lengths), max(1, math.ceil(share * len(lengths)))) - 1
        length = min(max(8, (lengths[at] + 7) // 8 * 8), 32)
        if not expected or length > expected[-1]:
            expected.append(length)
    with open(os.path.join(chosen, "manifest.json")) as f:
        got = json.load(f)["train"].get("seq_buckets")
    check(got == expected and "--seq-buckets auto: %s" % ",".join(map(str, got)) in log,
          "--seq-buckets auto=CORPUS,32: lengths %s, the corpus's 50/75/90/100th length "
          "percentiles rounded up to 8, at most 32 (expected %s)" % (got, expected))

    # Compile errors, one line each.
    static = os.path.join(tmp, "gpt.onnx")
    for model_path, flags, message in (
            (static, ["--seq-buckets", "8,16"],
             "--seq-buckets binds the sequence: a dynamic second dimension of a graph input"),
            (model, ["--seq-buckets", "16,8"],
             "--seq-buckets '16,8': 8 follows 16; give the lengths in ascending order")):
        result = run(args.ztc, "compile", model_path, "-o", os.path.join(tmp, "bad.ztc"),
                     *common, *flags, ok=False)
        check(result.returncode == 1 and message in result.stderr,
              "ztc compile %s: exit %d, %s" % (" ".join(flags), result.returncode,
                                               result.stderr.strip()[:200]))


if __name__ == "__main__":
    sys.exit(main())
