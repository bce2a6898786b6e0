"""Exports a PyTorch model to ONNX for training with ztc.

    import ztc_export          # python/ in ztc's repository, on sys.path
    ztc_export.export(model, (input_ids,), "model.onnx",
                      input_names=["input_ids"], output_names=["logits"])

This is `torch.onnx.export(..., dynamo=True)` (PyTorch 2.x's exporter)
with two differences that matter for training:

- The exporter's optimizer folds and merges initializers by value: a
  Linear weight becomes its transpose under a generated name (`val_117`),
  norm weights that are all ones become one tensor (which would then train
  as one), a position embedding becomes the rows the example input used.
  Here the parameters and the persistent float buffers (BatchNorm's
  running statistics) are graph inputs while the optimizer runs, so it
  folds everything else (shape arithmetic, rotary tables, masks) and leaves
  each of them whole, under its state-dict name. A tied parameter (an LM
  head sharing the embedding) is one initializer. The first dimension of
  each input is a symbolic batch size (`dynamic_batch`), which
  `ztc compile --batch-size` binds.
- The role of every floating-point initializer is recorded in the model's
  metadata property `ztc.initializers`, a JSON object:

      {"<initializer>": {"role": "parameter" | "buffer" | "constant",
                         "tied": ["<other state-dict names of it>", ...]}}

  Parameters and buffers are named as in the model's state dict;
  constants are what the exporter computed (no state-dict entry).
  `ztc compile` trains the parameters, keeps buffers fixed (in checkpoints
  and exports) and folds constants into the step; `ztc export
  --state-dict` writes the trained parameters back under their names,
  tied ones under every name, for
  `model.load_state_dict(safetensors.torch.load_file(...))`.

`export(..., dynamo=False)` uses PyTorch's older TorchScript exporter
instead (opset 18 unless `opset_version` says otherwise), for the models
the dynamo exporter cannot take, and for BatchNorm in training form: a
model in train() mode is exported with training-mode BatchNorm, whose
running statistics ztc then updates as PyTorch does. Constant folding is
off, so every parameter keeps its state-dict name (a Linear weight is read
through a Transpose node rather than stored transposed); the roles are
written the same way.

An embedding's padding_idx has no ONNX form: `export` warns of it, and
ztc trains the padding row as any other (PyTorch keeps its gradient zero).

Needs torch >= 2.6 with onnxscript. ztc's test environment does not have
them (PyPI's torch pulls about 4 GB of CUDA libraries);
test/models/make_modern.py builds its own.
"""

import json
import os

METADATA_KEY = "ztc.initializers"
# Past protobuf's 2 GB limit the weights go to an external file.
_EXTERNAL_BYTES = (1 << 31) - (1 << 26)


def _tie_groups(model):
    """[names] of each parameter, the first the one named_parameters()
    reports; tied parameters share a group."""
    groups = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(parameter), []).append(name)
    return list(groups.values())


def _roles(model, initializer_names, float_names, parameters, tied):
    """The `ztc.initializers` entries of the float initializers."""
    # Persistent buffers only: a non-persistent one (a rotary inv_freq) is
    # not in the state dict, and is derived like any constant.
    buffers = {name for name, _ in model.named_buffers()} & set(model.state_dict())
    roles = {}
    for name in initializer_names:
        if name not in float_names:
            continue
        if name in parameters:
            roles[name] = {"role": "parameter"}
            if tied.get(name):
                roles[name]["tied"] = tied[name]
        elif name in buffers:
            roles[name] = {"role": "buffer"}
        else:
            roles[name] = {"role": "constant"}
    return roles


def _report(path, roles, verbose):
    if verbose:
        counts = {}
        for role in roles.values():
            counts[role["role"]] = counts.get(role["role"], 0) + 1
        print("ztc_export: wrote %s: %s" % (
            path, ", ".join("%d %s%s" % (n, k, "s" if n != 1 else "")
                            for k, n in sorted(counts.items()))))


def _export_torchscript(model, args, path, kwargs, input_names, output_names,
                        opset_version, dynamic_batch, verbose, dynamic_sequence=False):
    """The TorchScript exporter's file with the roles recorded."""
    import onnx
    import torch

    if kwargs:
        raise ValueError("ztc_export: the TorchScript exporter takes positional "
                         "arguments only (kwargs given)")
    if not model.training and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                                  for m in model.modules()):
        print("ztc_export: warning: the model is in eval mode: the TorchScript exporter "
              "folds its BatchNorm into the convolutions, whose folded weights are "
              "not the model's parameters (export in train() mode to train them)")
    names = list(input_names or [])
    axes = {name: {0: "batch"} for name, arg in zip(names, args)
            if dynamic_batch and isinstance(arg, torch.Tensor) and arg.dim() > 0}
    for name, arg in zip(names, args):
        if dynamic_sequence and isinstance(arg, torch.Tensor) and arg.dim() > 1:
            axes.setdefault(name, {})[1] = "sequence"
    torch.onnx.export(model, tuple(args), path, dynamo=False,
                      opset_version=opset_version or 18, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      input_names=input_names, output_names=output_names,
                      dynamic_axes=axes or None)
    exported = onnx.load(path)
    present = {t.name for t in exported.graph.initializer}
    parameters, tied = set(), {}
    for group in _tie_groups(model):
        found = [name for name in group if name in present]
        if found:
            parameters.add(found[0])
            tied[found[0]] = [name for name in group if name != found[0]]
    floats = {t.name for t in exported.graph.initializer
              if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                 onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)}
    roles = _roles(model, [t.name for t in exported.graph.initializer], floats,
                   parameters, tied)
    entry = exported.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(roles, sort_keys=True)
    size = sum(t.ByteSize() for t in exported.graph.initializer)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.save(exported, path, save_as_external_data=size > _EXTERNAL_BYTES,
              location=os.path.basename(path) + ".data")
    _report(path, roles, verbose)
    return roles


def export(model, args, path, kwargs=None, input_names=None, output_names=None,
           opset_version=None, optimize=True, dynamic_batch=True, verbose=True,
           dynamo=True, dynamic_sequence=False):
    """Exports `model` called with `args` (a tuple) and `kwargs` to the ONNX
    file `path` with the roles of its initializers, and returns them.
    `input_names`, `output_names` and `opset_version` are
    torch.onnx.export's; `optimize=False` skips the exporter's optimizer.
    With `dynamic_batch` the first dimension of every tensor in `args` is
    one symbolic batch size, which `ztc compile --batch-size` binds (ZeRO
    and gradient accumulation need a per-rank batch other than the
    example's). With `dynamic_sequence` the second dimension of every
    tensor in `args` of rank 2 or more is one symbolic sequence length,
    which `ztc compile --seq-buckets` binds per bucket (token ids and their
    attention mask). `dynamo=False` uses the TorchScript exporter (above)."""
    import torch

    # padding_idx does not survive in ONNX (an embedding is a Gather).
    for module_name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
            print("ztc_export: warning: embedding '%s' has padding_idx=%d, which ONNX "
                  "cannot express: ztc trains that row like the others, where PyTorch "
                  "keeps its gradient zero (inputs without that token train alike)"
                  % (module_name, module.padding_idx))

    if not dynamo:
        return _export_torchscript(model, args, path, kwargs, input_names,
                                   output_names, opset_version, dynamic_batch, verbose,
                                   dynamic_sequence)

    if model.training and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                              for m in model.modules()):
        print("ztc_export: warning: the model is in training mode, but PyTorch's "
              "exporter writes BatchNorm in inference form: ztc will normalize with "
              "the running statistics and keep them fixed (call model.eval() to say so, "
              "or export with dynamo=False for training-mode BatchNorm)")

    options = {"input_names": input_names, "output_names": output_names}
    if opset_version is not None:
        options["opset_version"] = opset_version
    program = None
    if dynamic_batch:
        batch = torch.export.Dim("batch", min=1, max=1 << 20)
        sequence = torch.export.Dim("sequence", min=2, max=1 << 16)
        shapes = tuple(({0: batch, 1: sequence} if dynamic_sequence and arg.dim() > 1
                        else {0: batch})
                       if isinstance(arg, torch.Tensor) and arg.dim() > 0
                       else None for arg in args)
        try:
            program = torch.onnx.export(model, tuple(args), kwargs=kwargs, dynamo=True,
                                        optimize=False, dynamic_shapes=shapes, **options)
        except Exception as error:  # the exporter's own limits (T5's views)
            print("ztc_export: warning: cannot export a symbolic batch size (%s); "
                  "exporting the example's batch of %d, which --batch-size must match"
                  % (str(error).strip().splitlines()[0][:200], args[0].shape[0]))
    if program is None:
        program = torch.onnx.export(model, tuple(args), kwargs=kwargs, dynamo=True,
                                    optimize=False, **options)
    graph = program.model.graph
    initializers = graph.initializers

    parameters, tied = set(), {}
    for names in _tie_groups(model):
        present = [name for name in names if name in initializers]
        if not present:
            continue
        canonical = present[0]
        parameters.add(canonical)
        tied[canonical] = [name for name in names if name != canonical]
        # The other names of a tied parameter read the canonical one.
        for other in present[1:]:
            value = initializers[other]
            value.replace_all_uses_with(initializers[canonical])
            del initializers[other]

    # Persistent float buffers (BatchNorm's running statistics) stay whole
    # under their names too: the optimizer would merge those that start
    # equal. Non-persistent ones (rotary inv_freq) may fold into constants.
    persistent = {name for name, value in model.state_dict(keep_vars=True).items()
                  if value.is_floating_point()} - parameters - {
                      n for names in tied.values() for n in names}
    persistent &= set(initializers)

    if optimize:
        # The parameters are graph inputs while the optimizer runs: it
        # cannot fold, transpose or merge what has no value.
        hidden = {}
        for name in sorted(parameters | persistent):
            value = initializers[name]
            hidden[name] = (value, value.const_value)
            del initializers[name]
            value.const_value = None
            graph.inputs.append(value)
        program.optimize()
        for name, (value, tensor) in hidden.items():
            graph.inputs.remove(value)
            value.const_value = tensor
            graph.register_initializer(value)

    floats = {name for name, value in graph.initializers.items()
              if value.dtype is not None and value.dtype.is_floating_point()}
    roles = _roles(model, list(graph.initializers), floats, parameters, tied)
    program.model.metadata_props[METADATA_KEY] = json.dumps(roles, sort_keys=True)

    size = sum(v.const_value.nbytes for v in graph.initializers.values()
               if v.const_value is not None)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    program.save(path, external_data=size > _EXTERNAL_BYTES)
    _report(path, roles, verbose)
    return roles
