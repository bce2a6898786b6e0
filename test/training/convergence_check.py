#!/usr/bin/env python3
"""Training on real data: the example MLP and CNN learn scikit-learn's digits
(held-out accuracy >= 95%), and the small GPT learns
characters of the GPL-3 text Debian ships in /usr/share/common-licenses
(loss below 2.3 nats per character after 600 steps, from ln 64 = 4.16).

Each model goes through the whole user path: ztc compile, ztc train --save,
ztc export, and ztc run of the exported model on the held-out data.
Usage: convergence_check.py --ztc PATH
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = "/usr/share/common-licenses/GPL-3"
results = []


def report(ok, message):
    print("%s %s" % ("ok  " if ok else "FAIL", message), flush=True)
    results.append(ok)


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True,
                          text=True)


def train_classifier(ztc, tmp, name, digits_flags, compile_flags, epochs,
                     export_flags=()):
    data = os.path.join(tmp, name + "_digits")
    run(sys.executable, os.path.join(REPO, "examples", "onnx", "prepare_digits.py"),
        "--out", data, *digits_flags)
    model = os.path.join(tmp, "models", name + ".onnx")
    art, ckpt = os.path.join(tmp, name + ".ztc"), os.path.join(tmp, name + "_ckpt")
    trained = os.path.join(tmp, name + "_trained.onnx")
    start = time.monotonic()
    run(ztc, "compile", model, "-o", art, "--batch-size", "32", "--loss", "cross_entropy",
        *compile_flags)
    run(ztc, "train", art, "--data", os.path.join(data, "train"), "--epochs", epochs,
        "--seed", "1", "--save", ckpt)
    run(ztc, "export", art, "--checkpoint", ckpt, "-o", trained, *export_flags)
    seconds = time.monotonic() - start
    test = os.path.join(tmp, name + "_test")
    os.makedirs(test)
    x = np.load(os.path.join(data, "test", "x.npy"))
    labels = np.load(os.path.join(data, "test", "labels.npy"))
    np.save(os.path.join(test, "x.npy"), x)
    out = os.path.join(tmp, name + "_out")
    run(ztc, "run", trained, "--data", test, "--output-dir", out)
    logits = np.load(os.path.join(out, "logits.npy"))
    accuracy = float((logits.argmax(-1) == labels).mean())
    if export_flags:
        # The exported model is plain ONNX: onnxruntime computes the same.
        import onnxruntime
        session = onnxruntime.InferenceSession(trained,
                                               providers=["CPUExecutionProvider"])
        reference = session.run(None, {"x": x})[0]
        error = float(np.abs(logits - reference).max() / np.abs(reference).max())
        report(error <= 1e-5, "%s exported with %s: ztc run vs onnxruntime %.1e"
               % (name, " ".join(export_flags), error))
    # The time is reported, not asserted: a test must not depend on the
    # machine's load (bench/ measures speed).
    report(accuracy >= 0.95,
           "%s on digits: held-out accuracy %.1f%% (%d samples), compile+train+export %.1f s"
           % (name, 100 * accuracy, len(labels), seconds))


def write_gpl_characters(directory):
    """The GPL-3 text Debian ships as next-character windows of 16:
    DIRECTORY/tokens.npy and labels.npy (64 symbols: the 63 most frequent
    characters, the rest folded into one). Returns the window count."""
    text = open(TEXT, encoding="utf-8").read().lower()
    kept = sorted(set(text), key=lambda c: (-text.count(c), c))[:63]
    index = {c: i for i, c in enumerate(kept)}
    ids = np.array([index.get(c, 63) for c in text], dtype=np.int64)
    windows = (len(ids) - 1) // 16
    os.makedirs(directory)
    np.save(os.path.join(directory, "tokens.npy"), ids[: windows * 16].reshape(windows, 16))
    np.save(os.path.join(directory, "labels.npy"),
            ids[1: windows * 16 + 1].reshape(windows, 16))
    return windows


def train_gpt(ztc, tmp):
    data = os.path.join(tmp, "gpl3")
    windows = write_gpl_characters(data)
    art = os.path.join(tmp, "gpt.ztc")
    run(ztc, "compile", os.path.join(tmp, "models", "gpt.onnx"), "-o", art,
        "--batch-size", "32", "--loss", "cross_entropy", "--lr", "3e-3",
        "--lr-schedule", "warmup-cosine", "--warmup-steps", "30", "--total-steps", "600")
    start = time.monotonic()
    log = run(ztc, "train", art, "--data", data, "--steps", "600", "--log-every", "50").stderr
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", log)]
    final = float(np.mean(losses[-3:]))
    report(final < 2.3, "gpt on GPL-3 characters (%d windows of 16): loss %.3f -> %.3f in %.1f s"
           % (windows, losses[0], final, time.monotonic() - start))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ztc-converge-") as tmp:
        subprocess.run([os.path.join(REPO, "examples", "onnx", "make_all.sh"),
                        os.path.join(tmp, "models")], check=True)
        train_classifier(args.ztc, tmp, "mlp", [], ["--lr", "3e-3"], "30")
        # BatchNorm is exported in eval mode: its running statistics stay fixed.
        train_classifier(args.ztc, tmp, "cnn", ["--images"],
                         ["--lr", "3e-3", "--freeze", ".*running_(mean|var)"], "30")
        # Exported in training mode: BatchNorm normalizes with batch
        # statistics and updates its running statistics; the model exported
        # for inference normalizes with those.
        train_classifier(args.ztc, tmp, "cnn_train", ["--images"], ["--lr", "3e-3"], "30",
                         ["--inference"])
        if os.path.exists(TEXT):
            train_gpt(args.ztc, tmp)
        else:
            print("SKIP gpt: %s is not installed" % TEXT)
    print("%d passed, %d failed" % (results.count(True), results.count(False)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
