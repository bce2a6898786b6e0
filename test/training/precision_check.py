#!/usr/bin/env python3
"""Mixed precision (ztc compile --precision bf16 or fp16) trains like f32.

  - the example GPT on the GPL-3 characters Debian ships and the CNN
    (training-mode BatchNorm) on scikit-learn's digits, 200 steps each
    from the same weights and data in f32, bf16 and fp16 (dynamic loss
    scaling): each half-precision run's final loss (the mean over seeds 1
    and 2) is within 2% of the f32 run's;
  - the MLP and the CNN trained in bf16 and in fp16 reach at least 95%
    held-out accuracy on digits (the whole path: compile, train, export,
    run);
  - the bf16 GPT keeps at most 3/4 of the f32 saved activation bytes (the
    matrix products' inputs and outputs are half; softmax outputs, the
    residual stream and normalizations stay f32, as under PyTorch's
    autocast) and plans a smaller arena, with the same parameter and
    optimizer-state bytes (f32 master weights);
  - the MLP's parameters in bf16 and fp16 count 4 + 2 + 2 bytes (f32
    master, half working copy, half gradient) and the bf16 gradients in
    the arena peak at half the f32 ones;
  - with --half-weights the GPT (which reads its normalizations'
    parameters and its embeddings in f32) trains within 2% of f32 too,
    and every one of its parameters counts 4 + 2 + 2 bytes, where without
    the flag those f32 reads keep f32 gradients.
Usage: precision_check.py --ztc PATH
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convergence_check  # noqa: E402
from checks import check, summary  # noqa: E402

REPO = convergence_check.REPO


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)


def final_loss(ztc, model, data, precision, *flags):
    art = "%s-%s.ztc" % (model, precision)
    if "--half-weights" in flags:
        art = art.replace(".ztc", "-half-weights.ztc")
    run(ztc, "compile", model, "-o", art, "--loss", "cross_entropy", "--precision", precision,
        *flags)
    # Two seeds: one 200-step trajectory's final loss moves by about 1% with
    # any change of rounding (measured over seeds 1-5 in bf16), as much as
    # the precision itself moves it.
    finals = []
    for seed in ("1", "2"):
        log = run(ztc, "train", art, "--data", data, "--steps", "200", "--log-every", "25",
                  "--seed", seed).stderr
        losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", log)]
        finals.append(float(np.mean(losses[-2:])))
    return float(np.mean(finals))


def compare_losses(ztc, name, model, data, *flags, half_weights=False):
    f32 = final_loss(ztc, model, data, "fp32", *flags)
    runs = [("bf16", []), ("fp16", [])]
    if half_weights:
        runs.append(("bf16", ["--half-weights"]))
    for precision, more in runs:
        half = final_loss(ztc, model, data, precision, *flags, *more)
        check(abs(half - f32) <= 0.02 * f32,
              "%s, 200 steps: final loss %s %.4f, f32 %.4f (%.2f%% apart, at most 2%%)"
              % (name, " ".join([precision] + more), half, f32, 100 * abs(half - f32) / f32))


def inspect(ztc, model, precision, *flags):
    out = run(ztc, "inspect", model, "--loss", "cross_entropy", "--optimizer", "adamw",
              "--precision", precision, "--json", *flags).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-precision-") as tmp:
        models = os.path.join(tmp, "models")
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"), models],
                       check=True)
        # The GPT on characters.
        gpl = os.path.join(tmp, "gpl3")
        convergence_check.write_gpl_characters(gpl)
        gpt = os.path.join(models, "gpt.onnx")
        compare_losses(args.ztc, "gpt on GPL-3 characters", gpt, gpl, "--batch-size", "16",
                       "--optimizer", "adamw", "--lr", "3e-3", half_weights=True)
        # The CNN on digits.
        digits = os.path.join(tmp, "digits")
        run(sys.executable, os.path.join(REPO, "examples", "onnx", "prepare_digits.py"),
            "--out", digits, "--images")
        compare_losses(args.ztc, "cnn_train on digits", os.path.join(models, "cnn_train.onnx"),
                       os.path.join(digits, "train"), "--batch-size", "32", "--lr", "3e-3")

        # Held-out accuracy in bf16 and fp16, through the whole user path.
        for precision in ("bf16", "fp16"):
            start = len(convergence_check.results)
            os.makedirs(os.path.join(tmp, precision))
            os.symlink(models, os.path.join(tmp, precision, "models"))
            convergence_check.train_classifier(
                args.ztc, os.path.join(tmp, precision), "mlp", [],
                ["--lr", "3e-3", "--precision", precision], "30")
            convergence_check.train_classifier(
                args.ztc, os.path.join(tmp, precision), "cnn_train", ["--images"],
                ["--lr", "3e-3", "--precision", precision], "30", ["--inference"])
            done = convergence_check.results[start:]
            check(len(done) >= 2 and all(done),
                  "%s: the MLP and the CNN reach 95%% held-out accuracy on digits (above)"
                  % precision)

        # Gradient accumulation sums in f32 whatever the precision;
        # --grad-accum-dtype bf16 halves the accumulators and still trains.
        mlp = os.path.join(models, "mlp.onnx")
        accum = {}
        for dtype in ("fp32", "bf16"):
            art = os.path.join(tmp, "mlp-accum-%s.ztc" % dtype)
            flags = ["--grad-accum-dtype", dtype] if dtype == "bf16" else []
            run(args.ztc, "compile", mlp, "-o", art, "--batch-size", "16", "--loss",
                "cross_entropy", "--lr", "3e-3", "--precision", "bf16", "--grad-accum", "4",
                *flags)
            with open(os.path.join(art, "manifest.json")) as f:
                types = {b["dtype"] for b in json.load(f)["bindings"]
                         if b["name"].endswith(".grad_accum")}
            log = run(args.ztc, "train", art, "--data", os.path.join(tmp, "bf16", "mlp_digits",
                                                                     "train"),
                      "--steps", "100", "--log-every", "25", "--seed", "1").stderr
            losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", log)]
            accum[dtype] = (types, float(np.mean(losses[-2:])))
        check(accum["fp32"][0] == {"float32"} and accum["bf16"][0] == {"bfloat16"} and
              abs(accum["bf16"][1] - accum["fp32"][1]) <= 0.02 * accum["fp32"][1],
              "bf16 MLP, 4 micro-batches: accumulators %s by default, %s with "
              "--grad-accum-dtype bf16; final loss %.4f vs %.4f"
              % (sorted(accum["fp32"][0]), sorted(accum["bf16"][0]), accum["bf16"][1],
                 accum["fp32"][1]))

        # Memory: half activations, f32 master weights and states.
        wide = inspect(args.ztc, gpt, "fp32", "--batch-size", "16")
        half = inspect(args.ztc, gpt, "bf16", "--batch-size", "16")
        saved = (half["recompute"]["saved_activation_bytes"],
                 wide["recompute"]["saved_activation_bytes"])
        check(saved[0] < 0.75 * saved[1] and half["arena_bytes"] < wide["arena_bytes"] and
              all(half["bindings"][k] == wide["bindings"][k]
                  for k in ("params", "optimizer_state")),
              "gpt memory: saved activations bf16 %d bytes vs f32 %d; arena %d vs %d; "
              "parameters %d and optimizer states %d bytes in both"
              % (saved[0], saved[1], half["arena_bytes"], wide["arena_bytes"],
                 half["bindings"]["params"], half["bindings"]["optimizer_state"]))

        # Half gradients: every MLP parameter is read in half, so it counts
        # 4 (f32 master) + 2 (working copy) + 2 (gradient) + 8 (Adam), and the
        # gradients waiting for the update in the arena take half the f32
        # bytes (the widening happens inside the update kernels).
        peaks, reports = {}, {}
        for precision in ("fp32", "bf16", "fp16"):
            reports[precision] = inspect(args.ztc, mlp, precision, "--batch-size", "16")
            peaks[precision] = max(row[2] for row in reports[precision]["timeline"])
        for precision in ("bf16", "fp16"):
            report = reports[precision]
            count = report["param_count"]
            check(report["gradient_bytes"] == 2 * count and
                  report["working_copy_bytes"] == 2 * count and
                  report["bindings"]["params"] == 4 * count,
                  "mlp %s: %d parameters, %d bytes of f32 masters, %d of working copies, "
                  "%d of gradients (4 + 2 + 2 per parameter)"
                  % (precision, count, report["bindings"]["params"],
                     report["working_copy_bytes"], report["gradient_bytes"]))
        # The GPT reads its LayerNorm weights and biases and its embeddings
        # in f32, so without --half-weights those keep f32 gradients; with
        # it every parameter is read as its bf16 copy and counts 4 + 2 + 2.
        for flags in ([], ["--half-weights"]):
            report = inspect(args.ztc, gpt, "bf16", "--batch-size", "16", *flags)
            count = report["param_count"]
            if flags:
                ok = (report["gradient_bytes"] == 2 * count and
                      report["working_copy_bytes"] == 2 * count)
            else:
                ok = (report["gradient_bytes"] > 2 * count and
                      report["working_copy_bytes"] < 2 * count)
            check(ok and report["bindings"]["params"] == 4 * count,
                  "gpt bf16%s: %d parameters, %d bytes of f32 masters, %d of working copies, "
                  "%d of gradients"
                  % ("".join(" " + f for f in flags), count, report["bindings"]["params"],
                     report["working_copy_bytes"], report["gradient_bytes"]))
        check(peaks["bf16"] <= peaks["fp32"] // 2 + 64,
              "mlp: the arena's gradients at their most %d bytes in bf16, %d in f32"
              % (peaks["bf16"], peaks["fp32"]))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
