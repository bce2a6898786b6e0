#!/usr/bin/env python3
"""Compile time of whole models: cold, warm, and where the time goes.

For GPT-2-small's shape (12 layers, width 768, vocab 50257, context 128,
batch 4; examples/onnx/make_gpt.py --gpt2-small) and a MobileNetV2-style
CNN (torchvision's layout: 17 inverted-residual blocks of 1x1 expansion,
3x3 depthwise and 1x1 projection convolutions with BatchNorm and ReLU6,
width 1.0, 3x96x96 images, batch 8, training-mode BatchNorm), it measures
`ztc compile MODEL -o ART` with AdamW and cross entropy:

  cold  an empty step-library cache (ZTC_CACHE_DIR set to a new folder)
        and no artifact: import, the pass pipeline, the generated source
        and the first build of the step library;
  warm  the same command again, the artifact in place: nothing changed.

Each row also splits the cold time: `ztc compile --no-build` (everything
but the step library's build) and the rest (the host compiler building
the library). Times are the best of --repeat runs, in seconds, measured in
this one run; the issue's goals are printed beside them (cold <= 25 s for
GPT-2-small and <= 30 s for the CNN, warm < 1 s).

    .venv/bin/python bench/compile_time.py [--build build] [--repeat 2]
        [--models gpt2-small,mobilenet]
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "bench" / "compile_time"
GOALS = {"gpt2-small": 25.0, "mobilenet": 30.0}
WARM_GOAL = 1.0


def progress(text):
    print("[compile_time] " + text, file=sys.stderr, flush=True)


def mobilenet_onnx(path, batch=8, image=96, classes=10):
    """A MobileNetV2 (Sandler et al. 2018, torchvision's layout) exported in
    training mode: BatchNormalization normalizes with the batch's
    statistics."""
    import torch
    from torch import nn

    def conv_bn(cin, cout, kernel, stride, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        if act:
            layers.append(nn.ReLU6())
        return layers

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            layers = [] if expand == 1 else conv_bn(cin, hidden, 1, 1)
            layers += conv_bn(hidden, hidden, 3, stride, groups=hidden)
            layers += conv_bn(hidden, cout, 1, 1, act=False)
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.block(x) if self.residual else self.block(x)

    # (expansion, output channels, repeats, first stride)
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    layers = conv_bn(3, 32, 3, 2)
    cin = 32
    for expand, cout, repeats, stride in settings:
        for i in range(repeats):
            layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
            cin = cout
    layers += conv_bn(cin, 1280, 1, 1)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, classes)]
    torch.manual_seed(0)
    model = nn.Sequential(*layers).train()
    example = torch.randn(batch, 3, image, image)
    with warnings.catch_warnings():
        # One notice per BatchNorm that its step counter is not exported.
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, str(path), input_names=["x"],
                          output_names=["logits"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


def ensure_models(names):
    """The ONNX files, made once under build/bench/compile_time/."""
    CACHE.mkdir(parents=True, exist_ok=True)
    models = {}
    if "gpt2-small" in names:
        path = CACHE / "gpt2-small.onnx"
        if not path.exists():
            progress("exporting GPT-2-small's shape (a minute or two)")
            subprocess.run([sys.executable, str(ROOT / "examples" / "onnx" / "make_gpt.py"),
                            "--out", str(CACHE), "--name", "gpt2-small", "--quiet", "--gpt2-small",
                            "--context", "128"], check=True)
        models["gpt2-small"] = (path, 4)
    if "mobilenet" in names:
        path = CACHE / "mobilenet.onnx"
        if not path.exists():
            progress("exporting the MobileNetV2-style CNN")
            mobilenet_onnx(path)
        models["mobilenet"] = (path, 8)
    return models


def timed(command, env):
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(command), done.stderr[-2000:]))
    return seconds


def measure(ztc, model, batch, repeat, work):
    art = work / "model.ztc"
    flags = ["--batch-size", str(batch), "--loss", "cross_entropy", "--optimizer", "adamw"]
    best = {"cold": float("inf"), "source": float("inf"), "warm": float("inf")}
    for round_ in range(repeat):
        cache = work / ("cache-%d" % round_)
        env = dict(os.environ, ZTC_CACHE_DIR=str(cache))
        shutil.rmtree(art, ignore_errors=True)
        best["source"] = min(best["source"], timed([ztc, "compile", str(model), "-o", str(art),
                                                    "--no-build", *flags], env))
        shutil.rmtree(art, ignore_errors=True)
        best["cold"] = min(best["cold"], timed([ztc, "compile", str(model), "-o", str(art),
                                                *flags], env))
        best["warm"] = min(best["warm"], timed([ztc, "compile", str(model), "-o", str(art),
                                                *flags], env))
        shutil.rmtree(cache, ignore_errors=True)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--models", default="gpt2-small,mobilenet")
    args = parser.parse_args()
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    names = args.models.split(",")
    unknown = sorted(set(names) - set(GOALS))
    if unknown:
        parser.error("--models: unknown %s (known: %s)" % (", ".join(unknown), ", ".join(GOALS)))
    models = ensure_models(names)
    print("%-12s %9s %9s %9s %9s %11s %9s" % ("model", "cold s", "source s", "build s",
                                             "warm s", "cold goal", "warm goal"))
    with tempfile.TemporaryDirectory(prefix="ztc-bench-compile-") as tmp:
        for name in names:
            path, batch = models[name]
            progress("%s: %d rounds" % (name, args.repeat))
            best = measure(ztc, path, batch, args.repeat, pathlib.Path(tmp))
            print("%-12s %9.2f %9.2f %9.2f %9.2f %6.0f %-4s %5.0f %-4s" % (
                name, best["cold"], best["source"], best["cold"] - best["source"], best["warm"],
                GOALS[name], "met" if best["cold"] <= GOALS[name] else "not",
                WARM_GOAL, "met" if best["warm"] < WARM_GOAL else "not"), flush=True)
    print("threads: %d CPUs; cold = import + passes + source + step build (empty cache); "
          "source = the same with --no-build" % len(os.sched_getaffinity(0)))


if __name__ == "__main__":
    main()
