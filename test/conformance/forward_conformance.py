#!/usr/bin/env python3
"""Forward conformance: runs the ONNX backend node tests through `ztc run`.

Usage:
    forward_conformance.py --ztc PATH_TO_ZTC [--min-pass-rate 0.95] [--jobs N]
                           [--filter REGEX] [--sample N]

Each node test whose op types are all supported (selected exactly as in
import_conformance.py) is compiled and executed on the CPU backend: the
inputs of test_data_set_0 are written as <input>.npy, `ztc run` writes
<output>.npy, and every output is compared with the expected one
(numpy.testing.assert_allclose with rtol=1e-3, atol=1e-7, as ONNX's own
backend test runner does). Shape-deciding inputs are bound as constants with
--constant-input, as in the import conformance test.

A test is skipped when ztc rejects it as an unsupported op version or
element type; everything else that is not a match counts as a failure.

Outputs that depend on a training-mode Dropout with a non-zero ratio are
random: ONNX's reference draws their masks from numpy's RandomState, which
ztc's generator (a different one, the same on CPU and CUDA) cannot
reproduce. Their dtypes and shapes are checked, their values are not; a
test whose outputs all match or are random in this sense counts as
"random", apart from passed and failed, and each is listed with the reason.

The last line printed is "N passed, M failed, K skipped, R random"; the
exit status is 1 when passed / (passed + failed) is below --min-pass-rate.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import import_conformance as ic  # noqa: E402

SANITIZE = re.compile(r"[^A-Za-z0-9._-]")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ztc", required=True, help="path to the ztc binary")
    p.add_argument("--min-pass-rate", type=float, default=0.95)
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds per test (default 120)")
    p.add_argument("--filter", help="only tests whose name matches this regular expression")
    p.add_argument("--sample", type=int, default=1, metavar="N",
                   help="run one in N of the selected tests, in name order, and besides it the first "
                        "test of every op type no earlier choice covers (default 1: all); "
                        "the sanitizer build runs a sample, the release build all")
    p.add_argument("--verbose", "-v", action="store_true")
    return p.parse_args(argv)


def random_outputs(model, data_dir, inputs):
    """The set of value names that depend on a training-mode Dropout whose
    ratio is not 0 (or whose mode or ratio is not known)."""
    import onnx
    from onnx import helper, numpy_helper

    known = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

    def value(name):
        if name in known:
            return known[name]
        if name in inputs:
            tensor = onnx.TensorProto()
            with open(os.path.join(data_dir, "input_%d.pb" % inputs.index(name)), "rb") as f:
                tensor.ParseFromString(f.read())
            return numpy_helper.to_array(tensor)
        return None

    random = set()
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    known[node.output[0]] = numpy_helper.to_array(
                        helper.get_attribute_value(attr))
        named = [name for name in node.input if name]
        if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2]:
            mode = value(node.input[2])
            ratio = value(node.input[1]) if node.input[1] else 0.5
            if mode is None or ratio is None or (bool(mode) and float(ratio) != 0.0):
                random.update(name for name in node.output if name)
        if any(name in random for name in named):
            random.update(name for name in node.output if name)
    return random


def sample(cases, every):
    """Every `every`th case in name order, plus the first case of each op type
    that the cases kept so far do not cover: every op type runs at least
    once, whatever the sample."""
    if every <= 1:
        return cases
    covered, kept = set(), []
    for i, case in enumerate(sorted(cases, key=lambda c: c.name)):
        if i % every == 0 or not covered.issuperset(case.op_types):
            kept.append(case)
            covered.update(case.op_types)
    return kept


def run_case(ztc, case, workdir, timeout):
    """Compiles and runs one node test; sets case.status and case.detail."""
    try:
        return run_case_unguarded(ztc, case, workdir, timeout)
    except Exception as e:  # noqa: BLE001 - one broken test must not stop the run
        case.status, case.detail = "failed", "harness: %s: %s" % (type(e).__name__, e)
        return case


def run_case_unguarded(ztc, case, workdir, timeout):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(case.path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    data_dir = os.path.join(os.path.dirname(case.path), "test_data_set_0")
    constant_flags = ic.constant_input_args(case.path)
    constant_names = {f.split("=", 2)[1] for f in constant_flags}

    work = os.path.join(workdir, case.name)
    in_dir, out_dir = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(in_dir)
    for i, name in enumerate(inputs):
        if name in constant_names:
            continue
        tensor = onnx.TensorProto()
        with open(os.path.join(data_dir, "input_%d.pb" % i), "rb") as f:
            tensor.ParseFromString(f.read())
        np.save(os.path.join(in_dir, SANITIZE.sub("_", name) + ".npy"),
                numpy_helper.to_array(tensor))

    cmd = [ztc, "run", case.path, "--data", in_dir, "--output-dir", out_dir] + constant_flags
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    case.seconds = time.monotonic() - start
    case.status, case.detail = ic.classify(proc.returncode, err.decode("utf-8", "replace"),
                                           timed_out, timeout)
    if case.status != "passed":
        return case
    random = random_outputs(model, data_dir, inputs)
    for i, name in enumerate(outputs):
        tensor = onnx.TensorProto()
        with open(os.path.join(data_dir, "output_%d.pb" % i), "rb") as f:
            tensor.ParseFromString(f.read())
        expected = numpy_helper.to_array(tensor)
        path = os.path.join(out_dir, SANITIZE.sub("_", name) + ".npy")
        try:
            actual = np.load(path)
            if actual.shape != expected.shape or actual.dtype != expected.dtype:
                raise AssertionError("got %s%s, expected %s%s" % (
                    actual.dtype, list(actual.shape), expected.dtype, list(expected.shape)))
            if name in random:
                continue
            np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-7)
        except (AssertionError, OSError, ValueError) as e:
            case.status = "failed"
            lines = [line for line in str(e).splitlines() if line.strip()]
            case.detail = "output '%s': %s" % (name, " | ".join(lines[:4]))
            break
    not_compared = [name for name in outputs if name in random]
    if case.status == "passed" and not_compared:
        case.status = "random"
        case.detail = ("output%s %s: training-mode Dropout masks (numpy's RandomState in "
                       "ONNX's reference); dtype and shape checked, values not compared"
                       % ("s" if len(not_compared) > 1 else "",
                          ", ".join("'%s'" % name for name in not_compared)))
    shutil.rmtree(work, ignore_errors=True)
    return case


def main(argv=None):
    ic.ensure_venv()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    ops = ic.parse_op_list(subprocess.run([args.ztc, "list-ops"], capture_output=True,
                                          text=True, check=True).stdout)
    with tempfile.TemporaryDirectory(prefix="ztc-forward-") as tmpdir:
        cases = ic.load_cases(tmpdir)
        ic.select(cases, ops, args.filter)
        chosen = sample([c for c in cases if c.status == "selected"], args.sample)
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_case, args.ztc, c, tmpdir, args.timeout) for c in chosen]
            for fut in concurrent.futures.as_completed(futures):
                c = fut.result()
                if args.verbose:
                    print("  %-10s %6.2fs %s %s" % (c.status, c.seconds, c.name, c.detail),
                          flush=True)
        elapsed = time.monotonic() - start

    passed = [c for c in chosen if c.status == "passed"]
    failed = [c for c in chosen if c.status == "failed"]
    skipped = [c for c in chosen if c.status.startswith("skipped-")]
    random = [c for c in chosen if c.status == "random"]
    attempted = len(passed) + len(failed)
    rate = len(passed) / attempted if attempted else 0.0
    print("node tests with supported op types: %d%s" % (
        len(chosen), " (a sample: one in %d, and every op type)" % args.sample
        if args.sample > 1 else ""))
    print("failed: %d" % len(failed))
    for c in failed:
        print("  FAIL %s: %s" % (c.name, c.detail))
    print("skipped (unsupported version or type): %d" % len(skipped))
    print("ran, random outputs not compared: %d" % len(random))
    for c in random:
        print("  RANDOM %s: %s" % (c.name, c.detail))
    print("pass rate: %.2f%% (minimum %.2f%%), %.1fs with %d jobs"
          % (100.0 * rate, 100.0 * args.min_pass_rate, elapsed, args.jobs))
    print("%d passed, %d failed, %d skipped, %d random" % (
        len(passed), len(failed), len(skipped), len(random)))
    return 0 if attempted and rate >= args.min_pass_rate else 1


if __name__ == "__main__":
    sys.exit(main())
