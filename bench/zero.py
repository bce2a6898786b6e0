#!/usr/bin/env python3
"""Data parallelism and ZeRO on the CPU backend: step time and memory per rank.

For the example GPT (examples/onnx/make_gpt.py, by default its small size:
vocab 64, context 16, width 32, 2 blocks; AdamW) on next-character windows
of the GPL-3 text, global batch 16, and the example MLP on scikit-learn's
digits, global batch 64, the step is compiled for world sizes 1, 2 and 4
and ZeRO stages 0 to 3 (`ztc compile --world-size N --zero S`, stage 3
with --param-persistence-threshold 0 so that every parameter is sharded; batch
per rank = global batch / N, so every world size trains the same global
batch) and trained on the CPU backend: `ztc-train` for one rank,
`mpirun -np N ztc-train` for more.

One table per model, one row per (world size, stage):
  ms/step      wall time of a step: the difference between a run of 5 steps
               and one of 5 + --steps (the MLP: 10x as many), divided by the
               extra steps, so MPI start-up, loading and the first step
               cancel out; best of --repeat rounds in which all the
               configurations take turns, so they share the machine's state;
  vs stage 0   that time over stage 0's at the same world size: what
               sharding the optimizer state (1), the gradients (2) and the
               parameters (3) costs or saves per step;
  params       bytes of parameters each rank holds (the manifest's `param`
               bindings; ZeRO 1 and 2 keep them replicated, 3 holds 1/N);
  opt state    bytes of optimizer state each rank holds (`state` bindings:
               AdamW's two moments, 1/N of them from ZeRO 1 on);
  arena        the per-rank planned arena (activations, gradients, scratch);
  comm elems   elements each rank sends per step, as the trainer counts them
               ("communication: X elements per rank per step"); 0 for one
               rank;
  thread       for several ranks, the same artifact's ms/step with
               `ztc-train --comm-thread` (its collectives, which the compile
               puts on stream 1, run on a thread of their own while the
               step computes; stage 3 also gathers --prefetch-bytes ahead)
               over its ms/step in program order (the default).
Each rank gets max(1, cores // N) OpenMP/OpenBLAS threads. With more ranks
than cores (4 ranks on a 2-core machine) the ranks are oversubscribed, so
absolute times across world sizes are not a scaling measurement: compare
the ratios within a world size, which is what this benchmark is for.

    .venv/bin/python bench/zero.py [--build build] [--steps 200] [--repeat 3]
                                   [--layers L] [--width W] [--quick]
                                   [--prefetch-bytes B]
"""
import argparse
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test" / "training"))
from convergence_check import write_gpl_characters  # noqa: E402

WORLD_SIZES = (1, 2, 4)
STAGES = (0, 1, 2, 3)
WARMUP_STEPS = 5  # the short run; the long run adds --steps to it
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1}
COMMUNICATION = re.compile(r"communication: (\d+) elements per rank per step \(planned (\d+)\)")


def cores():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run(command, env=None):
    """Runs `command`; on failure exits with its stderr. Returns the stderr
    (ztc-train logs there)."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit("zero.py: %s failed (exit %d):\n%s" % (" ".join(map(str, command)),
                                                        done.returncode, done.stderr))
    return done.stderr


def footprint(art):
    """(parameter bytes, optimizer-state bytes, planned arena bytes) per
    rank, from the artifact's manifest."""
    manifest = json.loads((art / "manifest.json").read_text())
    held = {"param": 0, "state": 0}
    for binding in manifest["bindings"]:
        if binding["role"] in held:
            held[binding["role"]] += DTYPE_BYTES[binding["dtype"]] * math.prod(binding["shape"])
    return held["param"], held["state"], manifest["arena_bytes"]


def rank_env(world):
    """The environment of an N-rank run: Open MPI may run as root and put
    more ranks than cores on this machine, and each rank gets its share of
    the cores as threads."""
    env = dict(os.environ)
    threads = str(max(1, cores() // world))
    env.update(OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def run_steps(args, art, data, world, steps, *flags):
    """Trains `steps` steps on `world` ranks: (wall seconds, the elements
    communicated per rank per step, the elements planned)."""
    command = [pathlib.Path(args.build) / "bin" / "ztc-train", art, "--data", data,
               "--steps", steps, "--log-every", "0", *flags]
    if world > 1:
        command = [args.mpirun, "-np", world] + command
    start = time.perf_counter()
    log = run(command, env=rank_env(world))
    seconds = time.perf_counter() - start
    found = COMMUNICATION.search(log)
    if world > 1 and not found:
        sys.exit("zero.py: no communication line in the log of %s:\n%s" % (art, log))
    return seconds, (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def bench_model(args, name, model, data, global_batch, steps, work):
    """Compiles `model` for every (world size, stage), times them in turns
    and prints the table."""
    configs = [(world, stage) for world in WORLD_SIZES for stage in STAGES]
    arts, figures = {}, {}
    for world, stage in configs:
        art = work / ("%s-n%d-z%d.ztc" % (model.stem, world, stage))
        run([pathlib.Path(args.build) / "bin" / "ztc", "compile", model, "-o", art,
             "--loss", "cross_entropy", "--batch-size", global_batch // world,
             "--world-size", world, "--zero", stage, "--param-persistence-threshold", 0,
             *(["--prefetch-bytes", args.prefetch_bytes] if stage == 3 and world > 1 else [])])
        arts[world, stage] = art
        figures[world, stage] = footprint(art)

    best = {config: float("inf") for config in configs}
    threaded = {config: float("inf") for config in configs if config[0] > 1}
    comm = {}
    for _ in range(args.repeat):
        for world, stage in configs:
            short, _ = run_steps(args, arts[world, stage], data, world, WARMUP_STEPS)
            long, comm[world, stage] = run_steps(args, arts[world, stage], data, world,
                                                 WARMUP_STEPS + steps)
            best[world, stage] = min(best[world, stage], (long - short) / steps)
            if world > 1:
                short, _ = run_steps(args, arts[world, stage], data, world, WARMUP_STEPS,
                                     "--comm-thread")
                long, _ = run_steps(args, arts[world, stage], data, world,
                                    WARMUP_STEPS + steps, "--comm-thread")
                threaded[world, stage] = min(threaded[world, stage], (long - short) / steps)

    print("\n%s, global batch %d, %d timed steps, best of %d" % (name, global_batch, steps,
                                                                 args.repeat))
    print("%5s %4s %9s %10s %12s %12s %12s %11s %8s" % ("ranks", "ZeRO", "ms/step",
                                                        "vs stage 0", "params B",
                                                        "opt state B", "arena B",
                                                        "comm elems", "thread"))
    for world, stage in configs:
        params, state, arena = figures[world, stage]
        thread = ("%7.2fx" % (threaded[world, stage] / best[world, stage])
                  if (world, stage) in threaded else "%8s" % "-")
        print("%5d %4d %9.3f %9.2fx %12d %12d %12d %11d %s" % (
            world, stage, 1e3 * best[world, stage], best[world, stage] / best[world, 0],
            params, state, arena, comm[world, stage][0], thread))
    # The trainer counts what it sends; the manifest plans it. They should agree.
    for config, (sent, planned) in sorted(comm.items()):
        if sent != planned:
            print("  note: %d ranks, ZeRO %d sent %d elements per step, %d planned"
                  % (config + (sent, planned)))


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Absolute times across world sizes are not a scaling measurement when ranks "
               "outnumber cores; compare the ratios within a world size.")
    parser.add_argument("--build", default=str(ROOT / "build"),
                        help="build directory with bin/ztc and bin/ztc-train (default: build)")
    parser.add_argument("--mpirun", default="mpirun", help="MPI launcher (default: mpirun)")
    parser.add_argument("--steps", type=int,
                        help="timed steps per run for the GPT; the MLP runs 10x as many "
                             "(default: 200, or 100 with --quick)")
    parser.add_argument("--repeat", type=int,
                        help="rounds; each configuration's best counts "
                             "(default: 3, or 2 with --quick)")
    parser.add_argument("--layers", type=int,
                        help="GPT blocks (default: make_gpt.py's, 2)")
    parser.add_argument("--width", type=int,
                        help="GPT width, a multiple of its 2 heads (default: make_gpt.py's, 32)")
    parser.add_argument("--prefetch-bytes", type=int, default=1 << 20,
                        help="stage 3 on several ranks: parameter bytes gathered ahead of "
                             "their readers (ztc compile --prefetch-bytes; default 1 MiB)")
    parser.add_argument("--quick", action="store_true",
                        help="only the GPT, with fewer steps and rounds")
    args = parser.parse_args()
    if args.steps is None:
        args.steps = 100 if args.quick else 200
    if args.repeat is None:
        args.repeat = 2 if args.quick else 3
    return args


def main():
    args = parse_args()
    if shutil.which(args.mpirun) is None:
        sys.exit("zero.py: %r not found; world sizes 2 and 4 are launched with mpirun "
                 "(Open MPI: apt-get install openmpi-bin, or pass --mpirun PATH)" % args.mpirun)
    over = [world for world in WORLD_SIZES if world > cores()]
    print("%d CPU cores; each rank gets max(1, %d // ranks) threads." % (cores(), cores()))
    if over:
        print("%s ranks outnumber the cores: oversubscribed, so absolute times across world "
              "sizes are not a scaling measurement;\nthe ratios within a world size are what "
              "this benchmark measures." % " and ".join(map(str, over)))
    with tempfile.TemporaryDirectory(prefix="ztc-bench-zero-") as tmp:
        work = pathlib.Path(tmp)
        size = []
        if args.layers is not None:
            size += ["--layers", str(args.layers)]
        if args.width is not None:
            size += ["--width", str(args.width)]
        run([sys.executable, ROOT / "examples/onnx/make_gpt.py", "--out", work, "--quiet",
             *size])
        # Next-character windows of 16 over 64 symbols: the default GPT's
        # context and vocabulary, which --layers and --width leave alone.
        write_gpl_characters(str(work / "gpl3"))
        bench_model(args, "GPT (%s)" % (" ".join(size) or "make_gpt.py defaults"),
                    work / "gpt.onnx", work / "gpl3", 16, args.steps, work)
        if args.quick:
            return 0

        run([sys.executable, ROOT / "examples/onnx/make_mlp.py", "--out", work, "--quiet"])
        run([sys.executable, ROOT / "examples/onnx/prepare_digits.py", "--out",
             work / "digits"])
        bench_model(args, "MLP on digits", work / "mlp.onnx", work / "digits" / "train", 64,
                    10 * args.steps, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
