#!/usr/bin/env python3
"""Generates cnn.onnx: a small CNN for 1x8x8 (digits-sized) images.

Two blocks of Conv2d(3x3, pad 1) + BatchNorm2d + ReLU + MaxPool2d(2), then
Flatten + Linear to 10 classes, exported in inference mode.

Input  `x`      float32 [batch, 1, 8, 8]   (batch is a dynamic axis "batch")
Output `logits` float32 [batch, 10]
Reference data: cnn_data/x.npy (batch 8), cnn_ref/logits.npy.

By default BatchNormalization stays a separate node (in inference mode,
training_mode=0) so that the graph keeps the trainable BatchNorm parameters;
--fuse-bn lets PyTorch fold BatchNorm into the convolutions instead.
--training exports cnn_train.onnx: the same network in training mode
(BatchNormalization with training_mode=1 normalizes with the batch's
statistics and returns updated running statistics), as PyTorch trains it.
"""

import _common  # noqa: F401  (re-executes under .venv if needed)
from _common import base_argparser, describe, export, save_arrays, save_model, seed_everything

import copy
import warnings

import torch
from torch import nn

NAME = "cnn"
REF_BATCH = 8


class CNN(nn.Module):
    def __init__(self, channels=(1, 8, 16), classes=10, image=8):
        super().__init__()
        blocks = []
        for cin, cout in zip(channels[:-1], channels[1:]):
            blocks += [
                nn.Conv2d(cin, cout, kernel_size=3, padding=1),
                nn.BatchNorm2d(cout),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            image //= 2
        self.features = nn.Sequential(*blocks)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(channels[-1] * image * image, classes)

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def main():
    p = base_argparser(__doc__.splitlines()[0])
    p.add_argument("--fuse-bn", action="store_true",
                   help="export with TrainingMode.EVAL, which folds BatchNorm into Conv")
    p.add_argument("--training", action="store_true",
                   help="export cnn_train.onnx with TrainingMode.TRAINING (training-mode "
                        "BatchNormalization)")
    args = p.parse_args()
    name = NAME + "_train" if args.training else NAME
    seed_everything(args.seed)

    model = CNN()
    # Give BatchNorm non-trivial statistics and affine parameters so that a
    # wrong BatchNorm implementation shows in the reference output.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model.train(args.training)

    x = torch.rand(REF_BATCH, 1, 8, 8)
    # In training mode a forward pass moves the running statistics; the
    # reference runs on a copy so that the exported ones stay as drawn.
    with torch.no_grad():
        logits = copy.deepcopy(model)(x)

    if args.training:
        # num_batches_tracked counts steps; ONNX has no place for it.
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
        extra = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    elif args.fuse_bn:
        extra = dict(training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True)
    else:
        # TrainingMode.EVAL would run PyTorch's eval peephole pass, which fuses
        # Conv+BatchNorm even without constant folding. PRESERVE on a model in
        # eval mode exports the same inference semantics with BatchNorm kept.
        extra = dict(training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)

    proto = export(
        model,
        (x,),
        input_names=["x"],
        output_names=["logits"],
        dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
        **extra,
    )
    path = save_model(proto, args.out, name)
    save_arrays(args.out, name, {"x": x.numpy()}, {"logits": logits.numpy()})
    if not args.quiet:
        print(describe(proto, path))


if __name__ == "__main__":
    main()
