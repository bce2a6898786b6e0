#!/usr/bin/env python3
"""Builds the fixtures of test/fixtures/modern: tiny, randomly initialized
models of unmodified transformers and timm classes, exported the way docs/guide.md
says (python/ztc_export.py: torch.onnx.export with dynamo=True; EXPORTS
below adds opset 23, the exporter without its optimizer, and the
TorchScript exporter), with the data and PyTorch's reference values that
test/training/modern_check.py holds ztc to.

  make_modern.py [--out test/fixtures/modern] [--only NAME,...]
  make_modern.py --roundtrip ZTC        the weights round trip (below)

Needs its own environment, apart from the test venv (PyPI's torch pulls
about 4 GB of CUDA libraries), with the versions the fixtures were made
with:

  python3 -m venv build/ref-venv
  build/ref-venv/bin/pip install torch==2.15.0 transformers==5.24.0 \\
      timm==1.0.31 onnx onnxscript safetensors numpy
  build/ref-venv/bin/pip install --no-deps torchvision==0.29.2

Each fixture directory holds:
  model.onnx          the export (parameters under state-dict names, roles
                      in its `ztc.initializers` metadata), without the
                      exporter's per-node debugging metadata
  data/input_ids.npy, data/labels.npy
                      one batch (2 sequences of 8 tokens, none the padding
                      token 0; labels random); for the image models
                      data/x.npy (2 images of 3x32x32, 64x64 in train() mode) and 2 labels of 10
                      classes
  meta.json           the output ztc compares ("logits", or "loss" for a
                      model that computes its own loss, whose labels are
                      then an input), the --loss to compile with, and
                      "batch_statistics" for training-mode BatchNorm
  output.npy          PyTorch's forward on the batch
  grads.npz           the gradient of the mean cross-entropy per parameter:
                      for each, NAME:index (up to 64 flat positions, a
                      seeded sample), NAME:value (the gradient there) and
                      NAME:norm (its L2 norm)
  adamw_losses.npy    20 torch.optim.AdamW(lr=1e-3) steps on the batch
  state_dict.json     the model's state-dict keys (what load_state_dict
                      expects), each with whether it is floating point
                      (an integer buffer such as BatchNorm's
                      num_batches_tracked has no place in the ONNX file)
  versions.json       torch, transformers, onnx and onnxscript versions

--roundtrip ZTC: for each model, trains the fixture 20 steps with ztc,
writes the state dict back (`ztc export --state-dict`), loads it into the
class with load_state_dict (strict but for integer buffers), and compares
PyTorch's forward with ztc's (`ztc run` of the trained ONNX). Prints one
line per model; exit 1 when one differs by more than 1e-5.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

BATCH, SEQUENCE, VOCAB = 2, 8, 64


def configs():
    """name -> (transformers class, config), all dropout off."""
    import transformers as tf

    small = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                 num_hidden_layers=2, num_attention_heads=4,
                 max_position_embeddings=32)
    return {
        "llama": (tf.LlamaForCausalLM, tf.LlamaConfig(num_key_value_heads=2, **small)),
        "qwen3": (tf.Qwen3ForCausalLM,
                  tf.Qwen3Config(num_key_value_heads=2, head_dim=8, **small)),
        "phi3": (tf.Phi3ForCausalLM,
                 tf.Phi3Config(num_key_value_heads=4, pad_token_id=0, **small)),
        "gpt2": (tf.GPT2LMHeadModel,
                 tf.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                               n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                               attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)),
        "bert": (tf.BertForMaskedLM,
                 tf.BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                               **small)),
        "t5": (tf.T5ForConditionalGeneration,
               tf.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                           num_heads=4, dropout_rate=0.0, decoder_start_token_id=0,
                           pad_token_id=0, eos_token_id=1)),
        # More decoder families as transformers writes them: Mistral
        # (sliding-window causal mask), Qwen2 (biased q, k, v), Gemma 2
        # (scores capped by tanh, GELU-tanh gates, norms scaled by 1 + w),
        # Gemma 3 (normalized q and k, local and global layers), GPT-NeoX
        # and Phi (rotary embeddings on part of each head, attention and MLP
        # side by side), OPT (learned positions after an offset), Falcon
        # (one key/value head) and BLOOM (ALiBi biases, built with Tile).
        "mistral": (tf.MistralForCausalLM,
                    tf.MistralConfig(num_key_value_heads=2, **small)),
        "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config(num_key_value_heads=2, **small)),
        "gemma2": (tf.Gemma2ForCausalLM,
                   tf.Gemma2Config(num_key_value_heads=2, head_dim=8, pad_token_id=0,
                                   **small)),
        "gemma3": (tf.Gemma3ForCausalLM,
                   tf.Gemma3TextConfig(num_key_value_heads=2, head_dim=8, pad_token_id=0,
                                       **small)),
        "gptneox": (tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(rotary_pct=0.25, **small)),
        "phi": (tf.PhiForCausalLM, tf.PhiConfig(**small)),
        "opt": (tf.OPTForCausalLM,
                tf.OPTConfig(vocab_size=VOCAB, hidden_size=32, ffn_dim=64,
                             num_hidden_layers=2, num_attention_heads=4,
                             max_position_embeddings=32, word_embed_proj_dim=32,
                             pad_token_id=0)),
        "falcon": (tf.FalconForCausalLM,
                   tf.FalconConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4)),
        "bloom": (tf.BloomForCausalLM,
                  tf.BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4)),
        # And encoders: ModernBERT (local and global attention, GeGLU) and
        # DeBERTa-v2 (disentangled relative-position attention).
        "modernbert": (tf.ModernBertForMaskedLM,
                       tf.ModernBertConfig(vocab_size=VOCAB, hidden_size=32,
                                           intermediate_size=64, num_hidden_layers=2,
                                           num_attention_heads=4, max_position_embeddings=32,
                                           pad_token_id=0)),
        "debertav2": (tf.DebertaV2ForMaskedLM, tf.DebertaV2Config(pad_token_id=0, **small)),
        # PoolFormer: GroupNorm with one group, which the exporter writes as
        # InstanceNormalization over [N, 1, C*H*W].
        "hf_poolformer": (tf.PoolFormerForImageClassification,
                          tf.PoolFormerConfig(hidden_sizes=[8, 16, 32, 64],
                                              depths=[1, 1, 1, 1], num_labels=10)),
        "hf_vit": (tf.ViTForImageClassification,
                   tf.ViTConfig(image_size=32, patch_size=8, hidden_size=32,
                                num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, num_labels=10,
                                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    }


class Logits:
    """model(input_ids) -> logits (model(pixel_values) for an image model),
    the one output ztc trains on; with `loss_inside`, model(input_ids,
    labels) -> the model's own loss."""

    def __new__(cls, model, loss_inside=False):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.model = inner

            def forward(self, input_ids, labels=None):
                if "ForImageClassification" in type(self.model).__name__:
                    return self.model(pixel_values=input_ids).logits
                kwargs = {} if "Bert" in type(self.model).__name__ else {"use_cache": False}
                if loss_inside:
                    return self.model(input_ids=input_ids, labels=labels, **kwargs).loss
                return self.model(input_ids=input_ids, **kwargs).logits

        return Wrapped(model)


# transformers models that compute their loss (a shifted cross-entropy):
# name -> the configuration they share. T5 (an encoder-decoder, its labels
# shifted right into the decoder's input) only as t5_torchscript below: the
# dynamo exporter fails on it ("Failed to decompose the FX graph").
LOSS_INSIDE = {"gpt2_loss": "gpt2", "t5_loss": "t5"}
ONLY_EXPORTED = {"t5", "t5_loss"}


# timm image models: name -> (timm model, keyword arguments), 10 classes.
IMAGE = {
    # timm's own MobileNetV3-Small builder at a quarter width (the fixture
    # stays near 1 MB): HardSwish, HardSigmoid, depthwise convolutions.
    "timm_mobilenetv3": ("mobilenetv3_small_050", {"channel_multiplier": 0.25}),
    "timm_resnet": ("test_resnet", {}),
    # torchvision's MobileNetV2 at a quarter width: ReLU6 (Clip) at its
    # bounds, depthwise convolutions, eval-mode BatchNorm.
    "tv_mobilenetv2": ("torchvision.mobilenet_v2", {"width_mult": 0.25}),
    "timm_efficientnet": ("test_efficientnet", {}),
    "timm_convnext": ("test_convnext", {}),
    # A fixed grid: timm resamples the position table (a bicubic Resize)
    # when dynamic_img_size is on, as test_vit has it.
    "timm_vit": ("test_vit", {"img_size": 32, "dynamic_img_size": False}),
}
# The same classes exported in other ways: name -> (model, ztc_export.export
# options). Llama at opset 23 (Attention, RMSNormalization), Llama without
# the exporter's optimizer (Cast, CastLike, Range, Identity, Constant and the
# shape arithmetic stay in the graph), and PyTorch's older TorchScript
# exporter (BERT at opset 18; ResNet at opset 17 in train() mode, so with
# training-mode BatchNorm, which it only exports that way, and PyTorch's
# references in train() mode too; the Llama and GPT-2 classes of
# transformers 5 do not export with it: aten::diff).
EXPORTS = {
    "llama_opset23": ("llama", {"opset_version": 23}),
    "llama_noopt": ("llama", {"optimize": False}),
    "bert_torchscript": ("bert", {"dynamo": False, "opset_version": 18}),
    "timm_resnet_torchscript": ("timm_resnet", {"dynamo": False, "opset_version": 17}),
    "t5_torchscript": ("t5_loss", {"dynamo": False, "opset_version": 18}),
}
TRAIN_MODE = {"timm_resnet_torchscript"}
# Gradient elements kept per parameter (with the gradient's norm): the
# fixtures stay small.
GRAD_SAMPLES = 64


def names():
    return [name for name in list(configs()) + list(LOSS_INSIDE) + list(IMAGE)
            + list(EXPORTS) if name not in ONLY_EXPORTED]


def model_of(name):
    """The model a fixture exports (itself, or the one it exports otherwise)."""
    return EXPORTS[name][0] if name in EXPORTS else name


def is_image(name):
    return model_of(name) in IMAGE or model_of(name).startswith("hf_")


def build(name):
    import torch

    if name in TRAIN_MODE:
        return build(model_of(name)).train()
    name = model_of(name)
    torch.manual_seed(0)
    if name in IMAGE:
        import timm

        model, kwargs = IMAGE[name]
        if model.startswith("torchvision."):
            import torchvision
            return getattr(torchvision.models, model.split(".")[1])(
                num_classes=10, **kwargs).eval()
        if "channel_multiplier" in kwargs:
            from timm.models import mobilenetv3
            return mobilenetv3._gen_mobilenet_v3(
                model, kwargs["channel_multiplier"], num_classes=10).eval()
        return timm.create_model(model, pretrained=False, num_classes=10, **kwargs).eval()
    cls, config = configs()[LOSS_INSIDE.get(name, name)]
    return Logits(cls(config).eval(), loss_inside=name in LOSS_INSIDE)


def batch_of(name, rng):
    """(input name, input, labels) of the fixture's batch."""
    if is_image(name):
        # Training-mode BatchNorm normalizes over batch and positions: at
        # 32x32 ResNet's last stage would see 2 values per channel, where
        # the gradient is ill-conditioned (1 / their spread); at 64x64, 8.
        side = 64 if name in TRAIN_MODE else 32
        return ("x", rng.standard_normal((BATCH, 3, side, side)).astype(np.float32),
                rng.integers(0, 10, (BATCH,)).astype(np.int64))
    # Token 0 is the padding_idx of BERT's and Phi-3's embeddings, which
    # ONNX cannot express (ztc_export warns): the batch does not use it.
    return ("input_ids", rng.integers(1, VOCAB, (BATCH, SEQUENCE)).astype(np.int64),
            rng.integers(0, VOCAB, (BATCH, SEQUENCE)).astype(np.int64))


def loss_of(module, ids, labels, loss_inside=False):
    import torch.nn.functional as F

    if loss_inside:
        return module(ids, labels)
    logits = module(ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def make(name, out):
    import torch

    import ztc_export

    directory = os.path.join(out, name)
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    module = build(name)
    rng = np.random.default_rng(7)
    input_name, ids, labels = batch_of(name, rng)
    np.save(os.path.join(directory, "data", input_name + ".npy"), ids)
    np.save(os.path.join(directory, "data", "labels.npy"), labels)
    ids_t, labels_t = torch.from_numpy(ids), torch.from_numpy(labels)
    inside = model_of(name) in LOSS_INSIDE
    path = os.path.join(directory, "model.onnx")
    # A model computing its loss takes the labels as an input of its own.
    ztc_export.export(module, (ids_t, labels_t) if inside else (ids_t,), path,
                      input_names=[input_name] + (["labels"] if inside else []),
                      output_names=["loss" if inside else "logits"],
                      **(EXPORTS[name][1] if name in EXPORTS else {}))
    with open(os.path.join(directory, "meta.json"), "w") as f:
        meta = {"output": "loss" if inside else "logits",
                "loss": "none" if inside else "cross_entropy"}
        if name in TRAIN_MODE:
            # BatchNorm normalizes over each rank's batch under data
            # parallelism (PyTorch's DDP without SyncBatchNorm alike).
            meta["batch_statistics"] = True
        json.dump(meta, f, indent=1)
    # The exporter's per-node debugging metadata (stack traces, FX nodes) is
    # a quarter of the file and nothing ztc reads: the fixtures drop it.
    import onnx
    exported = onnx.load(path)
    if name in TRAIN_MODE:
        # Tracing in train() mode moved the running statistics: the
        # references start from what the file holds.
        from onnx import numpy_helper
        state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
                 for t in exported.graph.initializer}
        module.load_state_dict({k: v for k, v in state.items()
                                if k in module.state_dict()}, strict=False)
    for node in exported.graph.node:
        del node.metadata_props[:]
    onnx.save(exported, path)

    with torch.no_grad():
        output = module(ids_t, labels_t) if inside else module(ids_t)
        np.save(os.path.join(directory, "output.npy"), output.numpy())
    loss = loss_of(module, ids_t, labels_t, inside)
    loss.backward()
    sampled, pick = {}, np.random.default_rng(11)
    for pname, parameter in module.named_parameters():
        flat = parameter.grad.numpy().ravel()
        index = np.sort(pick.permutation(flat.size)[:GRAD_SAMPLES])
        sampled[pname + ":index"] = index
        sampled[pname + ":value"] = flat[index]
        sampled[pname + ":norm"] = np.array(np.linalg.norm(flat.astype(np.float64)))
    np.savez(os.path.join(directory, "grads.npz"), **sampled)
    module.zero_grad()
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-3)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = loss_of(module, ids_t, labels_t, inside)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    np.save(os.path.join(directory, "adamw_losses.npy"), np.array(losses))
    with open(os.path.join(directory, "state_dict.json"), "w") as f:
        json.dump({k: v.is_floating_point() for k, v in build(name).state_dict().items()},
                  f, indent=1, sort_keys=True)
    import onnx
    import onnxscript
    import timm
    import transformers
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "timm": timm.__version__, "onnx": onnx.__version__,
                "onnxscript": onnxscript.__version__}
    if IMAGE.get(model_of(name), ("",))[0].startswith("torchvision."):
        import torchvision
        versions["torchvision"] = torchvision.__version__
    with open(os.path.join(directory, "versions.json"), "w") as f:
        json.dump(versions, f, indent=1, sort_keys=True)
    print("made %s" % directory, flush=True)


def roundtrip(name, fixtures, ztc):
    import torch
    from safetensors.torch import load_file

    directory = os.path.join(fixtures, name)
    with tempfile.TemporaryDirectory(prefix="ztc-roundtrip-") as tmp:
        art, ckpt = os.path.join(tmp, "a.ztc"), os.path.join(tmp, "ckpt")
        weights = os.path.join(tmp, "weights.safetensors")
        trained = os.path.join(tmp, "trained.onnx")
        run = lambda *a: subprocess.run([str(x) for x in a], check=True,
                                        capture_output=True, text=True)
        meta = json.load(open(os.path.join(directory, "meta.json")))
        run(ztc, "compile", os.path.join(directory, "model.onnx"), "-o", art,
            "--batch-size", BATCH, "--loss", meta["loss"], "--optimizer", "adamw",
            "--lr", "1e-3")
        run(ztc, "train", art, "--data", os.path.join(directory, "data"),
            "--steps", 20, "--save", ckpt)
        run(ztc, "export", art, "--checkpoint", ckpt, "-o", trained,
            "--state-dict", weights)
        out, inputs = os.path.join(tmp, "out"), os.path.join(tmp, "inputs")
        os.makedirs(inputs)
        input_name = "x" if is_image(name) else "input_ids"
        ids = np.load(os.path.join(directory, "data", input_name + ".npy"))
        labels = np.load(os.path.join(directory, "data", "labels.npy"))
        np.save(os.path.join(inputs, input_name + ".npy"), ids)
        inside = model_of(name) in LOSS_INSIDE
        if inside:
            np.save(os.path.join(inputs, "labels.npy"), labels)
        run(ztc, "run", trained, "--data", inputs, "--output-dir", out)
        ours = np.load(os.path.join(out, meta["output"] + ".npy"))
        module = build(name)
        image = model_of(name) in IMAGE
        target = module if image else module.model
        prefix = "" if image else "model."
        result = target.load_state_dict(
            {k[len(prefix):]: v for k, v in load_file(weights).items()}, strict=False)
        integral = {k[len(prefix):] for k, v in module.state_dict().items()
                    if not v.is_floating_point()}
        if result.unexpected_keys or set(result.missing_keys) - integral:
            print("%s: load_state_dict: missing %s, unexpected %s"
                  % (name, result.missing_keys, result.unexpected_keys))
            return False
        with torch.no_grad():
            args = (torch.from_numpy(ids),) + ((torch.from_numpy(labels),) if inside else ())
            reference = module(*args).numpy()
        error = float(np.abs(ours - reference).max() / np.abs(reference).max())
        print("%s: trained weights loaded with load_state_dict (every key but %d "
              "integer buffers): forward vs ztc %.2e" % (name, len(integral), error),
              flush=True)
        return error <= 1e-5


def main():
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "modern"))
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--roundtrip", metavar="ZTC",
                        help="check the weights round trip with this ztc")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else names()
    if args.roundtrip:
        results = [roundtrip(name, args.out, args.roundtrip) for name in chosen]
        return 0 if all(results) else 1
    for name in chosen:
        make(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
