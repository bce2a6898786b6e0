#!/usr/bin/env python3
"""8-bit optimizer states (`ztc compile --optimizer adamw8bit` and
`adam8bit`) against bitsandbytes.

  - On test/fixtures/bnb8bit_train (made by test/models/make_bnb8bit_train.py
    with bitsandbytes from PyPI: a perceptron whose two larger weights hold
    8-bit states, the rest float32 ones, 30 steps on one batch), each
    optimizer leaves after two steps bitsandbytes' 8-bit codes (byte for
    byte from GCC's step; at least 99.9% of them from clang's, the others
    one code away), its scales and parameters within 1e-6; over 30 steps
    its losses within 1e-4 (relative L2 of the curve) and its parameters
    within 1e-2.
    (A code is a rounding: a last-bit difference between ztc's gradients
    and PyTorch's flips one now and then, and from there the trajectories
    part slowly.)
  - The artifact holds the 8-bit weights' moments as int8 codes (one byte
    per element) and float32 scales (one per 256 elements), the small
    tensors' as float32, and `ztc inspect` counts it: at most 2.1 bytes of
    optimizer state per parameter of the 8-bit weights.
  - The Hugging Face Trainer's name, adamw_bnb_8bit, compiles the same step.
  - On the example MLP and scikit-learn's digits, and on a small GPT (width
    64, a text whose next token is mostly the successor), 200 steps of
    adamw8bit end within 2% of AdamW's loss.
  - With --mpirun: ZeRO stage 2 on 2 ranks (batch 16 each) trains as one
    rank of 32 (losses within 1e-5), each rank holding whole blocks of 256
    of the quantized states; a run stopped and resumed from its sharded
    checkpoint gives the same losses bit for bit, and `ztc consolidate`
    reads that checkpoint (whose blocks are aligned, not ceil(n / 2)).

Usage: optim8bit_check.py --ztc PATH [--ztc-train PATH --mpirun PATH]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, read_checkpoint, read_safetensors, summary  # noqa: E402
from modern_check import curve_error, losses_of  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "test", "fixtures", "bnb8bit_train")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
EIGHT_BIT = ("net.0.weight", "net.2.weight")
PARAMS = EIGHT_BIT + ("net.0.bias", "net.2.bias", "net.4.weight", "net.4.bias")


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=ENV,
                            timeout=900)
    if result.returncode != 0:
        raise SystemExit("command failed (%d): %s\n%s%s" % (
            result.returncode, " ".join(str(a) for a in args), result.stdout, result.stderr))
    return result


def relative(ours, reference):
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    return float(np.linalg.norm(ours - reference) / max(np.linalg.norm(reference), 1e-30))


def bindings(art):
    with open(os.path.join(art, "manifest.json")) as f:
        return {b["name"]: b for b in json.load(f)["bindings"]}


def against_bitsandbytes(ztc, tmp, optimizer, name=None):
    """The fixture's steps with `optimizer` (compiled under `name`): the
    first two exactly, the 30 losses closely."""
    name = name or optimizer
    reference = os.path.join(FIXTURE, optimizer)
    art = os.path.join(tmp, name + ".ztc")
    run(ztc, "compile", os.path.join(FIXTURE, "model.onnx"), "-o", art, "--batch-size", "32",
        "--loss", "cross_entropy", "--optimizer", name, "--lr", "1e-3")

    def train(steps, save):
        return losses_of(run(ztc, "train", art, "--data", os.path.join(FIXTURE, "data"),
                             "--steps", steps, "--log-every", "1", "--save", save).stderr)

    # Two steps: the same codes, bytes for bytes; the parameters and scales
    # to the last bits of the gradients.
    train("2", os.path.join(tmp, name + ".step2"))
    state, after = read_checkpoint(os.path.join(tmp, name + ".step2")), os.path.join(
        reference, "step2")
    worst = max(relative(state[p], np.load(os.path.join(after, p + ".npy"))) for p in PARAMS)
    same, apart, scales = [], 0, 0.0
    for p in EIGHT_BIT:
        for key, part in ((".exp_avg", "state1"), (".exp_avg_sq", "state2")):
            theirs = np.load(os.path.join(after, "%s.%s.npy" % (p, part))).reshape(-1)
            ours = state[p + key]
            same.append(float(np.mean(ours == theirs)))
            apart = max(apart, int(np.max(np.abs(ours.view(np.uint8).astype(np.int64) -
                                                 theirs.view(np.uint8).astype(np.int64)))))
            scales = max(scales, relative(
                state[p + key + "_absmax"],
                np.load(os.path.join(after, "%s.absmax%s.npy" % (p, part[-1])))))
    # The same bytes with GCC's step; clang's (the sanitizer build) rounds
    # a gradient's last bit otherwise here and there, which may move one
    # code to its neighbour.
    check(min(same) >= 0.999 and apart <= 1 and scales <= 1e-6 and worst <= 1e-6,
          "%s, 2 steps: the 8-bit codes bitsandbytes' bytes (%s the same; any other at most "
          "one code away: %d), the scales within %.1e and the parameters within %.1e (at most "
          "1e-6)" % (name, ", ".join("%.2f%%" % (100 * v) for v in same), apart, scales, worst))

    # Thirty: a code is a rounding, so a last-bit difference in a gradient
    # flips one now and then and the parameters part slowly; the losses
    # stay close.
    ours = train("30", os.path.join(tmp, name + ".ckpt"))
    theirs = np.load(os.path.join(reference, "losses.npy"))
    error = curve_error(ours, theirs)
    check(error <= 1e-4, "%s: 30 losses within %.1e of bitsandbytes' (relative L2 of the "
          "curve, at most 1e-4; last %.6f, bitsandbytes %.6f)"
          % (name, error, ours[-1] if ours else float("nan"), theirs[-1]))
    state = read_checkpoint(os.path.join(tmp, name + ".ckpt"))
    worst = max(relative(state[p], np.load(os.path.join(reference, p + ".npy")))
                for p in PARAMS)
    check(worst <= 1e-2, "%s: parameters after 30 steps within %.1e of bitsandbytes' "
          "(relative L2 per tensor, at most 1e-2)" % (name, worst))
    return art, ours


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train")
    parser.add_argument("--mpirun")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-optim8bit-") as tmp:
        art, losses = against_bitsandbytes(args.ztc, tmp, "adamw8bit")
        against_bitsandbytes(args.ztc, tmp, "adam8bit")

        # What the artifact holds.
        bound = bindings(art)
        ok = True
        for p in EIGHT_BIT:
            n = int(np.prod(bound[p]["shape"]))
            for moment in (".exp_avg", ".exp_avg_sq"):
                codes, scales = bound[p + moment], bound[p + moment + "_absmax"]
                ok &= codes["dtype"] == "int8" and codes["shape"] == [n]
                ok &= scales["dtype"] == "float32" and scales["shape"] == [(n + 255) // 256]
        for p in ("net.4.weight", "net.0.bias"):
            ok &= bound[p + ".exp_avg"]["dtype"] == "float32"
            ok &= (p + ".exp_avg_absmax") not in bound
        check(ok, "adamw8bit: the two weights of 6400 and 7000 elements hold int8 codes and "
              "a float32 scale per 256; the last weight (700) and the biases float32 moments")
        report = json.loads(run(args.ztc, "inspect", os.path.join(FIXTURE, "model.onnx"),
                                "--batch-size", "32", "--loss", "cross_entropy",
                                "--optimizer", "adamw8bit", "--json").stdout)
        eight = sum(int(np.prod(bound[p]["shape"])) for p in EIGHT_BIT)
        small = report["param_count"] - eight
        state_bytes = report["bindings"]["optimizer_state"]
        per_param = (state_bytes - 8 * small) / eight
        check(per_param <= 2.1, "inspect: %d bytes of optimizer state for %d parameters; the "
              "8-bit weights' %.3f bytes per parameter (at most 2.1), the others' 8"
              % (state_bytes, report["param_count"], per_param))

        # The Trainer's name for it.
        _, named = against_bitsandbytes(args.ztc, tmp, "adamw8bit", name="adamw_bnb_8bit")
        check(named == losses, "adamw_bnb_8bit (the Hugging Face Trainer's name) trains as "
              "adamw8bit, bit for bit")

        # Against AdamW, 200 steps on digits.
        models = os.path.join(tmp, "models")
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"), models],
                       check=True, capture_output=True)
        digits = os.path.join(tmp, "digits")
        run(sys.executable, os.path.join(REPO, "examples", "onnx", "prepare_digits.py"),
            "--out", digits)
        finals = {}
        for optimizer in ("adamw", "adamw8bit"):
            mlp = os.path.join(tmp, "mlp-%s.ztc" % optimizer)
            run(args.ztc, "compile", os.path.join(models, "mlp.onnx"), "-o", mlp,
                "--batch-size", "32", "--loss", "cross_entropy", "--optimizer", optimizer,
                "--lr", "3e-3")
            log = run(args.ztc, "train", mlp, "--data", os.path.join(digits, "train"),
                      "--steps", "200", "--log-every", "25", "--seed", "1").stderr
            finals[optimizer] = float(np.mean(losses_of(log)[-2:]))
        apart = abs(finals["adamw8bit"] - finals["adamw"]) / finals["adamw"]
        check(apart <= 0.02, "mlp on digits, 200 steps: adamw8bit %.4f, adamw %.4f (%.2f%% "
              "apart, at most 2%%)" % (finals["adamw8bit"], finals["adamw"], 100 * apart))

        # Against AdamW, 200 steps of a small GPT (width 64: every weight but
        # the biases and norms has 4096 elements or more, so 8-bit states) on
        # a text whose next token is the successor 70% of the time, 1024 rows:
        # not learned by heart in 200 steps of 8, so the loss stays near the
        # text's entropy, where 2% is a fine margin.
        run(sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"), "--out",
            models, "--quiet", "--name", "gpt64", "--vocab", "128", "--context", "32",
            "--width", "64", "--heads", "2", "--layers", "2")
        rng = np.random.default_rng(5)
        text = [int(rng.integers(128))]
        for _ in range(1024 * 33):
            text.append((text[-1] + 1) % 128 if rng.random() < 0.7 else int(rng.integers(128)))
        rows = np.asarray(text[:1024 * 33], np.int64).reshape(1024, 33)
        corpus = os.path.join(tmp, "successor")
        os.makedirs(corpus)
        np.save(os.path.join(corpus, "tokens.npy"), rows[:, :32])
        np.save(os.path.join(corpus, "labels.npy"), rows[:, 1:])
        gpt_finals, eight_bit = {}, 0
        for optimizer in ("adamw", "adamw8bit"):
            gpt = os.path.join(tmp, "gpt-%s.ztc" % optimizer)
            run(args.ztc, "compile", os.path.join(models, "gpt64.onnx"), "-o", gpt,
                "--batch-size", "8", "--loss", "cross_entropy", "--optimizer", optimizer,
                "--lr", "3e-3")
            if optimizer == "adamw8bit":
                manifest = json.load(open(os.path.join(gpt, "manifest.json")))
                eight_bit = sum(1 for b in manifest["bindings"] if b["dtype"] == "int8")
            log = run(args.ztc, "train", gpt, "--data", corpus, "--steps", "200",
                      "--log-every", "10", "--seed", "1").stderr
            gpt_finals[optimizer] = float(np.mean(losses_of(log)[-2:]))
        apart = abs(gpt_finals["adamw8bit"] - gpt_finals["adamw"]) / gpt_finals["adamw"]
        check(apart <= 0.02 and eight_bit > 0,
              "small GPT (width 64, %d int8 states), 200 steps: adamw8bit %.4f, adamw %.4f "
              "(%.2f%% apart, at most 2%%)" % (eight_bit, gpt_finals["adamw8bit"],
                                               gpt_finals["adamw"], 100 * apart))

        if args.mpirun and args.ztc_train:
            zero = os.path.join(tmp, "zero2.ztc")
            run(args.ztc, "compile", os.path.join(FIXTURE, "model.onnx"), "-o", zero,
                "--batch-size", "16", "--loss", "cross_entropy", "--optimizer", "adamw8bit",
                "--lr", "1e-3", "--world-size", "2", "--zero", "2")
            data = os.path.join(FIXTURE, "data")
            ckpt = os.path.join(tmp, "zero2.ckpt")
            ours = losses_of(run(args.mpirun, "-n", "2", args.ztc_train, zero, "--data", data,
                                 "--steps", "30", "--log-every", "1").stderr)
            # Stopped at 15 and resumed: the sharded checkpoint holds the
            # codes and scales of each rank's blocks.
            first = losses_of(run(args.mpirun, "-n", "2", args.ztc_train, zero, "--data", data,
                                  "--steps", "15", "--log-every", "1", "--save",
                                  ckpt).stderr)
            rest = losses_of(run(args.mpirun, "-n", "2", args.ztc_train, zero, "--data", data,
                                 "--steps", "30", "--log-every", "1", "--resume",
                                 ckpt).stderr)
            check(first + rest == ours, "ZeRO-2 on 2 ranks: stopped after 15 steps and "
                  "resumed, the losses of the run without a stop, bit for bit")
            whole = os.path.join(tmp, "zero2.safetensors")
            run(args.ztc, "consolidate", ckpt, "-o", whole)
            merged = read_safetensors(whole)
            check(sorted(merged) == sorted(PARAMS) and
                  merged["net.2.weight"].shape == (70, 100),
                  "ztc consolidate reads the checkpoint of aligned blocks: %d whole weights, "
                  "net.2.weight %s" % (len(merged), merged["net.2.weight"].shape))
            bound = bindings(zero)
            blocks = [bound["net.2.weight" + s] for s in (".exp_avg", ".exp_avg_absmax")]
            check(blocks[0]["shape"] == [3584] and blocks[0]["full_shape"] == [7000] and
                  blocks[1]["shape"] == [14],
                  "ZeRO-2 on 2 ranks: each rank holds %s codes of net.2.weight's 7000 (whole "
                  "blocks of 256) and %s scales"
                  % (blocks[0]["shape"], blocks[1]["shape"]))
            error = curve_error(ours, losses)
            check(error <= 1e-5, "ZeRO-2 on 2 ranks of 16 trains as one rank of 32: losses "
                  "within %.1e (at most 1e-5)" % error)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
