"""What the training checks share: a ledger of named checks and a reader of
ztc's checkpoints (safetensors).

    check(ok, message)   prints "ok   message" or "FAIL message" and records it
    summary()            prints "N passed, M failed"; the exit status (0 or 1)
    read_safetensors(p)  {name: numpy array} of a checkpoint.safetensors
    read_safetensors_raw(p)  (header, data bytes) of a safetensors file
    read_checkpoint(d)   read_safetensors of d/checkpoint.safetensors
    tensors_equal(a, b)  whether two {name: array} hold the same names and bits
"""

import json
import os

import numpy as np

_checks = []
_failures = []


def check(ok, message):
    print("%s %s" % ("ok  " if ok else "FAIL", message), flush=True)
    _checks.append(message)
    if not ok:
        _failures.append(message)


def summary():
    print("%d passed, %d failed" % (len(_checks) - len(_failures), len(_failures)))
    # Again at the end, where a log cut in the middle still shows them (not
    # as FAIL lines, which scripts count).
    for message in _failures:
        print("failed: " + message)
    return 1 if _failures else 0


def read_safetensors_raw(path):
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(size)), f.read()


def read_safetensors(path):
    header, data = read_safetensors_raw(path)
    dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
              "I8": np.int8, "U8": np.uint8}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]]).reshape(
            info["shape"])
    return out


def read_checkpoint(directory):
    return read_safetensors(os.path.join(directory, "checkpoint.safetensors"))


def tensors_equal(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
