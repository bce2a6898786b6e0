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
  - --batching pad trains too, and every flag error is one line.

Usage: tokens_check.py --ztc PATH [--ztc-train PATH --mpirun PATH]
"""

import argparse
import json
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
            for mode in ("pack", "pad"):
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
                (["--batching", "group"], "--batching expects pack or pad, got 'group'"),
                (["--batching", "pad", "--eos-token", "0"],
                 "--eos-token applies to --batching pack")):
            result = run(args.ztc, "train", art, "--data", corpus, *flags, ok=False)
            check(result.returncode == 1 and message in result.stderr
                  and len(result.stderr.strip().splitlines()) == 1,
                  "ztc train %s: exit %d, %s" % (" ".join(flags), result.returncode,
                                                 result.stderr.strip()))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
