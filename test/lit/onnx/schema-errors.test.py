"""Writes the models of schema-errors.test into the directory argv[1]."""
import os
import sys

from onnx import TensorProto, helper, save

out = sys.argv[1]


def model(name, nodes, inputs, initializers=(), opset=17):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
         for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(initializers))
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]),
         os.path.join(out, name + ".onnx"))


model("max-empty", [helper.make_node("Max", ["a", ""], ["y"])],
      [("a", [2, 2])])
transpose = helper.make_node("Transpose", ["a"], ["y"])
transpose.attribute.append(helper.make_attribute("perm", [1.0, 0.0]))
model("float-perm", [transpose], [("a", [2, 2])])
model("huge-dim", [helper.make_node("Relu", ["a"], ["y"])],
      [("a", [1 << 62, 2])])
model("negative-opset", [helper.make_node("Relu", ["a"], ["y"])],
      [("a", [2, 2])], opset=-3)
model("split-scalar", [helper.make_node("Split", ["a"], ["y"], axis=0)],
      [("a", [])])
model("huge-reshape", [helper.make_node("Reshape", ["a", "s"], ["y"])],
      [("a", [2, 2])],
      [helper.make_tensor("s", TensorProto.INT64, [2], [1 << 32, 1 << 32])])
