#!/usr/bin/env python3
"""Builds test/fixtures/datasets: token datasets written by the real
libraries, which runtime/train/TokenDataset reads (TokenDatasetTest).

  make_datasets.py [--out test/fixtures/datasets]

Needs the reference environment of test/models/make_modern.py with
megatron-core and datasets:

  build/ref-venv/bin/pip install megatron-core==0.16.1 datasets

Writes:
  megatron_uint16.bin/.idx   megatron-core's IndexedDatasetBuilder (numpy
                             uint16 tokens): 5 documents, one of them empty
                             and one of two sequences (add_item twice, then
                             end_document)
  megatron_int32.bin/.idx    the same documents as int32
  hf/                        tools/ztc_dataset.py's output from a Hugging
                             Face `datasets` Dataset saved with
                             save_to_disk (an input_ids column)
  documents.json             the documents (token lists) all three hold,
                             in order, each as one list, and the versions
  length_grouped.json        transformers' get_length_grouped_indices (the
                             Trainer's group_by_length order) for given
                             lengths, batch sizes and permutations (its
                             torch.randperm replaced by each case's own), for
                             ztc-train --batching group
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Documents as sequences: document 2 is empty, document 3 has two.
DOCUMENTS = [[[5, 6, 7]], [[1]], [], [[9, 8], [7, 6, 65535]], [[2, 3, 4, 5]]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "test", "fixtures", "datasets"))
    args = parser.parse_args()
    import datasets
    import megatron.core
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

    os.makedirs(args.out, exist_ok=True)
    flat = [sum(document, []) for document in DOCUMENTS]
    for name, dtype in (("megatron_uint16", np.uint16), ("megatron_int32", np.int32)):
        prefix = os.path.join(args.out, name)
        builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
        for document in DOCUMENTS:
            for sequence in document:
                builder.add_item(torch.tensor(sequence, dtype=torch.int64))
            builder.end_document()
        builder.finalize(prefix + ".idx")
        # megatron-core's own reader gives the documents back.
        read = IndexedDataset(prefix)
        spans = read.document_indices
        got = [np.concatenate([read[s] for s in range(spans[d], spans[d + 1])]
                              or [np.zeros(0, dtype)]).tolist()
               for d in range(len(spans) - 1)]
        assert got == flat, (name, got)
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "hf")
        datasets.Dataset.from_dict({"input_ids": flat, "text": [str(d) for d in flat]}) \
            .save_to_disk(saved)
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "ztc_dataset.py"), saved,
                        "-o", os.path.join(args.out, "hf")], check=True)
    with open(os.path.join(args.out, "documents.json"), "w") as f:
        json.dump({"documents": flat,
                   "versions": {"megatron-core": megatron.core.__version__,
                                "datasets": datasets.__version__}}, f, indent=1)
    write_length_grouped(os.path.join(args.out, "length_grouped.json"))
    print("made %s" % args.out)


def write_length_grouped(path):
    """The Trainer's length-grouped order of several cases: skewed lengths
    (log-normal, as text is), ties, a dataset under four batches."""
    import torch
    import transformers
    from transformers import trainer_pt_utils

    rng = np.random.default_rng(38)
    cases = []
    for count, batch, lengths in (
            (1000, 8, np.clip(rng.lognormal(4.0, 0.8, 1000), 2, 512).astype(int)),
            (37, 4, rng.integers(1, 6, 37)),
            (10, 4, rng.integers(1, 100, 10)),
            (300, 6, np.clip(rng.lognormal(3.0, 1.0, 300), 2, 64).astype(int))):
        permutation = rng.permutation(count)
        real = torch.randperm
        torch.randperm = lambda n, generator=None: torch.tensor(permutation)
        try:
            order = trainer_pt_utils.get_length_grouped_indices(lengths.tolist(), batch)
        finally:
            torch.randperm = real
        cases.append({"batch_size": batch, "lengths": lengths.tolist(),
                      "permutation": permutation.tolist(), "order": [int(i) for i in order]})
    with open(path, "w") as f:
        json.dump({"cases": cases, "versions": {"transformers": transformers.__version__}}, f)


if __name__ == "__main__":
    main()
