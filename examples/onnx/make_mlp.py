#!/usr/bin/env python3
"""Generates mlp.onnx: a 64 -> 128 -> 64 -> 10 multilayer perceptron with ReLU.

Input  `x`      float32 [batch, 64]   (batch is a dynamic axis named "batch")
Output `logits` float32 [batch, 10]
Reference data: mlp_data/x.npy (batch 8), mlp_ref/logits.npy.
"""

import _common  # noqa: F401  (re-executes under .venv if needed)
from _common import base_argparser, describe, export, save_arrays, save_model, seed_everything

import torch
from torch import nn

NAME = "mlp"
REF_BATCH = 8


class MLP(nn.Module):
    def __init__(self, sizes=(64, 128, 64, 10)):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def main():
    args = base_argparser(__doc__.splitlines()[0]).parse_args()
    seed_everything(args.seed)

    model = MLP().eval()
    x = torch.randn(REF_BATCH, 64)
    with torch.no_grad():
        logits = model(x)

    proto = export(
        model,
        (x,),
        input_names=["x"],
        output_names=["logits"],
        dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
    )
    path = save_model(proto, args.out, NAME)
    save_arrays(args.out, NAME, {"x": x.numpy()}, {"logits": logits.numpy()})
    if not args.quiet:
        print(describe(proto, path))


if __name__ == "__main__":
    main()
