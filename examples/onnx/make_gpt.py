#!/usr/bin/env python3
"""Generates gpt.onnx: a small GPT (decoder-only transformer) language model.

Token embedding + learned position embedding, N pre-LayerNorm blocks of
multi-head causal self-attention and a GELU MLP, a final LayerNorm and a
language-model head tied to the token embedding.

Default size: vocab 64, context 16, width 32, 2 heads, 2 blocks.
--gpt2-small: GPT-2-small size (vocab 50257, context 1024, width 768,
12 heads, 12 blocks, about 124M parameters), written as gpt2_small.onnx with
its tensors in gpt2_small.onnx.data (external data).

Input  `tokens` int64   [batch, context]         (batch is a dynamic axis "batch")
Output `logits` float32 [batch, context, vocab]
With --dynamic-length the second axis is the dynamic "sequence" (at most the
context): positions and the causal mask are sliced to it, as Hugging Face
exports do, so `ztc compile --seq-buckets` can bind one length per bucket.
Reference data: <name>_data/tokens.npy (batch 4, or 1 for --gpt2-small) and
<name>_ref/logits.npy (not written for --gpt2-small unless --ref is given).
"""

import math

import _common  # noqa: F401  (re-executes under .venv if needed)
from _common import base_argparser, describe, export, save_arrays, save_model, seed_everything

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context, dynamic=False):
        super().__init__()
        assert width % heads == 0
        self.width, self.heads, self.context = width, heads, context
        self.dynamic = dynamic
        self.head_dim = width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        # True above the diagonal: the positions a token must not attend to.
        future = torch.tril(torch.ones(context, context)) == 0
        self.register_buffer("future", future.view(1, 1, context, context), persistent=False)

    def forward(self, x):
        # Shapes use the configured constants (and -1 for the batch) so that the
        # exported Reshapes get constant target shapes, not Shape/Gather chains.
        # With a dynamic length, T is the input's (Shape/Gather chains).
        T, C, H, D = self.context, self.width, self.heads, self.head_dim
        future = self.future
        if self.dynamic:
            T = x.shape[1]
            future = future[:, :, :T, :T]
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.reshape(-1, T, H, D).transpose(1, 2)  # [B, H, T, D]
        k = k.reshape(-1, T, H, D).transpose(1, 2)
        v = v.reshape(-1, T, H, D).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(future, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v)  # [B, H, T, D]
        y = y.transpose(1, 2).reshape(-1, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, width, heads, context, dynamic=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, context, dynamic)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width),
            nn.GELU(),
            nn.Linear(4 * width, width),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, context, width, heads, layers, dynamic=False):
        super().__init__()
        self.context = context
        self.dynamic = dynamic
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, context, dynamic)
                                    for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        # GPT-2 style initialisation, except that biases and LayerNorm
        # parameters get small random values instead of exact zeros/ones: the
        # reference output then depends on every parameter, and PyTorch's
        # exporter does not merge equal initializers into Identity nodes.
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02
                if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                    std = 0.02 / math.sqrt(2 * layers)
                nn.init.normal_(p, mean=0.0, std=std)
            elif ".ln" in "." + name and name.endswith("weight"):
                nn.init.normal_(p, mean=1.0, std=0.02)
            else:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, tokens):
        # The input always has `context` positions, so the whole position
        # table is added (it stays a plain, named initializer in ONNX); with
        # a dynamic length, its first rows.
        positions = self.wpe.weight[:tokens.shape[1]] if self.dynamic else self.wpe.weight
        x = self.wte(tokens) + positions
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        # Language-model head tied to the token embedding (as in GPT-2).
        return torch.matmul(x, self.wte.weight.t())


SMALL = dict(vocab=64, context=16, width=32, heads=2, layers=2)
GPT2_SMALL = dict(vocab=50257, context=1024, width=768, heads=12, layers=12)


def main():
    p = base_argparser(__doc__.splitlines()[0])
    p.add_argument("--gpt2-small", action="store_true",
                   help="GPT-2-small size (~124M parameters, external data)")
    p.add_argument("--name", help="model name (default: gpt, or gpt2_small)")
    p.add_argument("--batch", type=int, help="batch of the reference input (default: 4, or 1)")
    p.add_argument("--ref", action="store_true",
                   help="also write the reference output for --gpt2-small (~200 MB)")
    p.add_argument("--dynamic-length", action="store_true",
                   help="the sequence length is a dynamic axis \"sequence\" of at most "
                        "the context (ztc compile --seq-buckets binds it)")
    p.add_argument("--constant-folding", action="store_true",
                   help="let PyTorch fold constants; this pre-transposes (and, for "
                        "the tied LM head, duplicates) weights into unnamed initializers")
    for key in SMALL:
        p.add_argument("--" + key, type=int, help="override %s" % key)
    args = p.parse_args()

    config = dict(GPT2_SMALL if args.gpt2_small else SMALL)
    for key in config:
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    name = args.name or ("gpt2_small" if args.gpt2_small else "gpt")
    batch = args.batch or (1 if args.gpt2_small else 4)
    big = args.gpt2_small

    seed_everything(args.seed)
    model = GPT(**config, dynamic=args.dynamic_length).eval()
    tokens = torch.randint(0, config["vocab"], (batch, config["context"]), dtype=torch.int64)

    logits = None
    if not big or args.ref:
        with torch.no_grad():
            logits = model(tokens)

    proto = export(
        model,
        (tokens,),
        input_names=["tokens"],
        output_names=["logits"],
        dynamic_axes=({"tokens": {0: "batch", 1: "sequence"},
                       "logits": {0: "batch", 1: "sequence"}} if args.dynamic_length else
                      {"tokens": {0: "batch"}, "logits": {0: "batch"}}),
        training=torch.onnx.TrainingMode.EVAL,
        do_constant_folding=args.constant_folding,
        output_shapes={"logits": (None, None if args.dynamic_length else config["context"],
                                  config["vocab"])},
    )
    del model
    path = save_model(proto, args.out, name, external_data=big)
    save_arrays(
        args.out,
        name,
        {"tokens": tokens.numpy()},
        {"logits": logits.numpy()} if logits is not None else {},
    )
    if not args.quiet:
        print(describe(proto, path))


if __name__ == "__main__":
    main()
