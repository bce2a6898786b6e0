#!/usr/bin/env python3
"""Builds test/fixtures/bnb8bit: what bitsandbytes' 8-bit AdamW and Adam do
on the CPU, step by step, for runtime/kernels/Blockwise8bit.h to match.

  make_bnb8bit.py [--out test/fixtures/bnb8bit]

Needs the reference environment of test/models/make_modern.py with
bitsandbytes (pip install bitsandbytes==0.50.2; it runs its 8-bit
optimizers on the CPU).

A parameter of 600 float32 elements (three blocks of 256, the last one
partial) takes 6 steps of bnb.optim.AdamW8bit (lr 1e-3, betas 0.9, 0.999,
eps 1e-8, weight decay 0.01) and, from the same start, of
bnb.optim.Adam8bit (no weight decay), both with min_8bit_size=0 so that
the states are 8-bit (bitsandbytes keeps tensors under 4096 elements in
float32 by default), on seeded gradients of three scales. Writes .npy
files:
  qmap_signed, qmap_unsigned   the first and second moment's code books
                               (float32 [256]), as the optimizer holds them
  param0, grads                the start and each step's gradient
  <opt>_param, <opt>_state1, <opt>_state2, <opt>_absmax1, <opt>_absmax2
                               after each step (opt: adamw, adam), stacked;
                               the states' uint8 code bytes stored as int8
and versions.json.
"""

import argparse
import json
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZE, STEPS = 600, 6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "bnb8bit"))
    args = parser.parse_args()
    import bitsandbytes as bnb
    import torch

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(37)
    param0 = rng.standard_normal(SIZE).astype(np.float32)
    # Gradients of three scales, some zero, as training sees them.
    scales = [1e-2, 1e-2, 1.0, 1e-4, 1e-2, 1e-2]
    grads = np.stack([rng.standard_normal(SIZE).astype(np.float32) * np.float32(s)
                      for s in scales])
    grads[4, :100] = 0
    arrays = {"param0": param0, "grads": grads}
    for name, make in (("adamw", lambda p: bnb.optim.AdamW8bit(
            [p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, min_8bit_size=0)),
                       ("adam", lambda p: bnb.optim.Adam8bit(
            [p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, min_8bit_size=0))):
        p = torch.nn.Parameter(torch.from_numpy(param0.copy()))
        optimizer = make(p)
        rows = {key: [] for key in ("param", "state1", "state2", "absmax1", "absmax2")}
        for step in range(STEPS):
            p.grad = torch.from_numpy(grads[step].copy())
            optimizer.step()
            state = optimizer.state[p]
            assert state["state1"].dtype == torch.uint8, "the states are not 8-bit"
            rows["param"].append(p.detach().numpy().copy())
            for key in ("state1", "state2", "absmax1", "absmax2"):
                value = state[key].numpy().copy()
                # The code bytes as int8 (.npy readers, ztc's among them,
                # know int8): the same bytes.
                rows[key].append(value.view(np.int8) if value.dtype == np.uint8 else value)
        for key, values in rows.items():
            arrays["%s_%s" % (name, key)] = np.stack(values)
        arrays["qmap_signed"] = optimizer.state[p]["qmap1"].numpy().copy()
        arrays["qmap_unsigned"] = optimizer.state[p]["qmap2"].numpy().copy()
    for key, value in arrays.items():
        np.save(os.path.join(args.out, key + ".npy"), value)
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"bitsandbytes": bnb.__version__, "torch": torch.__version__,
                   "size": SIZE, "steps": STEPS, "lr": 1e-3, "betas": [0.9, 0.999],
                   "eps": 1e-8, "weight_decay": {"adamw": 0.01, "adam": 0.0}}, f, indent=1)
    print("made %s" % args.out)


if __name__ == "__main__":
    main()
