#!/usr/bin/env python3
"""Today's PyTorch exports of transformers and timm models, against PyTorch.

For each fixture of test/fixtures/modern (Llama, Qwen3, Phi-3, GPT-2 (also
computing its own loss), BERT, T5, ViT, PoolFormer, Mistral, Qwen2, Gemma 2,
Gemma 3, GPT-NeoX, Phi, OPT, Falcon, BLOOM, ModernBERT and DeBERTa-v2
classes from transformers;
ResNet, MobileNetV3, EfficientNet, ConvNeXt and ViT from timm;
MobileNetV2 from torchvision (ReLU6 as Clip, at its bounds); exported
through python/ztc_export.py by torch.onnx's dynamo exporter (also at
opset 23 and without its optimizer) or its TorchScript exporter (BERT, T5,
and ResNet in train() mode); test/models/make_modern.py made them and
PyTorch's values) with no --freeze list:
  1. `ztc run`: the logits (or the model's loss) within 1e-5 of PyTorch's
     (relative to the largest);
  2. `ztc compile` trains exactly the model's parameters (the count the
     state dict has, tied ones once), and its gradients are PyTorch's
     within 1e-4 (relative to each parameter's largest) at 64 sampled
     elements and in norm;
  3. 20 AdamW steps (lr 1e-3) on the batch: the loss curve within 1e-4
     (relative L2);
  4. `ztc export --state-dict`: the keys load_state_dict expects, each
     holding the trained value the checkpoint has;
  5. the same 20 steps with --precision bf16 (the curve within 2% of
     f32's), with --recompute full (sqrt where no blocks are found; losses
     and parameters bit-identical to none) and, with --mpirun, with ZeRO
     stage 3 on 2 ranks (the curve within 1e-5 of one rank's; not for
     training-mode BatchNorm, which normalizes over each rank's batch).
Usage: modern_check.py --ztc PATH [--ztc-train PATH --mpirun PATH] [--only NAME,...]
                       [--fixtures DIR]   (default: test/fixtures/modern; another
                                           directory make_modern.py --out wrote)
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "test", "fixtures", "modern")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checks import check, read_checkpoint, read_safetensors, summary  # noqa: E402

STEM = re.compile(r"[^A-Za-z0-9._-]")


def run(*args, env=None):
    """Runs a command; a failure shows its output's last lines (a rank's
    error under mpirun is there, not in the exit status)."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            env=env)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-20:]
        sys.exit("FAIL: %s exited with %d:\n%s"
                 % (" ".join(str(a) for a in args), result.returncode, "\n".join(tail)))
    return result


def relative(ours, reference):
    return float(np.abs(ours - reference).max() / max(np.abs(reference).max(), 1e-30))


def roles_of(model):
    """The model's `ztc.initializers` metadata (python/ztc_export.py)."""
    import onnx

    props = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
    return json.loads(props["ztc.initializers"])


# mpirun as root, more ranks than cores, one OpenMP thread per rank.
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")


def losses_of(log):
    return [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", log)]


def curve_error(ours, reference):
    """The relative L2 distance of two loss curves (1 when lengths differ):
    the image fixtures overfit their batch to a loss near 0, where a
    step's relative error says nothing."""
    if len(ours) != len(reference):
        return 1.0
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    return float(np.linalg.norm(ours - reference) / np.linalg.norm(reference))


# The exports whose attention ztc-fuse-attention fuses, one per exporter
# form: PyTorch's dynamo exporter with grouped-query attention and its NaN
# guard (Llama; Qwen3 adds normalized q and k), the same at opset 23 (the
# mask's guard for fully masked rows computed from the constant mask,
# which folding removes), and the TorchScript one; and Hugging Face's
# GPT-2 and Phi-3, whose fused projections (c_attn, qkv_proj) attention
# reads windows of heads of and writes its gradients into
# (ztc-fold-head-windows): GPT-2's q, k and v, Phi-3's v beside q and k
# stored [B, H, T, D] after their rotary embeddings. Then the other
# families whose attention fuses: Mistral, Qwen2, Gemma 2 (its capped
# scores the fused op's softcap), Gemma 3, GPT-NeoX, Phi, OPT, Falcon and
# ModernBERT (BLOOM's ALiBi biases and DeBERTa's relative positions stay
# unfused).
FUSED_ATTENTION = ("llama", "qwen3", "llama_opset23", "bert_torchscript", "phi3", "gpt2",
                   "mistral", "qwen2", "gemma2", "gemma3", "gptneox", "phi", "opt", "falcon",
                   "modernbert")


def variants(args, name, tmp, reference, reference_ckpt, meta):
    """5: fused attention, bf16, recompute full and ZeRO-3 on 2 ranks against
    the f32 run."""
    fixture = os.path.join(FIXTURES, name)
    loss = meta["loss"]
    model, data = os.path.join(fixture, "model.onnx"), os.path.join(fixture, "data")
    base = ["--loss", loss, "--optimizer", "adamw", "--lr", "1e-3"]

    def train(tag, compile_flags, launcher=(), save=None, batch=2):
        art = os.path.join(tmp, "%s-%s.ztc" % (name, tag))
        run(args.ztc, "compile", model, "-o", art, "--batch-size", batch, *base,
            *compile_flags)
        trainer = args.ztc_train if launcher else args.ztc
        command = [*launcher, trainer] + ([] if launcher else ["train"])
        extra = ["--save", save] if save else []
        result = run(*command, art, "--data", data, "--steps", "20", "--log-every", "1",
                     *extra, env=MPI_ENV if launcher else None)
        return losses_of(result.stderr)

    if name in FUSED_ATTENTION:
        # nn.attention (--fuse-attention on, the CUDA default) in place of
        # each layer's scores, softmax and product: the f32 run's losses.
        fused = train("fused", ["--fuse-attention", "on"])
        step = open(os.path.join(tmp, "%s-fused.ztc" % name, "step.cpp")).read()
        calls = len(re.findall(r"ztc::cpu::attention[<(]", step))
        drift = curve_error(fused, reference)
        check(calls > 0 and drift <= 1e-5,
              "%s --fuse-attention on: %d fused attention calls; 20 losses within %.2e of "
              "the unfused step's (relative L2)" % (name, calls, drift))
    bf16 = train("bf16", ["--precision", "bf16"])
    drift = curve_error(bf16, reference)
    check(drift <= 0.02, "%s --precision bf16: 20 losses within %.2f%% of f32's "
          "(relative L2; last %.4f, f32 %.4f)"
          % (name, 100 * drift, bf16[-1] if bf16 else float("nan"), reference[-1]))
    # full where the model has blocks to find; sqrt where it has none
    # (EfficientNet's stages differ in shape and the names carry no scope).
    policy = "full"
    probe = subprocess.run([args.ztc, "compile", model, "-o", os.path.join(tmp, "probe.ztc"),
                            "--batch-size", "2", *base, "--recompute", "full", "--no-build"],
                           capture_output=True, text=True)
    if probe.returncode != 0 and "no block found" in probe.stderr:
        policy = "sqrt"
    ckpt = os.path.join(tmp, name + "-recompute.ckpt")
    recomputed = train(policy, ["--recompute", policy], save=ckpt)
    ours, theirs = read_checkpoint(ckpt), read_checkpoint(reference_ckpt)
    same = ours.keys() == theirs.keys() and all(np.array_equal(ours[k], theirs[k])
                                                for k in ours)
    check(same and recomputed == reference,
          "%s --recompute %s: 20 losses and %d tensors bit-identical to none"
          % (name, policy, len(ours)))
    if args.mpirun and meta.get("batch_statistics"):
        # Each rank normalizes over its own sample: not one rank's step.
        print("note %s ZeRO stage 3 not compared: training-mode BatchNorm "
              "normalizes over each rank's batch (as PyTorch's DDP without "
              "SyncBatchNorm)" % name)
    elif args.mpirun:
        # --batch-size is per rank: the same 2 samples as one rank's batch.
        zero = train("zero3", ["--zero", "3", "--world-size", "2"],
                     launcher=(args.mpirun, "-np", "2"), batch=1)
        error = curve_error(zero, reference)
        check(error <= 1e-5, "%s ZeRO stage 3 on 2 ranks: 20 losses within %.2e of one "
              "rank's (relative L2)" % (name, error))


def check_model(ztc, name, tmp, args=None):
    fixture = os.path.join(FIXTURES, name)
    model = os.path.join(fixture, "model.onnx")
    data = os.path.join(fixture, "data")
    # What the model returns: logits, or (a model computing its own loss,
    # whose labels are an input) the loss.
    meta = json.load(open(os.path.join(fixture, "meta.json")))

    # 1. The forward.
    inputs, out = os.path.join(tmp, name + "_inputs"), os.path.join(tmp, name + "_out")
    os.makedirs(inputs)
    for file in sorted(os.listdir(data)):
        if file != "labels.npy" or meta["output"] == "loss":
            np.save(os.path.join(inputs, file), np.load(os.path.join(data, file)))
    batch = len(np.load(os.path.join(data, "labels.npy")))
    run(ztc, "run", model, "--data", inputs, "--output-dir", out)
    error = relative(np.load(os.path.join(out, meta["output"] + ".npy")),
                     np.load(os.path.join(fixture, "output.npy")))
    check(error <= 1e-5, "%s forward: %s vs PyTorch %.2e" % (name, meta["output"], error))

    # 2. What trains, and the gradients (sampled elements and the norm of
    # each parameter's).
    stored = dict(np.load(os.path.join(fixture, "grads.npz")))
    grads = {key[:-len(":value")]: (stored[key[:-len(":value")] + ":index"], value,
                                     float(stored[key[:-len(":value")] + ":norm"]))
             for key, value in stored.items() if key.endswith(":value")}
    art = os.path.join(tmp, name + ".ztc")
    report = run(ztc, "compile", model, "-o", art, "--batch-size", batch, "--loss",
                 meta["loss"], "--optimizer", "adamw", "--lr", "1e-3").stderr
    trained = re.search(r"trains (\d+) parameters", report)
    warned = "warning" in report
    check(trained and int(trained.group(1)) == len(grads) and not warned,
          "%s: ztc trains %s initializers, the model has %d parameters%s"
          % (name, trained.group(1) if trained else "?", len(grads),
             "; warned: " + report.strip() if warned else ""))
    dump = os.path.join(tmp, name + "_grads")
    run(ztc, "train", art, "--data", data, "--steps", "1", "--dump-grads", dump)
    largest = max(np.abs(value).max() for _, value, _ in grads.values())
    # A tied parameter is one initializer, named by one of its state-dict
    # names; PyTorch may call it by another.
    onnx_name = {}
    for initializer, role in roles_of(model).items():
        for other in role.get("tied", []):
            onnx_name[other] = initializer
    worst, missing = 0.0, []
    for pname, (index, reference, norm) in grads.items():
        stem = STEM.sub("_", onnx_name.get(pname, pname))
        path = os.path.join(dump, "grad", stem + ".npy")
        if not os.path.exists(path):
            missing.append(pname)
            continue
        ours = np.load(path).ravel()
        scale = max(np.abs(reference).max(), 1e-2 * largest)
        error = max(np.abs(ours[index] - reference).max() / scale,
                    abs(np.linalg.norm(ours.astype(np.float64)) - norm) / max(norm, scale))
        worst = max(worst, float(error))
    check(worst <= 1e-4 and not missing,
          "%s gradients: worst relative error %.2e over %d parameters%s"
          % (name, worst, len(grads) - len(missing),
             " (not dumped: %s)" % ", ".join(missing) if missing else ""))

    # 3. 20 AdamW steps.
    ckpt = os.path.join(tmp, name + "_ckpt")
    log = run(ztc, "train", art, "--data", data, "--steps", "20", "--log-every", "1",
              "--save", ckpt).stderr
    ours = losses_of(log)
    reference = np.load(os.path.join(fixture, "adamw_losses.npy"))
    error = curve_error(ours, reference)
    check(error <= 1e-4, "%s 20 AdamW steps: losses within %.2e of PyTorch's (relative "
          "L2; %.4f -> %.4f)" % (name, error, reference[0], reference[-1]))

    # 4. The weights back under the state-dict names.
    weights = os.path.join(tmp, name + ".safetensors")
    run(ztc, "export", art, "--checkpoint", ckpt, "--state-dict", weights)
    written = read_safetensors(weights)
    # Integer buffers (BatchNorm's num_batches_tracked) have no place in
    # the ONNX file.
    keys = json.load(open(os.path.join(fixture, "state_dict.json")))
    expected = {key for key, floating in keys.items() if floating}
    checkpoint = read_checkpoint(ckpt)
    same = all(np.array_equal(value, checkpoint[key]) for key, value in written.items()
               if key in checkpoint)
    check(set(written) == expected and same,
          "%s state dict: %d tensors, %s the keys load_state_dict expects%s"
          % (name, len(written), "exactly" if set(written) == expected else "NOT",
             "" if same else "; values differ from the checkpoint"))

    if args is not None and args.variants:
        variants(args, name, tmp, ours, ckpt, meta)


def main():
    global FIXTURES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--only", help="comma-separated fixture names")
    parser.add_argument("--fixtures", default=FIXTURES,
                        help="the fixtures' directory (default: %(default)s)")
    parser.add_argument("--no-variants", dest="variants", action="store_false",
                        help="skip bf16, recompute and ZeRO (5.)")
    parser.add_argument("--ztc-train", help="ztc-train, for --mpirun")
    parser.add_argument("--mpirun", help="also ZeRO stage 3 on 2 ranks under this mpirun")
    args = parser.parse_args()
    if args.mpirun and not args.ztc_train:
        parser.error("--mpirun needs --ztc-train")
    FIXTURES = args.fixtures
    if not os.path.isdir(FIXTURES):
        parser.error("--fixtures %s: no such directory" % FIXTURES)
    names = args.only.split(",") if args.only else sorted(os.listdir(FIXTURES))
    with tempfile.TemporaryDirectory(prefix="ztc-modern-") as tmp:
        for name in names:
            check_model(args.ztc, name, tmp, args)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
