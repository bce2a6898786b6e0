#!/usr/bin/env python3
"""Gradient check: ztc-autodiff's gradients against finite differences.

Usage:
    gradient_check.py --ztc-opt PATH_TO_ZTC_OPT FILE.mlir [FILE.mlir ...]

Every function of each file (nn dialect, first result a scalar loss) goes
through `ztc-opt --ztc-autodiff`; a small numpy interpreter of the nn dialect
then runs the differentiated function in float64 (whatever the declared
float types) and compares each parameter gradient it returns with central
finite differences of the loss, element by element. The interpreter follows
the documented semantics of every nn op (dialects/NN/IR/NNOps.td) and the
runtime's kernels where the documentation leaves a choice; the backward ops
are implemented from their definitions (loops over windows and taps), not
from the VJPs that use them, so the check covers both.

Float arguments are drawn from a standard normal distribution (seed 0);
integer arguments (targets, indices) and any argument that needs particular
values are given in the file by comment lines:

    // gradient-check @function name = <python literal>

where `name` is the argument's binding name (train.binding). A parameter that the loss depends
on must come back with a gradient. The last line printed is
"N gradients checked, M failed"; the exit status is 1 on any failure.
"""

import argparse
import ast
import math
import re
import subprocess
import sys

import numpy as np

RTOL = 1e-5
ATOL = 1e-6
STEP = 1e-6

# --------------------------------------------------------------------------
# Parsing the printed IR (generic enough for what ztc-opt prints)
# --------------------------------------------------------------------------

OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}


def split_top(text, sep=","):
    """Splits at `sep` outside brackets and strings."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in OPEN:
            depth += 1
        elif ch in OPEN.values() and not (ch == ">" and text[i - 1] == "-"):
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def matching(text, start):
    """Index of the bracket closing the one at `start`."""
    close, depth, quoted = OPEN[text[start]], 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == text[start]:
            depth += 1
        elif ch == close and not (ch == ">" and text[i - 1] == "-"):
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced: " + text)


def parse_type(text):
    """'tensor<2x3xf32>' -> ((2, 3), 'f32')."""
    m = re.fullmatch(r"tensor<(.*)>", text.strip())
    if not m:
        raise ValueError("not a tensor type: " + text)
    dims = m.group(1).split("x")
    return tuple(int(d) for d in dims[:-1]), dims[-1]


def is_float(dtype):
    return dtype in ("f32", "f64", "f16", "bf16")


def parse_value(text):
    text = text.strip()
    m = re.fullmatch(r"array<i64(?::(.*))?>", text)
    if m:
        return [int(v) for v in m.group(1).split(",")] if m.group(1) else []
    m = re.fullmatch(r"(\S+) : ([if]\d+)", text)
    if m:
        return float(m.group(1)) if m.group(2).startswith("f") else int(m.group(1))
    m = re.fullmatch(r'#train\.binding<(\w+) "(.*)">', text)
    if m:
        return (m.group(1), m.group(2))  # (role, name)
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        return ast.literal_eval(text)
    if text.startswith("["):
        return [parse_value(v) for v in split_top(text[1:-1])]
    return text


def parse_attrs(text):
    """'{a = 1 : i64, b}' -> {'a': 1, 'b': True}."""
    attrs = {}
    for entry in split_top(text.strip()[1:-1]):
        if "=" in entry:
            key, value = entry.split("=", 1)
            attrs[key.strip()] = parse_value(value)
        elif entry:
            attrs[entry.strip()] = True
    return attrs


def parse_dense(text, type_text):
    shape, dtype = parse_type(type_text)
    body = re.fullmatch(r"dense<(.*)>", text.strip()).group(1)
    if body.startswith('"0x'):
        np_type = {"f32": "<f4", "f64": "<f8", "i64": "<i8", "i32": "<i4"}[dtype]
        data = np.frombuffer(bytes.fromhex(body[3:-1]), dtype=np_type)
        values = data.reshape(shape) if data.size > 1 else np.full(shape, data[0])
    else:
        literal = ast.literal_eval(body.replace("true", "True").replace("false", "False"))
        values = np.broadcast_to(np.array(literal), shape) if np.ndim(literal) == 0 \
            else np.array(literal).reshape(shape)
    return convert(values, dtype)


def convert(values, dtype):
    if is_float(dtype):
        return np.array(values, dtype=np.float64)
    if dtype == "i1":
        return np.array(values, dtype=bool)
    return np.array(values, dtype=np.int64)


class Function:
    def __init__(self, name):
        self.name = name
        self.args = []      # (ssa name, (shape, dtype), attrs)
        self.results = []   # ((shape, dtype), attrs)
        self.ops = []       # (result, op name, operands, attrs, result type)
        self.returned = []


def parse_signature(func, line):
    start = line.index("(")
    end = matching(line, start)
    for arg in split_top(line[start + 1:end]):
        m = re.fullmatch(r"(%\w+): (tensor<[^>]*>)(?: (\{.*\}))?", arg)
        func.args.append((m.group(1), parse_type(m.group(2)),
                          parse_attrs(m.group(3)) if m.group(3) else {}))
    rest = line[end + 1:].strip()
    if not rest.startswith("->"):
        return
    rest = rest[2:].strip()
    if rest.startswith("("):
        results = split_top(rest[1:matching(rest, 0)])
    else:
        results = [re.match(r"tensor<[^>]*>", rest).group(0)]
    for result in results:
        m = re.fullmatch(r"(tensor<[^>]*>)(?: (\{.*\}))?", result)
        func.results.append((parse_type(m.group(1)),
                             parse_attrs(m.group(2)) if m.group(2) else {}))


def parse_op(func, line):
    """An op of one result, or of several: named (`%a, %b = ...`) or
    numbered (`%r:2 = ...`, read as %r#0 and %r#1)."""
    m = re.fullmatch(r"((?:%\w+, )*%\w+)(?::(\d+))? = ([\w.]+) (.*)", line)
    names, count, name, rest = m.groups()
    result = names.split(", ") if ", " in names else names
    if count:
        result = [f"{names}#{i}" for i in range(int(count))]
    if name == "arith.constant":
        value, type_text = rest.rsplit(" : ", 1)
        func.ops.append((result, name, [], {"value": parse_dense(value, type_text)},
                         parse_type(type_text)))
        return
    operands = re.match(r"((?:%\w+(?:#\d+)?(?:, )?)*)", rest).group(1)
    rest = rest[len(operands):].strip()
    attrs = {}
    if rest.startswith("{"):
        end = matching(rest, 0)
        attrs = parse_attrs(rest[:end + 1])
        rest = rest[end + 1:].strip()
    result_types = [parse_type(t) for t in split_top(rest.rsplit("->", 1)[1])]
    func.ops.append((result, name, [o.strip() for o in operands.split(",") if o.strip()],
                     attrs, result_types[0] if len(result_types) == 1 else result_types))


def parse_module(text):
    funcs, func = {}, None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("func.func"):
            func = Function(re.search(r"@(\w+)", line).group(1))
            parse_signature(func, line)
            funcs[func.name] = func
        elif func and line.startswith("return"):
            operands = line[len("return"):].split(":")[0]
            func.returned = [o.strip() for o in operands.split(",") if o.strip()]
        elif func and line.startswith("%"):
            parse_op(func, line)
    return funcs


def parse_inputs(text):
    inputs = {}
    for m in re.finditer(r"^// gradient-check @(\w+) ([\w.]+) = (.*)$", text, re.M):
        inputs.setdefault(m.group(1), {})[m.group(2)] = ast.literal_eval(m.group(3))
    return inputs


# --------------------------------------------------------------------------
# The nn dialect in numpy
# --------------------------------------------------------------------------

erf = np.vectorize(math.erf, otypes=[np.float64])


def reduce(fn, x, a):
    axes = tuple(a["axes"])
    return fn(x, axis=axes, keepdims=a["keepdims"]) if axes else x


def padded(x, pads, extra=(0, 0), fill=0.0):
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom + extra[0]), (left, right + extra[1])),
                  constant_values=fill)


def taps(xp, kernel, strides, dilations, out):
    """Yields (kh, kw, view) with view[n, c, oh, ow] the padded input element
    tap (kh, kw) of output (oh, ow) reads."""
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            h0, w0 = kh * dilations[0], kw * dilations[1]
            yield kh, kw, (slice(None), slice(None),
                           slice(h0, h0 + strides[0] * (out[0] - 1) + 1, strides[0]),
                           slice(w0, w0 + strides[1] * (out[1] - 1) + 1, strides[1]))


def conv2d(x, w, b, a, out):
    group, (o_all, cg) = a["group"], w.shape[:2]
    og = o_all // group
    xp = padded(x, a["pads"])
    y = np.zeros((x.shape[0], o_all) + tuple(out))
    for kh, kw, view in taps(xp, w.shape[2:], a["strides"], a["dilations"], out):
        window = xp[view]
        for g in range(group):
            y[:, g * og:(g + 1) * og] += np.einsum(
                "nchw,oc->nohw", window[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og, :, kh, kw])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def conv2d_backward_data(dy, w, a, x_shape):
    group, (o_all, cg) = a["group"], w.shape[:2]
    og = o_all // group
    top, left, bottom, right = a["pads"]
    dxp = np.zeros(x_shape[:2] + (x_shape[2] + top + bottom, x_shape[3] + left + right))
    for kh, kw, view in taps(dxp, w.shape[2:], a["strides"], a["dilations"], dy.shape[2:]):
        for g in range(group):
            dxp[view][:, g * cg:(g + 1) * cg] += np.einsum(
                "nohw,oc->nchw", dy[:, g * og:(g + 1) * og], w[g * og:(g + 1) * og, :, kh, kw])
    return dxp[:, :, top:top + x_shape[2], left:left + x_shape[3]]


def conv2d_backward_filter(x, dy, a):
    group, kernel = a["group"], a["kernel"]
    cg, og = x.shape[1] // group, dy.shape[1] // group
    xp = padded(x, a["pads"])
    dw = np.zeros((dy.shape[1], cg) + tuple(kernel))
    for kh, kw, view in taps(xp, kernel, a["strides"], a["dilations"], dy.shape[2:]):
        window = xp[view]
        for g in range(group):
            dw[g * og:(g + 1) * og, :, kh, kw] = np.einsum(
                "nohw,nchw->oc", dy[:, g * og:(g + 1) * og], window[:, g * cg:(g + 1) * cg])
    return dw


def pool_windows(x, a, out, fill):
    """Stacks the taps of every pooling window: [taps, N, C, Ho, Wo] (with
    `fill` at padding and past the padded input in ceil mode)."""
    dil = a.get("dilations", [1, 1])
    need = [(out[i] - 1) * a["strides"][i] + dil[i] * (a["kernel"][i] - 1) + 1 for i in range(2)]
    have = [x.shape[2] + a["pads"][0] + a["pads"][2], x.shape[3] + a["pads"][1] + a["pads"][3]]
    xp = padded(x, a["pads"], (max(0, need[0] - have[0]), max(0, need[1] - have[1])), fill)
    views = list(taps(xp, a["kernel"], a["strides"], dil, out))
    return xp, views, np.stack([xp[view] for _, _, view in views])


def max_pool2d(x, a, out):
    return pool_windows(x, a, out, -np.inf)[2].max(axis=0)


def max_pool2d_backward(x, dy, a):
    xp, views, stack = pool_windows(x, a, dy.shape[2:], -np.inf)
    winner = stack.argmax(axis=0)  # the first maximum, as the kernel
    dxp = np.zeros_like(xp)
    for t, (_, _, view) in enumerate(views):
        dxp[view] += np.where(winner == t, dy, 0.0)
    top, left = a["pads"][0], a["pads"][1]
    return dxp[:, :, top:top + x.shape[2], left:left + x.shape[3]]


def avg_divisors_and_windows(h, w, a, out):
    (kh, kw), (sh, sw), pads = a["kernel"], a["strides"], a["pads"]
    for oh in range(out[0]):
        for ow in range(out[1]):
            h0, w0 = oh * sh - pads[0], ow * sw - pads[1]
            rows = slice(max(h0, 0), min(h0 + kh, h))
            cols = slice(max(w0, 0), min(w0 + kw, w))
            count = kh * kw if a["count_include_pad"] else \
                (rows.stop - rows.start) * (cols.stop - cols.start)
            yield oh, ow, rows, cols, count


def avg_pool2d(x, a, out):
    y = np.zeros(x.shape[:2] + tuple(out))
    for oh, ow, rows, cols, count in avg_divisors_and_windows(*x.shape[2:], a, out):
        y[:, :, oh, ow] = x[:, :, rows, cols].sum(axis=(2, 3)) / count
    return y


def avg_pool2d_backward(dy, a, x_shape):
    dx = np.zeros(x_shape)
    for oh, ow, rows, cols, count in avg_divisors_and_windows(*x_shape[2:], a, dy.shape[2:]):
        dx[:, :, rows, cols] += (dy[:, :, oh, ow] / count)[:, :, None, None]
    return dx


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def norm_mean(x, axes, a):
    """The mean a layer norm subtracts: none (0) for a root-mean-square one."""
    return 0.0 if a.get("rms") else x.mean(axis=axes, keepdims=True)


def layer_norm(x, scale, bias, a):
    axes = tuple(range(a["axis"], x.ndim))
    mean = norm_mean(x, axes, a)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + a["epsilon"]) * scale
    return y if bias is None else y + bias


def layer_norm_backward(x, scale, dy, a):
    """nn.layer_norm_backward's formulas (the finite differences check them):
    the gradients of the input, the scale and the bias."""
    axes = tuple(range(a["axis"], x.ndim))
    rows = tuple(range(a["axis"]))
    mean = norm_mean(x, axes, a)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + a["epsilon"])
    xhat = (x - mean) * rstd
    dn = dy * scale
    dx = rstd * (dn - norm_mean(dn, axes, a)
                 - xhat * (dn * xhat).mean(axis=axes, keepdims=True))
    return dx, (dy * xhat).sum(axis=rows), dy.sum(axis=rows)


def batch_norm(x, scale, bias, mean, var, a):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    r = lambda v: v.reshape(shape)
    return (x - r(mean)) / np.sqrt(r(var) + a["epsilon"]) * r(scale) + r(bias)


def nll_loss(lp, target, weight, a):
    ignore = a.get("ignore_index")
    valid = np.ones(target.shape, bool) if ignore is None else target != ignore
    t = np.where(valid, target, 0)
    picked = np.take_along_axis(lp, np.expand_dims(t, 1), axis=1).squeeze(1)
    w = (np.ones(target.shape) if weight is None else weight[t]) * valid
    loss = -w * picked
    if a.get("reduction", "mean") == "none":
        return loss
    if a.get("reduction", "mean") == "sum":
        return np.array(loss.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.array(loss.sum() / w.sum())


def strided_index(starts, sizes, steps):
    return np.ix_(*[start + step * np.arange(size)
                    for start, size, step in zip(starts, sizes, steps)])


def scatter_add(data, indices, updates, axis):
    out = data.copy()
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    np.add.at(out, (slice(None),) * axis + (indices,), updates)
    return out


def insert_slice(dest, source, a):
    out = dest.copy()
    out[strided_index(a["starts"], source.shape, a["steps"])] = source
    return out


def trilu(x, a):
    rows, cols = x.shape[-2:]
    diff = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = diff >= a["diagonal"] if a["upper"] else diff <= a["diagonal"]
    return np.where(keep, x, np.zeros_like(x))


def rotate_half(x, a):
    lower, upper = np.split(x, 2, axis=-1)
    if a["inverse"]:
        return np.concatenate([upper, -lower], axis=-1)
    return np.concatenate([-upper, lower], axis=-1)


def rotary(x, cos, sin, a):
    if a["inverse"]:
        return x * cos + rotate_half(x * sin, {"inverse": True})
    return x * cos + rotate_half(x, {"inverse": False}) * sin


def gelu(x, a):
    if a.get("approximate", "none") == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def cast(x, dtype):
    if is_float(dtype):
        return x.astype(np.float64)
    if dtype == "i1":
        return x != 0
    return np.trunc(x).astype(np.int64)


OPS = {
    "nn.add": lambda x, a, t: x[0] + x[1],
    "nn.sub": lambda x, a, t: x[0] - x[1],
    "nn.mul": lambda x, a, t: x[0] * x[1],
    "nn.div": lambda x, a, t: x[0] / x[1],
    "nn.pow": lambda x, a, t: np.power(x[0], x[1]),
    "nn.max": lambda x, a, t: np.maximum(x[0], x[1]),
    "nn.min": lambda x, a, t: np.minimum(x[0], x[1]),
    "nn.equal": lambda x, a, t: x[0] == x[1],
    "nn.less": lambda x, a, t: x[0] < x[1],
    "nn.greater": lambda x, a, t: x[0] > x[1],
    "nn.and": lambda x, a, t: x[0] & x[1],
    "nn.or": lambda x, a, t: x[0] | x[1],
    "nn.not": lambda x, a, t: ~x[0],
    "nn.neg": lambda x, a, t: -x[0],
    "nn.exp": lambda x, a, t: np.exp(x[0]),
    "nn.log": lambda x, a, t: np.log(x[0]),
    "nn.tanh": lambda x, a, t: np.tanh(x[0]),
    "nn.sigmoid": lambda x, a, t: 1 / (1 + np.exp(-x[0])),
    "nn.relu": lambda x, a, t: np.maximum(x[0], 0),
    "nn.sqrt": lambda x, a, t: np.sqrt(x[0]),
    "nn.reciprocal": lambda x, a, t: 1 / x[0],
    "nn.erf": lambda x, a, t: erf(x[0]),
    "nn.abs": lambda x, a, t: np.abs(x[0]),
    "nn.softplus": lambda x, a, t: np.logaddexp(0, x[0]),
    "nn.leaky_relu": lambda x, a, t: np.where(x[0] < 0, a.get("alpha", 0.01) * x[0], x[0]),
    "nn.gelu": lambda x, a, t: gelu(x[0], a),
    "nn.cast": lambda x, a, t: cast(x[0], t[1]),
    "nn.where": lambda x, a, t: np.where(x[0], x[1], x[2]),
    "nn.broadcast_to": lambda x, a, t: np.broadcast_to(x[0], a["shape"]).copy(),
    "nn.matmul": lambda x, a, t: np.matmul(x[0], x[1]),
    "nn.conv2d": lambda x, a, t: conv2d(x[0], x[1], x[2] if len(x) > 2 else None, a, t[0][2:]),
    "nn.batch_norm": lambda x, a, t: batch_norm(*x, a),
    "nn.layer_norm": lambda x, a, t: layer_norm(x[0], x[1], x[2] if len(x) > 2 else None, a),
    "nn.layer_norm_backward": lambda x, a, t: layer_norm_backward(x[0], x[1], x[2], a),
    "nn.max_pool2d": lambda x, a, t: max_pool2d(x[0], a, t[0][2:]),
    "nn.avg_pool2d": lambda x, a, t: avg_pool2d(x[0], a, t[0][2:]),
    "nn.softmax": lambda x, a, t: softmax(x[0], a["axis"]),
    "nn.log_softmax": lambda x, a, t: np.log(softmax(x[0], a["axis"])),
    "nn.reduce_sum": lambda x, a, t: reduce(np.sum, x[0], a),
    "nn.reduce_mean": lambda x, a, t: reduce(np.mean, x[0], a),
    "nn.reduce_max": lambda x, a, t: reduce(np.max, x[0], a),
    "nn.reshape": lambda x, a, t: x[0].reshape(t[0]),
    "nn.transpose": lambda x, a, t: np.transpose(x[0], a["perm"]),
    "nn.concat": lambda x, a, t: np.concatenate(x, axis=a["axis"]),
    "nn.slice": lambda x, a, t: x[0][strided_index(a["starts"], a["sizes"], a["steps"])],
    "nn.gather": lambda x, a, t: np.take(x[0], x[1], axis=a["axis"]),
    "nn.trilu": lambda x, a, t: trilu(x[0], a),
    "nn.rotate_half": lambda x, a, t: rotate_half(x[0], a),
    "nn.rotary": lambda x, a, t: rotary(x[0], x[1], x[2], a),
    "nn.nll_loss": lambda x, a, t: nll_loss(x[0], x[1], x[2] if len(x) > 2 else None, a),
    "nn.conv2d_backward_data": lambda x, a, t: conv2d_backward_data(x[0], x[1], a, t[0]),
    "nn.conv2d_backward_filter": lambda x, a, t: conv2d_backward_filter(x[0], x[1], a),
    "nn.max_pool2d_backward": lambda x, a, t: max_pool2d_backward(x[0], x[1], a),
    "nn.avg_pool2d_backward": lambda x, a, t: avg_pool2d_backward(x[0], a, t[0]),
    "nn.scatter_add": lambda x, a, t: scatter_add(x[0], x[1], x[2], a["axis"]),
    "nn.insert_slice": lambda x, a, t: insert_slice(x[0], x[1], a),
}


def run(func, args):
    env = dict(zip((name for name, _, _ in func.args), args))
    for result, name, operands, attrs, rtype in func.ops:
        if name == "arith.constant":
            value = attrs["value"]
        else:
            value = OPS[name]([env[o] for o in operands], attrs, rtype)
        if isinstance(rtype, list):
            named = list(zip(result, value, rtype))
        else:
            named = [(result, value, rtype)]
        for key, v, t in named:
            v = np.asarray(v)
            if v.shape != t[0]:
                raise RuntimeError(f"@{func.name}: {name} gave shape {v.shape}, "
                                   f"the IR says {t[0]}")
            env[key] = convert(v, t[1])
    return [env[name] for name in func.returned]


# --------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------


def make_inputs(func, given, rng):
    args = []
    for _, (shape, dtype), attrs in func.args:
        _, name = attrs.get("train.binding", (None, None))
        if name in given:
            args.append(convert(np.array(given[name]).reshape(shape), dtype))
        elif is_float(dtype):
            args.append(rng.standard_normal(shape))
        else:
            raise RuntimeError(f"@{func.name}: give integer argument '{name}' "
                               "in a '// gradient-check' line")
    return args


def check_function(forward, backward, given, rng):
    """Returns (checked, failures) for one function."""
    args = make_inputs(forward, given, rng)
    results = run(backward, args)
    loss = float(run(forward, args)[0])
    if not np.isclose(float(results[0]), loss, rtol=1e-12):
        return 0, [f"@{forward.name}: loss {float(results[0])} differs from the "
                   f"forward loss {loss}"]
    grads = {attrs["train.grad_of"]: value
             for ((_, attrs), value) in zip(backward.results, results)
             if "train.grad_of" in attrs}
    checked, failures = 0, []
    for i, (_, (shape, dtype), attrs) in enumerate(forward.args):
        role, name = attrs.get("train.binding", (None, None))
        if role != "param" or not is_float(dtype):
            continue
        if name not in grads:
            failures.append(f"@{forward.name}: no gradient for '{name}'")
            continue
        numeric = np.zeros(shape)
        for index in np.ndindex(*shape):
            for sign in (1, -1):
                moved = list(args)
                moved[i] = args[i].copy()
                moved[i][index] += sign * STEP
                numeric[index] += sign * float(run(forward, moved)[0])
        numeric /= 2 * STEP
        checked += 1
        bad = ~np.isclose(grads[name], numeric, rtol=RTOL, atol=ATOL)
        if bad.any():
            where = tuple(int(v) for v in np.argwhere(bad)[0])
            failures.append(
                f"@{forward.name}: gradient of '{name}' at {where} is "
                f"{grads[name][where]:.9g}, finite differences give "
                f"{numeric[where]:.9g} ({int(bad.sum())} of {bad.size} differ)")
    return checked, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc-opt", required=True)
    parser.add_argument("files", nargs="+")
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    checked, failures = 0, []
    for path in options.files:
        with open(path) as f:
            source = f.read()
        printed = subprocess.run([options.ztc_opt, path], check=True,
                                 capture_output=True, text=True).stdout
        differentiated = subprocess.run(
            [options.ztc_opt, "--ztc-autodiff", path], check=True,
            capture_output=True, text=True).stdout
        forwards = parse_module(printed)
        backwards = parse_module(differentiated)
        inputs = parse_inputs(source)
        for name, forward in forwards.items():
            count, problems = check_function(forward, backwards[name],
                                             inputs.get(name, {}), rng)
            checked += count
            failures += problems
    for failure in failures:
        print(failure)
    print(f"{checked} gradients checked, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
