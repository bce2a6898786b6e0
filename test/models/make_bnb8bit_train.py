#!/usr/bin/env python3
"""Builds test/fixtures/bnb8bit_train: a small model trained by PyTorch with
bitsandbytes' AdamW8bit and Adam8bit, for `ztc compile --optimizer
adamw8bit` (and adam8bit) to match end to end.

  make_bnb8bit_train.py [--out test/fixtures/bnb8bit_train]

Needs the reference environment of test/models/make_modern.py with
bitsandbytes (pip install bitsandbytes==0.50.2; its optimizers run on the
CPU).

The model is a 64 -> 100 -> 70 -> 10 perceptron with ReLU (nn.Linear's
initialization, seed 0), written as model.onnx (Gemm nodes named as the
PyTorch modules, a dynamic batch). Its two larger weights (6400 elements,
25 blocks of 256; 7000, the last block partial) get 8-bit states; its last
weight (700) and the biases stay in float32, as bitsandbytes keeps every
tensor under 4096 elements (min_8bit_size). Halves of these weights are not
whole blocks, so ZeRO on 2 ranks must align its shards. One
batch of 32 seeded samples (data/x.npy, data/labels.npy) trains for 30
steps with cross-entropy, lr 1e-3, betas 0.9 and 0.999, eps 1e-8 and weight
decay 0.01 (AdamW8bit) or 0 (Adam8bit). Writes, per optimizer (adamw8bit,
adam8bit):
  <opt>/losses.npy           the loss before each step (float64 [30])
  <opt>/<param>.npy          each parameter after the last step
  <opt>/step2/<param>.npy    each parameter after the second step, and
  <opt>/step2/<param>.state1.npy, .state2.npy, .absmax1.npy, .absmax2.npy
                             the two larger weights' 8-bit states then
                             (codes as int8 bytes)
and versions.json. (Later states are not recorded: a code is a rounding, so
a last-bit difference in a gradient flips one now and then, and from there
two implementations' trajectories part slowly; the losses stay close.)
"""

import argparse
import json
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = (64, 100, 70, 10)
BATCH, STEPS = 32, 30


def build_onnx(path, weights):
    """The perceptron as ONNX: Gemm (transB) per layer, ReLU between."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, current = [], [], "x"
    layers = len(SIZES) - 1
    for i in range(layers):
        w, b = "net.%d.weight" % (2 * i), "net.%d.bias" % (2 * i)
        inits += [numpy_helper.from_array(weights[w], w), numpy_helper.from_array(weights[b], b)]
        out = "logits" if i + 1 == layers else "gemm%d" % i
        nodes.append(helper.make_node("Gemm", [current, w, b], [out], transB=1,
                                      name="/net.%d/Gemm" % (2 * i)))
        current = out
        if i + 1 < layers:
            nodes.append(helper.make_node("Relu", [current], ["relu%d" % i],
                                          name="/net.%d/Relu" % (2 * i + 1)))
            current = "relu%d" % i
    graph = helper.make_graph(
        nodes, "mlp8bit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", SIZES[0]])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", SIZES[-1]])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="make_bnb8bit_train.py")
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out",
                        default=os.path.join(REPO, "test", "fixtures", "bnb8bit_train"))
    args = parser.parse_args()
    import bitsandbytes as bnb
    import torch
    from torch import nn

    def perceptron():
        layers = []
        for i in range(len(SIZES) - 1):
            layers.append(nn.Linear(SIZES[i], SIZES[i + 1]))
            if i + 2 < len(SIZES):
                layers.append(nn.ReLU())
        model = nn.Module()
        model.net = nn.Sequential(*layers)
        model.forward = model.net.forward
        return model

    torch.manual_seed(0)
    start = {k: v.detach().numpy().copy() for k, v in perceptron().state_dict().items()}

    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    build_onnx(os.path.join(args.out, "model.onnx"), start)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    labels = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    np.save(os.path.join(args.out, "data", "x.npy"), x)
    np.save(os.path.join(args.out, "data", "labels.npy"), labels)

    for name, make, decay in (("adamw8bit", bnb.optim.AdamW8bit, 0.01),
                              ("adam8bit", bnb.optim.Adam8bit, 0.0)):
        model = perceptron()
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in start.items()})
        optimizer = make(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                         weight_decay=decay)
        out = os.path.join(args.out, name)
        os.makedirs(os.path.join(out, "step2"), exist_ok=True)
        losses = []
        for step in range(1, STEPS + 1):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(torch.from_numpy(x)),
                                               torch.from_numpy(labels))
            loss.backward()
            losses.append(float(loss.detach()))
            optimizer.step()
            if step != 2:
                continue
            for key, param in model.named_parameters():
                np.save(os.path.join(out, "step2", key + ".npy"),
                        param.detach().numpy().copy())
                state = optimizer.state[param]
                if state["state1"].dtype != torch.uint8:
                    assert param.numel() < 4096, "%s: a large tensor kept float32 states" % key
                    continue
                for part in ("state1", "state2", "absmax1", "absmax2"):
                    value = state[part].numpy().copy()
                    np.save(os.path.join(out, "step2", "%s.%s.npy" % (key, part)),
                            value.view(np.int8) if value.dtype == np.uint8 else value)
        np.save(os.path.join(out, "losses.npy"), np.asarray(losses, np.float64))
        for key, param in model.named_parameters():
            np.save(os.path.join(out, key + ".npy"), param.detach().numpy().copy())
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"bitsandbytes": bnb.__version__, "torch": torch.__version__,
                   "sizes": SIZES, "batch": BATCH, "steps": STEPS, "lr": 1e-3,
                   "betas": [0.9, 0.999], "eps": 1e-8,
                   "weight_decay": {"adamw8bit": 0.01, "adam8bit": 0.0}}, f, indent=1)
    print("made %s" % args.out)


if __name__ == "__main__":
    main()
