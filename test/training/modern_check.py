#!/usr/bin/env python3
"""Today's PyTorch exports of transformers models, against PyTorch.

For each fixture of test/fixtures/modern (Llama, Qwen3, Phi-3, GPT-2 and
BERT classes from transformers, exported by torch.onnx's dynamo exporter
through python/ztc_export.py; test/models/make_modern.py made them and
PyTorch's values) with no --freeze list:
  1. `ztc run`: the logits within 1e-5 of PyTorch's (relative to the
     largest);
  2. `ztc compile` trains exactly the model's parameters (the count the
     state dict has, tied ones once), and its gradients are PyTorch's
     within 1e-4 (relative to each parameter's largest);
  3. 20 AdamW steps (lr 1e-3) on the batch: every loss within 1e-4;
  4. `ztc export --state-dict`: the keys load_state_dict expects, each
     holding the trained value the checkpoint has.
Usage: modern_check.py --ztc PATH [--only NAME,...]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "test", "fixtures", "modern")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checks import check, read_checkpoint, read_safetensors, summary  # noqa: E402

STEM = re.compile(r"[^A-Za-z0-9._-]")


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True,
                          text=True)


def relative(ours, reference):
    return float(np.abs(ours - reference).max() / max(np.abs(reference).max(), 1e-30))


def roles_of(model):
    """The model's `ztc.initializers` metadata (python/ztc_export.py)."""
    import onnx

    props = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
    return json.loads(props["ztc.initializers"])


def check_model(ztc, name, tmp):
    fixture = os.path.join(FIXTURES, name)
    model = os.path.join(fixture, "model.onnx")
    data = os.path.join(fixture, "data")

    # 1. The forward.
    inputs, out = os.path.join(tmp, name + "_inputs"), os.path.join(tmp, name + "_out")
    os.makedirs(inputs)
    ids = np.load(os.path.join(data, "input_ids.npy"))
    np.save(os.path.join(inputs, "input_ids.npy"), ids)
    run(ztc, "run", model, "--data", inputs, "--output-dir", out)
    error = relative(np.load(os.path.join(out, "logits.npy")),
                     np.load(os.path.join(fixture, "logits.npy")))
    check(error <= 1e-5, "%s forward: logits vs PyTorch %.2e" % (name, error))

    # 2. What trains, and the gradients.
    grads = dict(np.load(os.path.join(fixture, "grads.npz")))
    art = os.path.join(tmp, name + ".ztc")
    report = run(ztc, "compile", model, "-o", art, "--batch-size", len(ids), "--loss",
                 "cross_entropy", "--optimizer", "adamw", "--lr", "1e-3").stderr
    trained = re.search(r"trains (\d+) parameters", report)
    warned = "warning" in report
    check(trained and int(trained.group(1)) == len(grads) and not warned,
          "%s: ztc trains %s initializers, the model has %d parameters%s"
          % (name, trained.group(1) if trained else "?", len(grads),
             "; warned: " + report.strip() if warned else ""))
    dump = os.path.join(tmp, name + "_grads")
    run(ztc, "train", art, "--data", data, "--steps", "1", "--dump-grads", dump)
    largest = max(np.abs(g).max() for g in grads.values())
    # A tied parameter is one initializer, named by one of its state-dict
    # names; PyTorch may call it by another.
    onnx_name = {}
    for initializer, role in roles_of(model).items():
        for other in role.get("tied", []):
            onnx_name[other] = initializer
    worst, missing = 0.0, []
    for pname, reference in grads.items():
        stem = STEM.sub("_", onnx_name.get(pname, pname))
        path = os.path.join(dump, "grad", stem + ".npy")
        if not os.path.exists(path):
            missing.append(pname)
            continue
        error = np.abs(np.load(path) - reference).max() / max(np.abs(reference).max(),
                                                               1e-2 * largest)
        worst = max(worst, float(error))
    check(worst <= 1e-4 and not missing,
          "%s gradients: worst relative error %.2e over %d parameters%s"
          % (name, worst, len(grads) - len(missing),
             " (not dumped: %s)" % ", ".join(missing) if missing else ""))

    # 3. 20 AdamW steps.
    ckpt = os.path.join(tmp, name + "_ckpt")
    log = run(ztc, "train", art, "--data", data, "--steps", "20", "--log-every", "1",
              "--save", ckpt).stderr
    ours = [float(v) for v in re.findall(r"loss ([0-9.eE+-]+)", log)]
    reference = np.load(os.path.join(fixture, "adamw_losses.npy"))
    error = (max(abs(a - b) / abs(b) for a, b in zip(ours, reference))
             if len(ours) == len(reference) else 1.0)
    check(error <= 1e-4, "%s 20 AdamW steps: worst relative loss error %.2e (%.4f -> %.4f)"
          % (name, error, reference[0], reference[-1]))

    # 4. The weights back under the state-dict names.
    weights = os.path.join(tmp, name + ".safetensors")
    run(ztc, "export", art, "--checkpoint", ckpt, "--state-dict", weights)
    written = read_safetensors(weights)
    expected = set(json.load(open(os.path.join(fixture, "state_dict.json"))))
    checkpoint = read_checkpoint(ckpt)
    same = all(np.array_equal(value, checkpoint[key]) for key, value in written.items()
               if key in checkpoint)
    check(set(written) == expected and same,
          "%s state dict: %d tensors, %s the keys load_state_dict expects%s"
          % (name, len(written), "exactly" if set(written) == expected else "NOT",
             "" if same else "; values differ from the checkpoint"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--only", help="comma-separated fixture names")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else sorted(os.listdir(FIXTURES))
    with tempfile.TemporaryDirectory(prefix="ztc-modern-") as tmp:
        for name in names:
            check_model(args.ztc, name, tmp)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
