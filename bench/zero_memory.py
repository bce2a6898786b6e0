#!/usr/bin/env python3
"""Per-rank model-state bytes under ZeRO, planned, against the ZeRO paper.

For GPT-2 124M (examples/onnx/make_gpt.py --gpt2-small: vocabulary 50257,
width 768, 12 blocks; batch 1, its context cut to 128 by default) with
mixed-precision AdamW (--precision bf16), `ztc inspect --json` plans the
step for ZeRO stages 0-3 and world sizes 1, 2, 4, 8 and 64; nothing runs.
Each row prints the bytes each rank holds for the model's state, as
`ztc inspect` counts them (parameters, the half working copies, gradients
at their peak, optimizer state), next to the paper's figure for
mixed-precision Adam (Rajbhandari et al., 2020, Figure 1; K = 12):

    stage 0  16 Psi          stage 2  2 Psi + 14 Psi / N
    stage 1  4 Psi + 12 Psi / N      stage 3  16 Psi / N

with Psi the parameter count, and their ratio. Two tables: ztc's default
mixed precision (PyTorch autocast's: parameters are cast to half where a
half op reads them), and --half-weights (DeepSpeed's and FSDP's: every
parameter is read as its half copy), which the paper counts. Under the
default, parameters the model also reads in f32 (LayerNorm weights and
biases, the position embedding, and the token embedding GPT-2 ties to its
output layer) keep f32 gradients and whole f32 masters, as their f32 reads
need. At stage 3 each rank keeps a half block of every parameter whose
half copy the step gathers, beside the f32 master's block (2 + 4 bytes /
N, as the paper counts), and gathers the copy from it for each use; the
gathered buckets live in the arena, not in these figures.

    .venv/bin/python bench/zero_memory.py [--build build] [--small]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAPER = {
    0: lambda n: 16.0,
    1: lambda n: 4.0 + 12.0 / n,
    2: lambda n: 2.0 + 14.0 / n,
    3: lambda n: 16.0 / n,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--small", action="store_true",
                        help="the example GPT instead of GPT-2 124M (a quick check)")
    parser.add_argument("--context", type=int, default=128)
    args = parser.parse_args()
    ztc = os.path.join(args.build, "bin", "ztc")
    with tempfile.TemporaryDirectory(prefix="ztc-zero-memory-") as tmp:
        flags = ["--name", "gpt"]
        if not args.small:
            flags += ["--gpt2-small", "--context", str(args.context)]
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "onnx", "make_gpt.py"),
                        "--out", tmp, "--quiet", *flags], check=True)
        model = os.path.join(tmp, "gpt.onnx")
        for policy in ([], ["--half-weights"]):
            print("model-state bytes per rank, bf16 AdamW%s, planned by ztc inspect"
                  % "".join(" " + flag for flag in policy))
            psi = table(ztc, model, policy)
            if psi is None:
                return 1
            print()
        print("Psi = %d parameters" % psi)
    return 0


def table(ztc, model, policy):
    """Prints one table; returns the parameter count, or None on failure."""
    print("%-6s %4s %14s %9s %9s %7s   %s" % ("stage", "N", "bytes/rank", "B/param",
                                             "paper", "ratio", "terms (B/param)"))
    psi = None
    for stage in range(4):
        for n in (1, 2, 4, 8, 64):
            if stage == 0 and n > 1:
                continue
            command = [ztc, "inspect", model, "--batch-size", "1", "--loss",
                       "cross_entropy", "--precision", "bf16", "--optimizer", "adamw",
                       "--world-size", str(n), "--zero", str(stage), "--json", *policy]
            if stage == 3:
                command += ["--param-persistence-threshold", "0"]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                print("stage %d, N %d: ztc inspect failed: %s"
                      % (stage, n, result.stderr.strip()[:300]))
                return None
            report = json.loads(result.stdout)
            psi = report["param_count"]
            terms = [report["bindings"]["params"], report["working_copy_bytes"],
                     report["gradient_bytes"], report["bindings"]["optimizer_state"]]
            total = sum(terms)
            per = total / psi
            paper = PAPER[stage](n)
            print("%-6d %4d %14d %9.2f %9.2f %7.3f   master %.2f + copy %.2f + gradient "
                  "%.2f + states %.2f"
                  % (stage, n, total, per, paper, per / paper,
                     *(t / psi for t in terms)))
    return psi


if __name__ == "__main__":
    sys.exit(main())
