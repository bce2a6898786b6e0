#!/usr/bin/env python3
"""Builds the fixtures of test/fixtures/lora: Hugging Face peft's LoRA on
models of test/fixtures/modern, with the values test/training/lora_check.py
holds `ztc compile --lora` to.

  make_lora.py [--out test/fixtures/lora] [--only NAME,...]
  make_lora.py --roundtrip ZTC    ztc's exports back into peft (below)

Needs the reference environment of test/models/make_modern.py, with peft:

  build/ref-venv/bin/pip install peft==0.21.2

For each case, the base model is the modern fixture's (its weights read
from the fixture's model.onnx, so base weights are the same bits), wrapped
by peft.get_peft_model with the case's LoraConfig (lora_dropout 0: dropout
masks are drawn by each framework's own generator). Each directory holds:

  adapter_init/       peft's save_pretrained before training:
                      adapter_config.json (the LoraConfig ztc compiles
                      with) and adapter_model.safetensors (peft's seeded
                      initialization, which ztc starts from: --lora-init)
  adapter_final.safetensors
                      the adapter after 20 torch.optim.AdamW(lr=1e-3)
                      steps on the modern fixture's batch, under peft's
                      names
  adamw_losses.npy    the 20 losses
  output_final.npy    the trained peft model's logits on the batch
  merged_output.npy   the same after merge_and_unload()
  versions.json       torch, transformers and peft versions

--roundtrip ZTC: for each case, trains with ztc from the fixture, exports
the adapter (`ztc export --adapter`) and the merged model (`--merge`, as
ONNX and as a state dict), loads the adapter with
PeftModel.from_pretrained and the merged state dict with load_state_dict,
and compares both models' logits with ztc's (`ztc run` of the merged
ONNX). Exit 1 when one differs by more than 1e-5.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# name -> (modern fixture, LoraConfig keyword arguments)
CASES = {
    # Linear layers ([out, in] weights), a list of module names.
    "llama": ("llama", {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}),
    # GPT-2's Conv1D ([in, out] weights, fan_in_fan_out), rank-stabilized
    # scaling, the adapted modules' biases trained too.
    "gpt2": ("gpt2", {"r": 4, "lora_alpha": 16, "target_modules": ["c_attn"],
                      "use_rslora": True, "bias": "lora_only", "fan_in_fan_out": True}),
}


def adamw_steps(model, ids, labels, steps=20):
    """`steps` torch.optim.AdamW(lr=1e-3) steps of what trains in `model` on
    one batch; the losses before each."""
    import torch

    import make_modern

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = make_modern.loss_of(model, ids, labels)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    return losses


def make(name, out):
    import torch
    import onnx
    import peft
    import transformers
    from onnx import numpy_helper
    from safetensors.torch import save_file

    import make_modern

    fixture, config = CASES[name]
    modern = os.path.join(make_modern.REPO, "test", "fixtures", "modern", fixture)
    directory = os.path.join(out, name)
    os.makedirs(directory, exist_ok=True)
    wrapped = make_modern.build(fixture)
    exported = onnx.load(os.path.join(modern, "model.onnx"))
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in exported.graph.initializer}
    missing, _ = wrapped.load_state_dict(
        {k: v for k, v in state.items() if k in wrapped.state_dict()}, strict=False)
    # A tied pair (embedding and output projection) appears once in the file.
    assert len(missing) <= 1 and all(
        wrapped.state_dict()[k].data_ptr() in {v.data_ptr() for n, v in
                                               wrapped.state_dict().items() if n != k}
        for k in missing), missing
    ids = torch.from_numpy(np.load(os.path.join(modern, "data", "input_ids.npy")))
    labels = torch.from_numpy(np.load(os.path.join(modern, "data", "labels.npy")))

    torch.manual_seed(0)
    lora = peft.LoraConfig(lora_dropout=0.0, **config)
    # peft wraps the module that was exported, so that its names are the
    # ONNX file's (model.model.layers.0...: the fixture's wrapper, then
    # the transformers class).
    base = wrapped
    wrapped = peft.get_peft_model(base, lora)
    wrapped.save_pretrained(os.path.join(directory, "adapter_init"))
    # The model card peft writes beside them is not needed.
    os.remove(os.path.join(directory, "adapter_init", "README.md"))

    losses = adamw_steps(wrapped, ids, labels)
    np.save(os.path.join(directory, "adamw_losses.npy"), np.array(losses))
    adapter = peft.get_peft_model_state_dict(wrapped)
    save_file({k: v.detach().contiguous() for k, v in adapter.items()},
              os.path.join(directory, "adapter_final.safetensors"))
    with torch.no_grad():
        np.save(os.path.join(directory, "output_final.npy"), wrapped(ids).numpy())
        merged = wrapped.merge_and_unload()
        np.save(os.path.join(directory, "merged_output.npy"), merged(ids).numpy())
    with open(os.path.join(directory, "versions.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "peft": peft.__version__}, f, indent=1, sort_keys=True)
    print("made %s: losses %.6f -> %.6f, %d adapter tensors"
          % (directory, losses[0], losses[-1], len(adapter)), flush=True)


def base_model(fixture):
    """The modern fixture's module with the weights of its model.onnx."""
    import onnx
    import torch
    from onnx import numpy_helper

    import make_modern

    modern = os.path.join(make_modern.REPO, "test", "fixtures", "modern", fixture)
    wrapped = make_modern.build(fixture)
    exported = onnx.load(os.path.join(modern, "model.onnx"))
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in exported.graph.initializer}
    wrapped.load_state_dict({k: v for k, v in state.items() if k in wrapped.state_dict()},
                            strict=False)
    return wrapped, modern


def roundtrip(name, fixtures, ztc):
    """ztc trains the case, exports the adapter (--adapter) and the merged
    weights (--merge); peft loads the adapter with PeftModel.from_pretrained
    and the class loads the merged state dict; both give ztc's logits (`ztc
    run` of the merged ONNX) within 1e-5."""
    import peft
    import torch
    from safetensors.torch import load_file

    fixture, _ = CASES[name]
    directory = os.path.join(fixtures, name)
    with tempfile.TemporaryDirectory() as tmp:
        base, modern = base_model(fixture)
        art, ckpt = os.path.join(tmp, "a.ztc"), os.path.join(tmp, "ckpt")
        init = os.path.join(directory, "adapter_init")
        subprocess.run([ztc, "compile", os.path.join(modern, "model.onnx"), "-o", art,
                        "--batch-size", "2", "--loss", "cross_entropy", "--lora", init,
                        "--lora-init", init], check=True, capture_output=True)
        subprocess.run([ztc, "train", art, "--data", os.path.join(modern, "data"), "--steps",
                        "20", "--save", ckpt], check=True, capture_output=True)
        adapter, merged = os.path.join(tmp, "adapter"), os.path.join(tmp, "merged")
        subprocess.run([ztc, "export", art, "--checkpoint", ckpt, "--adapter", adapter,
                        "--merge", "-o", merged + ".onnx", "--state-dict",
                        merged + ".safetensors"], check=True, capture_output=True)
        inputs, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        os.makedirs(inputs)
        ids = np.load(os.path.join(modern, "data", "input_ids.npy"))
        np.save(os.path.join(inputs, "input_ids.npy"), ids)
        subprocess.run([ztc, "run", merged + ".onnx", "--data", inputs, "--output-dir", out],
                       check=True, capture_output=True)
        ours = np.load(os.path.join(out, "logits.npy"))
        with torch.no_grad():
            loaded = peft.PeftModel.from_pretrained(base, adapter)
            theirs = loaded(torch.from_numpy(ids)).numpy()
            plain, _ = base_model(fixture)
            missing, unexpected = plain.load_state_dict(
                load_file(merged + ".safetensors"), strict=False)
            merged_logits = plain(torch.from_numpy(ids)).numpy()
    adapter_error = float(np.linalg.norm(theirs - ours) / np.linalg.norm(ours))
    merged_error = float(np.linalg.norm(merged_logits - ours) / np.linalg.norm(ours))
    ok = adapter_error <= 1e-5 and merged_error <= 1e-5 and not unexpected
    print("%s %s: PeftModel.from_pretrained of ztc's adapter %.2e, the merged state dict "
          "(load_state_dict: %d missing, %d unexpected) %.2e, from ztc's logits"
          % ("ok  " if ok else "FAIL", name, adapter_error, len(missing), len(unexpected),
             merged_error), flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "lora"))
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--roundtrip", metavar="ZTC",
                        help="check ztc's exports with peft instead (above)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    if args.roundtrip:
        return 0 if all([roundtrip(name, args.out, args.roundtrip) for name in names]) else 1
    for name in names:
        make(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
