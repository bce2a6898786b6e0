#!/usr/bin/env python3
"""ztc's CUDA training step against PyTorch on the same GPU, side by side.

A GPU node has no MLIR, so, as test/gpu/gpu_check.py, this comes in two
halves:

  prepare BUNDLE --ztc-train ZTC_TRAIN [--build build] [--models a,b]
      (where ztc is built) Exports bench/train_peers.py's models (cached
      where that script caches them), compiles each for CUDA with the AdamW
      of train_peers.py (`ztc compile --target cuda`, which builds step.so
      with nvcc), writes one batch of random data, and copies ZTC_TRAIN, a
      ztc-train built from runtime/ alone (`cmake -S runtime`), with the
      libraries a CUDA image may lack. Initial values over 64 KiB do not
      travel: the bundle keeps each one's shape, mean and standard
      deviation, and the run half draws it again, so GPT-2-small's half a
      gigabyte of weights stays home.
  run BUNDLE [--steps K] [--repeat R] [--no-compile] [--json FILE]
      (on the GPU node) Draws those values (the same for ztc and PyTorch),
      then per model: ztc-train, PyTorch eager, and PyTorch with
      torch.compile (its default mode), all from the same weights, on the
      same batch, with the same loss (the mean cross entropy) and AdamW
      (torch.optim.AdamW's default implementation). TF32 is as both sides'
      defaults have it, which agree: fp32 matrix products in fp32 (ztc's
      --allow-tf32 off, torch.backends.cuda.matmul.allow_tf32 False),
      fp32 convolutions on TF32 (ztc's --conv-tf32 on,
      torch.backends.cudnn.allow_tf32 True); the output prints PyTorch's as
      it reports them, and the CNN's fp32 losses are compared at TF32's
      tolerance (5e-3). bf16 models run PyTorch under autocast,
      whose policy ztc's --precision bf16 follows. First the losses: each
      peer's first two must agree with ztc's (1e-4 and 1e-3 relative in
      fp32, 1e-2 in bf16) or its row says MISMATCH. Then the time per step:
      ztc's from the trainer's own clock over K steps between two loss
      reads (--log-every K), the best of R intervals after a warm-up one;
      the peers' over K steps closed by a synchronize, the best of R rounds
      after two warm-up steps. Each row gives ms per step, ztc over the peer
      (below 1: ztc is faster), TFLOP/s (GPTs: 6N + 6*L*C*T per token; the
      CNN: three times its forward's), and device memory (ztc: the planned
      arena plus its bindings, without the scratch its CUDA kernels
      allocate while a step runs, such as a convolution's columns and
      cuBLAS's workspace; PyTorch: torch.cuda.max_memory_allocated).
      --json FILE: every figure of every row, as JSON.
  memory BUNDLE [--json FILE] [--tolerance 0.02]
      (on the GPU node; no PyTorch) The memory check: per model, the plan
      (the artifact's memory.json: total_bytes, and reserved_bytes and
      scratch_bytes where it has them) against what 2 steps of ztc-train
      hold on the device (`ztc-train --device-memory-report`: the most in use,
      sampled every 0.1 ms, less what the CUDA context held before the
      trainer allocated). Prints measured over planned per row and flags
      those off by more than the tolerance; exit 1 when one is, or when
      the trainer failed.

Models (name[:batch][:fp32|bf16][:nhwc]): gpt2-small:8, gpt2-small:8:bf16,
gpt-4layer:64, resnet:256, llama:64, gpt-4layer:8, resnet:16 and
resnet:256:fp32:nhwc by default: the large ones first, the small ones,
where launches dominate, after them, and last the ResNet again with
--conv-layout nhwc (channels-last convolutions on cuDNN; its peers stay
PyTorch's NCHW default): the two resnet:256 rows decide CUDA's default
layout.
llama is train_peers.py's: test/models/make_modern.py's Llama-family
fixture (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU),
whose PyTorch peer is train_peers.llama_module.
"""

import argparse
import base64
import json
import pathlib
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test" / "gpu"))
sys.path.insert(0, str(ROOT / "test" / "training"))

DEFAULT_MODELS = ("gpt2-small:8,gpt2-small:8:bf16,gpt-4layer:64,resnet:256,llama:64,"
                  "gpt-4layer:8,resnet:16,resnet:256:fp32:nhwc")
# The memory check: measured over planned may differ from 1 by this much.
MEMORY_TOLERANCE = 0.02
INLINE_BYTES = 64 * 1024


def progress(message):
    print("[gpu_train] " + message, file=sys.stderr, flush=True)


def parse_model(text):
    """name[:batch][:fp32|bf16][:nhwc]: the model, its batch, its precision
    and its convolutions' layout (ztc's --conv-layout; CUDA's default nchw)."""
    parts = text.split(":")
    name = parts[0]
    batch = int(parts[1]) if len(parts) > 1 and parts[1] else None
    precision, layout = "fp32", "nchw"
    for part in parts[2:]:
        if part in ("fp32", "bf16"):
            precision = part
        elif part in ("nchw", "nhwc"):
            layout = part
        else:
            raise SystemExit("gpu_train.py: --models: '%s' in '%s' is neither a precision "
                             "(fp32, bf16) nor a layout (nchw, nhwc)" % (part, text))
    return name, batch, precision, layout


# ----------------------------------------------------------------- prepare


def thin_init(art):
    """Replaces ART/init.safetensors by init.plan.json: small tensors inline,
    large ones as shape, mean and standard deviation."""
    from checks import read_safetensors_raw

    path = art / "init.safetensors"
    header, data = read_safetensors_raw(path)
    plan = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        entry = {"name": name, "dtype": info["dtype"], "shape": info["shape"]}
        if end - begin > INLINE_BYTES and info["dtype"] == "F32":
            values = np.frombuffer(data[begin:end], dtype=np.float32)
            entry.update(mean=float(values.mean()), std=float(values.std()))
        else:
            entry["data"] = base64.b64encode(data[begin:end]).decode()
        plan.append(entry)
    (art / "init.plan.json").write_text(json.dumps(plan))
    path.unlink()


def prepare(args):
    import gpu_check
    import train_peers

    bundle = pathlib.Path(args.bundle).resolve()
    if bundle.exists():
        shutil.rmtree(bundle)
    (bundle / "art").mkdir(parents=True)
    ztc = pathlib.Path(args.build) / "bin" / "ztc"
    jobs = []
    for text in args.models.split(","):
        name, batch, precision, layout = parse_model(text)
        if name not in train_peers.MODELS:
            raise SystemExit("gpu_train.py: unknown model '%s' (one of %s)"
                             % (name, ", ".join(train_peers.MODELS)))
        spec = dict(train_peers.MODELS[name])
        spec["batch"] = batch or spec["batch"]
        tag = "%s-b%d-%s%s" % (name, spec["batch"], precision,
                               "-nhwc" if layout == "nhwc" else "")
        model_path = train_peers.ensure_model(name, spec)
        if spec["kind"] == "resnet" and spec["batch"] != train_peers.MODELS[name]["batch"]:
            # The ResNet's export has a static batch: export it for this one.
            from recompute import resnet_onnx
            model_path = train_peers.CACHE / ("%s-b%d.onnx" % (name, spec["batch"]))
            resnet_onnx(model_path, spec["batch"])
        info = train_peers.inspect_model(model_path)
        art = bundle / "art" / (tag + ".ztc")
        progress("ztc compile %s (nvcc builds its step)" % tag)
        start = time.monotonic()
        subprocess.run([str(ztc), "compile", str(model_path), "-o", str(art), "--target", "cuda",
                        "--batch-size", str(spec["batch"]), "--loss", "cross_entropy",
                        "--optimizer", "adamw", "--lr", repr(args.lr),
                        "--betas", "%r,%r" % train_peers.BETAS, "--eps", repr(train_peers.EPS),
                        "--weight-decay", repr(args.weight_decay),
                        *(["--precision", "bf16"] if precision == "bf16" else []),
                        *(["--conv-layout", "nhwc"] if layout == "nhwc" else [])],
                       check=True)
        thin_init(art)
        gpu_check.pack_step(str(art))
        data = bundle / "data" / tag
        train_peers.write_data(spec, info, data)
        flops, formula, _ = train_peers.step_flops(spec, model_path, info["params"])
        jobs.append(dict(tag=tag, name=name, title=spec["title"], kind=spec["kind"],
                         gpt=spec.get("gpt"), llama=spec.get("llama"), batch=spec["batch"],
                         precision=precision,
                         input=info["input"], trainable=info["trainable"],
                         params=info["params"], flops=flops, formula=formula,
                         compile_seconds=round(time.monotonic() - start, 1)))
        progress("%s: %.0f s" % (tag, time.monotonic() - start))
    (bundle / "jobs.json").write_text(json.dumps(
        dict(jobs=jobs, lr=args.lr, weight_decay=args.weight_decay), indent=1))
    gpu_check.copy_runtime(bundle, [args.ztc_train])
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    progress("bundle %s: %.1f MiB" % (bundle, size / 2**20))


# --------------------------------------------------------------------- run


def draw_init(art, seed):
    """Writes ART/init.safetensors from init.plan.json (large tensors drawn
    from a normal distribution with their recorded mean and deviation) and
    returns its float32 tensors, {name: array}."""
    plan = json.loads((art / "init.plan.json").read_text())
    rng = np.random.default_rng(seed)
    arrays, header, blobs, offset = {}, {}, [], 0
    for entry in plan:
        if "data" in entry:
            blob = base64.b64decode(entry["data"])
            if entry["dtype"] == "F32":
                arrays[entry["name"]] = np.frombuffer(blob, dtype=np.float32).reshape(
                    entry["shape"])
        else:
            array = (rng.standard_normal(entry["shape"], dtype=np.float32) * np.float32(
                entry["std"]) + np.float32(entry["mean"])).astype(np.float32)
            blob = array.tobytes()
            arrays[entry["name"]] = array
        header[entry["name"]] = {"dtype": entry["dtype"], "shape": entry["shape"],
                                 "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(art / "init.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    return arrays


def ztc_run(train, art, data, job, steps, repeat, env):
    """{"losses", "ms", "memory"} or {"error"}: the first two losses of a
    --log-every 1 run; then the best of `repeat` intervals of `steps`."""
    work = art / "runs"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    first = subprocess.run([str(train), str(art), "--data", str(data), "--steps", "2",
                            "--log-every", "1", "--metrics", str(work / "first.jsonl")],
                           capture_output=True, text=True, env=env)
    if first.returncode != 0:
        return {"error": first.stderr.strip()[-600:]}
    losses = [json.loads(l)["loss"] for l in (work / "first.jsonl").read_text().splitlines()]
    timed = subprocess.run([str(train), str(art), "--data", str(data), "--steps",
                            str(steps * (repeat + 1)), "--log-every", str(steps), "--metrics",
                            str(work / "timed.jsonl")], capture_output=True, text=True, env=env)
    if timed.returncode != 0:
        return {"error": timed.stderr.strip()[-600:]}
    lines = [json.loads(l) for l in (work / "timed.jsonl").read_text().splitlines()]
    ms = min(1e3 * job["batch"] / line["samples_per_second"] for line in lines[1:])
    manifest = json.loads((art / "manifest.json").read_text())
    return {"losses": losses, "ms": ms, "memory": lines[-1]["arena_bytes"] + persistent_bytes(
        manifest), "log": timed.stderr}


def persistent_bytes(manifest):
    """The bytes of the bindings outside the arena: parameters, optimizer
    states, constants, the batch (hyperparameters are host scalars)."""
    sizes = {"float32": 4, "float64": 8, "int64": 8, "int32": 4, "bfloat16": 2, "float16": 2,
             "bool": 1}
    total = 0
    for binding in manifest["bindings"]:
        if binding["role"] != "hyper":
            total += int(np.prod(binding["shape"], dtype=np.int64)) * sizes[binding["dtype"]]
    return total


def torch_run(job, weights, data, steps, repeat, compiled, lr, weight_decay, device="cuda"):
    import torch
    import torch.nn.functional as F
    import train_peers

    tf32 = torch_tf32()
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    tensors = {name: torch.from_numpy(np.array(weights[name])).to(device)
               for name in job["trainable"]}
    params, forward = train_peers.torch_model(job, tensors, device)
    if compiled:
        forward = torch.compile(forward)
    optimizer = torch.optim.AdamW(params, lr=lr, betas=train_peers.BETAS, eps=train_peers.EPS,
                                  weight_decay=weight_decay)
    x = torch.from_numpy(np.load(data / (job["input"] + ".npy"))).to(device)
    labels = torch.from_numpy(np.load(data / "labels.npy")).to(device).reshape(-1)
    bf16 = job["precision"] == "bf16"

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            logits = forward(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    losses = [float(step()) for _ in range(2)]
    best = float("inf")
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        best = min(best, (time.perf_counter() - start) / steps)
    return {"losses": losses, "ms": 1e3 * best,
            "memory": torch.cuda.max_memory_allocated() if cuda else 0,
            "version": torch.__version__, "tf32": tf32}


def torch_tf32():
    """PyTorch's TF32 settings, left at its defaults (products off,
    convolutions on), which ztc's defaults match, as PyTorch reports them."""
    import torch

    return {"torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32}


ZTC_TF32 = ("ztc: --allow-tf32 off (fp32 products in fp32, CUBLAS_COMPUTE_32F), "
            "--conv-tf32 on (fp32 convolutions' products on TF32)")


def losses_agree(mine, theirs, precision, convolutions=False):
    """Whether a peer's first two losses agree with ztc's: bf16's
    tolerance, TF32's for fp32 convolutions (both sides' default), else
    fp32's."""
    first, second = ((1e-2, 1e-2) if precision == "bf16" else
                     (5e-3, 5e-3) if convolutions else (1e-4, 1e-3))
    return (len(mine) >= 2 and len(theirs) >= 2 and
            abs(mine[0] - theirs[0]) <= first * abs(theirs[0]) and
            abs(mine[1] - theirs[1]) <= second * abs(theirs[1]))


def open_bundle(path):
    """The bundle's folder, its jobs.json, the node's environment for it
    (gpu_check.node_environment) and its ztc-train."""
    import gpu_check

    bundle = pathlib.Path(path).resolve()
    spec = json.loads((bundle / "jobs.json").read_text())
    return bundle, spec, gpu_check.node_environment(str(bundle)), bundle / "bin" / "ztc-train"


def run(args):
    bundle, spec, env, train = open_bundle(args.bundle)
    rows = []
    tf32 = tf32_or_error(args.device)
    print("TF32: %s; PyTorch (set by this script): %s" % (ZTC_TF32, ", ".join(
        "%s = %s" % item for item in tf32.items())))
    for index, job in enumerate(spec["jobs"]):
        art = bundle / "art" / (job["tag"] + ".ztc")
        data = bundle / "data" / job["tag"]
        weights = draw_init(art, seed=index)
        steps = args.steps or (10 if job["name"] == "gpt2-small" else 20)
        progress("%s: ztc-train" % job["tag"])
        results = {"ztc": ztc_run(train, art, data, job, steps, args.repeat, env)}
        peers = ["eager"] + ([] if args.no_compile else ["compile"])
        for peer in peers:
            progress("%s: PyTorch %s" % (job["tag"], peer))
            try:
                results[peer] = torch_run(job, weights, data, steps, args.repeat,
                                          peer == "compile", spec["lr"], spec["weight_decay"],
                                          args.device)
            except Exception as error:  # a peer that fails gets a row with its error
                results[peer] = {"error": "%s: %s" % (type(error).__name__,
                                                      str(error).strip()[-400:])}
        rows.append((job, results))
        print_rows(job, results)
        if args.json:
            # After every row: a run stopped by a timeout keeps what it did.
            write_json(args.json, dict(bench_json(rows), tf32={"ztc": ZTC_TF32, "torch": tf32}))
    print_summary(rows)
    # Exit 1 when ztc failed on a row or a peer's losses disagree with it.
    return 1 if any("error" in row["ztc"] or any(
        entry.get("losses_agree") is False for entry in row.values() if isinstance(entry, dict))
        for row in bench_json(rows)["rows"]) else 0


def tf32_or_error(device):
    """PyTorch's TF32 settings as torch_run leaves them, or why not."""
    try:
        return torch_tf32() if device == "cuda" else {"device": device}
    except ImportError as error:
        return {"PyTorch": "cannot import: %s" % error}


def write_json(path, value):
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    temporary = pathlib.Path(str(path) + ".tmp")
    temporary.write_text(json.dumps(value, indent=1) + "\n")
    temporary.replace(path)


def bench_json(rows):
    """The bench's rows as JSON: each side's figures, the ratios, whether
    the losses agree, and the TF32 settings of each side."""
    out = []
    for job, results in rows:
        row = {key: job[key] for key in ("tag", "title", "batch", "precision", "flops")}
        ztc = results["ztc"]
        for peer, result in results.items():
            entry = {key: value for key, value in result.items() if key != "log"}
            if peer != "ztc" and "ms" in ztc and "ms" in result:
                entry["ztc_over_peer"] = ztc["ms"] / result["ms"]
                entry["losses_agree"] = losses_agree(ztc["losses"], result["losses"],
                                                     job["precision"],
                                                     job["kind"] == "resnet")
            if peer == "ztc":
                entry["tf32"] = ZTC_TF32
            row[peer] = entry
        out.append(row)
    return {"rows": out}


# ------------------------------------------------------------------ memory


def planned_memory(art):
    """The plan's figures from ART/memory.json: total_bytes, and
    reserved_bytes and scratch_bytes where the plan has them."""
    plan = json.loads((art / "memory.json").read_text())
    return {key: plan[key] for key in ("total_bytes", "reserved_bytes", "scratch_bytes")
            if key in plan}


def memory_row(train, art, data, env, timeout=300):
    """The plan against 2 steps of ztc-train --device-memory-report: the plan's
    figures, the probe's, and measured / planned; or with "error"."""
    row = {"planned": planned_memory(art)}
    work = art / "memory"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    probe = work / "device-memory.json"
    try:
        result = subprocess.run([str(train), str(art), "--data", str(data), "--steps", "2",
                                 "--device-memory-report", str(probe)], capture_output=True,
                                text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(row, error="ztc-train --device-memory-report: timed out after %d s" % timeout)
    if result.returncode != 0:
        return dict(row, error=result.stderr.strip()[-600:])
    row["measured"] = json.loads(probe.read_text())
    measured = row["measured"]["measured_bytes"]
    if measured is None:
        return dict(row, error=row["measured"].get("note", "no device memory measured"))
    row["ratio"] = measured / row["planned"]["total_bytes"]
    return row


def memory(args):
    bundle, spec, env, train = open_bundle(args.bundle)
    rows = []
    print("Memory per rank: planned (the artifact's memory.json total_bytes) against "
          "measured (ztc-train --device-memory-report: peak used less the CUDA context's), "
          "MiB; flagged when measured / planned is off 1 by more than %g" % args.tolerance)
    print("  %-24s %10s %9s %9s %9s %9s %9s %8s" % (
        "model", "planned", "reserved", "scratch", "context", "peak", "measured", "ratio"))
    for index, job in enumerate(spec["jobs"]):
        art = bundle / "art" / (job["tag"] + ".ztc")
        if not (art / "init.safetensors").exists():
            draw_init(art, seed=index)
        progress("%s: ztc-train --device-memory-report" % job["tag"])
        row = dict(memory_row(train, art, bundle / "data" / job["tag"], env), tag=job["tag"])
        row["flagged"] = "ratio" not in row or abs(row["ratio"] - 1) > args.tolerance
        rows.append(row)
        print_memory_row(row)
        if args.json:
            write_json(args.json, {"tolerance": args.tolerance, "rows": rows})
    flagged = [row["tag"] for row in rows if row["flagged"]]
    print("memory check: %d rows, %s" % (len(rows), "all within %g" % args.tolerance
                                          if not flagged else "flagged: " + ", ".join(flagged)))
    return 1 if flagged else 0


def print_memory_row(row):
    mib = lambda value: "-" if value is None else "%.1f" % (value / 2**20)
    planned, measured = row["planned"], row.get("measured", {})
    print("  %-24s %10s %9s %9s %9s %9s %9s %8s  %s" % (
        row["tag"], mib(planned.get("total_bytes")), mib(planned.get("reserved_bytes")),
        mib(planned.get("scratch_bytes")), mib(measured.get("context_used_bytes")),
        mib(measured.get("peak_used_bytes")), mib(measured.get("measured_bytes")),
        "%.3f" % row["ratio"] if "ratio" in row else "-",
        ("FLAGGED" if row["flagged"] else "ok") +
        (": " + row["error"].replace("\n", " | ")[-300:] if "error" in row else "")), flush=True)


def print_rows(job, results):
    ztc = results["ztc"]
    print("\n%s (%s), batch %d, %s: %s FLOPs per step (%s)" % (
        job["title"], job["tag"], job["batch"], job["precision"], format(job["flops"], ","),
        job["formula"]))
    print("  %-16s %10s %10s %9s %10s %12s  %s" % ("", "ms/step", "ztc/peer", "TFLOP/s",
                                                  "MiB", "loss 1, 2", ""))
    for peer, result in results.items():
        label = {"ztc": "ztc", "eager": "PyTorch eager", "compile": "torch.compile"}[peer]
        if "error" in result:
            print("  %-16s FAILED: %s" % (label, result["error"].replace("\n", " | ")[-300:]))
            continue
        ratio = "%.2f" % (ztc["ms"] / result["ms"]) if "ms" in ztc else "-"
        agree = "" if peer == "ztc" or "losses" not in ztc else (
            "" if losses_agree(ztc["losses"], result["losses"], job["precision"],
                               job["kind"] == "resnet")
            else "MISMATCH")
        print("  %-16s %10.2f %10s %9.2f %10.1f %6.4f %6.4f  %s" % (
            label, result["ms"], "-" if peer == "ztc" else ratio,
            job["flops"] / result["ms"] / 1e9, result["memory"] / 2**20, result["losses"][0],
            result["losses"][1], agree))
    sys.stdout.flush()


def print_summary(rows):
    print("\nztc over PyTorch (ms per step; below 1: ztc is faster)")
    print("  %-28s %8s %8s" % ("model", "eager", "compile"))
    for job, results in rows:
        cells = []
        for peer in ("eager", "compile"):
            a, b = results["ztc"], results.get(peer, {})
            cells.append("%.2f" % (a["ms"] / b["ms"]) if "ms" in a and "ms" in b else "-")
        print("  %-28s %8s %8s" % (job["tag"], *cells))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare", help="compile for CUDA and write the bundle")
    p.add_argument("bundle")
    p.add_argument("--ztc-train", required=True,
                   help="a runtime-only build with CUDA (cmake -S runtime)")
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    r = sub.add_parser("run", help="on the GPU node: train with ztc and PyTorch, print")
    r.add_argument("bundle")
    r.add_argument("--steps", type=int, default=0,
                   help="steps per timed interval (default 20; 10 for GPT-2-small)")
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    r.add_argument("--device", default="cuda",
                   help="PyTorch's device (cpu: to try the script where there is no GPU)")
    r.add_argument("--json", help="also write every figure to this file")
    m = sub.add_parser("memory", help="on the GPU node: the plan against the device's use")
    m.add_argument("bundle")
    m.add_argument("--json", help="also write every figure to this file")
    m.add_argument("--tolerance", type=float, default=MEMORY_TOLERANCE,
                   help="how far measured / planned may be from 1 (default %(default)s)")
    args = parser.parse_args()
    return {"prepare": prepare, "run": run, "memory": memory}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main() or 0)
