#!/usr/bin/env python3
"""Import conformance: runs `ztc import` on the ONNX backend node tests.

Usage:
    import_conformance.py --ztc PATH_TO_ZTC [--min-pass-rate 0.95] [--jobs N]

The node tests come from the onnx package of the repository's virtual
environment (onnx.backend.test.loader.load_model_tests(kind="node")).
`ZTC list-ops` gives the supported ONNX op types: one per line, the first
whitespace-separated word of each non-empty line that does not start with '#'.

A test is selected when its main graph has at least one node, every node is in
the default domain ("" or "ai.onnx"), and every node's op type is supported.
For each selected test `ZTC import MODEL.onnx --emit nn` runs (timeout 60 s):

  * exit 0                                         -> passed
  * exit 1 and the first line of stderr says that
    the op's since-version is unsupported
    ("unsupported opset version ...")              -> skipped-unsupported-version
  * exit 1 and the error is an element type outside
    ztc's set (f32 f64 f16 bf16 i64 i32 i8 i1)
    ("unsupported element type ...")               -> skipped-unsupported-type
  * anything else (other errors, signals, timeout) -> failed

The node tests of onnx 1.22 are written at the newest opset each was last
regenerated with, up to 25. ztc knows opsets up to MAX_OPSET (23). Opsets
24 and 25 re-versioned many operators only to widen their types (int2,
float8e8m0): a test above MAX_OPSET whose every operator's version there
has the same inputs, outputs and attributes as at MAX_OPSET is run at
MAX_OPSET, from a copy of its model with the opset lowered (ztc then
refuses a type the older version lacks, as for any model); the others are
skipped as unsupported versions.

ztc compiles for static shapes, so operands that decide shapes (Reshape's
shape, axes, Slice bounds, ...) must be constants. Node tests often feed
them as graph inputs, directly or through shape arithmetic; such inputs
are bound with `--constant-input` to the test's own data
(test_data_set_0/input_N.pb), as a user would.

The pass rate is passed / (passed + failed). The last line printed is
"N passed, M failed"; the exit status is 1 when the pass rate is below
--min-pass-rate (or nothing was imported at all), 0 otherwise.
"""

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DOMAINS = ("", "ai.onnx")

# ztc's own wording for an operator version it has no converter for, and for
# an element type outside its set.
UNSUPPORTED_VERSION_RE = re.compile(r"unsupported opset version")
UNSUPPORTED_TYPE_RE = re.compile(r"unsupported element type")

# Operand positions whose values decide shapes, by op type.
COMPILE_TIME_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Squeeze": (1,), "Unsqueeze": (1,),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,),
    "Slice": (1, 2, 3, 4), "Split": (1,), "Trilu": (1,),
    "Range": (0, 1, 2), "ConstantOfShape": (0,), "Dropout": (1, 2),
    "Pad": (1, 3), "CumSum": (1,), "Tile": (1,), "Resize": (1, 2, 3),
}


# The newest default-domain opset ztc knows (kMaxDefaultOpset in the importer).
MAX_OPSET = 23


def ensure_venv():
    """Re-executes this script with the repository's venv Python if needed."""
    venv = os.path.join(REPO_ROOT, ".venv")
    venv_python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.path.exists(venv_python) or os.environ.get("ZTC_CONFORMANCE_REEXEC") == "1":
        return
    os.environ["ZTC_CONFORMANCE_REEXEC"] = "1"
    os.execv(venv_python, [venv_python, os.path.abspath(__file__)] + sys.argv[1:])


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Runs `ztc import --emit nn` on the ONNX backend node tests.")
    p.add_argument("--ztc", required=True, help="path to the ztc binary")
    p.add_argument("--min-pass-rate", type=float, default=0.95,
                   help="fail when passed/(passed+failed) is below this (default 0.95)")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                   help="parallel ztc processes (default: number of CPUs)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per import (default 60)")
    p.add_argument("--ops-file",
                   help="read the supported op types from this file instead of `ZTC list-ops`")
    p.add_argument("--filter", help="only tests whose name matches this regular expression")
    p.add_argument("--dry-run", action="store_true",
                   help="select the tests and print them, but do not import")
    p.add_argument("--json", help="write per-test results to this JSON file")
    p.add_argument("--verbose", "-v", action="store_true", help="print every test's result")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    return args


def parse_op_list(text):
    ops = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        ops.add(line.split()[0])
    return ops


def supported_ops(args):
    if args.ops_file:
        with open(args.ops_file) as f:
            return parse_op_list(f.read())
    try:
        proc = subprocess.run([args.ztc, "list-ops"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=args.timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit("import_conformance: cannot run `%s list-ops`: %s" % (args.ztc, e))
    if proc.returncode != 0:
        sys.exit("import_conformance: `%s list-ops` exited with %d: %s"
                 % (args.ztc, proc.returncode, first_line(proc.stderr)))
    return parse_op_list(proc.stdout)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


class Case:
    """One node test: its name, model path and selection status."""

    def __init__(self, name, path):
        self.name = name
        self.path = path
        self.op_types = []
        self.status = None  # selected | skipped-* | passed | failed | ...
        self.detail = ""
        self.seconds = 0.0
        self.constant_inputs = []


def load_cases(tmpdir):
    """All node tests, each with the model on disk (written to tmpdir when the
    test only has an in-memory model)."""
    import onnx
    from onnx.backend.test.loader import load_model_tests

    cases = []
    for test in load_model_tests(kind="node"):
        path = None
        model_dir = getattr(test, "model_dir", None)
        if model_dir and os.path.exists(os.path.join(model_dir, "model.onnx")):
            path = os.path.join(model_dir, "model.onnx")
        elif getattr(test, "model", None) is not None:
            path = os.path.join(tmpdir, test.name + ".onnx")
            onnx.save_model(test.model, path)
        if path is not None:
            path = at_known_opset(path, os.path.join(tmpdir, test.name))
        cases.append(Case(test.name, path))
    cases.sort(key=lambda c: c.name)
    return cases


def signature(schema):
    """What an operator version takes and gives, apart from its types."""
    return ([(p.name, p.option) for p in schema.inputs],
            [(p.name, p.option) for p in schema.outputs],
            sorted((name, a.type) for name, a in schema.attributes.items()))


def at_known_opset(path, directory):
    """`path`, or a copy of its model in `directory` (beside a link to its
    test data) with the default-domain opset lowered to MAX_OPSET when the
    model's is newer but every node's operator version is the same at
    MAX_OPSET."""
    import onnx
    import onnx.defs

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - select() reports an unloadable model
        return path
    entries = [o for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not entries or entries[0].version <= MAX_OPSET:
        return path
    opset = entries[0].version
    for node in model.graph.node:
        if node.domain not in DEFAULT_DOMAINS:
            return path
        try:
            newest = onnx.defs.get_schema(node.op_type, opset, "")
            known = onnx.defs.get_schema(node.op_type, MAX_OPSET, "")
        except onnx.defs.SchemaError:
            return path
        if signature(newest) != signature(known):
            return path
    entries[0].version = MAX_OPSET
    os.makedirs(directory)
    for entry in os.listdir(os.path.dirname(path)):
        if entry.startswith("test_data_set_"):
            os.symlink(os.path.join(os.path.dirname(path), entry),
                       os.path.join(directory, entry))
    lowered = os.path.join(directory, "model.onnx")
    onnx.save_model(model, lowered)
    return lowered


def select(cases, ops, name_filter):
    import onnx

    pattern = re.compile(name_filter) if name_filter else None
    for case in cases:
        if pattern and not pattern.search(case.name):
            case.status = "skipped-filter"
            continue
        if case.path is None:
            case.status = "skipped-no-model"
            continue
        try:
            model = onnx.load(case.path, load_external_data=False)
        except Exception as e:  # noqa: BLE001 - a broken test model is skipped
            case.status = "skipped-unloadable"
            case.detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            continue
        nodes = model.graph.node
        case.op_types = sorted({n.op_type for n in nodes})
        if not nodes:
            case.status = "skipped-no-nodes"
        elif any(n.domain not in DEFAULT_DOMAINS for n in nodes):
            case.status = "skipped-non-default-domain"
        elif not all(n.op_type in ops for n in nodes):
            case.status = "skipped-unsupported-op"
            case.detail = " ".join(sorted({n.op_type for n in nodes} - ops))
        else:
            case.status = "selected"


def classify(returncode, stderr, timed_out, timeout):
    """Maps one ztc run to (status, detail)."""
    line = first_line(stderr)
    if timed_out:
        return "failed", "timeout after %gs" % timeout
    if returncode == 0:
        return "passed", ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal %d" % -returncode
        return "failed", "crashed with %s%s" % (name, (": " + line) if line else "")
    if returncode == 1 and UNSUPPORTED_VERSION_RE.search(line):
        return "skipped-unsupported-version", line
    if returncode == 1 and UNSUPPORTED_TYPE_RE.search(line):
        return "skipped-unsupported-type", line
    return "failed", "exit %d: %s" % (returncode, line or "(no stderr)")


def constant_input_args(path):
    """`--constant-input` flags for graph inputs that decide shapes."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    data_dir = os.path.join(os.path.dirname(path), "test_data_set_0")
    producers = {out: node for node in model.graph.node for out in node.output}
    args = []

    def bind(name, seen):
        """Binds the graph inputs `name`'s value is computed from: through
        any node but Shape and Size, whose results depend on shapes only."""
        if name in seen:
            return
        seen.add(name)
        if name in inputs:
            pb = os.path.join(data_dir, "input_%d.pb" % inputs.index(name))
            flag = "--constant-input=%s=%s" % (name, pb)
            if os.path.exists(pb) and flag not in args:
                args.append(flag)
            return
        node = producers.get(name)
        if node is not None and node.op_type not in ("Shape", "Size"):
            for source in node.input:
                if source:
                    bind(source, seen)

    for node in model.graph.node:
        for position in COMPILE_TIME_INPUTS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position]:
                bind(node.input[position], set())
    return args


def run_one(ztc, case, timeout):
    case.constant_inputs = constant_input_args(case.path)
    cmd = [ztc, "import", case.path, "--emit", "nn"] + case.constant_inputs
    start = time.monotonic()
    # A new session, so that a timeout kills ztc and anything it started.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        _, err = proc.communicate()
    case.seconds = time.monotonic() - start
    case.status, case.detail = classify(
        proc.returncode, err.decode("utf-8", "replace"), timed_out, timeout)
    return case


def main(argv=None):
    ensure_venv()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not (args.ops_file and args.dry_run) and not os.access(args.ztc, os.X_OK):
        sys.exit("import_conformance: not an executable: %s" % args.ztc)

    ops = supported_ops(args)
    if not ops:
        sys.exit("import_conformance: the supported op list is empty")

    import onnx

    with tempfile.TemporaryDirectory(prefix="ztc-conformance-") as tmpdir:
        cases = load_cases(tmpdir)
        select(cases, ops, args.filter)
        chosen = [c for c in cases if c.status == "selected"]

        print("onnx %s: %d node tests, %d supported op types listed"
              % (onnx.__version__, len(cases), len(ops)))
        if args.dry_run:
            for c in chosen:
                print("  %s: %s" % (c.name, " ".join(c.op_types)))
            print_skips(cases)
            print("%d node tests selected (dry run, nothing imported)" % len(chosen))
            return 0

        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, args.ztc, c, args.timeout) for c in chosen]
            for fut in concurrent.futures.as_completed(futures):
                c = fut.result()
                if args.verbose:
                    print("  %-10s %6.2fs %s %s" % (c.status, c.seconds, c.name, c.detail),
                          flush=True)
        elapsed = time.monotonic() - start

    passed = [c for c in chosen if c.status == "passed"]
    failed = [c for c in chosen if c.status == "failed"]
    skipped_version = [c for c in chosen if c.status == "skipped-unsupported-version"]
    skipped_type = [c for c in chosen if c.status == "skipped-unsupported-type"]
    specialized = [c for c in passed if c.constant_inputs]
    attempted = len(passed) + len(failed)
    rate = len(passed) / attempted if attempted else 0.0

    print()
    print("node tests:                    %d" % len(cases))
    print("with supported op types:       %d" % len(chosen))
    print("imported OK:                   %d" % len(passed))
    print("failed:                        %d" % len(failed))
    for c in failed:
        print("  FAIL %s: %s" % (c.name, c.detail))
    print("  of which with shape inputs bound as constants: %d" % len(specialized))
    print("skipped (unsupported version): %d" % len(skipped_version))
    for c in skipped_version:
        print("  SKIP %s: %s" % (c.name, c.detail))
    print("skipped (unsupported type):    %d" % len(skipped_type))
    for c in skipped_type:
        print("  SKIP %s: %s" % (c.name, c.detail))
    print_skips(cases)
    print("pass rate:                     %.2f%% (minimum %.2f%%), %.1fs with %d jobs"
          % (100.0 * rate, 100.0 * args.min_pass_rate, elapsed, args.jobs))

    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"name": c.name, "status": c.status, "detail": c.detail,
                        "op_types": c.op_types, "seconds": round(c.seconds, 3)}
                       for c in cases], f, indent=1)

    ok = attempted > 0 and rate >= args.min_pass_rate
    if attempted == 0:
        print("import_conformance: no test was imported", file=sys.stderr)
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 0 if ok else 1


def print_skips(cases):
    counts = {}
    for c in cases:
        if c.status.startswith("skipped-") and c.status not in (
                "skipped-unsupported-version", "skipped-unsupported-type"):
            counts[c.status] = counts.get(c.status, 0) + 1
    for status in sorted(counts):
        print("not selected (%s): %d" % (status[len("skipped-"):], counts[status]))


if __name__ == "__main__":
    sys.exit(main())
