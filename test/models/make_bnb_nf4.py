#!/usr/bin/env python3
"""Builds test/fixtures/bnb_nf4: bitsandbytes' 4-bit NormalFloat quantization
of weights as QLoRA stores them (blocks of 64, the block scales quantized
again in 8 bits in blocks of 256), for runtime/kernels/Nf4.h to match.

  make_bnb_nf4.py [--out test/fixtures/bnb_nf4]

Needs the reference environment of test/models/make_modern.py with
bitsandbytes (pip install bitsandbytes==0.50.2; it quantizes on the CPU).

For each weight (float32, seeded): [96, 200] (19,200 elements: 300 blocks
of 64, their 300 scales in 2 blocks of 256, the second partial) and [7, 9]
(63 elements: one partial block, an odd count), calls
bitsandbytes.functional.quantize_4bit(W, blocksize=64,
compress_statistics=True, quant_type="nf4") and dequantize_4bit, and
writes <name>_weight, <name>_packed (the uint8 pairs of 4-bit codes, as
int8), <name>_scale_codes (the 8-bit codes of the block scales, as int8),
<name>_scale_scales (float32, one per 256 scales), <name>_offset (float32
[1], the scales' mean taken off before quantizing them), <name>_dequantized
(float32, as dequantize_4bit gives it), and nf4_codes, dynamic_codes (the
two code books), versions.json.
"""

import argparse
import json
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "bnb_nf4"))
    args = parser.parse_args()
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
    import torch

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(373)
    arrays = {}
    for name, shape in (("wide", (96, 200)), ("odd", (7, 9))):
        weight = rng.standard_normal(shape).astype(np.float32)
        weight[0, :5] *= 40  # a block with an outlier, as trained weights have
        packed, state = F.quantize_4bit(torch.from_numpy(weight), blocksize=64,
                                        compress_statistics=True, quant_type="nf4")
        back = F.dequantize_4bit(packed, state)
        assert state.nested and state.blocksize == 64 and state.state2.blocksize == 256
        arrays[name + "_weight"] = weight
        arrays[name + "_packed"] = packed.numpy().reshape(-1).view(np.int8)
        arrays[name + "_scale_codes"] = state.absmax.numpy().view(np.int8)
        arrays[name + "_scale_scales"] = state.state2.absmax.numpy().astype(np.float32)
        arrays[name + "_offset"] = np.asarray([float(state.offset)], np.float32)
        arrays[name + "_dequantized"] = back.numpy().astype(np.float32)
        arrays["nf4_codes"] = state.code.numpy().astype(np.float32)
        arrays["dynamic_codes"] = state.state2.code.numpy().astype(np.float32)
    for key, value in arrays.items():
        np.save(os.path.join(args.out, key + ".npy"), value)
    with open(os.path.join(args.out, "versions.json"), "w") as f:
        json.dump({"bitsandbytes": bnb.__version__, "torch": torch.__version__,
                   "blocksize": 64, "scale_blocksize": 256, "quant_type": "nf4"}, f,
                  indent=1)
    print("made %s" % args.out)


if __name__ == "__main__":
    main()
