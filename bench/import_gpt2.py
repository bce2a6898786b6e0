#!/usr/bin/env python3
"""Benchmarks `ztc import` on a GPT-2-small-sized ONNX model (~124M parameters).

The model (gpt2_small.onnx with external data gpt2_small.onnx.data) is made
once by examples/onnx/make_gpt.py --gpt2-small and cached under build/bench/;
it is made again when the generator changes. Then

    ZTC import MODEL --emit nn --input-shape tokens=1x1024 > /dev/null

runs --repeat times; the median wall time and the largest peak RSS of the ztc
process are compared with the targets (default: < 5 s, < 1024 MB).

Exit status: 0 within the targets, 1 over a target, 2 when ztc failed.
"""

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE_DIR = os.path.join(REPO_ROOT, "build", "bench")
NAME = "gpt2_small"
GENERATOR = os.path.join(REPO_ROOT, "examples", "onnx", "make_gpt.py")
GENERATOR_DEPS = [GENERATOR, os.path.join(REPO_ROOT, "examples", "onnx", "_common.py")]
ZTC_CANDIDATES = ["build/bin/ztc", "build/tools/ztc/ztc", "build/tools/ztc", "build/ztc"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ztc", help="path to the ztc binary (default: the first of %s that exists)"
                   % ", ".join(ZTC_CANDIDATES))
    p.add_argument("--model", help="use this ONNX model instead of the cached GPT-2-small one")
    p.add_argument("--input-shape", default="tokens=1x1024",
                   help="value of ztc's --input-shape (default tokens=1x1024)")
    p.add_argument("--repeat", type=int, default=3, help="runs (default 3)")
    p.add_argument("--max-seconds", type=float, default=5.0, help="wall time target (default 5)")
    p.add_argument("--max-mb", type=float, default=1024.0, help="peak RSS target in MB (default 1024)")
    p.add_argument("--regenerate", action="store_true", help="make the cached model again")
    p.add_argument("--generate-only", action="store_true", help="make the model and stop")
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def find_ztc(path):
    if path:
        return path
    for rel in ZTC_CANDIDATES:
        candidate = os.path.join(REPO_ROOT, rel)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("import_gpt2: ztc not found; pass --ztc PATH")


def generator_hash():
    h = hashlib.sha256()
    for path in GENERATOR_DEPS:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def cached_model(regenerate):
    """Returns the path of the cached model, making it first when needed."""
    model = os.path.join(CACHE_DIR, NAME + ".onnx")
    data = model + ".data"
    stamp = os.path.join(CACHE_DIR, NAME + ".stamp")
    want = generator_hash()
    try:
        with open(stamp) as f:
            have = f.read().strip()
    except OSError:
        have = None
    if not regenerate and have == want and os.path.exists(model) and os.path.exists(data):
        return model

    print("import_gpt2: generating %s (once; ~15 s, ~3 GB of memory)"
          % os.path.relpath(model, REPO_ROOT), flush=True)
    tmp = os.path.join(CACHE_DIR, NAME + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    venv_python = os.path.join(REPO_ROOT, ".venv", "bin", "python")
    python = venv_python if os.path.exists(venv_python) else sys.executable
    subprocess.run([python, GENERATOR, "--gpt2-small", "--out", tmp, "--quiet"], check=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    for entry in os.listdir(tmp):
        dest = os.path.join(CACHE_DIR, entry)
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.replace(os.path.join(tmp, entry), dest)
    os.rmdir(tmp)
    with open(stamp, "w") as f:
        f.write(want + "\n")
    return model


def run_once(cmd):
    """Runs cmd with stdout to /dev/null; returns (exit status, seconds, peak RSS in MB, stderr)."""
    with open(os.devnull, "wb") as devnull:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=devnull,
                                stderr=subprocess.PIPE)
        # Read stderr in full before reaping, so that wait4 gives this child's
        # own resource usage (RUSAGE_CHILDREN would include earlier children).
        err = proc.stderr.read()
        proc.stderr.close()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in kilobytes on Linux.
    return proc.returncode, seconds, usage.ru_maxrss / 1024.0, err.decode("utf-8", "replace")


def display(path):
    """A path relative to the repository when it is inside it."""
    if os.path.isabs(path) and path.startswith(REPO_ROOT + os.sep):
        return os.path.relpath(path, REPO_ROOT)
    return path


def main():
    args = parse_args()
    model = os.path.abspath(args.model) if args.model else cached_model(args.regenerate)
    if args.generate_only:
        print(model)
        return 0
    ztc = find_ztc(args.ztc)

    cmd = [ztc, "import", model, "--emit", "nn", "--input-shape", args.input_shape]
    print("import_gpt2: %s > /dev/null" % " ".join(display(c) for c in cmd), flush=True)
    times, rss = [], []
    for i in range(args.repeat):
        rc, seconds, mb, err = run_once(cmd)
        if rc != 0:
            print("import_gpt2: ztc exited with %d; stderr:" % rc)
            print("\n".join(err.splitlines()[-20:]))
            return 2
        times.append(seconds)
        rss.append(mb)
        print("  run %d: %.2f s, %.0f MB" % (i + 1, seconds, mb), flush=True)

    median = statistics.median(times)
    peak = max(rss)
    time_ok = median < args.max_seconds
    rss_ok = peak < args.max_mb
    print("import_gpt2: median %.2f s (target < %g s: %s), peak RSS %.0f MB (target < %g MB: %s)"
          % (median, args.max_seconds, "OK" if time_ok else "OVER",
             peak, args.max_mb, "OK" if rss_ok else "OVER"))
    return 0 if time_ok and rss_ok else 1


if __name__ == "__main__":
    sys.exit(main())
