//===- InputShapeTest.cpp - parsing of --input-shape ---------------------===//
//
// `--input-shape NAME=D0xD1x...` is the user's way to bind dynamic
// dimensions; malformed text must be rejected with a message, never crash.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/Importer.h"

#include "llvm/Support/Error.h"
#include "gtest/gtest.h"

using mlir::ztc::onnx::ImportOptions;
using mlir::ztc::onnx::parseInputShape;

namespace {

std::string errorOf(llvm::StringRef text) {
  ImportOptions options;
  llvm::Error err = parseInputShape(text, options);
  return err ? llvm::toString(std::move(err)) : "";
}

TEST(InputShape, ParsesDims) {
  ImportOptions options;
  ASSERT_FALSE(static_cast<bool>(parseInputShape("x=8x64", options)));
  ASSERT_FALSE(static_cast<bool>(parseInputShape("tokens=1x1024", options)));
  EXPECT_EQ(options.inputShapes.lookup("x"),
            (llvm::SmallVector<int64_t>{8, 64}));
  EXPECT_EQ(options.inputShapes.lookup("tokens"),
            (llvm::SmallVector<int64_t>{1, 1024}));
}

TEST(InputShape, NameMayContainSeparators) {
  ImportOptions options;
  ASSERT_FALSE(static_cast<bool>(parseInputShape("input.1=3", options)));
  EXPECT_EQ(options.inputShapes.lookup("input.1"),
            (llvm::SmallVector<int64_t>{3}));
}

TEST(InputShape, EmptyDimsMeanScalar) {
  ImportOptions options;
  ASSERT_FALSE(static_cast<bool>(parseInputShape("lr=", options)));
  ASSERT_TRUE(options.inputShapes.count("lr"));
  EXPECT_TRUE(options.inputShapes.lookup("lr").empty());
}

TEST(InputShape, RejectsMalformedText) {
  EXPECT_NE(errorOf("x"), "");
  EXPECT_NE(errorOf("=8x64"), "");
  EXPECT_NE(errorOf("x=8xx64").find("is not a dimension size"),
            std::string::npos);
  EXPECT_NE(errorOf("x=8x-1"), "");
  EXPECT_NE(errorOf("x=eight"), "");
}

} // namespace
