//===- OpFactsTest.cpp - every nn op declares its facts -------------------===//
//
// Each nn op declares its autocast class, its cost and, when it lowers to a
// library kernel, which kernel and which of its attributes configure it
// (dialects/NN/IR/OpFacts.td). Tablegen already rejects an op without a
// class or a cost; these tests check what it cannot see: the registered
// ops as the passes find them, each library call against the library's
// one definition (runtime/kernels/Library.def), and the FLOP figures of
// each cost rule.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::ztc;

namespace {

class OpFactsTest : public ::testing::Test {
protected:
  OpFactsTest() {
    context
        .loadDialect<nn::NNDialect, arith::ArithDialect, func::FuncDialect>();
  }

  /// The registered ops of the nn dialect.
  SmallVector<RegisteredOperationName> nnOps() {
    SmallVector<RegisteredOperationName> ops;
    for (RegisteredOperationName name : context.getRegisteredOperations())
      if (name.getDialectNamespace() == nn::NNDialect::getDialectNamespace())
        ops.push_back(name);
    return ops;
  }

  MLIRContext context;
};

llvm::StringSet<> setOf(ArrayRef<StringRef> names) {
  llvm::StringSet<> set;
  for (StringRef name : names)
    set.insert(name);
  return set;
}

TEST_F(OpFactsTest, EveryOpDeclaresOneClassACostAndAGradient) {
  SmallVector<RegisteredOperationName> ops = nnOps();
  ASSERT_GT(ops.size(), 50u);
  for (RegisteredOperationName name : ops) {
    int classes =
        name.hasTrait<nn::HalfCompute>() + name.hasTrait<nn::WideCompute>() +
        name.hasTrait<nn::FollowCompute>() + name.hasTrait<nn::OwnCompute>();
    EXPECT_EQ(classes, 1) << name.getStringRef().str();
    EXPECT_TRUE(name.hasInterface<nn::CostOpInterface>())
        << name.getStringRef().str();
    EXPECT_TRUE(name.hasInterface<nn::GradientOpInterface>())
        << name.getStringRef().str();
  }
}

TEST_F(OpFactsTest, LibraryCallsAreTheLibrarysKernels) {
  int calls = 0;
  for (RegisteredOperationName name : nnOps()) {
    auto *call = name.getInterface<nn::LibraryCallOpInterface>();
    if (!call)
      continue;
    ++calls;
    std::string op = name.getStringRef().str();
    const kernel::LibraryKernel *kernel =
        kernel::lookupLibraryKernel(call->getLibraryCallee());
    ASSERT_TRUE(kernel) << op << " calls '" << call->getLibraryCallee().str()
                        << "', which Library.def does not declare";

    // The op's configuration and what later passes set are exactly the
    // kernel's fields; what later passes set may be absent at the lowering.
    llvm::StringSet<> config = setOf(call->getLibraryConfig());
    llvm::StringSet<> later = setOf(call->getLibraryConfigSetLater());
    for (const kernel::ConfigField &field : kernel->config) {
      EXPECT_TRUE(config.contains(field.name) != later.contains(field.name))
          << op << ": field '" << field.name.str()
          << "' is to be listed once, in the config or as set later";
      if (later.contains(field.name))
        EXPECT_FALSE(field.required()) << op << ": " << field.name.str();
    }
    for (StringRef attr : call->getLibraryConfig())
      EXPECT_TRUE(kernel->field(attr))
          << op << ": '" << attr.str() << "' is no field of "
          << kernel->name.str();
    for (StringRef attr : call->getLibraryConfigSetLater())
      EXPECT_TRUE(kernel->field(attr))
          << op << ": '" << attr.str() << "' is no field of "
          << kernel->name.str();

    // Every attribute of the op configures the kernel: the lowering passes
    // on the listed ones only.
    llvm::StringSet<> attributes;
    for (StringAttr attr : name.getAttributeNames())
      attributes.insert(attr.getValue());
    EXPECT_EQ(attributes.size(), config.size()) << op;
    for (const auto &attr : attributes)
      EXPECT_TRUE(config.contains(attr.getKey()))
          << op << ": attribute '" << attr.getKey().str()
          << "' is not in its library call's config";
  }
  EXPECT_GT(calls, 20);
}

TEST_F(OpFactsTest, CostRules) {
  // One op per rule (and every op that counts its own), each with the
  // figure ztc-recompute weighs it by.
  const char *source = R"mlir(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>,
                 %x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>,
                 %dy: tensor<1x4x6x6xf32>, %t: tensor<2x8xf32>,
                 %s: tensor<8xf32>, %q: tensor<2x3x4xf32>,
                 %k: tensor<2x5x4xf32>, %v: tensor<2x5x6xf32>,
                 %o: tensor<2x3x6xf32>) {
      %0 = nn.matmul %a, %b
          : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
      %1 = nn.conv2d %x, %w {strides = array<i64: 1, 1>,
          pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,
          group = 1 : i64}
          : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
      %2 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 8, 8>,
          strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
          dilations = array<i64: 1, 1>, group = 1 : i64}
          : tensor<1x4x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
      %3 = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 3, 3>,
          strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
          dilations = array<i64: 1, 1>, group = 1 : i64}
          : tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32> -> tensor<4x3x3x3xf32>
      %4 = nn.layer_norm %t, %s {axis = 1 : i64, epsilon = 1.0e-05 : f64}
          : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
      %5 = nn.softmax %t {axis = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
      %6 = nn.reduce_sum %t {axes = array<i64: 1>, keepdims = false}
          : tensor<2x8xf32> -> tensor<2xf32>
      %7 = nn.transpose %t {perm = array<i64: 1, 0>}
          : tensor<2x8xf32> -> tensor<8x2xf32>
      %8 = nn.add %t, %s : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
      %9 = nn.attention %q, %k, %v {scale = 0.5 : f64}
          : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>
          -> tensor<2x3x6xf32>
      %10:3 = nn.attention_backward %q, %k, %v, %o, %o {scale = 0.5 : f64}
          : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>,
            tensor<2x3x6xf32>, tensor<2x3x6xf32>
          -> tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>
      return
    }
  )mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  const std::pair<StringRef, int64_t> expected[] = {
      {"nn.matmul", 2 * 8 * 3},
      {"nn.conv2d", 2 * 144 * 27},
      {"nn.conv2d_backward_data", 2 * 144 * 27},
      {"nn.conv2d_backward_filter", 2 * 144 * 27},
      {"nn.layer_norm", 8 * 16},
      {"nn.softmax", 5 * 16},
      {"nn.reduce_sum", 16},
      {"nn.transpose", 0},
      {"nn.add", 16},
      // 30 scores: two products (D = 4, Dv = 6) and the softmax's five.
      {"nn.attention", 2 * 30 * (4 + 6) + 5 * 30},
      // The scores again, dq and dk (3 of D), dv and dP (2 of Dv), the
      // softmax's gradient.
      {"nn.attention_backward", 2 * 30 * (3 * 4 + 2 * 6) + 5 * 30},
  };
  auto func = *module->getOps<func::FuncOp>().begin();
  auto op = func.getBody().front().begin();
  for (auto [name, flops] : expected) {
    ASSERT_EQ(op->getName().getStringRef(), name);
    EXPECT_EQ(cast<nn::CostOpInterface>(&*op).estimateFlops(), flops)
        << name.str();
    ++op;
  }
}

} // namespace
