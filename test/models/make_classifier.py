#!/usr/bin/env python3
"""Builds test/fixtures/classifier: a BERT-style sequence classifier with an
attention mask, trained by PyTorch on dynamically padded batches, the
reference for `ztc-train --batching pad` on a token dataset with document
labels.

  make_classifier.py [--out test/fixtures/classifier]

Needs the reference environment of test/models/make_modern.py (torch,
transformers, tokenizers, onnx, onnxscript).

The model is transformers' BertForSequenceClassification (vocabulary 64,
width 32, 2 layers, 4 heads, 2 labels, no dropout), called as
model(input_ids, attention_mask) -> logits and exported with
python/ztc_export.py with a dynamic batch and sequence. The corpus is 48
documents of 3 to 24 tokens (ids 1..63; 0 is the padding token), each
labelled 1 when its first token is under 32. PyTorch trains 20 AdamW steps
(lr 1e-3, weight decay 0.01) on batches of 4 documents in order (12
batches an epoch, then the same again), each made by the Trainer's
DataCollatorWithPadding: padded to its longest document, with the
attention mask, the loss the mean cross entropy over the batch.

Writes:
  model.onnx        the export (initial weights)
  corpus.jsonl      the documents: {"input_ids": [...], "label": y} a line
  losses.json       the 20 losses, the hyperparameters and the versions
"""

import argparse
import json
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB, BATCH, STEPS = 64, 4, 20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "classifier"))
    args = parser.parse_args()
    import tokenizers
    import torch
    import transformers as tf

    sys.path.insert(0, os.path.join(REPO, "python"))
    import ztc_export

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(380)
    documents = []
    for _ in range(48):
        length = int(rng.integers(3, 25))
        ids = rng.integers(1, VOCAB, length).tolist()
        documents.append({"input_ids": ids, "label": int(ids[0] < 32)})
    with open(os.path.join(args.out, "corpus.jsonl"), "w") as f:
        for document in documents:
            f.write(json.dumps(document) + "\n")

    torch.manual_seed(0)
    config = tf.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=64, num_labels=2, pad_token_id=0,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = tf.BertForSequenceClassification(config)

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

    # A word-level tokenizer over the ids, for the Trainer's collator.
    vocab = {"[PAD]": 0, **{"t%d" % i: i for i in range(1, VOCAB)}}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[PAD]"))
    tokenizer = tf.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]")
    collator = tf.DataCollatorWithPadding(tokenizer)

    example = collator(documents[:BATCH])
    wrapped = Logits(model).eval()
    ztc_export.export(wrapped, (example["input_ids"], example["attention_mask"]),
                      os.path.join(args.out, "model.onnx"),
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_sequence=True, verbose=False)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    model.train()
    losses, lengths = [], []
    batches = len(documents) // BATCH
    for step in range(STEPS):
        first = (step % batches) * BATCH
        batch = collator(documents[first:first + BATCH])
        lengths.append(int(batch["input_ids"].shape[1]))
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=batch["labels"]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    import onnx
    import onnxscript
    with open(os.path.join(args.out, "losses.json"), "w") as f:
        json.dump({"losses": losses, "padded_lengths": lengths, "batch_size": BATCH,
                   "lr": 1e-3, "weight_decay": 0.01,
                   "versions": {"torch": torch.__version__, "transformers": tf.__version__,
                                "onnx": onnx.__version__,
                                "onnxscript": onnxscript.__version__}}, f, indent=1)
    print("made %s: losses %.4f -> %.4f" % (args.out, losses[0], losses[-1]))


if __name__ == "__main__":
    main()
