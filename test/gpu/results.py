#!/usr/bin/env python3
"""run_all.sh's helpers: the device's facts, the bundle's completeness and
the results file.

  results.py prepared DIR --stages S --repository REPO
                               DIR/prepared.json: the stages prepared for,
                               the commit, the date (written last)
  results.py stages DIR        those stages, comma-separated
  results.py device DIR        the GPU (nvidia-smi), driver, CUDA version,
                               date, PyTorch: DIR/logs/device.json
  results.py check DIR         DIR holds what `run_all.sh run` needs: one
                               line per missing thing, exit 1 if any
  results.py summarize DIR [--budget S]
                               the stages' outputs (DIR/logs) as one file of
                               every figure, DIR/results.json, and its
                               summary, DIR/results.md

Needs Python 3 alone (numpy neither): it runs on the node before anything
else, and where PyTorch is missing it says so.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys

MIB = 2**20


def read_json(path):
    """The file's JSON, or None where it is missing or cut short."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def output(*command):
    """The command's stdout, or None where it cannot run."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


# ------------------------------------------------------------------ device


def device(directory):
    facts = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "host": platform.node(), "python": platform.python_version()}
    query = output("nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                   "--format=csv,noheader")
    if query is None:
        facts["error"] = "nvidia-smi is missing or failed: no GPU facts"
    else:
        facts["gpus"] = [dict(zip(("name", "driver", "memory", "compute_capability"),
                                  (part.strip() for part in line.split(","))))
                         for line in query.strip().splitlines()]
        header = output("nvidia-smi") or ""
        match = re.search(r"CUDA Version:\s*([0-9.]+)", header)
        facts["cuda_driver_api"] = match.group(1) if match else None
    nvcc = output("nvcc", "--version") or output("/usr/local/cuda/bin/nvcc", "--version")
    match = re.search(r"release ([0-9.]+)", nvcc or "")
    facts["cuda_toolkit"] = match.group(1) if match else None
    facts["compute_sanitizer"] = bool(shutil.which("compute-sanitizer") or os.path.exists(
        "/usr/local/cuda/bin/compute-sanitizer"))
    torch = output(sys.executable, "-c", "import torch; print(torch.__version__); "
                   "print(torch.version.cuda); print(torch.cuda.is_available())")
    facts["torch"] = (dict(zip(("version", "cuda", "cuda_available"), torch.split()))
                      if torch else "not importable")
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    with open(os.path.join(directory, "logs", "device.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print(json.dumps(facts, indent=1))
    return 1 if "error" in facts else 0


# ------------------------------------------------------------------- check


def missing_parts(directory):
    """What `run` needs that DIR lacks, one phrase each."""
    missing = []

    def need(path, what):
        if not os.path.exists(os.path.join(directory, path)):
            missing.append("%s (%s)" % (path, what))
            return False
        return True

    if not need("prepared.json", "written last by run_all.sh prepare"):
        return missing
    stages = prepared_stages(directory)
    bundles = [bundle for bundle, users in (("check", {"check"}), ("bench", {"memory", "bench"}))
               if users & set(stages)]
    for bundle in bundles:
        need(bundle + "/bin/ztc-train", "the runtime-only trainer")
    if "check" in bundles and need("check/cases.json", "gpu_check.py prepare's case list"):
        for case in read_json(os.path.join(directory, "check", "cases.json")) or []:
            art = "check/art/%s-cuda.ztc" % case["name"]
            need(art + "/manifest.json", "case %s's CUDA artifact" % case["name"])
            if not any(os.path.exists(os.path.join(directory, art, step))
                       for step in ("step.so", "step.so.xz")):
                missing.append("%s/step.so.xz (case %s's step)" % (art, case["name"]))
            need("check/ref/%s/metrics.jsonl" % case["name"],
                 "case %s's CPU losses" % case["name"])
    if "bench" in bundles and need("bench/jobs.json", "gpu_train.py prepare's model list"):
        jobs = (read_json(os.path.join(directory, "bench", "jobs.json")) or {}).get("jobs", [])
        for job in jobs:
            art = "bench/art/%s.ztc" % job["tag"]
            need(art + "/manifest.json", "model %s's CUDA artifact" % job["tag"])
            need(art + "/init.plan.json", "model %s's initial values" % job["tag"])
            if need(art + "/memory.json", "model %s's memory plan" % job["tag"]):
                plan = read_json(os.path.join(directory, art, "memory.json")) or {}
                if "total_bytes" not in plan:
                    missing.append("%s/memory.json's total_bytes" % art)
            if not any(os.path.exists(os.path.join(directory, art, step))
                       for step in ("step.so", "step.so.xz")):
                missing.append("%s/step.so.xz (model %s's step)" % (art, job["tag"]))
            need("bench/data/%s/labels.npy" % job["tag"], "model %s's batch" % job["tag"])
    return missing


def check(directory):
    missing = missing_parts(directory)
    for part in missing:
        print("run_all.sh: error: %s lacks %s" % (directory, part), file=sys.stderr)
    if missing:
        print("run_all.sh: error: %s is not a complete bundle: make it with "
              "test/gpu/run_all.sh prepare %s" % (directory, directory), file=sys.stderr)
        return 1
    cases = read_json(os.path.join(directory, "check", "cases.json")) or []
    jobs = (read_json(os.path.join(directory, "bench", "jobs.json")) or {}).get("jobs", [])
    print("%s: complete for the stages %s: %d correctness cases (%s), %d bench rows (%s)" % (
        directory, ",".join(prepared_stages(directory)), len(cases),
        ", ".join(case["name"] for case in cases) or "-", len(jobs),
        ", ".join(job["tag"] for job in jobs) or "-"))
    return 0


def prepared_stages(directory):
    return (read_json(os.path.join(directory, "prepared.json")) or {}).get("stages", [])


def prepared(directory, stages, repository):
    commit = output("git", "-C", repository, "describe", "--always", "--dirty")
    with open(os.path.join(directory, "prepared.json"), "w") as f:
        json.dump({"stages": stages.split(","), "commit": commit.strip() if commit else None,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                       timespec="seconds")}, f, indent=1)
    return 0


# --------------------------------------------------------------- summarize


def stages(logs):
    rows = []
    try:
        with open(os.path.join(logs, "stages.tsv")) as f:
            for line in f:
                name, status, code, seconds, limit = line.rstrip("\n").split("\t")
                rows.append({"stage": name, "status": status,
                             "exit": int(code) if code else None,
                             "seconds": int(seconds), "limit": int(limit)})
    except OSError:
        pass
    return rows


def correctness(logs):
    """gpu_check.py's check lines and its summary line, from its log."""
    try:
        with open(os.path.join(logs, "check.log")) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    checks = [{"ok": line.startswith("ok"), "message": line[5:]} for line in lines
              if line.startswith(("ok  ", "FAIL "))]
    tally = [line for line in lines if re.match(r"\d+ passed, \d+ failed$", line)]
    # Its table of cases: the header and a row per case, up to the tally.
    first = next((i for i, line in enumerate(lines) if line.startswith("case ")), len(lines))
    table = [line for line in lines[first:] if line.strip() and line not in tally
             and not line.startswith("failed: ")]
    return {"checks": checks, "passed": sum(c["ok"] for c in checks),
            "failed": sum(not c["ok"] for c in checks), "finished": bool(tally),
            "table": table}


def mib(value):
    return "-" if value is None else "%.1f" % (value / MIB)


def markdown(results):
    out = []
    facts = results.get("device") or {}
    gpus = facts.get("gpus") or [{}]
    prepared = results.get("prepared") or {}
    out.append("# ztc on a GPU: results of test/gpu/run_all.sh\n")
    out.append("- device: %s (compute capability %s, %s)" % (
        gpus[0].get("name", "unknown"), gpus[0].get("compute_capability", "?"),
        gpus[0].get("memory", "?")))
    out.append("- driver %s, CUDA %s (driver API, nvidia-smi); toolkit %s" % (
        gpus[0].get("driver", "?"), facts.get("cuda_driver_api") or "?",
        facts.get("cuda_toolkit") or "none on the node"))
    torch = facts.get("torch")
    out.append("- PyTorch: %s" % ("%s (CUDA %s)" % (torch["version"], torch["cuda"])
                                  if isinstance(torch, dict) else torch or "?"))
    out.append("- date: %s; host %s" % (facts.get("date", results["date"]), facts.get("host")))
    out.append("- bundle prepared %s from ztc %s" % (prepared.get("date", "?"),
                                                    prepared.get("commit", "?")))
    out.append("- budget %s s, used %s s" % (results["budget"], sum(
        stage["seconds"] for stage in results["stages"])))
    if "error" in facts:
        out.append("- **%s**" % facts["error"])

    out.append("\n## Stages\n")
    out.append("| stage | status | exit | seconds | limit |")
    out.append("|---|---|---|---|---|")
    for stage in results["stages"]:
        out.append("| %s | %s | %s | %d | %d |" % (stage["stage"], stage["status"],
                                                 "-" if stage["exit"] is None else stage["exit"],
                                                 stage["seconds"], stage["limit"]))

    check = results.get("correctness")
    out.append("\n## Correctness (gpu_check.py: the CUDA step against the CPU's)\n")
    if check is None:
        out.append("No log: the stage did not run.")
    else:
        out.append("%d passed, %d failed%s." % (check["passed"], check["failed"], "" if check[
            "finished"] else " (it did not finish: the later checks are missing)"))
        for item in check["checks"]:
            if not item["ok"]:
                out.append("- FAIL %s" % item["message"][:400])
        if len(check["table"]) > 1:
            out.append("\n```\n%s\n```" % "\n".join(check["table"]))

    memory = results.get("memory")
    out.append("\n## Memory per rank: planned against measured\n")
    if memory is None:
        out.append("No figures: the stage did not run or wrote nothing.")
    else:
        out.append("Planned: the artifact's memory.json total_bytes (reserved and scratch: "
                   "its parts where the plan names them). Measured: `ztc-train "
                   "--device-memory-report` over 2 steps, peak used less the CUDA context's. "
                   "MiB; flagged when the ratio is off 1 by more than %g.\n"
                   % memory["tolerance"])
        out.append("| model | planned | reserved | scratch | context | peak | measured | "
                   "measured/planned | |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for row in memory["rows"]:
            planned, measured = row["planned"], row.get("measured", {})
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                row["tag"], mib(planned.get("total_bytes")), mib(planned.get("reserved_bytes")),
                mib(planned.get("scratch_bytes")), mib(measured.get("context_used_bytes")),
                mib(measured.get("peak_used_bytes")), mib(measured.get("measured_bytes")),
                "%.3f" % row["ratio"] if "ratio" in row else "-",
                ("**FLAGGED**" if row["flagged"] else "ok") +
                (": " + row["error"].replace("\n", " ")[:200] if "error" in row else "")))

    bench = results.get("bench")
    out.append("\n## Speed (gpu_train.py: ms per step; ratio below 1: ztc is faster)\n")
    if bench is None:
        out.append("No figures: the stage did not run or wrote nothing.")
    else:
        tf32 = bench.get("tf32", {})
        out.append("TF32: %s; PyTorch: %s.\n" % (tf32.get("ztc", "?"), ", ".join(
            "%s = %s" % item for item in tf32.get("torch", {}).items()) or "?"))
        out.append("| model | ztc | eager | compile | ztc/eager | ztc/compile | losses | "
                   "MiB ztc / eager / compile |")
        out.append("|---|---|---|---|---|---|---|---|")
        for row in bench["rows"]:
            cells, ratios, agree, memories = [], [], [], []
            for peer in ("ztc", "eager", "compile"):
                result = row.get(peer, {})
                cells.append("%.2f" % result["ms"] if "ms" in result else
                             "failed" if "error" in result else "-")
                memories.append(mib(result.get("memory")))
                if peer != "ztc":
                    ratios.append("%.2f" % result["ztc_over_peer"]
                                  if "ztc_over_peer" in result else "-")
                    if "losses_agree" in result:
                        agree.append("ok" if result["losses_agree"] else
                                     "**MISMATCH (%s)**" % peer)
            out.append("| %s | %s | %s | %s | %s |" % (
                row["tag"], " | ".join(cells), " | ".join(ratios),
                ", ".join(sorted(set(agree))) or "-", " / ".join(memories)))
        errors = ["%s %s: %s" % (row["tag"], peer, row[peer]["error"].replace("\n", " ")[:300])
                  for row in bench["rows"] for peer in ("ztc", "eager", "compile")
                  if "error" in row.get(peer, {})]
        for error in errors:
            out.append("- failed: %s" % error)
    return "\n".join(out) + "\n"


def summarize(directory, budget):
    logs = os.path.join(directory, "logs")
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "budget": budget, "stages": stages(logs),
        "prepared": read_json(os.path.join(directory, "prepared.json")),
        "device": read_json(os.path.join(logs, "device.json")),
        "correctness": correctness(logs),
        "memory": read_json(os.path.join(logs, "memory.json")),
        "bench": read_json(os.path.join(logs, "bench.json"))}
    with open(os.path.join(directory, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(directory, "results.md"), "w") as f:
        f.write(markdown(results))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode in ("prepared", "stages", "device", "check", "summarize"):
        p = sub.add_parser(mode)
        p.add_argument("dir")
        if mode == "summarize":
            p.add_argument("--budget", type=int, required=True)
        if mode == "prepared":
            p.add_argument("--stages", required=True)
            p.add_argument("--repository", required=True)
    args = parser.parse_args()
    if args.mode == "prepared":
        return prepared(args.dir, args.stages, args.repository)
    if args.mode == "stages":
        print(",".join(prepared_stages(args.dir)))
        return 0
    if args.mode == "device":
        return device(args.dir)
    if args.mode == "check":
        return check(args.dir)
    return summarize(args.dir, args.budget)


if __name__ == "__main__":
    sys.exit(main())
