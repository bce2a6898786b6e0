#!/usr/bin/env python3
"""Dynamic loss scaling in fp16 (ztc compile --precision fp16) follows
DeepSpeed's rule on the device, skips overflowing steps exactly, and stops
at its minimum with a report; --check-finite names the ONNX node that
overflowed.

  - planted overflows: the example MLP on scikit-learn's digits, three of
    whose training samples are scaled by 1e5 (beyond fp16's 65504, so every
    batch holding one overflows), from a first scale of 2^24 (the first
    steps' scaled gradients overflow too), with a window of 4 and a
    hysteresis of 2: the scale the trainer logs after every step equals the
    one DeepSpeed's DynamicLossScaler.update_scale computes from the same
    overflows (replayed here from its definition), the skipped-step count
    rises by one at each overflow, the scale grows back, and training
    recovers; with --consecutive-hysteresis (hysteresis 3) the sequence is
    DeepSpeed's with consecutive_hysteresis;
  - a skipped step changes nothing: the checkpoint after it holds the
    parameters, Adam's moments and Adam's step count of the checkpoint
    before it, bit for bit (and an applied step does change them);
  - every batch overflowing: from 2^2 with hysteresis 1 the scale halves to
    the minimum 1, and the overflow there stops training with exit status 1
    and a message naming the step;
  - --check-finite on a model with a planted Pow (x @ W1, cubed, @ W2):
    in fp32, inputs scaled by 1e13 make the Pow overflow float32, and
    training stops at step 1 naming the forward of '/planted/Pow'; in fp16
    with dynamic scaling, inputs scaled by 200 make the Pow's result
    overflow its cast to f16: each step names it as it is skipped, and the
    stop at the minimum scale names it too;
  - the first step's gradients with dynamic and with static scaling equal
    the f32 ones within fp16's rounding (unscaled once, not doubled).
Usage: loss_scale_check.py --ztc PATH
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, read_safetensors, summary  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = re.compile(r"step (\d+)/\d+  loss (\S+)  lr \S+  loss scale (\S+)  skipped (\d+)")


def run(*args, ok=True):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if ok and result.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (result.returncode, " ".join(map(str, args)),
                                                 result.stderr))
    return result


def deepspeed_scales(overflows, initial, window, hysteresis, minimum, consecutive=False):
    """The scale after each step, from DeepSpeed's DynamicLossScaler as it is
    defined (cur_iter, last_overflow_iter, cur_hysteresis)."""
    scale, cur_iter, last_overflow, cur_hysteresis = initial, 0, -1, hysteresis
    scales = []
    for overflow in overflows:
        if overflow:
            if hysteresis == 1 or cur_hysteresis == 1:
                scale = max(scale / 2, minimum)
            else:
                cur_hysteresis -= 1
            last_overflow = cur_iter
        else:
            if consecutive:
                cur_hysteresis = hysteresis
            if (cur_iter - last_overflow) % window == 0:
                if not consecutive:
                    cur_hysteresis = hysteresis
                scale *= 2
        cur_iter += 1
        scales.append(scale)
    return scales


def scale_log(ztc, art, data, steps):
    """(losses, scales, overflows) from a run logging every step."""
    log = run(ztc, "train", art, "--data", data, "--steps", steps, "--log-every", "1",
              "--seed", "1").stderr
    lines = [m for m in map(LINE.match, log.splitlines()) if m]
    skipped = [int(m.group(4)) for m in lines]
    overflows = [s - p for s, p in zip(skipped, [0] + skipped[:-1])]
    return ([float(m.group(2)) for m in lines], [float(m.group(3)) for m in lines],
            overflows)


def make_pow_model(path):
    """x[32,64] @ fc1.weight, cubed by the node '/planted/Pow', @ fc2.weight."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal((64, 32)) * 0.1).astype(np.float32),
                                "fc1.weight"),
        numpy_helper.from_array((rng.standard_normal((32, 10)) * 0.1).astype(np.float32),
                                "fc2.weight"),
        numpy_helper.from_array(np.array(3.0, dtype=np.float32), "three")]
    nodes = [helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="/fc1/MatMul"),
             helper.make_node("Pow", ["h", "three"], ["p"], name="/planted/Pow"),
             helper.make_node("MatMul", ["p", "fc2.weight"], ["logits"], name="/fc2/MatMul")]
    graph = helper.make_graph(
        nodes, "planted_pow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [32, 10])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def scaled_copy(train, directory, factor):
    os.makedirs(directory)
    x = np.load(os.path.join(train, "x.npy"))
    np.save(os.path.join(directory, "x.npy"), (x * factor).astype(np.float32))
    shutil.copy(os.path.join(train, "labels.npy"), directory)
    return directory


def trained_state(ztc, art, data, steps, directory):
    """The checkpoint after `steps` steps (a fresh run: runs are
    deterministic)."""
    if steps == 0:
        return None
    ckpt = os.path.join(directory, "after-%d" % steps)
    run(ztc, "train", art, "--data", data, "--steps", steps, "--seed", "1", "--save", ckpt)
    return read_safetensors(os.path.join(ckpt, "checkpoint.safetensors"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    ztc = args.ztc
    with tempfile.TemporaryDirectory(prefix="ztc-loss-scale-") as tmp:
        run(sys.executable, os.path.join(REPO, "examples", "onnx", "make_mlp.py"),
            "--out", tmp, "--quiet")
        digits = os.path.join(tmp, "digits")
        run(sys.executable, os.path.join(REPO, "examples", "onnx", "prepare_digits.py"),
            "--out", digits)
        train = os.path.join(digits, "train")
        planted = os.path.join(tmp, "planted")
        os.makedirs(planted)
        x = np.load(os.path.join(train, "x.npy"))
        x[[100, 700, 1300]] *= 1e5
        np.save(os.path.join(planted, "x.npy"), x)
        shutil.copy(os.path.join(train, "labels.npy"), planted)

        # 1. The scale follows DeepSpeed's rule step by step.
        initial, window, hysteresis = 2.0 ** 24, 4, 2
        art = os.path.join(tmp, "mlp-fp16.ztc")
        run(ztc, "compile", os.path.join(tmp, "mlp.onnx"), "-o", art, "--batch-size", "32",
            "--loss", "cross_entropy", "--optimizer", "adamw", "--lr", "3e-3",
            "--precision", "fp16", "--initial-scale-power", "24",
            "--loss-scale-window", window, "--hysteresis", hysteresis)
        steps = 90
        losses, scales, overflows = scale_log(ztc, art, planted, steps)
        check(len(losses) == steps, "fp16 MLP, %d steps logged one by one (%d lines with the "
              "loss scale)" % (steps, len(losses)))
        expected = deepspeed_scales([o == 1 for o in overflows], initial, window, hysteresis, 1)
        planted_steps = [i + 1 for i, loss in enumerate(losses) if not math.isfinite(loss)]
        check(all(o in (0, 1) for o in overflows) and scales == expected,
              "the scale after every step is DeepSpeed's: %s ... (overflows at steps %s)"
              % (", ".join("%g" % s for s in scales[:12]),
                 ", ".join(str(i + 1) for i, o in enumerate(overflows) if o)))
        first_growth = next((i for i in range(1, steps) if scales[i] > scales[i - 1]), None)
        check(overflows[0] == 1 and first_growth is not None and
              any(overflows[first_growth:]),
              "overflows from the first scale, growth after %d finite steps, and planted "
              "overflows after it (infinite loss at steps %s)"
              % (window, ", ".join(map(str, planted_steps))))
        check(all(overflows[i - 1] for i in planted_steps),
              "every step whose loss is infinite is skipped")
        finite = [v for v in losses if math.isfinite(v)]
        check(math.isfinite(losses[-1]) and np.mean(finite[-5:]) < 0.6 * finite[0],
              "training recovers: loss %.3f at first, %.3f over the last 5 finite steps"
              % (finite[0], np.mean(finite[-5:])))

        # With --consecutive-hysteresis every finite step restores the
        # hysteresis: isolated overflows never halve the scale.
        consecutive = os.path.join(tmp, "mlp-consecutive.ztc")
        run(ztc, "compile", os.path.join(tmp, "mlp.onnx"), "-o", consecutive, "--batch-size",
            "32", "--loss", "cross_entropy", "--optimizer", "adamw", "--lr", "3e-3",
            "--precision", "fp16", "--initial-scale-power", "24", "--loss-scale-window",
            window, "--hysteresis", "3", "--consecutive-hysteresis")
        _, c_scales, c_overflows = scale_log(ztc, consecutive, planted, steps)
        c_expected = deepspeed_scales([o == 1 for o in c_overflows], initial, window, 3, 1,
                                      consecutive=True)
        plain_expected = deepspeed_scales([o == 1 for o in c_overflows], initial, window, 3, 1)
        check(len(c_scales) == steps and c_scales == c_expected and
              c_expected != plain_expected,
              "--consecutive-hysteresis (hysteresis 3): the scale after every step is "
              "DeepSpeed's with consecutive_hysteresis (and differs from the rule "
              "without it on these overflows: %d of them)" % sum(c_overflows))

        # 2. Skipped steps change nothing; applied ones do.
        skips = [t for t in range(2, steps + 1) if overflows[t - 1]][:3]
        applied = [t for t in range(2, steps + 1) if not overflows[t - 1]][:1]
        kept, changed = [], []
        for step in skips + applied:
            before = trained_state(ztc, art, planted, step - 1, tmp)
            after = trained_state(ztc, art, planted, step, tmp)
            names = [n for n in before if not n.startswith("loss_scale")]
            same = all(np.array_equal(before[n], after[n]) for n in names)
            (kept if step in skips else changed).append((step, same, len(names)))
        check(kept and all(same for _, same, _ in kept),
              "skipped steps %s: all %d parameters, moments and Adam's step count are "
              "bit-identical to the step before"
              % (", ".join(str(s) for s, _, _ in kept), kept[0][2] if kept else 0))
        check(changed and not any(same for _, same, _ in changed),
              "an applied step (%s) changes them" % ", ".join(str(s) for s, _, _ in changed))

        # 3. At the minimum scale, an overflow stops training.
        poisoned = os.path.join(tmp, "poisoned")
        os.makedirs(poisoned)
        np.save(os.path.join(poisoned, "x.npy"), x * 1e5)
        shutil.copy(os.path.join(train, "labels.npy"), poisoned)
        low = os.path.join(tmp, "mlp-low.ztc")
        run(ztc, "compile", os.path.join(tmp, "mlp.onnx"), "-o", low, "--batch-size", "32",
            "--loss", "cross_entropy", "--precision", "fp16", "--initial-scale-power", "2",
            "--hysteresis", "1")
        result = run(ztc, "train", low, "--data", poisoned, "--steps", "10", "--log-every", "5",
                     "--seed", "1", ok=False)
        message = ("step 3: the gradients overflow in fp16 at the minimum loss scale (1) with "
                   "no hysteresis left; training stops (steps 3..5 applied no update")
        check(result.returncode == 1 and message in result.stderr,
              "scale 4 -> 2 -> 1, then an overflow at the minimum: exit %d, %r"
              % (result.returncode, result.stderr.strip().splitlines()[-1][:160]))

        # 4. --check-finite names the node.
        pow_model = os.path.join(tmp, "pow.onnx")
        make_pow_model(pow_model)
        wide = os.path.join(tmp, "pow-fp32.ztc")
        run(ztc, "compile", pow_model, "-o", wide, "--batch-size", "32", "--loss",
            "cross_entropy", "--check-finite")
        result = run(ztc, "train", wide, "--data", train, "--steps", "3", "--seed", "1", ok=False)
        check(result.returncode == 0, "--check-finite on finite data trains (exit %d)"
              % result.returncode)
        result = run(ztc, "train", wide, "--data", scaled_copy(train, os.path.join(tmp, "e13"), 1e13),
                     "--steps", "3", "--seed", "1", ok=False)
        message = ("step 1 (--check-finite): the first NaN or infinity was written by the "
                   "forward of ONNX node '/planted/Pow' (pow)")
        check(result.returncode == 1 and message in result.stderr,
              "fp32, Pow overflowing float32: exit %d, %r"
              % (result.returncode, result.stderr.strip().splitlines()[-1]))
        half = os.path.join(tmp, "pow-fp16.ztc")
        run(ztc, "compile", pow_model, "-o", half, "--batch-size", "32", "--loss",
            "cross_entropy", "--check-finite", "--precision", "fp16",
            "--initial-scale-power", "2", "--hysteresis", "1")
        result = run(ztc, "train", half, "--data", scaled_copy(train, os.path.join(tmp, "x200"), 200),
                     "--steps", "8", "--log-every", "4", "--seed", "1", ok=False)
        named = ("the first NaN or infinity was written by the forward of ONNX node "
                 "'/planted/Pow' (cast to f16)")
        check(result.returncode == 1 and
              all("step %d: %s (an overflow: the update is skipped)" % (s, named)
                  in result.stderr for s in (1, 2, 3)) and
              "step 3: the gradients overflow in fp16 at the minimum loss scale (1)" in
              result.stderr and "At step 3: " + named in result.stderr,
              "fp16, the Pow's result overflowing f16: named at steps 1-3 as they are "
              "skipped, and in the stop at the minimum scale: exit %d, %r"
              % (result.returncode, result.stderr.strip().splitlines()[-1][:220]))

        # 5. The gradients leave the backward unscaled: the first step's
        # gradients (--dump-grads, from the scale 2^16) are the f32 ones to
        # within fp16's rounding, for static and dynamic scaling alike.
        grads = {}
        for name, flags in (("f32", []), ("dynamic", ["--precision", "fp16"]),
                            ("static", ["--precision", "fp16", "--loss-scale", "1024"])):
            art = os.path.join(tmp, "mlp-grads-%s.ztc" % name)
            run(ztc, "compile", os.path.join(tmp, "mlp.onnx"), "-o", art, "--batch-size",
                "32", "--loss", "cross_entropy", "--optimizer", "adamw", *flags)
            dump = os.path.join(tmp, "grads-%s" % name)
            run(ztc, "train", art, "--data", train, "--steps", "1", "--dump-grads", dump)
            grad = os.path.join(dump, "grad")
            grads[name] = {f: np.load(os.path.join(grad, f)) for f in os.listdir(grad)}
        for name in ("dynamic", "static"):
            errors = {f: float(np.abs(g - grads["f32"][f]).max() /
                               np.abs(grads["f32"][f]).max())
                      for f, g in grads[name].items()}
            check(grads[name].keys() == grads["f32"].keys() and max(errors.values()) < 2e-2,
                  "fp16 MLP, %s scaling: first-step gradients match f32's within %.2g "
                  "(relative to each tensor's largest)" % (name, max(errors.values())))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
