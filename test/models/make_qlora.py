#!/usr/bin/env python3
"""Builds test/fixtures/qlora: QLoRA as Hugging Face peft and bitsandbytes
do it, for test/training/qlora_check.py to hold `ztc compile --lora ...
--base-dtype nf4` to.

  make_qlora.py [--out test/fixtures/qlora]
  make_qlora.py --roundtrip ZTC    ztc's QLoRA exports back into peft (below)

Needs the reference environment of test/models/make_lora.py, with
bitsandbytes (pip install bitsandbytes==0.50.2; its 4-bit layers run on
the CPU).

The base model is test/fixtures/modern/llama's (the weights of its
model.onnx). Every Linear but the output layer (lm_head, which Hugging
Face's 4-bit loading keeps) becomes a bitsandbytes Linear4bit: NF4, blocks
of 64, double quantization (compress_statistics), float32 compute. peft
then adds the LoRA adapters of test/fixtures/lora/llama (r 4, alpha 8,
q_proj and v_proj), starting from that fixture's adapter_init, so ztc
starts from the same values (--lora-init). The directory holds:

  quantized.safetensors  for each 4-bit weight W (under its ONNX name):
                         W (the packed codes, uint8 as int8), W.absmax (the
                         8-bit codes of the block scales, as int8),
                         W.nested_absmax (float32), W.offset (float32 [1])
                         and W.dequantized (float32, dequantize_4bit's)
  adamw_losses.npy       20 torch.optim.AdamW(lr=1e-3) steps on the modern
                         fixture's batch
  adapter_final.safetensors  the adapter after them, under peft's names
  versions.json          torch, transformers, peft, bitsandbytes versions

--roundtrip ZTC: ztc trains the QLoRA step 20 steps from the fixture's
adapter, exports the adapter (`ztc export --adapter`) and the merged model
(`--merge`: the base dequantized, the adapters folded in, float32 ONNX);
PeftModel.from_pretrained loads the adapter onto the bitsandbytes 4-bit
model, and its logits must be those of `ztc run` on the merged model
within 1e-5. Exit 1 otherwise.
"""

import argparse
import json
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def quantized_model(torch, bnb, quantized=None):
    """The modern Llama with every Linear but lm_head a bitsandbytes
    Linear4bit (NF4, double quantization, float32 compute); `quantized`,
    when given, receives each weight's parts under its ONNX name."""
    import bitsandbytes.functional as F

    import make_lora

    model, modern = make_lora.base_model("llama")
    names = {id(module): name for name, module in model.named_modules()}

    def replace(parent):
        for child_name, child in list(parent.named_children()):
            name = names[id(child)]
            if isinstance(child, torch.nn.Linear) and not name.endswith("lm_head"):
                layer = bnb.nn.Linear4bit(child.in_features, child.out_features,
                                          bias=child.bias is not None,
                                          compute_dtype=torch.float32,
                                          compress_statistics=True, quant_type="nf4")
                layer.weight = bnb.nn.Params4bit(child.weight.data.clone(),
                                                 requires_grad=False,
                                                 compress_statistics=True,
                                                 quant_type="nf4", blocksize=64)
                if child.bias is not None:
                    layer.bias = torch.nn.Parameter(child.bias.data.clone())
                layer = layer.to("cpu")
                state = layer.weight.quant_state
                assert state.nested and state.blocksize == 64 and state.state2.blocksize == 256
                if quantized is not None:
                    key = name + ".weight"
                    quantized[key] = layer.weight.data.reshape(-1).view(torch.int8).clone()
                    quantized[key + ".absmax"] = state.absmax.view(torch.int8).clone()
                    quantized[key + ".nested_absmax"] = state.state2.absmax.float().clone()
                    quantized[key + ".offset"] = torch.tensor([float(state.offset)])
                    quantized[key + ".dequantized"] = F.dequantize_4bit(
                        layer.weight.data, state).float().clone()
                setattr(parent, child_name, layer)
            else:
                replace(child)

    replace(model)
    return model, modern


def roundtrip(ztc):
    import subprocess
    import tempfile

    import bitsandbytes as bnb
    import peft
    import torch

    init = os.path.join(REPO, "test", "fixtures", "lora", "llama", "adapter_init")
    with tempfile.TemporaryDirectory() as tmp:
        model, modern = quantized_model(torch, bnb)
        art, ckpt = os.path.join(tmp, "q.ztc"), os.path.join(tmp, "ckpt")
        subprocess.run([ztc, "compile", os.path.join(modern, "model.onnx"), "-o", art,
                        "--batch-size", "2", "--loss", "cross_entropy", "--lora", init,
                        "--lora-init", init, "--base-dtype", "nf4"], check=True,
                       capture_output=True)
        subprocess.run([ztc, "train", art, "--data", os.path.join(modern, "data"), "--steps",
                        "20", "--save", ckpt], check=True, capture_output=True)
        adapter, merged = os.path.join(tmp, "adapter"), os.path.join(tmp, "merged.onnx")
        subprocess.run([ztc, "export", art, "--checkpoint", ckpt, "--adapter", adapter,
                        "--merge", "-o", merged], check=True, capture_output=True)
        inputs, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        os.makedirs(inputs)
        ids = np.load(os.path.join(modern, "data", "input_ids.npy"))
        np.save(os.path.join(inputs, "input_ids.npy"), ids)
        subprocess.run([ztc, "run", merged, "--data", inputs, "--output-dir", out],
                       check=True, capture_output=True)
        ours = np.load(os.path.join(out, "logits.npy"))
        with torch.no_grad():
            loaded = peft.PeftModel.from_pretrained(model, adapter)
            theirs = loaded(torch.from_numpy(ids)).numpy()
    error = float(np.linalg.norm(theirs - ours) / np.linalg.norm(ours))
    ok = error <= 1e-5
    print("%s qlora: PeftModel.from_pretrained of ztc's adapter on bitsandbytes' 4-bit "
          "model %.2e from ztc's merged model's logits" % ("ok  " if ok else "FAIL", error),
          flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "qlora"))
    parser.add_argument("--roundtrip", metavar="ZTC",
                        help="check ztc's exports with peft instead (above)")
    args = parser.parse_args()
    if args.roundtrip:
        return 0 if roundtrip(args.roundtrip) else 1
    import bitsandbytes as bnb
    import peft
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    import make_lora

    os.makedirs(args.out, exist_ok=True)
    quantized = {}
    model, modern = quantized_model(torch, bnb, quantized)
    save_file(quantized, os.path.join(args.out, "quantized.safetensors"))

    ids = torch.from_numpy(np.load(os.path.join(modern, "data", "input_ids.npy")))
    labels = torch.from_numpy(np.load(os.path.join(modern, "data", "labels.npy")))
    init = os.path.join(REPO, "test", "fixtures", "lora", "llama", "adapter_init")
    config = peft.LoraConfig.from_pretrained(init)
    config.inference_mode = False
    wrapped = peft.get_peft_model(model, config)
    peft.set_peft_model_state_dict(
        wrapped, load_file(os.path.join(init, "adapter_model.safetensors")))
    trained = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    assert all("lora_" in n for n in trained), trained
    losses = make_lora.adamw_steps(wrapped, ids, labels)
    np.save(os.path.join(args.out, "adamw_losses.npy"), np.array(losses))
    adapter = peft.get_peft_model_state_dict(wrapped)
    save_file({k: v.detach().contiguous() for k, v in adapter.items()},
              os.path.join(args.out, "adapter_final.safetensors"))
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "peft": peft.__version__, "bitsandbytes": bnb.__version__,
                   "quant_type": "nf4", "blocksize": 64, "compress_statistics": True,
                   "compute_dtype": "float32"}, f, indent=1, sort_keys=True)
    print("made %s: %d 4-bit weights, losses %.6f -> %.6f, %d adapter tensors"
          % (args.out, len(quantized) // 5, losses[0], losses[-1], len(adapter)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
