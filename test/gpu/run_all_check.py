#!/usr/bin/env python3
"""test/gpu/run_all.sh's two halves on a machine that may have no GPU.

Prepares the memory and bench stages for one small row (the Llama-family
fixture at batch 8: no PyTorch needed to make it), checks the bundle the
node gets (the CUDA step packed, the plan's memory.json, the initial
values thinned, prepared.json naming the stages), then runs the node's
half on it within a short budget. With a GPU the memory row must measure
something; without one, each stage is recorded as failed with the missing
device's message, and the results file must still be whole: results.json
with every stage and results.md with its sections. Last, `check` must
name what a bundle lacks.

Usage: run_all_check.py --ztc ZTC --ztc-train ZTC_TRAIN
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "training"))
from checks import check, summary  # noqa: E402

SCRIPT = os.path.join(HERE, "run_all.sh")
MODEL = "llama:8"
TAG = "llama-b8-fp32"
NO_DEVICE = re.compile(r"no usable CUDA device|sees no CUDA device")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train", required=True)
    args = parser.parse_args()
    env = dict(os.environ, PYTHON=sys.executable)
    with tempfile.TemporaryDirectory(prefix="ztc-run-all-") as tmp:
        bundle = os.path.join(tmp, "gpu")
        prepared = subprocess.run([SCRIPT, "prepare", bundle, "--ztc", args.ztc, "--ztc-train",
                                   args.ztc_train, "--only", "memory,bench", "--models", MODEL],
                                  capture_output=True, text=True, env=env)
        check(prepared.returncode == 0, "run_all.sh prepare --only memory,bench --models %s: "
              "exit %d%s" % (MODEL, prepared.returncode, "" if prepared.returncode == 0
                             else ": " + prepared.stderr.strip()[-1500:]))
        if prepared.returncode != 0:
            return summary()
        with open(os.path.join(bundle, "prepared.json")) as f:
            stages = json.load(f)["stages"]
        check(stages == ["device", "memory", "bench"], "prepared.json names the stages %s"
              % stages)
        art = os.path.join(bundle, "bench", "art", TAG + ".ztc")
        with open(os.path.join(art, "memory.json")) as f:
            planned = json.load(f)["total_bytes"]
        check(planned > 0 and os.path.exists(os.path.join(art, "step.so.xz")) and
              not os.path.exists(os.path.join(art, "step.so")) and
              not os.path.exists(os.path.join(art, "init.safetensors")),
              "%s: the step packed, the plan (%d bytes), the initial values thinned"
              % (TAG, planned))
        check(not os.path.exists(os.path.join(bundle, "check")),
              "no correctness bundle where its stage is not prepared")

        ran = subprocess.run([SCRIPT, "run", bundle, "--budget", "150"], capture_output=True,
                             text=True, env=env, timeout=300)
        check(ran.returncode == 0, "run_all.sh run: exit %d (stages that fail are recorded)%s"
              % (ran.returncode, "" if ran.returncode == 0 else ": " + ran.stderr[-800:]))
        results = os.path.join(bundle, "results.json")
        if not os.path.exists(results):
            check(False, "run_all.sh run wrote results.json")
            return summary()
        with open(results) as f:
            results = json.load(f)
        ran_stages = {stage["stage"]: stage["status"] for stage in results["stages"]}
        check(list(ran_stages) == ["device", "memory", "bench"],
              "results.json records the prepared stages: %s" % ran_stages)
        rows = (results.get("memory") or {}).get("rows", [])
        row = rows[0] if rows else {}
        check(row.get("planned", {}).get("total_bytes") == planned,
              "the memory row's plan is the artifact's total_bytes")
        if ran_stages.get("device") == "ok":
            check("ratio" in row and row["measured"]["measured_bytes"] > 0,
                  "a GPU is here: the memory row measured %s against the plan"
                  % row.get("ratio"))
        else:
            check(ran_stages["memory"] == "failed" and row.get("flagged") and
                  NO_DEVICE.search(row.get("error", "")),
                  "no GPU: the memory stage failed with the missing device's message (%s)"
                  % row.get("error", "no row")[:200])
            bench_rows = (results.get("bench") or {}).get("rows", [])
            check(bench_rows and NO_DEVICE.search(bench_rows[0]["ztc"].get("error", "")),
                  "no GPU: the bench row records ztc's error")
        with open(os.path.join(bundle, "results.md")) as f:
            text = f.read()
        sections = ["## Stages", "## Memory per rank", "## Speed", "- device:", "- date:"]
        check(all(section in text for section in sections) and TAG in text,
              "results.md has the device, the stages, the memory and speed sections")

        os.unlink(os.path.join(art, "memory.json"))
        incomplete = subprocess.run([SCRIPT, "check", bundle], capture_output=True, text=True,
                                    env=env)
        check(incomplete.returncode == 1 and "memory.json" in incomplete.stderr,
              "run_all.sh check names what a bundle lacks: %s"
              % incomplete.stderr.strip().splitlines()[0][:200])
    return summary()


if __name__ == "__main__":
    sys.exit(main())
