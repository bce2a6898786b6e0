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

from checks import check, read_safetensors, summary  # noqa: E402

STEM = re.compile(r"[^A-Za-z0-9._-]")


def torch_model(name, onnx_path):
    """The example's PyTorch module with the ONNX model's weights."""
    if name == "mlp":
        from make_mlp import MLP
        module = MLP()
    elif name == "cnn":
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
    # BatchNorm runs in inference form (the model is exported in eval mode):
    # its running statistics normalize, and are not trained.
    return module.eval() if name == "cnn" else module.train()


def ztc(*args):
    subprocess.run(list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_data(directory, name, rng, batch):
    os.makedirs(directory, exist_ok=True)
    if name == "cnn":
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
    worst = 0.0
    for pname, param in module.named_parameters():
        path = os.path.join(dump, "grad", STEM.sub("_", pname) + ".npy")
        if not os.path.exists(path):
            check(False, "%s: no gradient dumped for %s" % (name, pname))
            continue
        ours, ref = np.load(path), param.grad.numpy()
        error = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-12)
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

    # 4. 20 steps straight and 10 + resume + 10 give bit-identical state.
    art = os.path.join(tmp, name + "_adamw.ztc")
    straight, first = os.path.join(tmp, name + "_straight"), os.path.join(tmp, name + "_first")
    resumed = os.path.join(tmp, name + "_resumed")
    ztc(args.ztc, "train", art, "--data", data, "--steps", "20", "--save", straight)
    ztc(args.ztc, "train", art, "--data", data, "--steps", "10", "--save", first)
    ztc(args.ztc, "train", art, "--data", data, "--steps", "20", "--resume", first,
        "--save", resumed)
    a = read_safetensors(os.path.join(straight, "checkpoint.safetensors"))
    b = read_safetensors(os.path.join(resumed, "checkpoint.safetensors"))
    same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    check(same, "%s 20 steps vs 10 + resume + 10: %d tensors bit-identical" % (name, len(a)))

    # 5. Gradient accumulation: 2 micro-batches of batch/2 make the same
    # optimizer steps (losses and parameters) as one batch.
    if batch % 2 == 0:
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-train-") as tmp:
        models = os.path.join(tmp, "models")
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"), models],
                       check=True)
        for name, batch in (("mlp", 8), ("cnn", 8), ("gpt", 4)):
            run_model(args, tmp, name, os.path.join(models, name + ".onnx"), batch)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
