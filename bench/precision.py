#!/usr/bin/env python3
"""Mixed precision on the CPU backend: step time and planned memory, side by side.

For the 4-layer GPT of bench/recompute.py (width 256, 4 heads, context 128,
vocab 1024, batch 8, AdamW), the step is compiled with each
`--precision` and trained on the CPU backend. One table: precision,
planned memory per rank, the arena, saved activation bytes, bytes per
parameter (parameter, gradient and optimizer state), and the step time
relative to fp32 (the difference between runs of 2 and 2 + --steps steps,
best of --repeat rounds in which the precisions take turns). A precision
ztc refuses gets a row with its message.

    .venv/bin/python bench/precision.py [--build build] [--steps 10] [--repeat 3]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from recompute import make_gpt, parse_args, run_steps  # noqa: E402

PRECISIONS = ("fp32", "bf16", "fp16")


def main():
    args = parse_args(__doc__)
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="ztc-bench-precision-") as tmp:
        work = pathlib.Path(tmp)
        gpt, text = make_gpt(work, rng)
        arts, reports, refused = {}, {}, {}
        for precision in PRECISIONS:
            art = work / ("gpt-%s.ztc" % precision)
            done = subprocess.run([ztc, "compile", str(gpt), "-o", str(art),
                                   "--batch-size", "8", "--loss", "cross_entropy",
                                   "--optimizer", "adamw", "--precision", precision],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                refused[precision] = done.stderr.strip().splitlines()[-1]
                continue
            arts[precision] = art
            reports[precision] = json.loads((art / "memory.json").read_text())
        best = {precision: float("inf") for precision in arts}
        for _ in range(args.repeat):
            for precision, art in arts.items():
                short = run_steps(ztc, art, text, 2)
                long = run_steps(ztc, art, text, 2 + args.steps)
                best[precision] = min(best[precision], (long - short) / args.steps)
        manifest = json.loads((arts["fp32"] / "manifest.json").read_text())
        count = sum(int(np.prod(b["shape"])) for b in manifest["bindings"]
                    if b["role"] == "param")
        print("4-layer GPT (batch 8, AdamW), %d parameters" % count)
        print("%-9s %12s %12s %14s %10s %10s %8s" % ("precision", "memory", "arena",
                                                   "saved activ.", "bytes/par", "ms/step",
                                                   "vs fp32"))
        for precision in PRECISIONS:
            if precision in refused:
                print("%-9s refused: %s" % (precision, refused[precision]))
                continue
            r = reports[precision]
            # As the ZeRO paper counts: parameter, gradient, optimizer state.
            persistent = 2 * r["bindings"]["params"] + r["bindings"]["optimizer_state"]
            print("%-9s %9.2f MB %9.2f MB %11.2f MB %10.1f %10.1f %7.2fx" % (
                precision, r["total_bytes"] / 1e6, r["arena_bytes"] / 1e6,
                r["recompute"]["saved_activation_bytes"] / 1e6, persistent / count,
                1e3 * best[precision], best[precision] / best["fp32"]))


if __name__ == "__main__":
    sys.exit(main())
