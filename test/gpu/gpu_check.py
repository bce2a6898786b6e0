#!/usr/bin/env python3
"""The CUDA backend on a GPU, checked against the CPU backend.

A GPU node has no MLIR, so the check comes in two halves:

  prepare BUNDLE --ztc ZTC --ztc-train ZTC_TRAIN [--cases a,b]   (a build machine)
      Generates the example models and their data, compiles every case for
      the CPU and for CUDA (`ztc compile --target cuda` builds step.so with
      nvcc, for sm_80 and sm_90), trains the CPU artifacts for reference
      (losses, the first step's gradients, the final checkpoint), and
      copies into BUNDLE a ztc-train built from runtime/ alone
      (`cmake -S runtime`) with the shared libraries it and the CUDA
      backend's unit tests need that a CUDA image may lack (xz-compressed).

  run BUNDLE [--out DIR]                          (on the GPU node)
      Trains every CUDA artifact with that ztc-train, one rank (the first
      case under `--comm nccl`, the rest on the local communicator), and
      compares with the CPU: the first step's loss and gradients, the loss
      of every step, the final parameters; checks that two runs of the same
      artifact give the same bits, and that replayed CUDA graphs give the
      bits of direct calls (--no-cuda-graph); runs the CUDA backend's unit
      tests and, where compute-sanitizer is there, two steps of the GPT
      under its memory checker (and one of the GPT and the bf16 GPT under
      its race checker); runs some cases again with other kernels
      (VARIANTS).
      Prints one line per check and a summary; exit 1 when any failed. Logs
      go to DIR.

The tolerances are those of different summation orders in fp32 (cuBLAS and
the block reductions against OpenBLAS, oneDNN and the CPU's loops), and of
one rounding more or less in bf16 and fp16.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test", "training"))
from checks import check, read_checkpoint, summary, tensors_equal  # noqa: E402

# name, model, data (under the bundle), batch, steps, compile flags, and
# the tolerances: first-step gradients (relative L2 per tensor), every
# step's loss (relative), final parameters (relative L2 per tensor; None:
# not compared, as for the GPT under AdamW, whose attention key bias has a
# zero gradient in exact arithmetic and moves with rounding noise).
CASES = [
    dict(name="gpt", model="gpt.onnx", data="gpl", batch=16, steps=50,
         flags=["--lr", "3e-3", "--clip-grad-norm", "1"], grads=1e-5, loss=1e-4,
         params=None, comm="nccl"),
    dict(name="gpt-sgd", model="gpt.onnx", data="gpl", batch=16, steps=30,
         flags=["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.1"], grads=1e-5,
         loss=1e-4, params=1e-4),
    dict(name="gpt-recompute-accum", model="gpt.onnx", data="gpl", batch=16, steps=20,
         flags=["--lr", "3e-3", "--recompute", "full", "--grad-accum", "2"], grads=1e-5,
         loss=1e-4, params=None),
    dict(name="gpt-bf16", model="gpt.onnx", data="gpl", batch=16, steps=20,
         flags=["--lr", "3e-3", "--precision", "bf16"], grads=2e-2, loss=2e-3, params=None),
    # Every parameter read as its bf16 copy (--half-weights): the f32
    # readers (LayerNorm, the embeddings) read it widened.
    dict(name="gpt-bf16-half-weights", model="gpt.onnx", data="gpl", batch=16, steps=20,
         flags=["--lr", "3e-3", "--precision", "bf16", "--half-weights"], grads=2e-2,
         loss=2e-3, params=None),
    dict(name="mlp-fp16", model="mlp.onnx", data="digits/train", batch=32, steps=30,
         flags=["--lr", "3e-3", "--precision", "fp16", "--initial-scale-power", "12"],
         grads=2e-2, loss=3e-3, params=None),
    dict(name="gpt-fp16", model="gpt.onnx", data="gpl", batch=16, steps=20,
         flags=["--lr", "3e-3", "--precision", "fp16"], grads=2e-2, loss=3e-3, params=None),
    # Training-mode BatchNorm, under SGD: the convolutions' biases before it
    # have a zero gradient in exact arithmetic, which Adam would turn into
    # steps of lr from rounding noise. Exact f32 convolutions
    # (--conv-tf32=false), to compare with the CPU's.
    dict(name="cnn-batchnorm", model="cnn_train.onnx", data="images/train", batch=32,
         steps=20, flags=["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05",
                          "--conv-tf32=false"],
         grads=1e-4, loss=1e-4, params=1e-4, eval="images/test"),
    # Channels-last convolutions (--conv-layout nhwc): cuDNN's NHWC
    # descriptors, and the BatchNorm arithmetic and statistics between the
    # convolutions on NHWC tensors.
    dict(name="cnn-nhwc", model="cnn_train.onnx", data="images/train", batch=32,
         steps=20, flags=["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05",
                          "--conv-tf32=false", "--conv-layout", "nhwc"],
         grads=1e-4, loss=1e-4, params=1e-4, eval="images/test"),
    # timm's ResNet as exported in eval mode (test/fixtures/modern): the
    # inference-form BatchNorm, a max pool and a global average pool
    # between NHWC convolutions, each channels-last too.
    dict(name="resnet-eval-nhwc", model="timm_resnet.onnx", data="timm_resnet", batch=2,
         steps=20, flags=["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05",
                          "--conv-tf32=false", "--conv-layout", "nhwc"],
         grads=1e-4, loss=1e-4, params=1e-4),
    dict(name="cnn-folded", model="cnn.onnx", data="images/train", batch=32, steps=20,
         flags=["--lr", "3e-3", "--conv-tf32=false"], grads=1e-4, loss=1e-4, params=1e-4,
         eval="images/test"),
    # TF32 as PyTorch's defaults have it (convolutions on, the default) and
    # with --allow-tf32 (products too): inputs rounded to 10 mantissa bits,
    # so bf16's tolerances.
    dict(name="cnn-tf32", model="cnn_train.onnx", data="images/train", batch=32,
         steps=20, flags=["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05"],
         grads=2e-2, loss=2e-3, params=None, eval="images/test"),
    dict(name="gpt-tf32", model="gpt.onnx", data="gpl", batch=16, steps=20,
         flags=["--lr", "3e-3", "--allow-tf32"], grads=2e-2, loss=2e-3, params=None),
    # The Llama-family fixture (test/models/make_modern.py's export and its
    # two samples): rotary embeddings (nn.rotate_half), grouped-query
    # attention, RMSNorm and SwiGLU, as today's exports write them.
    dict(name="llama", model="llama.onnx", data="llama", batch=2, steps=20,
         flags=["--lr", "3e-3"], grads=1e-5, loss=1e-4, params=None),
    dict(name="llama-bf16", model="llama.onnx", data="llama", batch=2, steps=20,
         flags=["--lr", "3e-3", "--precision", "bf16"], grads=2e-2, loss=2e-3,
         params=None),
    # Hugging Face's GPT-2 fixture: Conv1D layers (x W + bias, [B*T, C]
    # products behind reshapes), their bias gradients in the weight
    # gradient's product (cuBLASLt's BGRADA), and under bf16 its residuals
    # adding bf16 products to the f32 stream in the products' calls.
    dict(name="gpt2", model="gpt2.onnx", data="gpt2", batch=2, steps=20,
         flags=["--lr", "3e-3"], grads=1e-5, loss=1e-4, params=None),
    dict(name="gpt2-bf16", model="gpt2.onnx", data="gpt2", batch=2, steps=20,
         flags=["--lr", "3e-3", "--precision", "bf16"], grads=2e-2, loss=2e-3,
         params=None),
    # Gemma 2's fixture: capped attention scores (the fused attention's
    # softcap, on every CUDA attention path's scores and gradients), GELU
    # gates, norms scaled by 1 + w.
    dict(name="gemma2", model="gemma2.onnx", data="gemma2", batch=2, steps=20,
         flags=["--lr", "3e-3"], grads=1e-5, loss=1e-4, params=None),
    # Dropout: the masks are the same bits on the CPU and the GPU.
    dict(name="mlp-dropout", model="mlp_dropout.onnx", data="dropout", batch=32, steps=20,
         flags=["--lr", "1e-2"], grads=1e-5, loss=1e-5, params=1e-4),
]


# Runs of a case's CUDA artifact with other kernels, chosen by the
# environment: (name, variables, what they choose), checked against the
# CPU with the case's tolerances.
VARIANTS = {
    "cnn-batchnorm": [("own-kernels", {"ZTC_CUDNN": "0"}, "ztc's own convolutions")],
    "gpt-sgd": [("warp-attention", {"ZTC_CUDA_ATTENTION": "warp"},
                 "attention a warp per query")],
    "gpt-bf16": [("tile-attention", {"ZTC_CUDA_ATTENTION": "tiles"},
                  "attention on tiles without the tensor cores"),
                 ("warp-attention", {"ZTC_CUDA_ATTENTION": "warp"},
                  "attention a warp per query")],
}


def run(*args, env=None, timeout=600, ok=True):
    args = [str(a) for a in args]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if ok and result.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s%s" % (
            result.returncode, " ".join(args), result.stdout[-3000:], result.stderr[-3000:]))
        raise SystemExit(1)
    return result


def train_args(art, data, case, out):
    return [art, "--data", data, "--steps", case["steps"], "--log-every", "1",
            "--no-prefetch", "--metrics", os.path.join(out, "metrics.jsonl"),
            "--save", os.path.join(out, "ckpt")]


# ----------------------------------------------------------------- prepare


def shared_libraries(binary):
    """{soname: path} of what `binary` loads, the C library's own aside."""
    out = run("ldd", binary).stdout
    libs = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+) => (\S+)", line)
        if match and not re.match(r"lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+)\.so", match.group(1)):
            libs[match.group(1)] = match.group(2)
    return libs


def copy_runtime(bundle, binaries):
    """Copies `binaries` into BUNDLE/bin and the libraries they load that a
    CUDA image may lack into BUNDLE/lib, xz-compressed (node_environment
    unpacks them). libcudart, libcublas and libnccl are left to the node:
    they must match its driver."""
    bin_dir = os.path.join(bundle, "bin")
    lib_dir = os.path.join(bundle, "lib")
    os.makedirs(bin_dir, exist_ok=True)
    os.makedirs(lib_dir, exist_ok=True)
    for binary in binaries:
        shutil.copy(binary, bin_dir)
        for soname, path in shared_libraries(binary).items():
            if re.match(r"lib(cudart|cublas|cublasLt|nccl|cuda)\.so", soname):
                continue
            target = os.path.join(lib_dir, soname)
            if not os.path.exists(target + ".xz"):
                shutil.copy(os.path.realpath(path), target)
                run("xz", "-T2", "-6", target)


def pack_step(art):
    """Replaces ART/step.so by step.so.xz: a step's machine code for two GPU
    generations compresses to a few percent, and the bundle travels."""
    path = os.path.join(art, "step.so")
    with open(path + ".xz", "wb") as f:
        subprocess.run(["xz", "-T2", "-6", "-c", path], stdout=f, check=True)
    os.unlink(path)


def unpack_steps(bundle):
    """Unpacks every BUNDLE/art/*/step.so.xz (before ztc-train loads one:
    without step.so it would build the step with this machine's nvcc)."""
    for packed in glob.glob(os.path.join(bundle, "art", "*", "step.so.xz")):
        if not os.path.exists(packed[:-3]):
            run("xz", "-dk", packed)


def prepare(args):
    bundle = os.path.abspath(args.bundle)
    if os.path.exists(bundle):
        shutil.rmtree(bundle)
    os.makedirs(bundle)
    py = sys.executable
    models = os.path.join(bundle, "models")
    run(os.path.join(REPO, "examples", "onnx", "make_all.sh"), models)
    for name, extra in (("digits", []), ("images", ["--images"])):
        run(py, os.path.join(REPO, "examples", "onnx", "prepare_digits.py"), "--out",
            os.path.join(bundle, name), *extra)
    import convergence_check
    import dropout_check
    convergence_check.write_gpl_characters(os.path.join(bundle, "gpl"))
    dropout_check.export_mlp(os.path.join(models, "mlp_dropout.onnx"))
    for fixture in ("llama", "timm_resnet", "gpt2", "gemma2"):
        source = os.path.join(REPO, "test", "fixtures", "modern", fixture)
        shutil.copy(os.path.join(source, "model.onnx"),
                    os.path.join(models, fixture + ".onnx"))
        shutil.copytree(os.path.join(source, "data"), os.path.join(bundle, fixture))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    teacher = rng.standard_normal((16, 4)).astype(np.float32)
    os.makedirs(os.path.join(bundle, "dropout"))
    np.save(os.path.join(bundle, "dropout", "x.npy"), x)
    np.save(os.path.join(bundle, "dropout", "labels.npy"),
            np.argmax(x @ teacher, axis=1).astype(np.int64))

    names = [case["name"] for case in CASES]
    wanted = args.cases.split(",") if args.cases else names
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise SystemExit("gpu_check.py: --cases: unknown case %s (one of %s)"
                         % (", ".join(unknown), ", ".join(names)))
    cases = [case for case in CASES if case["name"] in wanted]
    for case in cases:
        start = time.monotonic()
        model = os.path.join(models, case["model"])
        for target in ("cpu", "cuda"):
            art = os.path.join(bundle, "art", "%s-%s.ztc" % (case["name"], target))
            run(args.ztc, "compile", model, "-o", art, "--loss", "cross_entropy",
                "--batch-size", case["batch"], "--target", target, *case["flags"])
        ref = os.path.join(bundle, "ref", case["name"])
        os.makedirs(ref)
        cpu = os.path.join(bundle, "art", case["name"] + "-cpu.ztc")
        data = os.path.join(bundle, case["data"])
        extra = ["--eval-data", os.path.join(bundle, case["eval"])] if "eval" in case else []
        log = run(args.ztc_train, *train_args(cpu, data, case, ref), *extra).stderr
        with open(os.path.join(ref, "log.txt"), "w") as f:
            f.write(log)
        run(args.ztc_train, cpu, "--data", data, "--steps", "1", "--no-prefetch",
            "--dump-grads", os.path.join(ref, "grads"))
        shutil.rmtree(cpu)
        pack_step(os.path.join(bundle, "art", case["name"] + "-cuda.ztc"))
        print("prepared %s (%.0f s)" % (case["name"], time.monotonic() - start), flush=True)

    # The backend's unit tests, from the same build: a runtime-only build
    # puts them in test/, the full one in test/unit/runtime/.
    binaries = [args.ztc_train]
    build = os.path.dirname(os.path.dirname(os.path.abspath(args.ztc_train)))
    for folder in ("test", os.path.join("test", "unit", "runtime")):
        tests = os.path.join(build, folder, "ztc-cuda-backend-tests")
        if os.path.exists(tests):
            binaries.append(tests)
            break
    copy_runtime(bundle, binaries)
    with open(os.path.join(bundle, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    size = sum(os.path.getsize(p) for p in glob.glob(bundle + "/**", recursive=True)
               if os.path.isfile(p))
    print("bundle %s: %.1f MiB" % (bundle, size / 2**20))


# --------------------------------------------------------------------- run


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if '"loss"' in line]


def same_bits(a, b):
    return tensors_equal(read_checkpoint(a), read_checkpoint(b))


def worst_tensor_difference(got, ref, skip=(".exp_avg", ".exp_avg_sq", "momentum_buffer")):
    """max over tensors of ||got - ref|| / ||ref||, and the tensor's name."""
    worst, name = 0.0, "-"
    for key, value in ref.items():
        if key.endswith(skip):
            continue
        if key not in got:
            return float("inf"), key + " (missing)"
        diff = float(np.linalg.norm(got[key].astype(np.float64) - value)) / max(
            float(np.linalg.norm(value.astype(np.float64))), 1e-30)
        if not diff <= worst:
            worst, name = diff, key
    return worst, name


def gradient_difference(files, directory):
    """The worst ||g - g_cpu|| / ||g_cpu|| over the gradients `files` (the
    CPU's) and their namesakes in `directory`, its tensor, and how many were
    measured against the largest gradient's norm instead: those whose CPU
    norm is under 1e-4 of it, zero in exact arithmetic and rounding noise
    here (a bias before training-mode BatchNorm, whose mean it removes)."""
    want = {os.path.basename(p)[:-4]: np.load(p).astype(np.float64) for p in files}
    largest = max((float(np.linalg.norm(v)) for v in want.values()), default=0.0)
    worst, where, zeros = 0.0, "-", 0
    for name, value in want.items():
        path = os.path.join(directory, name + ".npy")
        have = np.load(path).astype(np.float64) if os.path.exists(path) else None
        if have is None or have.shape != value.shape:
            return float("inf"), name + " (missing)", zeros
        scale = float(np.linalg.norm(value))
        if scale < 1e-4 * largest:
            scale = largest
            zeros += 1
        diff = float(np.linalg.norm(have - value)) / max(scale, 1e-30)
        if not diff <= worst:
            worst, where = diff, name
    return worst, where, zeros


def node_environment(bundle):
    """LD_LIBRARY_PATH: the bundle's libraries, the CUDA toolkit's, and the
    NVIDIA wheels' (NCCL, cuBLAS, cuDNN) that the node's Python carries; and
    the bundle's steps unpacked."""
    lib_dir = os.path.join(bundle, "lib")
    for packed in glob.glob(os.path.join(lib_dir, "*.xz")):
        if not os.path.exists(packed[:-3]):
            run("xz", "-dk", packed)
    paths = [lib_dir, "/usr/local/cuda/lib64", "/usr/local/cuda/lib"]
    try:
        import nvidia  # the CUDA wheels PyTorch depends on
        for root in nvidia.__path__:
            paths += sorted(glob.glob(os.path.join(root, "*", "lib")))
    except ImportError:
        pass
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(paths + [env.get("LD_LIBRARY_PATH", "")])
    env["ZTC_RUNTIME_DIR"] = os.path.join(REPO, "runtime")
    env["ZTC_CACHE_DIR"] = os.path.join(bundle, "cache")
    unpack_steps(bundle)
    return env


def run_cases(args):
    bundle = os.path.abspath(args.bundle)
    out = os.path.abspath(args.out or os.path.join(bundle, "gpu"))
    os.makedirs(out, exist_ok=True)
    env = node_environment(bundle)
    train = os.path.join(bundle, "bin", "ztc-train")
    if shutil.which("nvidia-smi"):
        print(run("nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                  "--format=csv,noheader", ok=False).stdout.strip(), flush=True)
    with open(os.path.join(bundle, "cases.json")) as f:
        cases = json.load(f)
    table = []
    for case in cases:
        name = case["name"]
        art = os.path.join(bundle, "art", name + "-cuda.ztc")
        data = os.path.join(bundle, case["data"])
        ref = os.path.join(bundle, "ref", name)
        got = os.path.join(out, name)
        shutil.rmtree(got, ignore_errors=True)
        os.makedirs(got)
        comm = ["--comm", case.get("comm", "local")]
        extra = ["--eval-data", os.path.join(bundle, case["eval"])] if "eval" in case else []
        start = time.monotonic()
        result = run(train, *train_args(art, data, case, got), *comm, *extra, env=env,
                     ok=False)
        seconds = time.monotonic() - start
        with open(os.path.join(got, "log.txt"), "w") as f:
            f.write(result.stdout + result.stderr)
        if result.returncode != 0:
            check(False, "%s: ztc-train on CUDA exited %d: %s" % (
                name, result.returncode, result.stderr.strip()[-1500:]))
            continue
        # The first step's loss and gradients.
        dump = os.path.join(got, "grads")
        grads = run(train, art, "--data", data, "--steps", "1", "--no-prefetch",
                    "--dump-grads", dump, *comm, env=env, ok=False)
        if grads.returncode == 0:
            files = sorted(glob.glob(os.path.join(ref, "grads", "grad", "*.npy")))
            worst, where, zeros = gradient_difference(files, os.path.join(dump, "grad"))
            loss0 = float(np.load(os.path.join(dump, "loss.npy")))
            ref0 = float(np.load(os.path.join(ref, "grads", "loss.npy")))
            check(files and worst <= case["grads"] and abs(loss0 - ref0) <= 1e-5 * abs(ref0),
                  "%s: first step on CUDA: loss %.7f (CPU %.7f), %d gradients within %.2e of "
                  "the CPU's (worst %s; relative L2, at most %g%s)"
                  % (name, loss0, ref0, len(files), worst, where, case["grads"],
                     "; %d zero in exact arithmetic, against the largest" % zeros
                     if zeros else ""))
        else:
            check(False, "%s: --dump-grads on CUDA exited %d: %s" % (
                name, grads.returncode, grads.stderr.strip()[-1500:]))
        # Convolutions on cuDNN (the NVIDIA wheel the node's PyTorch
        # carries), channels-last ones included.
        if case["model"].startswith("cnn"):
            notice = re.findall(r"ztc: cuDNN (?:is not available|offers no algorithm|does not take)[^\n]*",
                                result.stderr)
            check(not notice, "%s: convolutions on cuDNN%s" % (
                name, ": " + notice[0] if notice else ""))
        # Every step's loss.
        mine, want = losses(os.path.join(got, "metrics.jsonl")), losses(
            os.path.join(ref, "metrics.jsonl"))
        diffs = [abs(a - b) / abs(b) for a, b in zip(mine, want)]
        worst = max(diffs, default=float("inf"))
        check(len(mine) == len(want) == case["steps"] and worst <= case["loss"],
              "%s: %d steps on CUDA (%s): losses within %.2e of the CPU's (at most %g); "
              "last %.6f against %.6f"
              % (name, len(mine), comm[1], worst, case["loss"], mine[-1] if mine else 0,
                 want[-1] if want else 0))
        # The final parameters.
        params, where = worst_tensor_difference(read_checkpoint(os.path.join(got, "ckpt")),
                                                read_checkpoint(os.path.join(ref, "ckpt")))
        if case["params"] is not None:
            check(params <= case["params"],
                  "%s: final parameters within %.2e of the CPU's (worst %s; at most %g)"
                  % (name, params, where, case["params"]))
        if "eval" in case:
            pattern = r"eval after step \d+: loss ([0-9.]+)"
            mine_eval = re.findall(pattern, result.stderr)
            want_eval = re.findall(pattern, open(os.path.join(ref, "log.txt")).read())
            ok = mine_eval and want_eval and abs(float(mine_eval[-1]) - float(
                want_eval[-1])) <= 1e-4 * float(want_eval[-1])
            check(bool(ok), "%s: held-out loss on CUDA %s, on the CPU %s" % (
                name, mine_eval[-1:] or "none", want_eval[-1:] or "none"))
        table.append((name, len(mine), worst, params, seconds))

    # The same artifact twice: the same bits.
    first = cases[0]
    again = os.path.join(out, first["name"] + "-again")
    shutil.rmtree(again, ignore_errors=True)
    os.makedirs(again)
    result = run(train, *train_args(os.path.join(bundle, "art", first["name"] + "-cuda.ztc"),
                                    os.path.join(bundle, first["data"]), first, again),
                 env=env, ok=False)
    straight = os.path.join(out, first["name"], "ckpt")
    same = result.returncode == 0 and losses(os.path.join(again, "metrics.jsonl")) == losses(
        os.path.join(out, first["name"], "metrics.jsonl")) and same_bits(
            os.path.join(again, "ckpt"), straight)
    check(same, "%s: a second CUDA run (local communicator) gives the same losses and "
          "checkpoint, bit for bit" % first["name"])
    # Half the steps, a checkpoint, and the rest resumed from it: the
    # optimizer state and the data position survive the device round trip.
    half = os.path.join(out, first["name"] + "-resumed")
    shutil.rmtree(half, ignore_errors=True)
    art = os.path.join(bundle, "art", first["name"] + "-cuda.ztc")
    data = os.path.join(bundle, first["data"])
    first_half = run(train, art, "--data", data, "--steps", first["steps"] // 2,
                     "--no-prefetch", "--save", half, env=env, ok=False)
    resumed = run(train, art, "--data", data, "--steps", first["steps"], "--no-prefetch",
                  "--resume", half, "--save", half, env=env, ok=False)
    check(first_half.returncode == 0 and resumed.returncode == 0 and same_bits(half, straight),
          "%s: %d steps on CUDA, saved, then resumed to %d: the checkpoint of the "
          "straight run, bit for bit%s" % (
              first["name"], first["steps"] // 2, first["steps"],
              "" if resumed.returncode == 0 else ": " + resumed.stderr.strip()[-800:]))

    # CUDA graphs (each entry captured at its second call per upload slot,
    # replayed after; docs/gpu.md) against direct calls (--no-cuda-graph):
    # the same losses and final checkpoint, bit for bit, and no notice that
    # the capture failed and fell back. The cases cover two entries a step
    # (accumulation), a random key per micro-batch (Dropout), convolution
    # scratch and the evaluate entry (the CNN), and the NCCL communicator on
    # one rank (gpt).
    for case in cases:
        if case["name"] not in ("gpt", "gpt-sgd", "gpt-recompute-accum", "mlp-dropout",
                                "cnn-batchnorm"):
            continue
        graphs = os.path.join(out, case["name"])
        direct = os.path.join(out, case["name"] + "-direct")
        shutil.rmtree(direct, ignore_errors=True)
        os.makedirs(direct)
        extra = ["--eval-data", os.path.join(bundle, case["eval"])] if "eval" in case else []
        result = run(train, *train_args(os.path.join(bundle, "art", case["name"] + "-cuda.ztc"),
                                        os.path.join(bundle, case["data"]), case, direct),
                     "--comm", case.get("comm", "local"), *extra, "--no-cuda-graph", env=env,
                     ok=False)
        with open(os.path.join(direct, "log.txt"), "w") as f:
            f.write(result.stdout + result.stderr)
        graph_log = open(os.path.join(graphs, "log.txt")).read() if os.path.exists(
            os.path.join(graphs, "log.txt")) else ""
        fell_back = re.findall(r"CUDA graphs off[^\n]*", graph_log)
        same = (result.returncode == 0 and os.path.exists(os.path.join(graphs, "ckpt"))
                and losses(os.path.join(direct, "metrics.jsonl")) == losses(
                    os.path.join(graphs, "metrics.jsonl"))
                and same_bits(os.path.join(direct, "ckpt"), os.path.join(graphs, "ckpt")))
        check(same and not fell_back,
              "%s: replayed CUDA graphs give the losses and checkpoint of direct calls "
              "(--no-cuda-graph), bit for bit%s" % (
                  case["name"], ": " + fell_back[0] if fell_back else
                  "" if result.returncode == 0 else ": " + result.stderr.strip()[-800:]))

    # The same artifacts with other kernels, against the CPU with the case's
    # tolerances: ztc's own convolution kernels (im2col and cuBLAS, what
    # runs where cuDNN does not load) with cuDNN turned off, and attention
    # on tiles without the tensor cores, and a warp per query.
    for case in cases:
        for name, variables, what in VARIANTS.get(case["name"], ()):
            own = os.path.join(out, case["name"] + "-" + name)
            shutil.rmtree(own, ignore_errors=True)
            os.makedirs(own)
            result = run(train, *train_args(
                os.path.join(bundle, "art", case["name"] + "-cuda.ztc"),
                os.path.join(bundle, case["data"]), case, own),
                         env=dict(env, **variables), ok=False)
            with open(os.path.join(own, "log.txt"), "w") as f:
                f.write(result.stdout + result.stderr)
            ref = os.path.join(bundle, "ref", case["name"])
            mine, want = losses(os.path.join(own, "metrics.jsonl")), losses(
                os.path.join(ref, "metrics.jsonl"))
            worst = max((abs(a - b) / abs(b) for a, b in zip(mine, want)),
                        default=float("inf"))
            params, where = 0.0, "not compared"
            if case["params"] is not None:
                params, where = (worst_tensor_difference(
                    read_checkpoint(os.path.join(own, "ckpt")),
                    read_checkpoint(os.path.join(ref, "ckpt")))
                                 if result.returncode == 0 else (float("inf"), "no checkpoint"))
            setting = " ".join("%s=%s" % item for item in variables.items())
            check(result.returncode == 0 and len(mine) == len(want) and worst <= case["loss"]
                  and (case["params"] is None or params <= case["params"]),
                  "%s with %s (%s): losses within %.2e, parameters within %.2e (%s) of "
                  "the CPU's%s" % (
                      case["name"], setting, what, worst, params, where,
                      "" if result.returncode == 0 else ": " + result.stderr.strip()[-800:]))

    # The backend's unit tests: a hand-written step against the CPU kernels.
    tests = os.path.join(bundle, "bin", "ztc-cuda-backend-tests")
    if os.path.exists(tests):
        result = run(tests, env=env, ok=False, timeout=300)
        with open(os.path.join(out, "backend-tests.txt"), "w") as f:
            f.write(result.stdout + result.stderr)
        summary_line = [l for l in result.stdout.splitlines() if "PASSED" in l or "FAILED" in l]
        check(result.returncode == 0 and "SKIPPED" not in result.stdout,
              "ztc-cuda-backend-tests on the GPU: %s" % "; ".join(summary_line[-3:]))

    # Two steps of the GPT (and the bf16 GPT, attention on the tensor
    # cores) under compute-sanitizer's memory checker, and one of each GPT
    # under its race checker (attention's tiles in shared memory).
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if os.path.exists(sanitizer) and not args.no_sanitizer:
        gpts = [case for case in cases if case["name"] in ("gpt", "gpt-bf16")]
        memchecked = [cases[0]] + [case for case in [cases[-1]] + gpts
                                   if case["name"] in (cases[-1]["name"], "gpt-bf16")]
        checks = ([("memcheck", case) for case in dict(
            (case["name"], case) for case in memchecked).values()]
                  + [("racecheck", case) for case in gpts])
        for tool, case in checks:
            checked = os.path.join(out, case["name"] + "-" + tool)
            shutil.rmtree(checked, ignore_errors=True)
            steps = "2" if tool == "memcheck" else "1"
            result = run(sanitizer, "--tool", tool, "--error-exitcode", "3", train,
                         os.path.join(bundle, "art", case["name"] + "-cuda.ztc"), "--data",
                         os.path.join(bundle, case["data"]), "--steps", steps, "--no-prefetch",
                         env=env, ok=False, timeout=300)
            with open(checked + ".txt", "w") as f:
                f.write(result.stdout + result.stderr)
            # memcheck ends "ERROR SUMMARY: N errors", racecheck "RACECHECK
            # SUMMARY: H hazards displayed (N errors, W warnings)".
            errors = re.findall(r"ERROR SUMMARY: (\d+)|RACECHECK SUMMARY: \d+ hazards? "
                                r"displayed \((\d+) errors?", result.stdout + result.stderr)
            errors = ["".join(found) for found in errors]
            check(result.returncode == 0 and errors and errors[-1] == "0",
                  "%s: %s step(s) under compute-sanitizer %s: exit %d, %s error(s)%s" % (
                      case["name"], steps, tool, result.returncode, errors[-1] if errors else "?",
                      "" if result.returncode == 0 else ": " + (result.stdout + result.stderr)
                      .strip()[-800:]))

    print("\n%-22s %6s %12s %12s %8s" % ("case", "steps", "loss diff", "param diff", "s"))
    for name, steps, loss, params, seconds in table:
        print("%-22s %6d %12.2e %12.2e %8.1f" % (name, steps, loss, params, seconds))
    return summary()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare", help="compile, train the CPU references, write the bundle")
    p.add_argument("bundle")
    p.add_argument("--ztc", required=True)
    p.add_argument("--ztc-train", required=True,
                   help="the CPU reference and the node's trainer: a runtime-only build "
                   "with CUDA and NCCL (cmake -S runtime)")
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    r = sub.add_parser("run", help="on the GPU node: train, compare, print")
    r.add_argument("bundle")
    r.add_argument("--out")
    r.add_argument("--no-sanitizer", action="store_true")
    args = parser.parse_args()
    if args.mode == "prepare":
        prepare(args)
        return 0
    return run_cases(args)


if __name__ == "__main__":
    sys.exit(main())
