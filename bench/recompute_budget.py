#!/usr/bin/env python3
"""Budget mode (--recompute budget=BYTES) on a GPT of GPT-2-small shape.

The 12-layer GPT of GPT-2-small shape (width 768, 12 heads, context 1024,
vocab 50257) at batch 8 is planned, never run: first every fixed policy
(`ztc inspect --recompute all --json`), then budget mode at --budgets
budgets spread evenly between the smallest fixed policy's peak and the
peak without recomputation. One table: budget, planned peak, recompute
FLOPs (share of the step), how the plan was chosen, and the seconds the
whole planning took. Then the checks the issue asks for:
  - the planned peak never exceeds the budget;
  - the recompute cost is never higher than that of a fixed policy that
    fits the same budget;
  - a larger budget never costs more recompute;
  - each planning takes at most --max-seconds (30).
Exit status 1 when a check fails.

    .venv/bin/python bench/recompute_budget.py [--build build] [--budgets 6]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLAGS = ("--batch-size", "8", "--loss", "cross_entropy", "--optimizer", "adamw")


def gib(n):
    return "%.2f GiB" % (n / 2**30)


def inspect(ztc, model, policy):
    start = time.perf_counter()
    out = subprocess.run([ztc, "inspect", model, *FLAGS, "--recompute", policy, "--json"],
                         check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--budgets", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    args = parser.parse_args()
    ztc = os.path.join(args.build, "bin", "ztc")
    failures = []

    def check(ok, what):
        print("%s %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="ztc-budget-") as tmp:
        subprocess.run([sys.executable, str(ROOT / "examples" / "onnx" / "make_gpt.py"),
                        "--gpt2-small", "--out", tmp, "--quiet"], check=True)
        model = os.path.join(tmp, "gpt2_small.onnx")
        fixed, _ = inspect(ztc, model, "all")
        fixed = {r["policy"]: r for r in fixed}
        print("fixed policies (planned bytes per rank, recompute FLOPs):")
        for name, r in fixed.items():
            rec = r["recompute"]
            print("  %-10s %12s  %5.1f%%" % (name, gib(r["total_bytes"]),
                                             100.0 * rec["recompute_flops"] / rec["step_flops"]))
        low = min(r["total_bytes"] for r in fixed.values())
        high = fixed["none"]["total_bytes"]
        budgets = [low + (high - low) * i // (args.budgets - 1) for i in range(args.budgets)]

        print("\n%-12s %12s %9s %8s  %s" % ("budget", "planned", "recompute", "seconds",
                                           "plan"))
        rows = []
        for budget in budgets:
            report, seconds = inspect(ztc, model, "budget=%d" % budget)
            rec = report["recompute"]
            share = 100.0 * rec["recompute_flops"] / rec["step_flops"]
            rows.append((budget, report["total_bytes"], rec["recompute_flops"], seconds))
            print("%-12s %12s %8.2f%% %8.1f  %s" % (gib(budget), gib(report["total_bytes"]),
                                                   share, seconds, rec["budget_plan"]))
        print()
        for budget, planned, flops, seconds in rows:
            fitting = {name: r["recompute"]["recompute_flops"] for name, r in fixed.items()
                       if r["total_bytes"] <= budget}
            check(planned <= budget, "budget %s: planned %s fits" % (gib(budget), gib(planned)))
            check(all(flops <= other for other in fitting.values()),
                  "budget %s: %.3g recompute FLOPs, no more than the fixed policies that "
                  "fit (%s)" % (gib(budget), flops,
                               ", ".join("%s %.3g" % item for item in fitting.items())))
            check(seconds <= args.max_seconds,
                  "budget %s: planned in %.1f s (at most %.0f)" % (gib(budget), seconds,
                                                                  args.max_seconds))
        costs = [flops for _, _, flops, _ in rows]
        check(all(a >= b for a, b in zip(costs, costs[1:])),
              "a larger budget never costs more recompute: " +
              ", ".join("%.3g" % c for c in costs))
    print("%d checks failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
