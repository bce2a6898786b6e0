"""Shared helpers for the ONNX example generators in this directory.

Each generator builds a small PyTorch model with a fixed seed, exports it with
torch.onnx.export and writes, under the output directory:

    <name>.onnx                 the model
    <name>_data/<input>.npy     a reference input per graph input
    <name>_ref/<output>.npy     PyTorch's output for that input

The scripts must run under the repository's virtual environment (created by
scripts/setup.sh); when started with another interpreter they re-execute
themselves with .venv/bin/python if it exists.
"""

import argparse
import io
import os
import sys

EXAMPLES_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(EXAMPLES_DIR))
DEFAULT_OUT = os.path.join(EXAMPLES_DIR, "models")
OPSET = 17


def ensure_venv():
    """Re-executes the running script with the repository's venv Python."""
    venv = os.path.join(REPO_ROOT, ".venv")
    venv_python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.path.exists(venv_python):
        return  # Let the imports below fail (or succeed) on their own.
    if os.environ.get("ZTC_EXAMPLES_REEXEC") == "1":
        return  # Guard against loops.
    os.environ["ZTC_EXAMPLES_REEXEC"] = "1"
    os.execv(venv_python, [venv_python] + sys.argv)


ensure_venv()

import numpy as np  # noqa: E402
import torch  # noqa: E402


def base_argparser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help="output directory (default: examples/onnx/models in the repository)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    return p


def seed_everything(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def export(model, args, input_names, output_names, dynamic_axes, output_shapes=None, **kwargs):
    """Exports `model` to an in-memory ONNX model (onnx.ModelProto).

    output_shapes: optional {output name: shape}, None for a dynamic axis;
    fixes output dimensions that PyTorch's exporter left symbolic although
    they are static.
    """
    import onnx

    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model,
            args,
            buf,
            opset_version=OPSET,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            export_params=True,
            **kwargs,
        )
    proto = onnx.load_from_string(buf.getvalue())
    for out in proto.graph.output:
        shape = (output_shapes or {}).get(out.name)
        if shape is None:
            continue
        dims = out.type.tensor_type.shape.dim
        assert len(dims) == len(shape), (out.name, len(dims), shape)
        for dim, size in zip(dims, shape):
            if size is not None:
                dim.Clear()
                dim.dim_value = size
    return proto


def save_model(model_proto, out_dir, name, external_data=False):
    """Checks and writes <out_dir>/<name>.onnx; returns its path."""
    import onnx

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".onnx")
    if external_data:
        location = name + ".onnx.data"
        data_path = os.path.join(out_dir, location)
        if os.path.exists(data_path):
            os.remove(data_path)  # save_model appends to an existing file.
        onnx.save_model(
            model_proto,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=location,
            size_threshold=1024,
        )
        # The checker needs the path to find the external data.
        onnx.checker.check_model(path)
    else:
        onnx.checker.check_model(model_proto)
        onnx.save_model(model_proto, path)
    return path


def save_arrays(out_dir, name, inputs, outputs):
    """Writes reference inputs/outputs (dicts name -> np.ndarray) as .npy."""
    for suffix, arrays in (("_data", inputs), ("_ref", outputs)):
        if not arrays:
            continue
        d = os.path.join(out_dir, name + suffix)
        os.makedirs(d, exist_ok=True)
        for key, value in arrays.items():
            np.save(os.path.join(d, key + ".npy"), np.ascontiguousarray(value))


def describe(model_proto, path):
    """One human-readable summary of an exported model."""
    g = model_proto.graph
    ops = sorted({n.op_type for n in g.node})
    n_params = 0
    for init in g.initializer:
        size = 1
        for d in init.dims:
            size *= d
        n_params += size

    def shape(vi):
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            dims.append(d.dim_param if d.dim_param else str(d.dim_value))
        return "[" + ",".join(dims) + "]"

    lines = [
        "wrote %s" % path,
        "  opset %s, %d nodes, %d initializers (%d parameters)"
        % (
            ",".join("%s:%d" % (o.domain or "ai.onnx", o.version) for o in model_proto.opset_import),
            len(g.node),
            len(g.initializer),
            n_params,
        ),
        "  inputs:  " + ", ".join("%s%s" % (i.name, shape(i)) for i in g.input),
        "  outputs: " + ", ".join("%s%s" % (o.name, shape(o)) for o in g.output),
        "  ops: " + " ".join(ops),
    ]
    return "\n".join(lines)
