#!/usr/bin/env python3
"""QLoRA (`ztc compile --lora ... --base-dtype nf4`) against bitsandbytes
and peft.

test/fixtures/qlora (made by test/models/make_qlora.py with bitsandbytes
0.50 and peft from PyPI) holds the Llama of test/fixtures/modern with
every Linear but lm_head in bitsandbytes' NF4 (Linear4bit, double
quantization, float32 compute) and peft's q_proj/v_proj adapters. Checked:

  - the base weights ztc compiles into the artifact are bitsandbytes'
    bytes: packed codes, the scales' 8-bit codes, their scales and offset
    (the offset, a float32 mean, may differ in its last bits, and the
    scales by as little: see runtime/kernels/Nf4.h), and lm_head and the embeddings stay float32;
  - from peft's initial adapter, 20 AdamW steps give peft's losses within
    1e-5 and its adapters within 1e-5, and the 4-bit weights come out of
    training bit-identical;
  - memory: `ztc inspect` counts the NF4 base at no more than 0.56 bytes
    per parameter, the planned arena is the LoRA step's (no product
    dequantizes a whole weight into it), and the trained run writes no
    more of it than planned;
  - over 200 steps in bf16 the final loss is within 3% of bf16 LoRA on the
    float32 base;
  - `ztc export --adapter` writes peft's names, and `--merge` the
    dequantized weights with the adapters folded in: the merged model's
    loss is the trained QLoRA step's within 1e-5;
  - --base-dtype without --lora, with --zero 3, or other than nf4 is an
    error naming the flag; with --mpirun, ZeRO-2 on 2 ranks (adapter
    gradients and states sharded) within 1e-5 of one rank.

Usage: qlora_check.py --ztc PATH [--ztc-train PATH --mpirun PATH]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, read_checkpoint, read_safetensors, summary  # noqa: E402
from lora_check import ENV, ours_for, run  # noqa: E402
from modern_check import curve_error, losses_of  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "test", "fixtures", "qlora")
MODERN = os.path.join(REPO, "test", "fixtures", "modern", "llama")
INIT = os.path.join(REPO, "test", "fixtures", "lora", "llama", "adapter_init")
PARTS = (".absmax", ".nested_absmax", ".offset")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ztc", required=True)
    parser.add_argument("--ztc-train")
    parser.add_argument("--mpirun")
    args = parser.parse_args()
    ztc = args.ztc
    model = os.path.join(MODERN, "model.onnx")
    data = os.path.join(MODERN, "data")
    flags = ["--batch-size", "2", "--loss", "cross_entropy", "--optimizer", "adamw",
             "--lr", "1e-3", "--lora", INIT]

    with tempfile.TemporaryDirectory(prefix="ztc-qlora-") as tmp:
        def compile_(tag, *more):
            art = os.path.join(tmp, tag + ".ztc")
            return art, run(ztc, "compile", model, "-o", art, *flags, *more).stderr

        def train(art, tag, *more, steps=20, launcher=()):
            ckpt = os.path.join(tmp, tag + ".ckpt")
            command = [*launcher, args.ztc_train] if launcher else [ztc, "train"]
            result = run(*command, art, "--data", data, "--steps", steps, "--log-every", "1",
                         "--save", ckpt, *more)
            return losses_of(result.stderr), ckpt, result.stderr

        # 1. The base in 4 bits: bitsandbytes' bytes.
        art, report = compile_("qlora", "--lora-init", INIT, "--base-dtype", "nf4")
        init = read_safetensors(os.path.join(art, "init.safetensors"))
        theirs = read_safetensors(os.path.join(FIXTURE, "quantized.safetensors"))
        weights = sorted(k[:-len(".dequantized")] for k in theirs if k.endswith(".dequantized"))
        same_codes = all(np.array_equal(init[w], theirs[w]) for w in weights if w in init)
        same_scales = all(np.array_equal(init[w + ".absmax"], theirs[w + ".absmax"])
                          for w in weights if w + ".absmax" in init)
        worst = max((float(np.max(np.abs(init[w + p] - theirs[w + p])
                                  / np.maximum(np.abs(theirs[w + p]), 1e-30)))
                     for w in weights for p in (".nested_absmax", ".offset")
                     if w + p in init), default=1.0)
        check(all(w in init for w in weights) and same_codes and same_scales
              and worst <= 1e-6,
              "the %d 4-bit weights: packed codes (%s) and the scales' 8-bit codes (%s) "
              "bitsandbytes' bytes, their scales and offset within %.1e (relative; at "
              "most 1e-6, a few float32 ulps from the order of the offset's sum)"
              % (len(weights), same_codes, same_scales, worst))
        float_weights = [k for k in init if init[k].dtype == np.float32
                         and not k.endswith(PARTS) and "lora_" not in k]
        check(any(k.endswith("lm_head.weight") for k in float_weights)
              and any(k.endswith("embed_tokens.weight") for k in float_weights)
              and not any(k.endswith("_proj.weight") for k in float_weights),
              "lm_head and the embeddings stay float32, every projection is in 4 bits")

        # 2. Against peft and bitsandbytes, from peft's initial adapter.
        losses, ckpt, log = train(art, "qlora")
        reference = np.load(os.path.join(FIXTURE, "adamw_losses.npy"))
        error = curve_error(losses, reference)
        check(error <= 1e-5, "20 AdamW steps within %.2e of peft and bitsandbytes' QLoRA "
              "(%.6f -> %.6f, theirs %.6f -> %.6f)"
              % (error, losses[0] if losses else 0, losses[-1] if losses else 0,
                 reference[0], reference[-1]))
        trained = read_checkpoint(ckpt)
        final = read_safetensors(os.path.join(FIXTURE, "adapter_final.safetensors"))
        worst, unmatched = 0.0, []
        for key, value in final.items():
            ours = ours_for(key, trained)
            if ours is None:
                unmatched.append(key)
                continue
            worst = max(worst, float(np.linalg.norm(trained[ours] - value)
                                     / max(np.linalg.norm(value), 1e-12)))
        check(not unmatched and worst <= 1e-5,
              "the %d adapter tensors within %.2e of peft's after 20 steps%s"
              % (len(final), worst, "; missing: " + ", ".join(unmatched) if unmatched else ""))
        parts = [w + p for w in weights for p in ("",) + PARTS]
        changed = [k for k in parts if not np.array_equal(trained.get(k), init[k])]
        check(not changed, "the %d tensors of the 4-bit weights bit-identical after training%s"
              % (len(parts), "; changed: " + ", ".join(changed) if changed else ""))

        # 3. Memory, before and while running.
        shown = run(ztc, "inspect", art, "--weights").stdout
        nf4 = re.search(r"frozen base nf4: (\d+) elements, (\d+) bytes", shown)
        per = int(nf4.group(2)) / int(nf4.group(1)) if nf4 else 99.0
        expected = sum(theirs[w + ".dequantized"].size for w in weights)
        check(nf4 and int(nf4.group(1)) == expected and per <= 0.56,
              "ztc inspect: the NF4 base is %s parameters in %s bytes, %.3f bytes each (at "
              "most 0.56)" % (nf4.group(1) if nf4 else "?", nf4.group(2) if nf4 else "?", per))
        lora_art, lora_report = compile_("lora", "--lora-init", INIT)
        arena = re.search(r"arena (\d+) bytes", report)
        lora_arena = re.search(r"arena (\d+) bytes", lora_report)
        written = re.search(r"arena: (\d+) bytes planned, (\d+) written", log)
        check(arena and lora_arena and arena.group(1) == lora_arena.group(1)
              and written and int(written.group(2)) <= int(written.group(1)),
              "the planned arena is the float32 LoRA step's (%s and %s bytes), and training "
              "writes %s of it" % (arena.group(1) if arena else "?",
                                   lora_arena.group(1) if lora_arena else "?",
                                   written.group(2) if written else "?"))

        # 4. 200 steps in bf16 against bf16 LoRA.
        bf16_q, _ = compile_("qlora-bf16", "--base-dtype", "nf4", "--precision", "bf16")
        bf16_l, _ = compile_("lora-bf16", "--precision", "bf16")
        q_losses, _, _ = train(bf16_q, "qlora-bf16", steps=200)
        l_losses, _, _ = train(bf16_l, "lora-bf16", steps=200)
        gap = abs(q_losses[-1] - l_losses[-1]) / abs(l_losses[-1]) if q_losses and l_losses \
            else 1.0
        check(len(q_losses) == 200 and gap <= 0.03,
              "200 steps in bf16: QLoRA ends at %.5f, LoRA on the float32 base at %.5f (%.2f%% "
              "apart, at most 3%%)" % (q_losses[-1] if q_losses else 0,
                                       l_losses[-1] if l_losses else 0, 100 * gap))

        # 5. Exports.
        adapter = os.path.join(tmp, "adapter")
        run(ztc, "export", art, "--checkpoint", ckpt, "--adapter", adapter)
        exported = read_safetensors(os.path.join(adapter, "adapter_model.safetensors"))
        check(set(exported) == set(final),
              "ztc export --adapter: %d tensors under peft's names" % len(exported))
        merged = os.path.join(tmp, "merged.onnx")
        run(ztc, "export", art, "--checkpoint", ckpt, "--merge", "-o", merged)
        after, _, _ = train(art, "qlora-21", steps=21)
        merged_art = os.path.join(tmp, "merged.ztc")
        run(ztc, "compile", merged, "-o", merged_art, "--batch-size", "2", "--loss",
            "cross_entropy")
        merged_losses, _, _ = train(merged_art, "merged", steps=1)
        error = abs(merged_losses[0] - after[20]) / abs(after[20]) if merged_losses and \
            len(after) == 21 else 1.0
        check(error <= 1e-5, "ztc export --merge: the merged float32 model's loss %.6f is the "
              "trained QLoRA step's %.6f (within %.1e)"
              % (merged_losses[0] if merged_losses else 0,
                 after[20] if len(after) == 21 else 0, error))

        # 6. Errors, and ZeRO.
        for more, expect in ((["--base-dtype", "int4"], "--base-dtype 'int4'"),
                             (["--base-dtype", "nf4", "--zero", "3", "--world-size", "2"],
                              "--zero 3"),):
            result = subprocess.run([ztc, "compile", model, "-o", os.path.join(tmp, "x.ztc"),
                                     *flags, *more], capture_output=True, text=True, env=ENV)
            check(result.returncode != 0 and expect in result.stderr,
                  "%s: refused, naming %s: %s" % (" ".join(more), expect,
                                                   result.stderr.strip()[:200]))
        result = subprocess.run([ztc, "compile", model, "-o", os.path.join(tmp, "x.ztc"),
                                 "--batch-size", "2", "--base-dtype", "nf4"],
                                capture_output=True, text=True, env=ENV)
        check(result.returncode != 0 and "--lora" in result.stderr,
              "--base-dtype nf4 without --lora: refused, naming --lora: %s"
              % result.stderr.strip()[:200])
        if args.mpirun and args.ztc_train:
            art_z2 = os.path.join(tmp, "z2.ztc")
            run(ztc, "compile", model, "-o", art_z2, *flags, "--lora-init", INIT,
                "--base-dtype", "nf4", "--batch-size", "1", "--world-size", "2", "--zero", "2")
            sharded, _, _ = train(art_z2, "z2", launcher=(args.mpirun, "-np", "2"))
            error = curve_error(sharded, losses)
            check(error <= 1e-5, "ZeRO-2 on 2 ranks within %.2e of one rank" % error)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
