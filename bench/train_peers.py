#!/usr/bin/env python3
"""ztc's CPU training step against PyTorch eager, ONNX Runtime Training and
JAX, side by side in one run.

Every framework trains the same model from the same initial weights on the
same batch, with the same loss (the mean cross entropy over the logits), the
same AdamW (--lr, betas 0.9,0.999, eps 1e-8, --weight-decay on every
parameter, PyTorch's update formula) and the same threads on the same cores.
The models:

  gpt-small   a 2-layer GPT (width 128, 4 heads, context 64, vocab 512),
              batch 8: a step of tens of milliseconds, where each
              framework's cost per op weighs as much as its matrix products
              (the default example GPT, width 32, would measure nothing
              else);
  gpt-4layer  the 4-layer GPT of bench/recompute.py (width 256, 4 heads,
              context 128, vocab 1024), batch 8;
  resnet      bench/recompute.py's ResNet-style CNN (training-mode
              BatchNorm), 3x32x32 images, batch 16;
  gpt2-small  GPT-2-small's shape (12 layers, width 768, 12 heads, vocab
              50257) at context 128, batch 4; slow (--skip-gpt2);
  llama       the Llama-family fixture of test/models/make_modern.py
              (transformers' LlamaForCausalLM: RMSNorm, rotary embeddings,
              grouped-query attention, a SwiGLU MLP; 2 layers, width 32,
              context 8, vocab 64), batch 8; its peers: PyTorch (a plain
              torch module of the same arithmetic, llama_module) and ORT.

The GPTs come from examples/onnx/make_gpt.py, the CNN from recompute.py's
resnet_onnx; the ONNX files are cached under build/bench/train_peers/. Each
framework gets them as follows:

  ztc          `ztc compile` the ONNX file, `ztc-train --log-every 1
               --metrics` (losses in full precision, the trainer's own time
               per step).
  PyTorch      Debian's torch (this interpreter): make_gpt.py's own GPT
               module with the ONNX initializers loaded by name, the CNN in
               torch.nn.functional; torch.optim.AdamW.
  ORT Training onnxruntime-training-cpu's generate_artifacts and on-device
               API (Module, Optimizer, CheckpointState) on a copy of the
               very ONNX file (see ort_training_model).
  JAX          the same architectures in jax.numpy with the ONNX
               initializers; loss, gradients and AdamW in one jax.jit.

ORT and JAX come from a virtual environment this script makes once
(build/bench/peers-venv, from the system interpreter with its site packages:
onnxruntime.training imports torch); a peer that cannot be installed or run
gets a row with its error.

Threads: the whole run is pinned to the first --threads CPUs
(os.sched_setaffinity, inherited by every process it starts): XLA's CPU
thread pool has no size setting but sizes itself by the affinity. On top,
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (Debian's torch calls OpenBLAS),
torch.set_num_threads, ORT's intra-op threads. Idle threads wait as each
framework's users get it (ztc's spin briefly, torch's libgomp and ORT's
and XLA's pools spin longer): on a loaded machine the long spinners
suffer most, and the header says when the load average shows other work.

First the losses: each peer's first-step loss must agree with ztc's (or,
if ztc failed, the first framework's that ran) to 1e-4 (relative), or its
row says MISMATCH and it is no rival in the goals. The second step's loss
(after one AdamW update) is shown too. Each framework sees only the first
batch: the data set is one batch, so ztc's shuffling only reorders its rows.

Then the time per step. ztc: the mean of steps 3..2+K of one run, by the
trainer's clock, the best of --repeat runs. Peers: K steps after 2 warm-up
steps, the best of --repeat rounds in one process. K is --steps (default:
20, 10, 10 and 3 per model above). Each table gives ztc's time over the
peer's (below 1: ztc is faster), the fastest framework, and GFLOP/s: GPTs
count 6N + 6*L*C*T FLOPs per token, CNNs three times the Conv, Gemm and
MatMul FLOPs of the ONNX graph. Their share of sgemm is of cblas_sgemm in
Debian's OpenBLAS (a C program compiled once into build/bench/), measured
just before each model's runs with OPENBLAS_NUM_THREADS=--threads: with the
environment ztc's runs get (OPENBLAS_CORETYPE as the caller set it, or not)
and, on a processor with AVX-512 that OpenBLAS 0.3.21 takes for a Haswell
(AMD's), with OPENBLAS_CORETYPE=SkylakeX too; the better figure is the
100%. It ends with the goals: ztc over the fastest peer per model (<= 0.8)
and GPT-2-small's share of sgemm (>= 60%).

    .venv/bin/python bench/train_peers.py [--models gpt-small,gpt-4layer,resnet,gpt2-small]
        [--skip-gpt2] [--peers torch,ort,jax] [--threads 2] [--steps K] [--repeat 3]
        [--lr 1e-3] [--weight-decay 0.01] [--build build]
"""
import argparse
import functools
import hashlib
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "bench" / "train_peers"
PEER_VENV = ROOT / "build" / "bench" / "peers-venv"
# Python 3.11 wheels that work with numpy 1.x (Debian's torch 1.13 needs it);
# onnx 1.16 is the one ORT 1.19 was released against.
PEER_PACKAGES = ("numpy==1.26.4", "protobuf==5.29.5", "onnx==1.16.2",
                 "onnxruntime-training-cpu==1.19.2", "jax==0.4.38", "jaxlib==0.4.38")
BETAS = (0.9, 0.999)
EPS = 1e-8
LOSS_TOLERANCE = 1e-4
# The first AdamW update moves every parameter by about lr times the sign of
# its gradient, whatever the gradient's size: a rounding difference in a
# gradient near zero can flip a sign, so step 2 is held to less.
STEP2_TOLERANCE = 1e-3
WARMUP = 2
PEER_TIMEOUT = 3600

MODELS = {
    "gpt-small": dict(title="2-layer GPT", kind="gpt", batch=8, steps=20,
                      gpt=dict(layers=2, width=128, heads=4, context=64, vocab=512)),
    "gpt-4layer": dict(title="4-layer GPT", kind="gpt", batch=8, steps=10,
                       gpt=dict(layers=4, width=256, heads=4, context=128, vocab=1024)),
    "resnet": dict(title="ResNet-style CNN", kind="resnet", batch=16, steps=10),
    "gpt2-small": dict(title="GPT-2-small shape", kind="gpt", batch=4, steps=3,
                       gpt=dict(layers=12, width=768, heads=12, context=128, vocab=50257)),
    # make_modern.py's llama configuration (LlamaConfig's defaults for the
    # rest: rms_norm_eps 1e-6, rope_theta 10000, no biases, untied head).
    "llama": dict(title="Llama-family (make_modern.py's llama)", kind="llama", batch=8,
                  steps=20, llama=dict(layers=2, width=32, heads=4, kv_heads=2, context=8,
                                       vocab=64, intermediate=64, eps=1e-6, theta=10000.0)),
}
PEERS = {"torch": "PyTorch eager", "ort": "ORT Training", "jax": "JAX jit"}
# The matrix products of the sgemm figure: the GPT-2-small step's shapes
# (B*T = 512 rows, twice for headroom), the best of them.
SGEMM_SHAPES = ((1024, 768, 768), (1024, 3072, 768), (1024, 768, 3072), (1024, 1024, 1024))
SGEMM_SOURCE = r"""
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* sgemm M N K REPS: the best of REPS C = A*B in GFLOP/s, OpenBLAS's core and config. */
int main(int argc, char **argv) {
  if (argc != 5) return 2;
  long m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
  int reps = atoi(argv[4]);
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
        *c = malloc(sizeof(float) * m * n);
  for (long i = 0; i < m * k; ++i) a[i] = (float)(i % 7) * 0.1f;
  for (long i = 0; i < k * n; ++i) b[i] = (float)(i % 5) * 0.1f;
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) { /* the first call warms up */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n,
                0.0f, c, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    if (r > 0 && s < best) best = s;
  }
  printf("%f\t%s\t%s\n", 2.0 * m * n * k / best / 1e9, openblas_get_corename(),
         openblas_get_config());
  return 0;
}
"""


def progress(message):
    print("[train_peers] " + message, file=sys.stderr, flush=True)


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


# --- Models and data --------------------------------------------------------


def digest(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
    return h.hexdigest()


def gpt_flags(spec):
    shape = spec.get("gpt") or spec["llama"]
    return [flag for key, value in shape.items() for flag in ("--" + key, str(value))]


def ensure_model(name, spec):
    """The model's ONNX file under CACHE, made again when its generator
    (or its flags) changed. GPT-2-small's tensors go to external data."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / (name + ".onnx")
    if spec["kind"] == "llama":
        # Exported once by make_modern.py (it needs transformers), committed.
        return LLAMA_FIXTURE / "model.onnx"
    if spec["kind"] == "gpt":
        generator = ROOT / "examples" / "onnx" / "make_gpt.py"
        big = name == "gpt2-small"
        command = [sys.executable, str(generator), "--out", str(CACHE), "--name", name, "--quiet",
                   *(["--gpt2-small"] if big else []), *gpt_flags(spec)]
        key = digest(generator.read_bytes(), (generator.parent / "_common.py").read_bytes(),
                     command[3:])
    else:
        key = digest((ROOT / "bench" / "recompute.py").read_bytes())
    stamp = path.with_suffix(".key")
    if path.exists() and stamp.exists() and stamp.read_text() == key:
        return path
    progress("exporting %s to %s%s" % (spec["title"], path,
                                       " (a minute or two)" if name == "gpt2-small" else ""))
    if spec["kind"] == "gpt":
        subprocess.run(command, check=True)
    else:
        sys.path.insert(0, str(ROOT / "bench"))
        from recompute import resnet_onnx
        resnet_onnx(path)
    stamp.write_text(key)
    return path


def write_data(spec, model_info, folder, seed=0):
    """One batch as ztc reads it: <input>.npy and labels.npy, random tokens
    or images and labels (as bench/recompute.py makes them)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    batch = spec["batch"]
    if spec["kind"] in ("gpt", "llama"):
        shape = spec.get("gpt") or spec["llama"]
        vocab, context = shape["vocab"], shape["context"]
        x = rng.integers(0, vocab, (batch, context)).astype(np.int64)
        labels = rng.integers(0, vocab, (batch, context)).astype(np.int64)
    else:
        x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        labels = rng.integers(0, 10, batch).astype(np.int64)
    np.save(folder / (model_info["input"] + ".npy"), x)
    np.save(folder / "labels.npy", labels)


def inspect_model(path):
    """The graph's input name, trainable parameters (float initializers but
    BatchNorm's running statistics and those whose `ztc.initializers` role,
    where the file gives one, is not parameter) and their element count."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    running = {name for node in model.graph.node if node.op_type == "BatchNormalization"
               for name in node.input[3:5]}
    roles = {prop.key: prop.value for prop in model.metadata_props}.get("ztc.initializers")
    roles = {name: entry.get("role") for name, entry in json.loads(roles).items()} if roles else {}
    trainable = [init for init in model.graph.initializer
                 if init.data_type == onnx.TensorProto.FLOAT and init.name not in running
                 and roles.get(init.name, "parameter") == "parameter"]
    initializers = {init.name for init in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    return {"input": inputs[0], "trainable": [init.name for init in trainable],
            "params": sum(math.prod(init.dims) for init in trainable)}


def cnn_forward_flops(path):
    """2 * output elements * reduction length, summed over the Conv, Gemm
    and MatMul nodes (shapes by ONNX shape inference)."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        shapes[value.name] = [d.dim_value for d in value.type.tensor_type.shape.dim]
    total = 0
    for node in graph.node:
        if node.op_type == "Conv":
            reduction = math.prod(shapes[node.input[1]][1:])  # Cin/groups * kh * kw
        elif node.op_type == "Gemm":
            trans_a = any(a.name == "transA" and a.i for a in node.attribute)
            reduction = shapes[node.input[0]][0 if trans_a else 1]
        elif node.op_type == "MatMul":
            reduction = shapes[node.input[0]][-1]
        else:
            continue
        total += 2 * math.prod(shapes[node.output[0]]) * reduction
    return total


def step_flops(spec, model_path, params):
    """(FLOPs per training step, the formula with its numbers, what it counts)."""
    batch = spec["batch"]
    if spec["kind"] in ("gpt", "llama"):
        g = spec.get("gpt") or spec["llama"]
        layers, width, context = g["layers"], g["width"], g["context"]
        per_token = 6 * params + 6 * layers * width * context
        flops = batch * context * per_token
        formula = ("B*T*(6N + 6*L*C*T) = %d*%d*(6*%s + 6*%d*%d*%d)"
                   % (batch, context, format(params, ","), layers, width, context))
        return flops, formula, ("N: every parameter (embeddings, biases, LayerNorms; the tied "
                                "LM head once)")
    forward = cnn_forward_flops(model_path)
    return 3 * forward, "3 * %s" % format(forward, ","), (
        "3 * the forward's FLOPs: the sum over Conv, Gemm and MatMul of 2*(output elements)"
        "*(reduction length)")


# --- sgemm ------------------------------------------------------------------


def sgemm_binary():
    """The sgemm program, compiled into CACHE when its source changed."""
    CACHE.mkdir(parents=True, exist_ok=True)
    source, binary = CACHE / "sgemm.c", CACHE / "sgemm"
    if not binary.exists() or not source.exists() or source.read_text() != SGEMM_SOURCE:
        source.write_text(SGEMM_SOURCE)
        subprocess.run(["cc", "-O2", "-o", str(binary), str(source), "-lopenblas"], check=True,
                       capture_output=True, text=True)
    return binary


def measure_sgemm(threads, coretype):
    """The best of SGEMM_SHAPES: {"gflops", "shape", "core", "config",
    "coretype"}; `coretype` None leaves OPENBLAS_CORETYPE as the caller set
    it (or not)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    binary, best = sgemm_binary(), None
    for shape in SGEMM_SHAPES:
        out = subprocess.run([str(binary), *map(str, shape), "10"], check=True, env=env,
                             capture_output=True, text=True).stdout.split("\t")
        if best is None or float(out[0]) > best["gflops"]:
            best = {"gflops": float(out[0]), "shape": shape, "core": out[1].strip(),
                    "config": out[2].strip(),
                    "coretype": env.get("OPENBLAS_CORETYPE", "unset")}
    return best


def sgemm_figures(threads):
    """sgemm with the environment ztc's runs get and, on a processor with
    AVX-512 that it does not pick, with OpenBLAS's SkylakeX kernels (0.3.21
    takes AMD's AVX-512 processors for Haswells); [] if it cannot run."""
    coretypes = [None]
    with open("/proc/cpuinfo") as cpuinfo:
        avx512 = " avx512f " in " %s " % cpuinfo.read().replace("\n", " ")
    if avx512 and os.environ.get("OPENBLAS_CORETYPE") not in ("SkylakeX", "Cooperlake"):
        coretypes.append("SkylakeX")
    try:
        return [measure_sgemm(threads, coretype) for coretype in coretypes]
    except (subprocess.CalledProcessError, OSError) as error:
        progress("sgemm failed: %s" % last_line(getattr(error, "stderr", "") or str(error)))
        return []


# --- ztc --------------------------------------------------------------------


def ztc_bench(args, spec, model_path, data, work, env):
    """Compiles and trains with ztc: {"losses", "ms"} or {"error"}."""
    ztc = pathlib.Path(args.build) / "bin" / "ztc"
    trainer = pathlib.Path(args.build) / "bin" / "ztc-train"
    art = work / "ztc.ztc"
    compile_command = [str(ztc), "compile", str(model_path), "-o", str(art),
                       "--batch-size", str(spec["batch"]), "--loss", "cross_entropy",
                       "--optimizer", "adamw", "--lr", repr(args.lr),
                       "--betas", "%r,%r" % BETAS, "--eps", repr(EPS),
                       "--weight-decay", repr(args.weight_decay)]
    try:
        progress("ztc compile %s" % spec["title"])
        subprocess.run(compile_command, check=True, capture_output=True, text=True, env=env)
        params = {b["name"] for b in json.loads((art / "manifest.json").read_text())["bindings"]
                  if b["role"] == "param"}
        steps = args.steps or spec["steps"]
        losses, best = None, float("inf")
        for round_ in range(args.repeat):
            metrics = work / ("ztc-%d.jsonl" % round_)
            progress("ztc-train %s, round %d of %d" % (spec["title"], round_ + 1, args.repeat))
            subprocess.run([str(trainer), str(art), "--data", str(data), "--steps",
                            str(WARMUP + steps), "--log-every", "1", "--metrics", str(metrics)],
                           check=True, capture_output=True, text=True, env=env)
            lines = [json.loads(line) for line in metrics.read_text().splitlines()]
            losses = losses or [line["loss"] for line in lines[:WARMUP]]
            seconds = [spec["batch"] / line["samples_per_second"] for line in lines[WARMUP:]]
            best = min(best, sum(seconds) / len(seconds))
        return {"losses": losses, "ms": 1e3 * best, "trainable": sorted(params)}
    except subprocess.CalledProcessError as error:
        return {"error": "%s: %s" % (pathlib.Path(error.cmd[0]).name,
                                     last_line(error.stderr or error.stdout or ""))}
    except (OSError, ValueError, KeyError) as error:
        return {"error": "%s: %s" % (type(error).__name__, error)}


# --- Peers: the launcher ----------------------------------------------------


def ensure_peer_venv():
    """The peer venv's interpreter, installed once (a stamp names the pins)."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / "ztc-peers.stamp"
    wanted = "\n".join(PEER_PACKAGES)
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    progress("installing %s into %s (once)" % (" ".join(PEER_PACKAGES), PEER_VENV))
    # The system interpreter (this venv's base) with its site packages:
    # onnxruntime.training imports torch, which is Debian's.
    base = getattr(sys, "_base_executable", sys.executable)
    for command in ([base, "-m", "venv", "--system-site-packages", str(PEER_VENV)],
                    [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("%s failed: %s" % (" ".join(command[:4]),
                                                  last_line(done.stderr + done.stdout)))
    stamp.write_text(wanted)
    return python


def run_peer(python, peer, job, work, env):
    """Runs one peer in its own process: {"losses", "ms", "version"} or {"error"}."""
    job_file = work / ("%s.json" % peer)
    job_file.write_text(json.dumps(job))
    progress("%s: %s" % (PEERS[peer], job["title"]))
    try:
        done = subprocess.run([str(python), str(pathlib.Path(__file__).resolve()), "--peer", peer,
                               "--job", str(job_file)], capture_output=True, text=True,
                              env=env, timeout=PEER_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % PEER_TIMEOUT}
    if done.returncode != 0:
        reason = ("killed by signal %d" % -done.returncode if done.returncode < 0
                  else "exit status %d" % done.returncode)
        return {"error": "%s: %s" % (reason, last_line(done.stderr))}
    return json.loads(last_line(done.stdout))


# --- Peers: shared by their processes ---------------------------------------


def load_batch(job):
    data = pathlib.Path(job["data"])
    return np.load(data / (job["input"] + ".npy")), np.load(data / "labels.npy")


def onnx_weights(job):
    """The trainable initializers as numpy arrays, by name."""
    import onnx
    from onnx import numpy_helper

    initializers = {init.name: init for init in onnx.load(job["model"]).graph.initializer}
    return {name: numpy_helper.to_array(initializers[name]) for name in job["trainable"]}


def time_steps(job, step, finish=lambda: None):
    """The warm-up steps' losses, then --repeat rounds of K steps: the best
    round's time per step."""
    losses = [float(step()) for _ in range(WARMUP)]
    best = float("inf")
    for _ in range(job["repeat"]):
        start = time.perf_counter()
        for _ in range(job["steps"]):
            step()
        finish()
        best = min(best, (time.perf_counter() - start) / job["steps"])
    return {"losses": losses, "ms": 1e3 * best}


# bench/recompute.py's ResNet: stem (conv, BatchNorm, ReLU), then basic
# blocks (name, stride), global average pooling and a linear layer.
RESNET_BLOCKS = (("layer1.0", 1), ("layer1.1", 1), ("layer2.0", 2), ("layer2.1", 1))


def resnet_forward(ops, p, x):
    """The ResNet's logits, written once for torch and JAX (`ops`)."""
    def conv_bn(x, conv, bn, stride):
        return ops.batch_norm(ops.conv(x, p[conv + ".weight"], stride),
                              p[bn + ".weight"], p[bn + ".bias"])

    x = ops.relu(conv_bn(x, "stem.0", "stem.1", 1))
    for block, stride in RESNET_BLOCKS:
        y = ops.relu(conv_bn(x, block + ".conv1", block + ".bn1", stride))
        y = conv_bn(y, block + ".conv2", block + ".bn2", 1)
        if block + ".down.0.weight" in p:
            x = conv_bn(x, block + ".down.0", block + ".down.1", stride)
        x = ops.relu(y + x)
    return ops.linear(ops.mean_hw(x), p["fc.weight"], p["fc.bias"])


# --- Peers: PyTorch ---------------------------------------------------------


class TorchOps:
    """resnet_forward's ops in torch.nn.functional (same padding: k // 2)."""

    @staticmethod
    def conv(x, w, stride):
        import torch.nn.functional as F
        return F.conv2d(x, w, stride=stride, padding=w.shape[-1] // 2)

    @staticmethod
    def batch_norm(x, w, b):
        import torch.nn.functional as F
        return F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)

    @staticmethod
    def relu(x):
        return x.relu()

    @staticmethod
    def mean_hw(x):
        return x.mean(dim=(2, 3))

    @staticmethod
    def linear(x, w, b):
        import torch.nn.functional as F
        return F.linear(x, w, b)


# The Llama-family model: make_modern.py's `llama` fixture (transformers'
# LlamaForCausalLM, exported with the dynamo exporter), and its shape.
LLAMA_FIXTURE = ROOT / "test" / "fixtures" / "modern" / "llama"


def llama_module(l):
    """transformers' LlamaForCausalLM as the fixture's ONNX file computes it,
    in plain torch (a GPU node need not have transformers), under the
    fixture's state-dict names (model.model.*, model.lm_head): RMSNorm
    (x / sqrt(mean(x^2) + eps) * weight), rotary position embeddings on the
    query and key (rotate_half: the two halves of each head), grouped-query
    causal attention (each key and value head serving heads/kv_heads query
    heads), a SwiGLU MLP (down(silu(gate(x)) * up(x))), no biases, an
    untied LM head."""
    import torch
    from torch import nn

    width, heads, kv_heads = l["width"], l["heads"], l["kv_heads"]
    head = width // heads

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            variance = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x.float() * torch.rsqrt(variance + l["eps"])).to(x.dtype)

    def linear(inputs, outputs):
        return nn.Linear(inputs, outputs, bias=False)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.o_proj = linear(width, width), linear(width, width)
            self.k_proj = linear(width, kv_heads * head)
            self.v_proj = linear(width, kv_heads * head)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape

            def split(t, count):
                return t.view(B, T, count, head).transpose(1, 2)

            def rotate(t):
                half = t.shape[-1] // 2
                return t * cos + torch.cat((-t[..., half:], t[..., :half]), -1) * sin

            def repeat(t):
                return t[:, :, None].expand(B, kv_heads, heads // kv_heads, T, head).reshape(
                    B, heads, T, head)

            q = rotate(split(self.q_proj(x), heads))
            k = repeat(rotate(split(self.k_proj(x), kv_heads)))
            v = repeat(split(self.v_proj(x), kv_heads))
            scores = (q @ k.transpose(-1, -2)) * head ** -0.5
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            y = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
            return self.o_proj(y.transpose(1, 2).reshape(B, T, width))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = linear(width, l["intermediate"])
            self.up_proj = linear(width, l["intermediate"])
            self.down_proj = linear(l["intermediate"], width)

        def forward(self, x):
            return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.self_attn, self.mlp = Attention(), MLP()

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(l["vocab"], width)
            self.layers = nn.ModuleList(Layer() for _ in range(l["layers"]))
            self.norm = RMSNorm()

    class CausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.lm_head = Decoder(), linear(width, l["vocab"])

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = CausalLM()

        def forward(self, ids):
            T = ids.shape[1]
            inv_freq = 1.0 / (l["theta"] ** (torch.arange(0, head, 2, device=ids.device).float()
                                             / head))
            freqs = torch.arange(T, device=ids.device).float()[:, None] * inv_freq[None]
            angles = torch.cat((freqs, freqs), -1)
            cos, sin = angles.cos(), angles.sin()
            decoder = self.model.model
            x = decoder.embed_tokens(ids)
            for layer in decoder.layers:
                x = layer(x, cos.to(x.dtype), sin.to(x.dtype))
            return self.model.lm_head(decoder.norm(x))

    return Llama()


def torch_model(job, weights, device="cpu"):
    """(parameters, forward) of the peer of job's model, from `weights`
    ({name: tensor}, the ONNX initializers by name)."""
    if job["kind"] in ("gpt", "llama"):
        if job["kind"] == "gpt":
            # make_gpt.py's own module: the model the ONNX file was exported from.
            sys.path.insert(0, str(ROOT / "examples" / "onnx"))
            from make_gpt import GPT
            g = job["gpt"]
            model = GPT(g["vocab"], g["context"], g["width"], g["heads"], g["layers"])
        else:
            model = llama_module(job["llama"])
        model = model.to(device).train()
        model.load_state_dict(weights, strict=True)
        return list(model.parameters()), model
    p = {name: w.clone().requires_grad_() for name, w in weights.items()}
    return list(p.values()), functools.partial(resnet_forward, TorchOps, p)


def peer_torch(job):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(job["threads"])
    weights = {name: torch.from_numpy(w) for name, w in onnx_weights(job).items()}
    params, forward = torch_model(job, weights)
    optimizer = torch.optim.AdamW(params, lr=job["lr"], betas=BETAS, eps=EPS,
                                  weight_decay=job["weight_decay"])
    x, labels = (torch.from_numpy(a) for a in load_batch(job))
    labels = labels.reshape(-1)

    def step():
        logits = forward(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return dict(time_steps(job, step), version="torch " + torch.__version__)


# --- Peers: ONNX Runtime Training --------------------------------------------


def ort_training_model(model):
    """A copy of the ONNX model that ORT 1.19's training artifacts accept:
    1. every LayerNormalization gets its optional Mean and InvStdDev outputs
       (its gradient builder fails on a LayerNormalization with one);
    2. logits of rank > 2 are reshaped to [-1, classes], as the built-in
       SoftmaxCrossEntropyLoss takes axis 1 as the class axis (the labels
       are flattened to match)."""
    import onnx
    from onnx import helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for node in graph.node:
        if node.op_type == "LayerNormalization" and len(node.output) == 1:
            node.output.extend([node.name + "/Mean", node.name + "/InvStdDev"])
    logits = graph.output[0]
    dims = logits.type.tensor_type.shape.dim
    if len(dims) > 2:
        classes = dims[-1].dim_value
        graph.initializer.append(helper.make_tensor("ort_logits_shape", onnx.TensorProto.INT64,
                                                    [2], [-1, classes]))
        graph.node.append(helper.make_node("Reshape", [logits.name, "ort_logits_shape"],
                                           ["ort_logits_2d"]))
        del graph.output[:]
        graph.output.append(helper.make_tensor_value_info("ort_logits_2d", onnx.TensorProto.FLOAT,
                                                          [None, classes]))
    return model


def ort_torch_adamw(path):
    """Sets the optimizer model's AdamWOptimizer to adam_mode 0.

    onnxblock.optim.AdamW takes betas, eps and weight_decay but always
    writes adam_mode 1, the Hugging Face formula (bias correction folded into
    the learning rate, decay after the update); the CPU kernel's mode 0 is
    torch.optim.AdamW's (decay first, m and v corrected separately). What
    remains different: the kernel computes the bias corrections in float32
    (PyTorch in double), and ORT accumulates each gradient into a buffer
    that lazy_reset_grad resets (a copy per step that the others do not
    make)."""
    import onnx

    model = onnx.load(str(path))
    nodes = [node for node in model.graph.node if node.op_type == "AdamWOptimizer"]
    if not nodes:
        raise RuntimeError("no AdamWOptimizer node in %s" % path)
    for node in nodes:
        for attribute in node.attribute:
            if attribute.name == "adam_mode":
                attribute.i = 0
    onnx.save(model, str(path))


def peer_ort(job):
    import logging

    import onnx
    import onnxruntime
    from onnxruntime.training import artifacts, onnxblock
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    onnxruntime.set_default_logger_severity(3)
    logging.getLogger().setLevel(logging.WARNING)
    out = pathlib.Path(job["work"]) / "ort"
    out.mkdir()
    artifacts.generate_artifacts(
        ort_training_model(onnx.load(job["model"])), requires_grad=job["trainable"],
        frozen_params=[], loss=artifacts.LossType.CrossEntropyLoss,
        optimizer=onnxblock.optim.AdamW(betas=BETAS, eps=EPS, weight_decay=job["weight_decay"]),
        artifact_directory=str(out))
    ort_torch_adamw(out / "optimizer_model.onnx")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = job["threads"]
    options.inter_op_num_threads = 1
    state = CheckpointState.load_checkpoint(str(out / "checkpoint"))
    # No eval model: ORT cannot load one with training-mode BatchNorm.
    module = Module(str(out / "training_model.onnx"), state, device="cpu",
                    session_options=options)
    optimizer = Optimizer(str(out / "optimizer_model.onnx"), module)
    optimizer.set_learning_rate(job["lr"])
    module.train()
    x, labels = load_batch(job)
    labels = labels.reshape(-1)

    def step():
        loss = module(x, labels)
        optimizer.step()
        module.lazy_reset_grad()
        return loss

    return dict(time_steps(job, step), version="onnxruntime-training " + onnxruntime.__version__)


# --- Peers: JAX -------------------------------------------------------------


class JaxOps:
    """resnet_forward's ops in jax.numpy and lax (NCHW, OIHW, as ONNX)."""

    @staticmethod
    def conv(x, w, stride):
        from jax import lax
        pad = w.shape[-1] // 2
        return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)],
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))

    @staticmethod
    def batch_norm(x, w, b):
        from jax import lax
        mean = x.mean(axis=(0, 2, 3), keepdims=True)
        var = x.var(axis=(0, 2, 3), keepdims=True)
        return (x - mean) * lax.rsqrt(var + 1e-5) * w[:, None, None] + b[:, None, None]

    @staticmethod
    def relu(x):
        import jax
        return jax.nn.relu(x)

    @staticmethod
    def mean_hw(x):
        return x.mean(axis=(2, 3))

    @staticmethod
    def linear(x, w, b):
        return x @ w.T + b


def jax_gpt(p, tokens, g):
    """make_gpt.py's GPT in jax.numpy: pre-LayerNorm blocks of causal
    attention and an exact-GELU MLP, the LM head tied to the embedding."""
    import jax
    import jax.numpy as jnp

    T, C, H = g["context"], g["width"], g["heads"]
    D = C // H

    def layer_norm(x, name):
        mean = x.mean(-1, keepdims=True)
        var = jnp.square(x - mean).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def linear(x, name):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def heads(t):
        return t.reshape(-1, T, H, D).transpose(0, 2, 1, 3)

    causal = jnp.tril(jnp.ones((T, T), bool))
    x = p["wte.weight"][tokens] + p["wpe.weight"]
    for i in range(g["layers"]):
        b = "blocks.%d." % i
        q, k, v = map(heads, jnp.split(linear(layer_norm(x, b + "ln1"), b + "attn.qkv"), 3, -1))
        att = jnp.where(causal, (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(D)), -jnp.inf)
        y = (jax.nn.softmax(att, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(-1, T, C)
        x = x + linear(y, b + "attn.proj")
        x = x + linear(jax.nn.gelu(linear(layer_norm(x, b + "ln2"), b + "mlp.0"),
                                   approximate=False), b + "mlp.2")
    return layer_norm(x, "ln_f") @ p["wte.weight"].T


def peer_jax(job):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    if job["kind"] == "llama":
        raise NotImplementedError("no JAX Llama here (PyTorch and ORT are its peers)")
    if job["kind"] == "gpt":
        forward = functools.partial(jax_gpt, g=job["gpt"])
    else:
        forward = functools.partial(resnet_forward, JaxOps)
    lr, wd, (beta1, beta2) = job["lr"], job["weight_decay"], BETAS

    def loss_fn(p, x, labels):
        logits = forward(p, x)
        logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
        return -jnp.take_along_axis(logp, labels.reshape(-1, 1), axis=1).mean()

    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(p, m, v, t, x, labels):
        # torch.optim.AdamW's update, formula for formula.
        loss, grads = jax.value_and_grad(loss_fn)(p, x, labels)
        tree = jax.tree_util.tree_map
        m = tree(lambda m, g: beta1 * m + (1 - beta1) * g, m, grads)
        v = tree(lambda v, g: beta2 * v + (1 - beta2) * g * g, v, grads)
        c1, c2 = 1 - beta1 ** t, 1 - beta2 ** t
        p = tree(lambda p, m, v: p * (1 - lr * wd) - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2)
                                                                      + EPS), p, m, v)
        return p, m, v, loss

    state = {"p": {name: jnp.asarray(w) for name, w in onnx_weights(job).items()}}
    state["m"] = jax.tree_util.tree_map(jnp.zeros_like, state["p"])
    state["v"] = jax.tree_util.tree_map(jnp.zeros_like, state["p"])
    state["t"] = 0
    x, labels = (jnp.asarray(a) for a in load_batch(job))

    def step():
        state["t"] += 1
        state["p"], state["m"], state["v"], loss = train_step(
            state["p"], state["m"], state["v"], jnp.float32(state["t"]), x, labels)
        return loss

    result = time_steps(job, step, lambda: jax.block_until_ready(state["p"]))
    import jaxlib
    return dict(result, version="jax %s (jaxlib %s)" % (jax.__version__, jaxlib.__version__))


PEER_MAINS = {"torch": peer_torch, "ort": peer_ort, "jax": peer_jax}


def peer_main(peer, job_file):
    """A peer's process: one JSON line on stdout, the result or the error."""
    job = json.loads(pathlib.Path(job_file).read_text())
    try:
        result = PEER_MAINS[peer](job)
    except Exception as error:  # Any failure is the peer's row, not the bench's end.
        traceback.print_exc()
        result = {"error": "%s: %s" % (type(error).__name__, str(error).strip().splitlines()[0]
                                       if str(error).strip() else "")}
    print(json.dumps(result), flush=True)


# --- The bench --------------------------------------------------------------


def pin_cpus(threads):
    """Pins this process (and so every process it starts) to `threads` CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads > len(cpus):
        progress("only %d CPUs available; --threads %d oversubscribes them" % (len(cpus), threads))
    os.sched_setaffinity(0, cpus[:threads])
    return cpus[:threads]


def bench_model(args, name, spec, peer_pythons, work, env):
    """Every framework on one model: {"spec", "flops", "formula", "rows"}."""
    model_path = ensure_model(name, spec)
    info = inspect_model(model_path)
    data = work / "data"
    write_data(spec, info, data)
    flops, formula, note = step_flops(spec, model_path, info["params"])
    # Measured next to the model's runs, so that both meet the machine as
    # it is then (other processes on a shared machine halve either).
    sgemm = sgemm_figures(args.threads)
    rows = {"ztc": ztc_bench(args, spec, model_path, data, work, env)}
    job = dict(title=spec["title"], kind=spec["kind"], gpt=spec.get("gpt"),
               llama=spec.get("llama"), model=str(model_path),
               data=str(data), input=info["input"], trainable=info["trainable"],
               batch=spec["batch"], lr=args.lr, weight_decay=args.weight_decay,
               threads=args.threads, steps=args.steps or spec["steps"], repeat=args.repeat,
               work=str(work))
    warnings = []
    if set(rows["ztc"].get("trainable", info["trainable"])) != set(info["trainable"]):
        warnings.append("ztc trains other parameters than the peers: %s" % sorted(
            set(rows["ztc"]["trainable"]) ^ set(info["trainable"])))
    for peer in args.peers:
        python = peer_pythons[peer]
        rows[peer] = ({"error": python.args[0]} if isinstance(python, Exception)
                      else run_peer(python, peer, job, work, env))
    return {"spec": spec, "flops": flops, "formula": formula, "note": note, "rows": rows,
            "warnings": warnings, "sgemm": sgemm,
            "peak": max((figure["gflops"] for figure in sgemm), default=None)}


def check_losses(rows):
    """Marks each row's losses against ztc's (or the first that ran)."""
    ran = [key for key, row in rows.items() if "losses" in row]
    if not ran:
        return None
    reference = ran[0]
    for key in ran:
        row = rows[key]
        ref = rows[reference]["losses"]
        row["diff"] = [abs(a - b) / abs(b) for a, b in zip(row["losses"], ref)]
        row["status"] = ""
        if key != reference:
            row["status"] = "ok" if row["diff"][0] <= LOSS_TOLERANCE else "MISMATCH"
            if row["status"] == "ok" and row["diff"][1] > STEP2_TOLERANCE:
                row["status"] = "ok, step 2 differs"
    return reference


def print_table(name, result, args):
    spec, rows = result["spec"], result["rows"]
    shape = (" ".join(gpt_flags(spec)) if spec["kind"] != "resnet" else "3x32x32 images")
    print("\n== %s (%s): %s, batch %d, %d threads, K = %d" % (
        spec["title"], name, shape, spec["batch"], args.threads, args.steps or spec["steps"]))
    print("FLOPs/step = %s = %.3f GFLOP (%s)" % (result["formula"], result["flops"] / 1e9,
                                                 result["note"]))
    for figure in result["sgemm"]:
        print("sgemm: %.1f GFLOP/s with OPENBLAS_CORETYPE %s: core %s (%s), best of M,N,K in "
              "%s at %s" % (figure["gflops"], figure["coretype"], figure["core"],
                            figure["config"], " ".join("x".join(map(str, s)) for s in SGEMM_SHAPES),
                            "x".join(map(str, figure["shape"]))))
    peak = result["peak"]
    reference = check_losses(rows)
    print("%-14s %14s %9s %14s %9s %-10s %10s %9s %8s %8s" % (
        "", "step-1 loss", "rel.diff", "step-2 loss", "rel.diff", "loss", "ms/step",
        "ztc/peer", "GFLOP/s", "% sgemm"))
    ztc_ms = rows["ztc"].get("ms")
    for key, row in rows.items():
        label = "ztc" if key == "ztc" else PEERS[key]
        if "error" in row:
            print("%-14s error: %s" % (label, row["error"]))
            continue
        gflops = result["flops"] / (row["ms"] * 1e-3) / 1e9
        print("%-14s %14.8f %9s %14.8f %9s %-10s %10.2f %9s %8.2f %7.1f%%" % (
            label, row["losses"][0], "ref" if key == reference else "%.1e" % row["diff"][0],
            row["losses"][1], "ref" if key == reference else "%.1e" % row["diff"][1],
            row["status"] or "reference", row["ms"],
            "%.2f" % (ztc_ms / row["ms"]) if ztc_ms and key != "ztc" else "-",
            gflops, 100 * gflops / peak if peak else float("nan")))
    timed = {key: row["ms"] for key, row in rows.items() if "ms" in row}
    if timed:
        fastest = min(timed, key=timed.get)
        print("fastest: %s%s" % ("ztc" if fastest == "ztc" else PEERS[fastest],
                                 " (its loss MISMATCHes)"
                                 if rows[fastest].get("status") == "MISMATCH" else ""))
    for key, row in rows.items():
        if row.get("status") == "MISMATCH":
            print("LOSS MISMATCH: %s's first-step loss %.8f differs from %s's %.8f by %.1e "
                  "(relative; tolerance %.0e)" % (PEERS[key], row["losses"][0],
                                                  PEERS.get(reference, reference),
                                                  rows[reference]["losses"][0], row["diff"][0],
                                                  LOSS_TOLERANCE))
    for warning in result["warnings"]:
        print("warning: " + warning)
    sys.stdout.flush()


def print_summary(results):
    print("\n== Goals: ztc / fastest peer <= 0.8; GPT-2-small shape at >= 60% of sgemm")
    print("%-12s %12s  %-14s %12s %14s" % ("model", "ztc ms/step", "fastest peer", "its ms/step",
                                           "ztc/fastest"))
    mismatches = []
    for name, result in results.items():
        rows = result["rows"]
        # A peer whose loss disagrees computes something else: not a rival.
        peers = {key: row["ms"] for key, row in rows.items()
                 if key != "ztc" and "ms" in row and row.get("status") != "MISMATCH"}
        mismatches += ["%s: %s" % (name, PEERS[key]) for key, row in rows.items()
                       if row.get("status") == "MISMATCH"]
        if "ms" not in rows["ztc"] or not peers:
            print("%-12s %s" % (name, "no ratio: ztc or every peer failed"))
            continue
        fastest = min(peers, key=peers.get)
        ratio = rows["ztc"]["ms"] / peers[fastest]
        print("%-12s %12.2f  %-14s %12.2f %9.2f  %s" % (
            name, rows["ztc"]["ms"], PEERS[fastest], peers[fastest], ratio,
            "met" if ratio <= 0.8 else "not met"))
    gpt2 = results.get("gpt2-small")
    if gpt2 and "ms" in gpt2["rows"]["ztc"] and gpt2["peak"]:
        gflops = gpt2["flops"] / (gpt2["rows"]["ztc"]["ms"] * 1e-3) / 1e9
        share = gflops / gpt2["peak"]
        print("GPT-2-small shape: ztc %.1f GFLOP/s = %.0f%% of sgemm's %.1f GFLOP/s (goal >= 60%%: "
              "%s)" % (gflops, 100 * share, gpt2["peak"], "met" if share >= 0.6 else "not met"))
    print("first-step losses: %s" % ("MISMATCH in " + ", ".join(mismatches) if mismatches
                                     else "every framework that ran agrees to %.0e"
                                     % LOSS_TOLERANCE))
    versions = {}
    for result in results.values():
        for key, row in result["rows"].items():
            if "version" in row:
                versions[PEERS[key]] = row["version"]
    if versions:
        print("peers: " + "; ".join("%s: %s" % item for item in versions.items()))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of %s" % ", ".join(MODELS))
    parser.add_argument("--skip-gpt2", action="store_true", help="leave out gpt2-small")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated subset of %s" % ", ".join(PEERS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=0,
                        help="timed steps per round (default: per model)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.models = [m for m in args.models.split(",") if m and not (args.skip_gpt2 and
                                                                    m == "gpt2-small")]
    args.peers = [p for p in args.peers.split(",") if p]
    for value, known in ((args.models, MODELS), (args.peers, PEERS)):
        unknown = set(value) - set(known)
        if unknown:
            parser.error("unknown: %s (known: %s)" % (", ".join(sorted(unknown)), ", ".join(known)))
    return args


def main():
    args = parse_args()
    if args.peer:
        return peer_main(args.peer, args.job)
    load = os.getloadavg()[0]
    cpus = pin_cpus(args.threads)
    # OpenBLAS's own pool too: Debian's torch calls it, and its default is
    # every core, on top of torch's OpenMP threads.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads),
               # make_gpt.py re-executes itself under .venv unless told not to.
               ZTC_EXAMPLES_REEXEC="1")
    # Each framework idles its threads as its users get it: ztc's runtime
    # spins them briefly (GOMP_SPINCOUNT=300), Debian's torch spins long
    # (libgomp's default), ORT and XLA spin in their own pools. Spinning
    # pools collapse when other processes want the cores (the header warns
    # when the load says so); set OMP_WAIT_POLICY or GOMP_SPINCOUNT to give
    # both libgomp users the same.
    if args.threads == 1:
        flags = env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
        env["XLA_FLAGS"] = flags.strip()
    peer_pythons = {"torch": pathlib.Path(sys.executable)}
    if {"ort", "jax"} & set(args.peers):
        try:
            venv = ensure_peer_venv()
        except (RuntimeError, OSError) as error:
            venv = RuntimeError("peer venv: %s" % error)
        peer_pythons.update(ort=venv, jax=venv)
    print("CPUs %s, %d threads; OpenMP %s; load average %.2f at the start%s" % (
        ",".join(map(str, cpus)), args.threads,
        " ".join("%s=%s" % (key, env[key]) for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
                 if key in env), load,
        " (other processes want these cores: times will be noisy, OpenMP's the most)"
        if load > 0.5 else ""))
    sys.stdout.flush()
    results = {}
    with tempfile.TemporaryDirectory(prefix="ztc-bench-train-peers-") as tmp:
        for name in args.models:
            work = pathlib.Path(tmp) / name
            work.mkdir()
            try:
                results[name] = bench_model(args, name, MODELS[name], peer_pythons, work, env)
            except (subprocess.CalledProcessError, OSError, ImportError) as error:
                print("\n== %s (%s): could not be made: %s" % (MODELS[name]["title"], name, error))
                continue
            finally:
                shutil.rmtree(work, ignore_errors=True)
            print_table(name, results[name], args)
    print_summary(results)


if __name__ == "__main__":
    sys.exit(main())
