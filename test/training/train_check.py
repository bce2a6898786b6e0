#!/usr/bin/env python3
"""Training against PyTorch: gradients, an AdamW loss sequence, one SGD step.

For the example MLP, CNN (BatchNorm in inference form) and GPT (the same architectures as examples/onnx, with
the weights of the exported ONNX model loaded into the PyTorch module by
name):
  1. `ztc train --dump-grads` gradients vs torch autograd (max relative
     error <= 1e-4, relative to each gradient's largest magnitude);
  2. 20 AdamW steps on one batch: ztc's loss sequence vs torch.optim.AdamW
     (relative error <= 1e-4 at every step);
  3. one SGD step: ztc's parameters (from the checkpoint) vs torch.optim.SGD.
Usage: train_check.py --ztc PATH
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "examples", "onnx"))

import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from checks import check, read_checkpoint, read_safetensors, summary, tensors_equal  # noqa: E402

STEM = re.compile(r"[^A-Za-z0-9._-]")


def torch_model(name, onnx_path):
    """The example's PyTorch module with the ONNX model's weights."""
    if name == "mlp":
        from make_mlp import MLP
        module = MLP()
    elif name in ("cnn", "cnn_train"):
        from make_cnn import CNN
        module = CNN()
    else:
        from make_gpt import GPT, SMALL
        module = GPT(**SMALL)
    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
               for t in onnx.load(onnx_path).graph.initializer}
    state = module.state_dict()
    for key in state:
        if key in weights:
            state[key] = weights[key]
    module.load_state_dict(state)
    # cnn is exported in eval mode: BatchNorm's running statistics normalize
    # and are not trained. cnn_train is exported in training mode.
    return module.eval() if name == "cnn" else module.train()


def ztc(*args):
    subprocess.run(list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_data(directory, name, rng, batch):
    os.makedirs(directory, exist_ok=True)
    if name.startswith("cnn"):
        x = rng.standard_normal((batch, 1, 8, 8)).astype(np.float32)
        labels = rng.integers(0, 10, (batch,)).astype(np.int64)
        np.save(os.path.join(directory, "x.npy"), x)
    elif name == "mlp":
        x = rng.standard_normal((batch, 64)).astype(np.float32)
        labels = rng.integers(0, 10, (batch,)).astype(np.int64)
        np.save(os.path.join(directory, "x.npy"), x)
    else:
        x = rng.integers(0, 64, (batch, 16)).astype(np.int64)
        labels = rng.integers(0, 64, (batch, 16)).astype(np.int64)
        np.save(os.path.join(directory, "tokens.npy"), x)
    np.save(os.path.join(directory, "labels.npy"), labels)
    return torch.from_numpy(x), torch.from_numpy(labels)


def torch_loss(module, x, labels):
    logits = module(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def run_model(args, tmp, name, onnx_path, batch):
    rng = np.random.default_rng(1)
    data = os.path.join(tmp, name + "_data")
    x, labels = make_data(data, name, rng, batch)

    # 1. Gradients.
    art = os.path.join(tmp, name + "_adamw.ztc")
    ztc(args.ztc, "compile", onnx_path, "-o", art, "--batch-size", str(batch),
        "--loss", "cross_entropy", "--optimizer", "adamw", "--lr", "1e-3")
    dump = os.path.join(tmp, name + "_grads")
    ztc(args.ztc, "train", art, "--data", data, "--steps", "1", "--dump-grads", dump)
    module = torch_model(name, onnx_path)
    loss = torch_loss(module, x, labels)
    loss.backward()
    ztc_loss = float(np.load(os.path.join(dump, "loss.npy")))
    check(abs(ztc_loss - loss.item()) <= 1e-5 * abs(loss.item()),
          "%s loss %.7f (torch %.7f)" % (name, ztc_loss, loss.item()))
    # Relative to each parameter's largest gradient; a gradient that is zero
    # up to rounding (a convolution bias before training-mode BatchNorm,
    # which subtracts the batch mean) is compared with 1% of the model's
    # largest gradient instead (an absolute error of at most 1e-6 of it).
    largest = max(p.grad.abs().max().item() for p in module.parameters())
    worst = 0.0
    for pname, param in module.named_parameters():
        path = os.path.join(dump, "grad", STEM.sub("_", pname) + ".npy")
        if not os.path.exists(path):
            check(False, "%s: no gradient dumped for %s" % (name, pname))
            continue
        ours, ref = np.load(path), param.grad.numpy()
        error = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-2 * largest)
        worst = max(worst, error)
    check(worst <= 1e-4, "%s gradients: worst relative error %.2e over %d parameters"
          % (name, worst, len(list(module.parameters()))))

    # 2. 20 AdamW steps on one batch.
    log = subprocess.run([args.ztc, "train", art, "--data", data, "--steps", "20",
                          "--log-every", "1"], check=True, capture_output=True,
                         text=True).stderr
    ours = [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", log)]
    module = torch_model(name, onnx_path)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    ref = []
    for _ in range(20):
        opt.zero_grad()
        loss = torch_loss(module, x, labels)
        ref.append(loss.item())
        loss.backward()
        opt.step()
    error = max(abs(a - b) / abs(b) for a, b in zip(ours, ref)) if len(ours) == 20 else 1.0
    check(error <= 1e-4, "%s 20 AdamW steps: worst relative loss error %.2e (losses %.4f -> %.4f)"
          % (name, error, ref[0], ref[-1]))

    # 3. One SGD step.
    art = os.path.join(tmp, name + "_sgd.ztc")
    ztc(args.ztc, "compile", onnx_path, "-o", art, "--batch-size", str(batch),
        "--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9")
    ckpt = os.path.join(tmp, name + "_sgd_ckpt")
    ztc(args.ztc, "train", art, "--data", data, "--steps", "1", "--save", ckpt)
    params = read_safetensors(os.path.join(ckpt, "checkpoint.safetensors"))
    module = torch_model(name, onnx_path)
    opt = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    torch_loss(module, x, labels).backward()
    opt.step()
    worst = 0.0
    for pname, param in module.named_parameters():
        if pname not in params:
            continue  # frozen: no optimizer state, value unchanged
        ref = param.detach().numpy()
        worst = max(worst, np.abs(params[pname] - ref).max() / max(np.abs(ref).max(), 1e-12))
    check(worst <= 1e-5, "%s one SGD step: worst relative parameter error %.2e" % (name, worst))
    if name == "cnn_train":
        check_running_statistics(name, module, params, onnx_path, x)

    # 4. 20 steps straight and 10 + resume + 10 give bit-identical state.
    art = os.path.join(tmp, name + "_adamw.ztc")
    straight, first = os.path.join(tmp, name + "_straight"), os.path.join(tmp, name + "_first")
    resumed = os.path.join(tmp, name + "_resumed")
    ztc(args.ztc, "train", art, "--data", data, "--steps", "20", "--save", straight)
    ztc(args.ztc, "train", art, "--data", data, "--steps", "10", "--save", first)
    ztc(args.ztc, "train", art, "--data", data, "--steps", "20", "--resume", first,
        "--save", resumed)
    a, b = read_checkpoint(straight), read_checkpoint(resumed)
    same = tensors_equal(a, b)
    check(same, "%s 20 steps vs 10 + resume + 10: %d tensors bit-identical" % (name, len(a)))

    # 5. Gradient accumulation: 2 micro-batches of batch/2 make the same
    # optimizer steps (losses and parameters) as one batch. Not with
    # training-mode BatchNorm: its statistics are the micro-batch's, in
    # PyTorch as in ztc.
    if batch % 2 == 0 and name != "cnn_train":
        half = os.path.join(tmp, name + "_accum.ztc")
        ztc(args.ztc, "compile", onnx_path, "-o", half, "--batch-size", str(batch // 2),
            "--grad-accum", "2", "--loss", "cross_entropy", "--optimizer", "adamw",
            "--lr", "1e-3")
        accum = os.path.join(tmp, name + "_accum_ckpt")
        log = subprocess.run([args.ztc, "train", half, "--data", data, "--steps", "3",
                              "--log-every", "1", "--save", accum], check=True,
                             capture_output=True, text=True).stderr
        accum_losses = [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", log)]
        c = read_safetensors(os.path.join(accum, "checkpoint.safetensors"))
        ztc(args.ztc, "train", art, "--data", data, "--steps", "3", "--save",
            os.path.join(tmp, name + "_full3"))
        full = read_safetensors(os.path.join(tmp, name + "_full3", "checkpoint.safetensors"))
        worst = max(np.abs(c[k] - v).max() / max(np.abs(v).max(), 1e-12)
                    for k, v in full.items() if k in c)
        full_log = subprocess.run([args.ztc, "train", art, "--data", data, "--steps", "3",
                                   "--log-every", "1"], check=True, capture_output=True,
                                  text=True).stderr
        full_losses = [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", full_log)]
        loss_error = max(abs(a - b) / abs(b) for a, b in zip(accum_losses, full_losses))
        check(worst <= 1e-4 and loss_error <= 1e-5 and len(accum_losses) == 3,
              "%s --grad-accum 2: worst relative parameter error %.2e, loss error %.2e "
              "after 3 steps" % (name, worst, loss_error))


def check_running_statistics(name, module, params, onnx_path, x):
    """After one step, BatchNorm's running statistics in the checkpoint are
    ONNX's: running * momentum + batch * (1 - momentum). The mean is
    PyTorch's; PyTorch's variance update uses the unbiased batch variance,
    ONNX's the biased one, so the expected variance is derived from both."""
    initial = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(onnx_path).graph.initializer}
    counts = {}
    hooks = [m.register_forward_hook(
        lambda m, inputs, out, key=key: counts.__setitem__(key, inputs[0].numel() //
                                                           inputs[0].shape[1]))
        for key, m in module.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        module(x)  # only to count elements per channel; statistics not used
    for hook in hooks:
        hook.remove()
    fresh = torch_model(name, onnx_path)
    torch_loss(fresh, x, torch.zeros(x.shape[0], dtype=torch.int64))
    worst = 0.0
    for key, n in counts.items():
        momentum = 0.9  # ONNX's momentum: 1 - PyTorch's 0.1
        torch_mean = dict(fresh.named_buffers())[key + ".running_mean"].numpy()
        torch_var = dict(fresh.named_buffers())[key + ".running_var"].numpy()
        var0 = initial[key + ".running_var"]
        expected_var = momentum * var0 + (torch_var - momentum * var0) * (n - 1) / n
        for ours, ref in ((params[key + ".running_mean"], torch_mean),
                          (params[key + ".running_var"], expected_var)):
            worst = max(worst, np.abs(ours - ref).max() / np.abs(ref).max())
    check(worst <= 1e-5 and len(counts) == 2,
          "%s running statistics after one step: worst relative error %.2e (%d BatchNorms)"
          % (name, worst, len(counts)))


def optimizer_variants(args, tmp, onnx_path):
    """Each optimizer option against torch.optim on the MLP: 3 steps.

    Adam divides by sqrt(v), which amplifies float32 rounding: on these runs
    torch in float32 and in float64 differ by 1.1e-4 (relative to the largest
    parameter), so Adam's bound is 1e-4 and SGD's 1e-5."""
    rng = np.random.default_rng(2)
    data = os.path.join(tmp, "variants_data")
    x, labels = make_data(data, "mlp", rng, 8)
    variants = [
        ("sgd nesterov + weight decay + clipping",
         ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--nesterov",
          "--weight-decay", "0.01", "--clip-grad-norm", "0.5"],
         lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                    weight_decay=0.01), 0.5, 1e-5),
        ("adam with L2 weight decay, betas and eps",
         ["--optimizer", "adam", "--lr", "1e-2", "--weight-decay", "0.01",
          "--betas", "0.8,0.95", "--eps", "1e-6"],
         lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.01, betas=(0.8, 0.95),
                                     eps=1e-6), None, 1e-4),
        ("adamw with weight decay 0.1 and clipping",
         ["--optimizer", "adamw", "--lr", "1e-2", "--weight-decay", "0.1",
          "--clip-grad-norm", "1.0"],
         lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), 1.0, 1e-4),
    ]
    for index, (title, flags, make_opt, clip, bound) in enumerate(variants):
        art = os.path.join(tmp, "variant%d.ztc" % index)
        ztc(args.ztc, "compile", onnx_path, "-o", art, "--batch-size", "8",
            "--loss", "cross_entropy", *flags)
        ckpt = os.path.join(tmp, "variant%d_ckpt" % index)
        ztc(args.ztc, "train", art, "--data", data, "--steps", "3", "--save", ckpt)
        params = read_safetensors(os.path.join(ckpt, "checkpoint.safetensors"))
        module = torch_model("mlp", onnx_path)
        opt = make_opt(module.parameters())
        for _ in range(3):
            opt.zero_grad()
            torch_loss(module, x, labels).backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
            opt.step()
        worst = max(np.abs(params[n] - p.detach().numpy()).max() /
                    max(np.abs(p.detach().numpy()).max(), 1e-12)
                    for n, p in module.named_parameters())
        check(worst <= bound, "mlp 3 steps of %s: worst relative parameter error %.2e"
              % (title, worst))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-train-") as tmp:
        models = os.path.join(tmp, "models")
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"), models],
                       check=True)
        for name, batch in (("mlp", 8), ("cnn", 8), ("cnn_train", 8), ("gpt", 4)):
            run_model(args, tmp, name, os.path.join(models, name + ".onnx"), batch)
        optimizer_variants(args, tmp, os.path.join(models, "mlp.onnx"))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
