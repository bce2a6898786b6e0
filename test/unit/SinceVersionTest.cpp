//===- SinceVersionTest.cpp - since-version resolution and registry ------===//
//
// Converters are keyed by (op type, since-version); these tests pin the
// resolution rule against the ONNX operator history and check that every
// op type the importer claims to support resolves at the opsets PyTorch
// emits (13 to 18).
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include "gtest/gtest.h"

using namespace mlir::ztc::onnx_to_nn;

namespace {

TEST(SinceVersion, PicksLatestVersionAtOrBelowOpset) {
  // Softmax changed at 1, 11 and 13.
  EXPECT_EQ(resolveSinceVersion("Softmax", 12), 11);
  EXPECT_EQ(resolveSinceVersion("Softmax", 13), 13);
  EXPECT_EQ(resolveSinceVersion("Softmax", 17), 13);
  // ReduceMean moved its axes to an input at 18.
  EXPECT_EQ(resolveSinceVersion("ReduceMean", 17), 13);
  EXPECT_EQ(resolveSinceVersion("ReduceMean", 18), 18);
}

TEST(SinceVersion, UnknownOperatorsAndOpsetsResolveToNothing) {
  EXPECT_FALSE(resolveSinceVersion("NoSuchOp", 17).has_value());
  // Gelu only exists from opset 20.
  EXPECT_FALSE(resolveSinceVersion("Gelu", 17).has_value());
  EXPECT_EQ(resolveSinceVersion("Gelu", 20), 20);
}

TEST(Registry, CoversPyTorchOpsets) {
  const ConverterRegistry &registry = ConverterRegistry::get();
  const char *required[] = {"Add",
                            "Sub",
                            "Mul",
                            "Div",
                            "Pow",
                            "Sqrt",
                            "Reciprocal",
                            "Neg",
                            "Exp",
                            "Log",
                            "Tanh",
                            "Sigmoid",
                            "Relu",
                            "LeakyRelu",
                            "Erf",
                            "Softplus",
                            "Abs",
                            "Clip",
                            "Min",
                            "Max",
                            "Where",
                            "Equal",
                            "Less",
                            "Greater",
                            "Not",
                            "And",
                            "Cast",
                            "CastLike",
                            "Identity",
                            "Dropout",
                            "MatMul",
                            "Gemm",
                            "Conv",
                            "BatchNormalization",
                            "LayerNormalization",
                            "MaxPool",
                            "AveragePool",
                            "GlobalAveragePool",
                            "Softmax",
                            "LogSoftmax",
                            "ReduceSum",
                            "ReduceMean",
                            "ReduceMax",
                            "Reshape",
                            "Transpose",
                            "Flatten",
                            "Squeeze",
                            "Unsqueeze",
                            "Concat",
                            "Split",
                            "Slice",
                            "Gather",
                            "Expand",
                            "Shape",
                            "Size",
                            "Constant",
                            "ConstantOfShape",
                            "Range",
                            "Trilu",
                            "SoftmaxCrossEntropyLoss",
                            "NegativeLogLikelihoodLoss"};
  for (const char *op : required) {
    for (int64_t opset = 13; opset <= 18; ++opset) {
      std::optional<int64_t> since = resolveSinceVersion(op, opset);
      if (!since)
        continue; // e.g. LayerNormalization before 17.
      EXPECT_NE(registry.lookup(op, *since), nullptr)
          << op << " at opset " << opset << " (since-version " << *since << ")";
    }
  }
  EXPECT_NE(registry.lookup("Gelu", 20), nullptr);
  EXPECT_EQ(registry.lookup("NoSuchOp", 13), nullptr);
}

} // namespace
