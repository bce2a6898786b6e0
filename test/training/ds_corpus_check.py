#!/usr/bin/env python3
"""Third-party DeepSpeed configs, as their projects wrote them, compile and train.

test/fixtures/ds_corpus/ holds public DeepSpeed configs of other projects
(SOURCES.md names each one's repository, path, commit and license), byte for
byte: comments and trailing commas included. EXPECTED lists, for each, what
ztc must do with it:

    NAME.json  trains               compiles, then trains a few steps
    NAME.json  refused KEY          `ztc compile` stops with a one-line error
                                    naming KEY, a feature docs/config.md lists
                                    as refused

For each config, "auto" is filled the way the Hugging Face Trainer fills it
from its arguments: `--batch-size 4` when the micro-batch is "auto" or
absent (and train_batch_size does not fix it), nothing else (ztc's defaults
stand for the rest: lr 1e-3, fp32, the run's length for total_num_steps).
The world size is what the batch identity gives when all three terms are
numbers (train_batch_size / (micro-batch x accumulation)); else 2 for a
ZeRO stage of 1 or more (where the batch sizes the file fixes divide over
two ranks), so that the shards are real; else 1. More than one rank trains
under mpirun. The model is the example GPT (its
blocks give activation_checkpointing something to recompute).

Prints one line per config and a closing "N passed, N failed" line; exits 1
when any config does other than EXPECTED says.

Usage: ds_corpus_check.py --ztc PATH --ztc-train PATH [--mpirun PATH]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import hjson
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(REPO, "test", "fixtures", "ds_corpus")
# mpirun as root, more ranks than cores, one OpenMP thread per rank.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1")
STEPS = 3


def run(command, timeout=900):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, env=ENV,
                          timeout=timeout)


def read_expected():
    expected = {}
    with open(os.path.join(CORPUS, "EXPECTED")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if fields[1] not in ("trains", "refused") or (fields[1] == "refused") != (
                    len(fields) == 3):
                raise SystemExit("EXPECTED: cannot read %r" % line)
            expected[fields[0]] = fields[1:]
    return expected


def number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def fill(config):
    """The flags the Trainer's arguments stand for, and the world size."""
    micro = number(config.get("train_micro_batch_size_per_gpu"))
    accum = number(config.get("gradient_accumulation_steps"))
    total = number(config.get("train_batch_size"))
    flags = []
    if micro is None and total is None:
        flags += ["--batch-size", "4"]
    if micro and accum and total:
        return flags, int(total // (micro * accum))
    # ZeRO shards over ranks: two, where the batch sizes the file fixes
    # divide over them.
    zero = config.get("zero_optimization")
    stage = zero if isinstance(zero, bool) else (
        zero.get("stage") if isinstance(zero, dict) else None)
    if not number(stage) and stage is not True:
        return flags, 1
    if total and total % (2 * (micro or 1) * (accum or 1)):
        return flags, 1
    return flags, 2


def check_one(args, name, outcome, model, data, work):
    path = os.path.join(CORPUS, name)
    with open(path) as f:
        config = hjson.load(f)
    flags, world = fill(config)
    art = os.path.join(work, name + ".ztc")
    compiled = run([args.ztc, "compile", model, "-o", art, "--loss", "cross_entropy",
                    "--config", path, "--world-size", world, *flags])
    errors = [line for line in compiled.stderr.splitlines() if line.startswith("ztc: error:")]
    if outcome[0] == "refused":
        key = outcome[1]
        if compiled.returncode == 0:
            return "compiled, but EXPECTED says it is refused for %s" % key
        if len(errors) != 1 or (": %s:" % key) not in errors[0] and (
                ": %s " % key) not in errors[0]:
            return "refused, but not with one line naming %s:\n%s" % (key, compiled.stderr)
        return "refused: " + errors[0].split(": ", 2)[2].replace(path + ": ", "")
    if compiled.returncode != 0:
        return "not compiled:\n" + compiled.stderr
    # The config's steps_per_print is the logging interval; the last step is
    # always reported.
    command = [args.ztc_train, art, "--data", data, "--steps", STEPS, "--config", path]
    if world > 1:
        if not args.mpirun:
            return "needs %d ranks and there is no mpirun" % world
        command = [args.mpirun, "-np", world] + command
    trained = run(command)
    logged = re.findall(r"step (\d+)/%d  loss ([0-9.]+|nan|inf)" % STEPS, trained.stderr)
    losses = [float(loss) for _, loss in logged]
    if trained.returncode != 0 or not logged or logged[-1][0] != str(STEPS) or not all(
            np.isfinite(losses)):
        return "did not train %d steps:\n%s" % (STEPS, trained.stderr)
    return "trains on %d rank%s, losses %s" % (world, "s" if world > 1 else "",
                                              " ".join("%.4f" % v for v in losses))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train", required=True)
    parser.add_argument("--mpirun")
    args = parser.parse_args()
    expected = read_expected()
    present = sorted(n for n in os.listdir(CORPUS) if n.endswith(".json"))
    if sorted(expected) != present:
        raise SystemExit("EXPECTED and the corpus differ: %s" % sorted(
            set(expected).symmetric_difference(present)))
    passed = failed = trains = refused = 0
    with tempfile.TemporaryDirectory(prefix="ztc-ds-corpus-") as work:
        done = run([sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"),
                    "--out", work, "--quiet"])
        if done.returncode != 0:
            raise SystemExit("make_gpt.py failed:\n" + done.stderr)
        model = os.path.join(work, "gpt.onnx")
        data = os.path.join(work, "data")
        os.makedirs(data)
        rng = np.random.default_rng(0)
        np.save(os.path.join(data, "tokens.npy"), rng.integers(0, 64, (4096, 16)))
        np.save(os.path.join(data, "labels.npy"), rng.integers(0, 64, (4096, 16)))
        for name in present:
            outcome = expected[name]
            result = check_one(args, name, outcome, model, data, work)
            good = result.startswith("trains") == (outcome[0] == "trains") and (
                result.startswith("trains") or result.startswith("refused"))
            print("%s %s: %s" % ("ok  " if good else "FAIL", name, result), flush=True)
            passed += good
            failed += not good
            trains += good and outcome[0] == "trains"
            refused += good and outcome[0] == "refused"
    print("ds_corpus_check: %d configs: %d compile and train, %d refused as documented" % (
        len(present), trains, refused))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
