#!/usr/bin/env python3
"""Reproducible compiles: the same model and flags give a byte-identical
artifact, whatever the machine's load.

`--recompute budget=` searches among integer-program plans; its search is
bounded by branch-and-bound nodes, not seconds, so a compile beside a busy
process chooses what a quiet one chooses. For each example model (and a
deeper GPT), a budget between the smallest reachable peak and the peak
without recomputation is compiled twice: once quietly, once while two
processes spin on every core. Every file of the two artifacts must match
byte for byte, the step's shared object included; `compile.key` is left
out, being the up-to-date stamp that records the outputs' modification
times. The same for a ZeRO-3 compile for 2 ranks.

Usage: reproducible_check.py --ztc PATH [--quick]
  --quick: the GPT alone, on 1 and 2 ranks (a short run by hand)
"""

import argparse
import filecmp
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STAMP = "compile.key"
results = []


def report(ok, message):
    print("%s %s" % ("ok  " if ok else "FAIL", message), flush=True)
    results.append(ok)


def budget_between(ztc, model, flags, tmp):
    """A budget halfway between the smallest planned peak a plan reaches
    and the peak without recomputation (read from the error a 1 KiB
    budget gives), so that the integer program's plans compete."""
    probe = subprocess.run([ztc, "compile", model, "-o", os.path.join(tmp, "probe.ztc"),
                            *flags, "--recompute", "budget=1KiB", "--no-build"],
                           capture_output=True, text=True)
    found = re.search(r"smallest planned peak reachable is [^(]*\((\d+) bytes\).*"
                      r"without recomputation it is [^(]*\((\d+) bytes\)", probe.stderr)
    if probe.returncode == 0 or not found:
        raise SystemExit("reproducible_check: cannot read the reachable peaks of %s:\n%s"
                         % (model, probe.stderr))
    smallest, none = int(found.group(1)), int(found.group(2))
    return (smallest + none) // 2


def compile_artifact(ztc, model, out, flags, budget):
    result = subprocess.run([ztc, "compile", model, "-o", out, *flags,
                             "--recompute", "budget=%d" % budget],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("reproducible_check: ztc compile %s failed:\n%s"
                         % (model, result.stderr))
    chosen = re.search(r"chosen: ([^,]+)", result.stderr)
    return chosen.group(1) if chosen else "?"


def busy_processes():
    """Two processes that keep every core of a 2-core machine busy."""
    spin = "import os\nwhile True:\n    os.getpid()\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]


def differences(a, b):
    names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
    different = []
    for name in names:
        if name == STAMP:
            continue
        pa, pb = os.path.join(a, name), os.path.join(b, name)
        if not (os.path.isfile(pa) and os.path.isfile(pb)) or \
                not filecmp.cmp(pa, pb, shallow=False):
            different.append(name)
    return names, different


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--quick", action="store_true",
                        help="the GPT alone, on 1 and 2 ranks")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-reproducible-") as tmp:
        models = os.path.join(tmp, "models")
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"), models],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"),
                        "--out", models, "--name", "gpt_deep", "--layers", "6",
                        "--width", "48", "--quiet"], check=True)
        base = ["--batch-size", "32", "--loss", "cross_entropy"]
        names = ("gpt",) if args.quick else ("mlp", "cnn", "cnn_train", "gpt", "gpt_deep")
        cases = [(name, base) for name in names]
        cases.append(("gpt", base + ["--zero", "3", "--world-size", "2"]))
        for name, flags in cases:
            model = os.path.join(models, name + ".onnx")
            budget = budget_between(args.ztc, model, flags, tmp)
            tag = name + ("-zero3x2" if "--zero" in flags else "")
            quiet = os.path.join(tmp, tag + "-quiet.ztc")
            loaded = os.path.join(tmp, tag + "-loaded.ztc")
            chosen = compile_artifact(args.ztc, model, quiet, flags, budget)
            spinners = busy_processes()
            try:
                compile_artifact(args.ztc, model, loaded, flags, budget)
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
            names, different = differences(quiet, loaded)
            report(not different and "step.so" in names,
                   "%s %s at budget=%d bytes (chosen: %s): %d files compared, %s"
                   % (name, " ".join(flags[4:]) or "1 rank", budget, chosen,
                      len(names) - (STAMP in names),
                      "byte-identical" if not different
                      else "different: " + ", ".join(different)))
    print("%d passed, %d failed" % (results.count(True), results.count(False)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
