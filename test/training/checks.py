"""What the training checks share: a ledger of named checks and a reader of
ztc's checkpoints (safetensors).

    check(ok, message)   prints "ok   message" or "FAIL message" and records it
    summary()            prints "N passed, M failed"; the exit status (0 or 1)
    read_safetensors(p)  {name: numpy array} of a checkpoint.safetensors
"""

import json

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
    return 1 if _failures else 0


def read_safetensors(path):
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]]).reshape(
            info["shape"])
    return out
