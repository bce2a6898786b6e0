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
# Rank 9: more dimensions than the kernels' shape type holds, as an input,
# an initializer, and a node's result.
model("rank9-input", [helper.make_node("Relu", ["a"], ["y"])],
      [("a", [1] * 8 + [2])])
model("rank9-initializer", [helper.make_node("Add", ["a", "w"], ["y"])],
      [("a", [2])],
      [helper.make_tensor("w", TensorProto.FLOAT, [1] * 8 + [2], [1.0, 2.0])])
model("rank9-reshape", [helper.make_node("Reshape", ["a", "s"], ["y"])],
      [("a", [2, 2])],
      [helper.make_tensor("s", TensorProto.INT64, [9], [1] * 7 + [2, 2])])
# A stride of 0 with auto_pad SAME divided by zero.
model("same-stride0", [helper.make_node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2],
                                        strides=[0, 1], auto_pad="SAME_UPPER")],
      [("a", [1, 1, 4, 4])])
