#!/usr/bin/env python3
"""Structural mutation fuzzing of ztc's importer and conversion.

    mutate_models.py --ztc PATH [--count N] [--seed S] [--jobs J]
                     [--keep DIR] [--compile-every K]

libFuzzer's targets (ztc-fuzz-onnx-*) mutate bytes; most of their inputs
never parse. This fuzzer mutates valid models the way a buggy exporter or
a hostile file would, so every mutant parses and reaches what comes after
the reader: shape inference, the converters, the training pipeline. It
starts from the ONNX backend node tests (the onnx package of the test
venv) and applies one to three mutations of these kinds:

  attribute   an attribute's value set to 0, -1, a huge or NaN value, an
              empty or long list, another type; an attribute removed,
              given twice, or one the operator does not declare
  rank        an input's or initializer's rank raised (up to 10), lowered
              or a dimension set to 0, 1 or a huge size
  dtype       an input's or initializer's element type changed (including
              types ztc does not compute in: uint8, string, complex)
  external    an initializer moved to external data whose location leaves
              the model's directory ('../x', an absolute path, a symlink
              out), does not exist, or whose offset or length is not a
              number or past the end
  structure   an output written twice, an input dropped or repeated, the
              opset changed, a node's inputs reordered

Each mutant runs through `ztc import --emit nn` (every --compile-every-th
also through `ztc compile --no-build` with --loss mse), with the
test's shape-deciding inputs bound as the conformance tests bind them.
The oracle: exit status 0 or 1; on 1, a message on stderr that names the
file and is no crash report (no signal, no "LLVM ERROR", no sanitizer
report, no assertion, no stack dump), within the time limit. Failing
mutants are written to --keep (default: a temporary directory that is
kept when something failed) with the command to replay them.

The last line is "N mutants, M failed"; exit 1 when M > 0. The same seed
gives the same mutants.
"""

import argparse
import concurrent.futures
import copy
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))

import import_conformance as ic  # noqa: E402

CRASH = re.compile(r"LLVM ERROR|AddressSanitizer|UndefinedBehaviorSanitizer|"
                   r"runtime error:|Assertion .* failed|Stack dump|PLEASE submit|"
                   r"terminate called|Segmentation fault|Aborted")
HUGE = 1 << 40


def mutate_attribute(model, rng):
    import onnx
    from onnx import helper

    nodes = [n for n in model.graph.node]
    if not nodes:
        return "attribute: no node"
    node = rng.choice(nodes)
    choice = rng.randrange(6)
    if choice == 0 or not node.attribute:
        node.attribute.extend([helper.make_attribute(
            rng.choice(["bogus", "axis", "alpha", "perm", "axes"]),
            rng.choice([3, -7, 1.5, [1, 2, 3], "junk"]))])
        return "attribute: %s gets %s" % (node.op_type, node.attribute[-1].name)
    attr = rng.choice(list(node.attribute))
    if choice == 1:
        node.attribute.remove(attr)
        return "attribute: %s loses %s" % (node.op_type, attr.name)
    if choice == 2:
        node.attribute.extend([copy.deepcopy(attr)])
        return "attribute: %s has %s twice" % (node.op_type, attr.name)
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.INT:
        attr.i = rng.choice([0, -1, -HUGE, HUGE, 2 ** 63 - 1, -(2 ** 63), 7, 64])
    elif kind == A.FLOAT:
        attr.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e38])
    elif kind == A.INTS:
        values = rng.choice([[], [0], [-1], [HUGE], list(range(12)), [1, 1], [-HUGE, 2]])
        del attr.ints[:]
        attr.ints.extend(values)
    elif kind == A.FLOATS:
        del attr.floats[:]
        attr.floats.extend(rng.choice([[], [float("nan")], [0.0] * 9]))
    elif kind == A.STRING:
        attr.s = rng.choice([b"", b"junk", b"\xff\xfe", b"CONSTANT", b"x" * 300])
    else:
        attr.type = A.INT
        attr.i = 1
    if choice == 5:  # a type its schema does not declare
        attr.type = A.FLOAT if kind != A.FLOAT else A.INT
    return "attribute: %s.%s changed" % (node.op_type, attr.name)


def tensor_types(model):
    """Every graph input, output and value_info type, and every initializer."""
    values = list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info)
    return [v.type.tensor_type for v in values if v.type.HasField("tensor_type")]


def mutate_rank(model, rng):
    initializers = list(model.graph.initializer)
    types = [t for t in tensor_types(model) if t.HasField("shape")]
    if initializers and (not types or rng.random() < 0.4):
        init = rng.choice(initializers)
        dims = list(init.dims)
        what = rng.randrange(3)
        if what == 0:
            dims = dims + [1] * rng.randint(1, 8)
        elif what == 1 and dims:
            dims = dims[:-1]
        elif dims:
            dims[rng.randrange(len(dims))] = rng.choice([0, 1, HUGE])
        del init.dims[:]
        init.dims.extend(dims)
        return "rank: initializer %s dims %s" % (init.name, dims)
    if not types:
        return "rank: nothing"
    shape = rng.choice(types).shape
    what = rng.randrange(3)
    if what == 0:
        for _ in range(rng.randint(1, 8)):
            shape.dim.add().dim_value = 1
    elif what == 1 and shape.dim:
        del shape.dim[-1]
    elif shape.dim:
        shape.dim[rng.randrange(len(shape.dim))].dim_value = rng.choice([0, 1, HUGE, 3])
    return "rank: a value's shape now has %d dims" % len(shape.dim)


def mutate_dtype(model, rng):
    from onnx import TensorProto as T

    choices = [T.UINT8, T.INT8, T.INT16, T.INT32, T.INT64, T.FLOAT16, T.BFLOAT16, T.DOUBLE,
               T.BOOL, T.STRING, T.COMPLEX64, T.UINT64, T.FLOAT, 0, 999]
    targets = tensor_types(model)
    if model.graph.initializer and (not targets or rng.random() < 0.4):
        init = rng.choice(list(model.graph.initializer))
        init.data_type = rng.choice(choices)
        return "dtype: initializer %s -> %d" % (init.name, init.data_type)
    if not targets:
        return "dtype: nothing"
    t = rng.choice(targets)
    t.elem_type = rng.choice(choices)
    return "dtype: a value -> %d" % t.elem_type


def mutate_external(model, rng, directory):
    from onnx import TensorProto

    initializers = list(model.graph.initializer)
    if not initializers:
        return "external: no initializer"
    init = rng.choice(initializers)
    location = rng.choice(["../outside.bin", "/etc/passwd", "missing.bin", "data.bin",
                           "link.bin", "sub/../../x.bin", ""])
    with open(os.path.join(directory, "data.bin"), "wb") as f:
        f.write(bytes(64))
    link = os.path.join(directory, "link.bin")
    if not os.path.lexists(link):
        os.symlink("/etc/hostname", link)
    offset = rng.choice(["0", "8", "-1", "abc", str(HUGE), "18446744073709551616"])
    length = rng.choice([None, "4", "0", "-5", "x", str(HUGE)])
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.ClearField("int64_data")
    init.ClearField("int32_data")
    init.data_location = TensorProto.EXTERNAL
    del init.external_data[:]
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = init.external_data.add()
            entry.key, entry.value = key, value
    return "external: %s at %r offset %s length %s" % (init.name, location, offset, length)


def mutate_structure(model, rng):
    nodes = list(model.graph.node)
    if not nodes:
        return "structure: no node"
    node = rng.choice(nodes)
    what = rng.randrange(5)
    if what == 0 and len(nodes) > 1:
        other = rng.choice(nodes)
        if other.output and node.output:
            other.output[0] = node.output[0]
        return "structure: an output written twice"
    if what == 1 and node.input:
        del node.input[rng.randrange(len(node.input))]
        return "structure: %s loses an input" % node.op_type
    if what == 2 and node.input:
        node.input.append(node.input[0])
        return "structure: %s gets an extra input" % node.op_type
    if what == 3:
        for entry in model.opset_import:
            if entry.domain in ("", "ai.onnx"):
                entry.version = rng.choice([1, 6, 11, 13, 17, 22, 23, 24, 99])
        return "structure: opset changed"
    if len(node.input) > 1:
        node.input[0], node.input[1] = node.input[1], node.input[0]
    return "structure: %s inputs swapped" % node.op_type


MUTATIONS = ["attribute", "rank", "dtype", "external", "structure"]


def make_mutant(source, index, seed, out):
    """Writes mutant `index` of `source` into its own directory under `out`;
    returns (directory, model path, what was done)."""
    import onnx

    rng = random.Random("%d:%d" % (seed, index))
    model = onnx.load(source, load_external_data=False)
    directory = os.path.join(out, "m%05d" % index)
    os.makedirs(directory, exist_ok=True)
    done = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(MUTATIONS)
        if kind == "attribute":
            done.append(mutate_attribute(model, rng))
        elif kind == "rank":
            done.append(mutate_rank(model, rng))
        elif kind == "dtype":
            done.append(mutate_dtype(model, rng))
        elif kind == "external":
            done.append(mutate_external(model, rng, directory))
        else:
            done.append(mutate_structure(model, rng))
    path = os.path.join(directory, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    # The test's data, for the shape-deciding inputs it binds.
    data = os.path.join(os.path.dirname(source), "test_data_set_0")
    if os.path.isdir(data) and not os.path.exists(os.path.join(directory, "test_data_set_0")):
        os.symlink(data, os.path.join(directory, "test_data_set_0"))
    return directory, path, "; ".join(done)


def check(ztc, path, compile_too, timeout):
    """None when ztc behaved, else why not, and the commands run."""
    try:
        bound = ic.constant_input_args(path)
    except Exception:  # noqa: BLE001 - a mutant the onnx package cannot read
        bound = []
    commands = [[ztc, "import", path, "--emit", "nn"] + bound]
    if compile_too:
        commands.append([ztc, "compile", path, "-o", path + ".ztc", "--loss", "mse",
                         "--no-build"] + bound)
    for command in commands:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "timeout after %gs" % timeout, command
        err = err.decode("utf-8", "replace")
        if proc.returncode < 0:
            return "killed by signal %d: %s" % (-proc.returncode, err.strip()[-300:]), command
        if proc.returncode not in (0, 1):
            return "exit %d: %s" % (proc.returncode, err.strip()[-300:]), command
        if CRASH.search(err):
            return "crash report: %s" % err.strip()[-300:], command
        if proc.returncode == 1 and not err.strip():
            return "exit 1 without a message", command
        if proc.returncode != 0:
            break
    return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds per command (a guard; default 60)")
    parser.add_argument("--compile-every", type=int, default=10)
    parser.add_argument("--keep", help="write failing mutants here")
    args = parser.parse_args()

    from onnx.backend.test.loader import load_model_tests

    sources = sorted(os.path.join(t.model_dir, "model.onnx")
                     for t in load_model_tests(kind="node")
                     if getattr(t, "model_dir", None) and
                     os.path.exists(os.path.join(t.model_dir, "model.onnx")) and
                     os.path.getsize(os.path.join(t.model_dir, "model.onnx")) < 1 << 16)
    picker = random.Random(args.seed)
    chosen = [picker.choice(sources) for _ in range(args.count)]
    work = tempfile.mkdtemp(prefix="ztc-mutants-")
    failures = []
    try:
        jobs = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for index, source in enumerate(chosen):
                directory, path, what = make_mutant(source, index, args.seed, work)
                compile_too = args.compile_every > 0 and index % args.compile_every == 0
                jobs.append((index, source, directory, what,
                             pool.submit(check, args.ztc, path, compile_too, args.timeout)))
            for index, source, directory, what, future in jobs:
                why, command = future.result()
                if why:
                    failures.append((index, source, directory, what, why, command))
        keep = args.keep or (tempfile.mkdtemp(prefix="ztc-mutant-failures-")
                             if failures else None)
        for index, source, directory, what, why, commands in failures:
            target = os.path.join(keep, os.path.basename(directory))
            shutil.copytree(directory, target, symlinks=True, dirs_exist_ok=True)
            print("FAIL mutant %d of %s (%s): %s\n  replay: %s"
                  % (index, os.path.basename(os.path.dirname(source)), what, why,
                     " ".join(str(c) for c in commands).replace(directory, target)))
        if failures:
            print("failing mutants kept in %s" % keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d mutants, %d failed" % (len(chosen), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
