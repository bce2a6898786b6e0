#!/usr/bin/env python3
"""Writes a tokenized corpus as a ztc token dataset (DIR/tokens.npy and DIR/offsets.npy).

    tools/ztc_dataset.py SAVED_DATASET -o DIR [--column input_ids] [--split train]
                         [--label-column label]
    tools/ztc_dataset.py --jsonl FILE.jsonl -o DIR [--column input_ids] [--label-column label]

SAVED_DATASET is what Hugging Face `datasets` wrote with
`Dataset.save_to_disk` (or `DatasetDict.save_to_disk`: --split picks one),
after tokenizing, e.g.

    ds = datasets.load_dataset(...).map(lambda b: tokenizer(b["text"]), batched=True)
    ds.save_to_disk("corpus")

The `datasets` package is needed only for that form. A JSON-lines file
holds one document per line: a list of token ids, or an object whose
--column is one.

The output, which `ztc-train` reads without loading it whole
(runtime/train/TokenDataset.h): tokens.npy, every document's tokens end to
end (int32, or int64 when an id needs it), and offsets.npy, int64
[documents + 1], where document d is tokens[offsets[d]:offsets[d + 1]].
Documents keep their order; empty ones are kept. The tokens are streamed
to disk, so the corpus need not fit in memory; the offsets do. A token
that is not a non-negative integer is an error naming the document. DIR
is created; files in it are replaced only when both are written.

--label-column NAME (a sequence classifier's data: one integer label per
document, in that column or JSON field) also writes document_labels.npy,
int64 [documents], which ztc-train gives a model whose labels are [B].
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np

INT32_MAX = 2**31 - 1


class ConvertError(Exception):
    pass


def documents_from_jsonl(path, column, label_column=None):
    """(tokens, label) per document; label None without label_column."""
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                raise ConvertError("%s:%d: not JSON: %s" % (path, line_number, error))
            label = None
            if label_column is not None:
                if not isinstance(value, dict) or label_column not in value:
                    raise ConvertError("%s:%d: no '%s' field (--label-column)"
                                       % (path, line_number, label_column))
                label = value[label_column]
            if isinstance(value, dict):
                if column not in value:
                    raise ConvertError("%s:%d: no '%s' field (--column)"
                                       % (path, line_number, column))
                value = value[column]
            yield value, label


def documents_from_saved(path, column, split, label_column=None):
    try:
        import datasets
    except ImportError:
        raise ConvertError("reading %s needs the `datasets` package (pip install "
                           "datasets), or give --jsonl" % path)
    loaded = datasets.load_from_disk(path)
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise ConvertError("%s has splits %s, not '%s' (--split)"
                               % (path, ", ".join(loaded), split))
        loaded = loaded[split]
    for name, flag in ((column, "--column"), (label_column, "--label-column")):
        if name is not None and name not in loaded.column_names:
            raise ConvertError("%s has columns %s, not '%s' (%s)"
                               % (path, ", ".join(loaded.column_names), name, flag))
    columns = [column] + ([label_column] if label_column is not None else [])
    for batch in loaded.select_columns(columns).iter(batch_size=1024):
        labels = batch[label_column] if label_column is not None else [None] * len(batch[column])
        yield from zip(batch[column], labels)


def convert(documents, out_dir):
    """Writes `documents` (an iterable of (token sequence, label or None))
    to out_dir; returns (documents, tokens, dtype)."""
    os.makedirs(out_dir, exist_ok=True)
    offsets = [0]
    labels = []
    largest = 0
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".ztc-dataset-") as tmp:
        raw_path = os.path.join(tmp, "tokens.raw")
        with open(raw_path, "wb") as raw:
            for index, (document, label) in enumerate(documents):
                if label is not None:
                    if isinstance(label, bool) or not isinstance(label, int):
                        raise ConvertError("document %d: label %r is not an integer"
                                           % (index, label))
                    labels.append(label)
                try:
                    array = np.asarray(document)
                except (TypeError, ValueError) as error:
                    raise ConvertError("document %d: not a list of token ids (%s)"
                                       % (index, error))
                if array.size and (array.ndim != 1 or not np.issubdtype(array.dtype,
                                                                         np.integer)):
                    raise ConvertError("document %d: not a list of integer token ids "
                                       "(%s of shape %s)" % (index, array.dtype, array.shape))
                array = array.astype(np.int64).ravel()
                if array.size and array.min() < 0:
                    raise ConvertError("document %d: token %d is negative (%d)"
                                       % (index, int(np.argmin(array)), int(array.min())))
                if array.size:
                    largest = max(largest, int(array.max()))
                raw.write(array.tobytes())
                offsets.append(offsets[-1] + array.size)
        dtype = np.int32 if largest <= INT32_MAX else np.int64
        tokens_tmp = os.path.join(tmp, "tokens.npy")
        # The tokens go from the raw int64 file into the .npy in chunks.
        source = np.memmap(raw_path, dtype=np.int64, mode="r", shape=(offsets[-1],)) \
            if offsets[-1] else np.zeros(0, np.int64)
        target = np.lib.format.open_memmap(tokens_tmp, mode="w+", dtype=dtype,
                                           shape=(offsets[-1],))
        for start in range(0, offsets[-1], 1 << 22):
            target[start:start + (1 << 22)] = source[start:start + (1 << 22)]
        target.flush()
        del target, source
        offsets_tmp = os.path.join(tmp, "offsets.npy")
        np.save(offsets_tmp, np.asarray(offsets, dtype=np.int64))
        if labels:
            np.save(os.path.join(tmp, "document_labels.npy"), np.asarray(labels, np.int64))
        os.replace(tokens_tmp, os.path.join(out_dir, "tokens.npy"))
        os.replace(offsets_tmp, os.path.join(out_dir, "offsets.npy"))
        labels_path = os.path.join(out_dir, "document_labels.npy")
        if labels:
            os.replace(os.path.join(tmp, "document_labels.npy"), labels_path)
        elif os.path.exists(labels_path):
            os.remove(labels_path)
    return len(offsets) - 1, offsets[-1], np.dtype(dtype).name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[1:]))
    parser.add_argument("dataset", nargs="?", help="a directory Dataset.save_to_disk wrote")
    parser.add_argument("--jsonl", help="one document per line instead")
    parser.add_argument("-o", "--out", required=True, help="the output directory")
    parser.add_argument("--column", default="input_ids")
    parser.add_argument("--split", default="train")
    parser.add_argument("--label-column", help="also one integer label per document from "
                        "this column (a sequence classifier's): document_labels.npy")
    args = parser.parse_args()
    if bool(args.dataset) == bool(args.jsonl):
        parser.error("give a saved dataset or --jsonl FILE (one of them)")
    try:
        if args.jsonl:
            documents = documents_from_jsonl(args.jsonl, args.column, args.label_column)
        else:
            documents = documents_from_saved(args.dataset, args.column, args.split,
                                             args.label_column)
        count, tokens, dtype = convert(documents, args.out)
    except (ConvertError, OSError) as error:
        print("ztc_dataset.py: error: %s" % error, file=sys.stderr)
        return 1
    print("ztc_dataset.py: wrote %s (%d documents%s, %d tokens of %s)"
          % (args.out, count, " with labels" if args.label_column else "", tokens, dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
