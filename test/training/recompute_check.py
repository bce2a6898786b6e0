#!/usr/bin/env python3
"""Recomputation (ztc compile --recompute) changes memory, never results.

For each model, the artifact of every policy (none, selective, full, sqrt)
trains from the same weights on the same data, and must give:
  - bit-identical losses at every step and bit-identical parameters,
    optimizer states and buffers (BatchNorm running statistics) at the end;
  - the same first-step gradients (--dump-grads), bit for bit;
  - a measured arena high-water mark (the trainer's report) equal to the
    plan of the entries the run called: the training step's arena_bytes,
    and with --dump-grads the larger of it and the gradient entry's.
Models: the example MLP, CNN (inference- and training-mode BatchNorm), a
4-layer GPT (50 AdamW steps, and 10 with --grad-accum 2 and 10 in bf16
mixed precision), and a PyTorch MLP
with training-mode Dropout (the recomputed mask must be the original).
Also:
  - the manifests' figures: on the GPT, selective keeps fewer saved
    activation bytes than none and full fewer than selective, and every
    policy's planned arena is smaller than none's;
  - a GPT with frozen embeddings and a frozen first block compiles and
    trains under full, identically to the same model without recompute;
  - budget mode (--recompute budget=BYTES), at a budget halfway between
    the smallest fixed policy's planned peak and none's (from `ztc inspect
    --recompute all --json`), is one more policy above, and its plan fits
    the budget at no more recompute than any fixed policy that fits.
With --quick (the sanitizer build, where every step is compiled and runs
instrumented) the GPT trains 10 steps instead of 50 under every fixed
policy; the training-mode CNN and the Dropout MLP compare full against
none; budget mode (whose integer programs take minutes in the
instrumented compiler),
the MLP, the inference-mode CNN and the GPT's accumulated, bf16 and frozen
variants are left to the main suite. The sanitizer build's lit still
compiles budget mode (test/lit/pipelines/training-pipeline.test).
Usage: recompute_check.py --ztc PATH [--quick]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from checks import check, read_safetensors, summary, tensors_equal

POLICIES = ("none", "selective", "full", "sqrt")
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "examples", "onnx")


def make_example(script, out, *flags):
    subprocess.run([sys.executable, os.path.join(EXAMPLES, script), "--out", out,
                    "--quiet", *flags], check=True)


def save_data(directory, **arrays):
    os.makedirs(directory, exist_ok=True)
    for name, array in arrays.items():
        np.save(os.path.join(directory, name + ".npy"), array)
    return directory


def compile_model(args, model, art, policy, *flags):
    subprocess.run([args.ztc, "compile", model, "-o", art, "--loss", "cross_entropy",
                    "--optimizer", "adamw", "--lr", "1e-3", "--recompute", policy,
                    *flags], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(os.path.join(art, "manifest.json")) as f:
        return json.load(f)


def train(args, art, data, steps, save, dump):
    log = subprocess.run([args.ztc, "train", art, "--data", data, "--steps", str(steps),
                          "--log-every", "1", "--save", save], check=True,
                         capture_output=True, text=True).stderr
    dump_log = subprocess.run([args.ztc, "train", art, "--data", data, "--steps", "1",
                               "--dump-grads", dump], check=True, capture_output=True,
                              text=True).stderr
    arenas = [re.search(r"arena: (\d+) bytes planned, (\d+) written", text)
              for text in (log, dump_log)]
    return re.findall(r"loss ([0-9.eE+-]+)", log), [a and a.groups() for a in arenas]


def grads(directory):
    grad = os.path.join(directory, "grad")
    out = {f: np.load(os.path.join(grad, f)) for f in os.listdir(grad)}
    out["loss"] = np.load(os.path.join(directory, "loss.npy"))
    return out


def inspect_policies(args, model, *flags):
    """{policy: memory report} of every fixed policy, planned by ztc inspect."""
    out = subprocess.run([args.ztc, "inspect", model, "--loss", "cross_entropy",
                          "--optimizer", "adamw", "--lr", "1e-3", "--recompute", "all",
                          "--json", *flags], check=True, stdout=subprocess.PIPE).stdout
    return {report["policy"]: report for report in json.loads(out)}


def budget_policy(args, name, model, *flags):
    """A budget halfway between the smallest fixed policy's peak and none's."""
    reports = inspect_policies(args, model, *flags)
    least = min(r["total_bytes"] for r in reports.values())
    budget = (least + reports["none"]["total_bytes"]) // 2
    return "budget=%d" % budget, budget, reports


def compare_policies(args, tmp, name, model, data, steps, *flags, policies=POLICIES,
                     budget=True):
    """Trains every policy's artifact (and budget mode's); returns {policy: manifest}."""
    runs, manifests = {}, {}
    policies = list(policies)
    if budget:
        policy, limit, reports = budget_policy(args, name, model, *flags)
        policies.append(policy)
    for policy in policies:
        art = os.path.join(tmp, "%s-%s.ztc" % (name, policy))
        manifests[policy] = compile_model(args, model, art, policy, *flags)
        save, dump = art + ".ckpt", art + ".grads"
        losses, (arena, dump_arena) = train(args, art, data, steps, save, dump)
        # Training calls the main entry; --dump-grads the gradient entry too,
        # which may reach further (the arena is the largest of the entries).
        entries = {e["purpose"]: e["arena_bytes"] for e in manifests[policy]["entries"]}
        plan = entries["train_step"]
        check(arena is not None and arena[0] == arena[1] == str(plan),
              "%s --recompute %s: the arena's measured high-water mark %s equals the plan's "
              "%d bytes" % (name, policy, arena and arena[1], plan))
        dump_plan = max(plan, entries["loss_and_grads"])
        check(dump_arena is not None and dump_arena[0] == dump_arena[1] == str(dump_plan)
              and max(entries.values()) == manifests[policy]["arena_bytes"],
              "%s --recompute %s: with the gradient entry, the high-water mark %s equals "
              "its plan's %d bytes (the arena: %d)" % (name, policy, dump_arena and dump_arena[1],
                                                     dump_plan, manifests[policy]["arena_bytes"]))
        runs[policy] = (losses, read_safetensors(os.path.join(save, "checkpoint.safetensors")),
                        grads(dump))
    if budget:
        with open(os.path.join(tmp, "%s-%s.ztc" % (name, policy), "memory.json")) as f:
            planned = json.load(f)
        flops = planned["recompute"]["recompute_flops"]
        fitting = {p: r["recompute"]["recompute_flops"] for p, r in reports.items()
                   if r["total_bytes"] <= limit}
        check(planned["total_bytes"] <= limit and
              all(flops <= other for other in fitting.values()),
              "%s --recompute %s: planned %d bytes, %d recompute FLOPs; fixed policies "
              "that fit: %s" % (name, policy, planned["total_bytes"], flops,
                                ", ".join("%s %d" % item for item in fitting.items())))
    base_losses, base_state, base_grads = runs[policies[0]]
    for policy in policies[1:]:
        losses, state, first = runs[policy]
        check(len(losses) == steps and losses == base_losses and
              tensors_equal(state, base_state) and tensors_equal(first, base_grads),
              "%s --recompute %s: %d losses, %d tensors after %d steps and %d first-step "
              "gradients bit-identical to %s" % (name, policy, len(losses), len(state), steps,
                                                 len(first) - 1, policies[0]))
    return manifests


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--quick", action="store_true",
                        help="the sanitizer build's subset (see above)")
    args = parser.parse_args()
    # --quick: the models other than the GPT compare full against none.
    small = {"policies": ("none", "full"), "budget": False} if args.quick else {}
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="ztc-recompute-") as tmp:
        make_example("make_mlp.py", tmp)
        make_example("make_cnn.py", tmp)
        make_example("make_cnn.py", tmp, "--training")
        make_example("make_gpt.py", tmp, "--layers", "4", "--name", "gpt4")
        images = save_data(os.path.join(tmp, "images"),
                           x=rng.standard_normal((64, 1, 8, 8)).astype(np.float32),
                           labels=rng.integers(0, 10, 64).astype(np.int64))
        vectors = save_data(os.path.join(tmp, "vectors"),
                            x=rng.standard_normal((64, 64)).astype(np.float32),
                            labels=rng.integers(0, 10, 64).astype(np.int64))
        text = save_data(os.path.join(tmp, "text"),
                         tokens=rng.integers(0, 64, (64, 16)).astype(np.int64),
                         labels=rng.integers(0, 64, (64, 16)).astype(np.int64))

        if not args.quick:
            compare_policies(args, tmp, "mlp", os.path.join(tmp, "mlp.onnx"), vectors, 10,
                             "--batch-size", "8")
            compare_policies(args, tmp, "cnn", os.path.join(tmp, "cnn.onnx"), images, 10,
                             "--batch-size", "8")
        compare_policies(args, tmp, "cnn_train", os.path.join(tmp, "cnn_train.onnx"), images,
                         10, "--batch-size", "8", **small)
        gpt = os.path.join(tmp, "gpt4.onnx")
        manifests = compare_policies(args, tmp, "gpt4", gpt, text, 10 if args.quick else 50,
                                     "--batch-size", "4", budget=not args.quick)
        if not args.quick:
            compare_policies(args, tmp, "gpt4_accum", gpt, text, 10, "--batch-size", "2",
                             "--grad-accum", "2", policies=("none", "selective", "full"),
                             budget=False)

        figures = {p: m["train"]["recompute"] for p, m in manifests.items() if p in POLICIES}
        saved = {p: f["saved_activation_bytes"] for p, f in figures.items()}
        arena = {p: m["arena_bytes"] for p, m in manifests.items() if p in POLICIES}
        check(saved["full"] < saved["selective"] < saved["none"] and
              all(f["baseline_saved_activation_bytes"] == saved["none"]
                  for f in figures.values()),
              "gpt4 saved activation bytes: none %d, selective %d, full %d, sqrt %d"
              % (saved["none"], saved["selective"], saved["full"], saved["sqrt"]))
        check(all(arena[p] < arena["none"] for p in POLICIES[1:]),
              "gpt4 planned arena: " + ", ".join("%s %d" % (p, arena[p]) for p in POLICIES))
        check(figures["none"]["recompute_flops"] == 0 and
              all(figures[p]["recompute_flops"] > 0 for p in POLICIES[1:]),
              "gpt4 recomputation FLOPs: " +
              ", ".join("%s %.1f%%" % (p, 100.0 * f["recompute_flops"] / f["step_flops"])
                        for p, f in figures.items()))

        if not args.quick:
            # Mixed precision: recomputed bf16 values are the kept ones, bit
            # for bit.
            compare_policies(args, tmp, "gpt4_bf16", gpt, text, 10, "--batch-size", "4",
                             "--precision", "bf16", policies=("none", "selective", "full"),
                             budget=False)
            # Frozen embeddings and first block under full: no "does not
            # require grad" failure, and the same training as without
            # recomputation.
            frozen = ("--freeze", r"wte\..*|wpe\..*|blocks\.0\..*")
            compare_policies(args, tmp, "gpt4_frozen", gpt, text, 10, "--batch-size", "4",
                             *frozen, policies=("none", "full"), budget=False)

        # Training-mode Dropout: a recomputed mask is the original one.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from dropout_check import export_mlp
        dropout = os.path.join(tmp, "mlp_dropout.onnx")
        export_mlp(dropout)
        vectors16 = save_data(os.path.join(tmp, "small"),
                          x=rng.standard_normal((64, 16)).astype(np.float32),
                          labels=rng.integers(0, 4, 64).astype(np.int64))
        compare_policies(args, tmp, "mlp_dropout", dropout, vectors16, 10, "--batch-size", "8",
                         **small)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
