#!/usr/bin/env python3
"""What each recomputation policy buys, measured side by side in one run.

For a 4-layer GPT (width 256, 4 heads, context 128, vocab 1024, batch 8)
and a ResNet-style CNN (two stages of two basic blocks, training-mode
BatchNorm, 3x32x32 images, batch 16), every policy of `ztc compile
--recompute` is compiled and trained on the CPU backend. One table per
model: policy (budget=0.7: the least recompute within 70% of none's
planned memory per rank), planned peak (the arena), saved activation
bytes, the recomputation's FLOPs as a share of the step's, and the step
time relative to `none`. Step times are the difference between a run of 2 steps and one
of 2 + --steps, divided by --steps (loading and the first step cancel out),
the best of --repeat rounds in which the policies take turns, so they share
the machine's state.

    .venv/bin/python bench/recompute.py [--build build] [--steps 10] [--repeat 3]
"""
import argparse
import io
import json
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
POLICIES = ("none", "selective", "full", "sqrt", "budget=0.7")


def resnet_onnx(path, batch=16):
    """A small ResNet (torchvision's BasicBlock layout), training mode, for
    batches of `batch` 3x32x32 images."""
    import onnx
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(32), nn.ReLU())
            self.layer1 = nn.Sequential(Block(32, 32, 1), Block(32, 32, 1))
            self.layer2 = nn.Sequential(Block(32, 64, 2), Block(64, 64, 1))
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = self.layer2(self.layer1(self.stem(x)))
            return self.fc(x.mean(dim=(2, 3)))

    # The exporter warns about every BatchNorm's num_batches_tracked; the
    # ONNX graph does not need it.
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.manual_seed(0)
    model = ResNet().train()
    buf = io.BytesIO()
    torch.onnx.export(model, (torch.randn(batch, 3, 32, 32),), buf, opset_version=17,
                      input_names=["x"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    onnx.save(onnx.load_from_string(buf.getvalue()), str(path))


def run_steps(ztc, art, data, steps):
    start = time.perf_counter()
    subprocess.run([ztc, "train", str(art), "--data", str(data), "--steps", str(steps),
                    "--log-every", "0"], check=True, capture_output=True)
    return time.perf_counter() - start


def bench_model(ztc, name, model, data, flags, steps, repeat, work):
    arts, figures = {}, {}
    for policy in POLICIES:
        art = work / ("%s-%s.ztc" % (name, policy))
        subprocess.run([ztc, "compile", str(model), "-o", str(art), "--loss", "cross_entropy",
                        "--recompute", policy, *flags], check=True, capture_output=True)
        manifest = json.loads((art / "manifest.json").read_text())
        arts[policy] = art
        figures[policy] = (manifest["arena_bytes"], manifest["train"]["recompute"])
    best = {policy: float("inf") for policy in POLICIES}
    for _ in range(repeat):
        for policy in POLICIES:
            short = run_steps(ztc, arts[policy], data, 2)
            long = run_steps(ztc, arts[policy], data, 2 + steps)
            best[policy] = min(best[policy], (long - short) / steps)
    print("\n%s (%s)" % (name, " ".join(flags)))
    print("%-12s %14s %16s %14s %12s %10s" % ("policy", "planned peak", "saved activ.",
                                              "recompute", "ms/step", "vs none"))
    for policy in POLICIES:
        arena, report = figures[policy]
        print("%-12s %11.2f MB %13.2f MB %13.1f%% %12.1f %9.2fx" % (
            policy, arena / 1e6, report["saved_activation_bytes"] / 1e6,
            100.0 * report["recompute_flops"] / report["step_flops"],
            1e3 * best[policy], best[policy] / best["none"]))


def parse_args(doc):
    """The benchmarks' flags: --build, --steps, --repeat."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args()


def make_gpt(work, rng):
    """The 4-layer GPT (width 256, 4 heads, context 128, vocab 1024) as
    work/gpt.onnx, and 256 random windows of text in work/text."""
    subprocess.run([sys.executable, str(ROOT / "examples/onnx/make_gpt.py"), "--out",
                    str(work), "--quiet", "--name", "gpt", "--layers", "4", "--width", "256",
                    "--heads", "4", "--context", "128", "--vocab", "1024"], check=True)
    text = work / "text"
    text.mkdir()
    np.save(text / "tokens.npy", rng.integers(0, 1024, (256, 128)).astype(np.int64))
    np.save(text / "labels.npy", rng.integers(0, 1024, (256, 128)).astype(np.int64))
    return work / "gpt.onnx", text


def main():
    args = parse_args(__doc__)
    ztc = str(pathlib.Path(args.build) / "bin" / "ztc")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="ztc-bench-recompute-") as tmp:
        work = pathlib.Path(tmp)
        gpt, text = make_gpt(work, rng)
        bench_model(ztc, "4-layer GPT", gpt, text, ["--batch-size", "8"],
                    args.steps, args.repeat, work)

        resnet_onnx(work / "resnet.onnx")
        images = work / "images"
        images.mkdir()
        np.save(images / "x.npy", rng.standard_normal((256, 3, 32, 32)).astype(np.float32))
        np.save(images / "labels.npy", rng.integers(0, 10, 256).astype(np.int64))
        bench_model(ztc, "ResNet-style CNN", work / "resnet.onnx", images,
                    ["--batch-size", "16"], args.steps, args.repeat, work)


if __name__ == "__main__":
    sys.exit(main())
