#!/usr/bin/env python3
"""Training-mode Dropout end to end: `ztc run` on masks, `ztc train` on a
PyTorch MLP with nn.Dropout.

  1. A model built with onnx.helper: two training-mode Dropout nodes
     (ratio 0.3) on the same x, returning y, the mask and the second mask,
     run with `ztc run --seed`:
       - y == where(mask, x * float32(1 / (1 - ratio)), 0) bit for bit (the
         scale is the reciprocal, as in ONNX's reference and PyTorch; it is
         within 1 ulp of x / (1 - ratio));
       - the dropped fraction is within 5 standard deviations of 0.3 (for
         a fixed seed the outcome is deterministic; a correct generator
         leaves it outside with probability below 1e-6);
       - the same seed gives the same bytes, another seed other masks, and
         the two nodes draw different masks (each pair of masks disagrees on
         about 2 * 0.3 * 0.7 = 42% of the elements, and both drop about 9%).
  2. An MLP with nn.Dropout(0.3) exported by PyTorch in training mode
     (Dropout(x, ratio, training_mode=true)), compiled with AdamW:
       - the loss falls over 20 steps;
       - 20 steps straight and 10 + --resume + 10 give bit-identical
         parameters and optimizer states, with and without --grad-accum 2;
       - with lr 0 (parameters fixed) on a batch of copies of one sample
         (so shuffling changes nothing) the loss still changes from step to
         step: every step draws new masks.
Usage: dropout_check.py --ztc PATH
"""

import argparse
import io
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from checks import check, read_checkpoint, summary, tensors_equal

RATIO = 0.3


def dropout_model(path, shape):
    """y, mask = Dropout(x) and mask_b from a second Dropout node, opset 17."""
    ratio = numpy_helper.from_array(np.array(RATIO, np.float32), "ratio")
    training = numpy_helper.from_array(np.array(True), "training")
    nodes = [
        helper.make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"],
                         name="drop_a"),
        helper.make_node("Dropout", ["x", "ratio", "training"], ["y_b", "mask_b"],
                         name="drop_b"),
    ]
    graph = helper.make_graph(
        nodes, "dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, shape),
         helper.make_tensor_value_info("mask_b", TensorProto.BOOL, shape)],
        [ratio, training])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def run_forward(args, tmp):
    shape = [64, 256]
    model = os.path.join(tmp, "dropout.onnx")
    dropout_model(model, shape)
    data = os.path.join(tmp, "dropout_data")
    os.makedirs(data)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.save(os.path.join(data, "x.npy"), x)

    def run(seed, name):
        out = os.path.join(tmp, name)
        subprocess.run([args.ztc, "run", model, "--data", data, "--output-dir", out,
                        "--seed", str(seed)], check=True)
        return {k: np.load(os.path.join(out, k + ".npy")) for k in ("y", "mask", "mask_b")}

    first, again, other = run(0, "seed0"), run(0, "seed0_again"), run(1, "seed1")
    y, mask = first["y"], first["mask"]
    check(mask.dtype == np.bool_ and mask.shape == x.shape,
          "the mask is bool%s" % list(mask.shape))
    scale = np.float32(1.0 / (1.0 - float(np.float32(RATIO))))
    expected = np.where(mask, x * scale, np.float32(0))
    check(y.dtype == np.float32 and np.array_equal(y, expected),
          "y == where(mask, x * %r, 0) bit for bit" % float(scale))
    divided = np.where(mask, x / np.float32(1 - RATIO), np.float32(0))
    ulps = int(np.max(np.abs(y.view(np.int32).astype(np.int64) -
                             divided.view(np.int32).astype(np.int64))))
    check(ulps <= 1, "y is within %d ulp of where(mask, x / (1 - 0.3), 0)" % ulps)

    n = mask.size
    sigma = np.sqrt(RATIO * (1 - RATIO) / n)
    for name, m in (("drop_a seed 0", mask), ("drop_b seed 0", first["mask_b"]),
                    ("drop_a seed 1", other["mask"])):
        dropped = 1.0 - m.mean()
        check(abs(dropped - RATIO) <= 5 * sigma,
              "%s drops %.4f of %d elements (0.3 +- %.4f)" % (name, dropped, n, 5 * sigma))

    check(all(np.array_equal(first[k], again[k]) for k in first),
          "the same --seed gives the same y and masks")
    both = 2 * RATIO * (1 - RATIO)
    bound = 5 * np.sqrt(both * (1 - both) / n)
    for name, a, b in (("seeds 0 and 1", mask, other["mask"]),
                       ("nodes drop_a and drop_b", mask, first["mask_b"])):
        differ = np.mean(a != b)
        check(abs(differ - both) <= bound,
              "%s: masks differ on %.4f of the elements (%.2f +- %.4f)"
              % (name, differ, both, bound))
    together = np.mean(~mask & ~first["mask_b"])
    check(abs(together - RATIO ** 2) <= 5 * np.sqrt(RATIO ** 2 * (1 - RATIO ** 2) / n),
          "both nodes drop %.4f of the elements (independent: %.2f)"
          % (together, RATIO ** 2))


def export_mlp(path):
    """A PyTorch MLP with nn.Dropout(0.3), exported in training mode."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(RATIO),
                          nn.Linear(64, 4)).train()
    buf = io.BytesIO()
    torch.onnx.export(model, (torch.randn(8, 16),), buf, opset_version=17,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    proto = onnx.load_from_string(buf.getvalue())
    dropouts = [n for n in proto.graph.node if n.op_type == "Dropout"]
    check(len(dropouts) == 1 and len(dropouts[0].input) == 3,
          "PyTorch exports nn.Dropout as Dropout(x, ratio, training_mode)")
    onnx.save(proto, path)


def train_log(args, art, data, steps, *extra):
    log = subprocess.run([args.ztc, "train", art, "--data", data, "--steps", str(steps),
                          "--log-every", "1"] + list(extra), check=True,
                         capture_output=True, text=True).stderr
    return [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", log)]


def same_checkpoints(a, b):
    a, b = read_checkpoint(a), read_checkpoint(b)
    return tensors_equal(a, b), len(a)


def run_training(args, tmp):
    model = os.path.join(tmp, "mlp_dropout.onnx")
    export_mlp(model)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    teacher = rng.standard_normal((16, 4)).astype(np.float32)
    labels = np.argmax(x @ teacher, axis=1).astype(np.int64)
    data = os.path.join(tmp, "mlp_data")
    os.makedirs(data)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "labels.npy"), labels)

    for accum, batch in ((1, 32), (2, 16)):
        art = os.path.join(tmp, "mlp_accum%d.ztc" % accum)
        subprocess.run([args.ztc, "compile", model, "-o", art, "--batch-size", str(batch),
                        "--grad-accum", str(accum), "--loss", "cross_entropy",
                        "--optimizer", "adamw", "--lr", "1e-2"], check=True,
                       stderr=subprocess.DEVNULL)
        straight = os.path.join(tmp, "straight%d" % accum)
        first = os.path.join(tmp, "first%d" % accum)
        losses = train_log(args, art, data, 20, "--save", straight)
        train_log(args, art, data, 10, "--save", first)
        train_log(args, art, data, 20, "--resume", first, "--save", first)
        same, count = same_checkpoints(straight, first)
        check(same, "--grad-accum %d: 20 steps vs 10 + resume + 10: %d tensors "
              "bit-identical" % (accum, count))
        if accum == 1:
            start, end = np.mean(losses[:5]), np.mean(losses[-5:])
            check(len(losses) == 20 and end < 0.8 * start,
                  "the loss falls: mean of steps 1-5 %.4f, of steps 16-20 %.4f"
                  % (start, end))

    # lr 0 on a batch of 32 copies of one sample: the parameters stay, and
    # shuffling changes nothing, so with the same masks every step the loss
    # would repeat bit for bit; only new masks can change it.
    one = os.path.join(tmp, "one_sample")
    os.makedirs(one)
    np.save(os.path.join(one, "x.npy"), np.repeat(x[:1], 32, axis=0))
    np.save(os.path.join(one, "labels.npy"), np.repeat(labels[:1], 32))
    art = os.path.join(tmp, "mlp_lr0.ztc")
    subprocess.run([args.ztc, "compile", model, "-o", art, "--batch-size", "32",
                    "--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0"],
                   check=True, stderr=subprocess.DEVNULL)
    losses = train_log(args, art, one, 4)
    spread = (max(losses) - min(losses)) / max(losses) if len(losses) == 4 else 0.0
    check(spread > 1e-3, "with lr 0 the loss still varies by %.2e (relative) over 4 "
          "steps: new masks every step (losses %s)"
          % (spread, ", ".join("%.5f" % v for v in losses)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-dropout-") as tmp:
        run_forward(args, tmp)
        run_training(args, tmp)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
