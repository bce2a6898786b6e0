#!/usr/bin/env python3
"""Writes scikit-learn's handwritten digits (8x8 images, 10 classes, shipped
with the package) as ztc training data.

Creates OUT/train and OUT/test, each with x.npy (float32, pixels scaled to
[0, 1]; shape [N, 64], or [N, 1, 8, 8] with --images) and labels.npy (int64
[N]). The split is fixed: 80% train, 20% test, shuffled with --seed.
"""

import argparse
import os

import numpy as np
from sklearn.datasets import load_digits


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "models", "digits"))
    p.add_argument("--images", action="store_true", help="shape x as [N, 1, 8, 8] for the CNN")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    if args.images:
        x = x.reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(args.seed).permutation(len(y))
    split = int(0.8 * len(y))
    for name, index in (("train", order[:split]), ("test", order[split:])):
        directory = os.path.join(args.out, name)
        os.makedirs(directory, exist_ok=True)
        np.save(os.path.join(directory, "x.npy"), x[index])
        np.save(os.path.join(directory, "labels.npy"), y[index])
    print("digits: %d train, %d test samples in %s" % (split, len(y) - split, args.out))


if __name__ == "__main__":
    main()
