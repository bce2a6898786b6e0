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


def export(model, args, path, kwargs=None, input_names=None, output_names=None,
           opset_version=None, optimize=True, dynamic_batch=True, verbose=True):
    """Exports `model` called with `args` (a tuple) and `kwargs` to the ONNX
    file `path` with the roles of its initializers, and returns them.
    `input_names`, `output_names` and `opset_version` are
    torch.onnx.export's; `optimize=False` skips the exporter's optimizer.
    With `dynamic_batch` the first dimension of every tensor in `args` is
    one symbolic batch size, which `ztc compile --batch-size` binds (ZeRO
    and gradient accumulation need a per-rank batch other than the
    example's)."""
    import torch

    # padding_idx does not survive in ONNX (an embedding is a Gather).
    for module_name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
            print("ztc_export: warning: embedding '%s' has padding_idx=%d, which ONNX "
                  "cannot express: ztc trains that row like the others, where PyTorch "
                  "keeps its gradient zero (inputs without that token train alike)"
                  % (module_name, module.padding_idx))

    if model.training and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                              for m in model.modules()):
        print("ztc_export: warning: the model is in training mode, but PyTorch's "
              "exporter writes BatchNorm in inference form: ztc will normalize with "
              "the running statistics and keep them fixed (call model.eval() to say so)")

    options = {"input_names": input_names, "output_names": output_names}
    if opset_version is not None:
        options["opset_version"] = opset_version
    program = None
    if dynamic_batch:
        batch = torch.export.Dim("batch", min=1, max=1 << 20)
        shapes = tuple({0: batch} if isinstance(arg, torch.Tensor) and arg.dim() > 0
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

    buffers = {name for name, _ in model.named_buffers()}
    roles = {}
    for name, value in graph.initializers.items():
        if value.dtype is None or not value.dtype.is_floating_point():
            continue
        if name in parameters:
            roles[name] = {"role": "parameter"}
            if tied.get(name):
                roles[name]["tied"] = tied[name]
        elif name in buffers:
            roles[name] = {"role": "buffer"}
        else:
            roles[name] = {"role": "constant"}
    program.model.metadata_props[METADATA_KEY] = json.dumps(roles, sort_keys=True)

    size = sum(v.const_value.nbytes for v in graph.initializers.values()
               if v.const_value is not None)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    program.save(path, external_data=size > _EXTERNAL_BYTES)
    if verbose:
        counts = {}
        for role in roles.values():
            counts[role["role"]] = counts.get(role["role"], 0) + 1
        print("ztc_export: wrote %s: %s" % (
            path, ", ".join("%d %s%s" % (n, k, "s" if n != 1 else "")
                            for k, n in sorted(counts.items()))))
    return roles
