//===- ShapeLimitsTest.cpp - the compiler's limits are the kernels' -------===//
//
// The importer refuses tensors of more dimensions than the kernel
// libraries' shape type holds; the two constants are kept apart (the
// dialects include no runtime header) and must agree.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/ShapeLimits.h"
#include "runtime/kernels/Dims.h"

#include "gtest/gtest.h"

static_assert(mlir::ztc::nn::kMaxRank == ::ztc::kMaxRank,
              "the importer's rank limit is not what runtime/kernels/Dims.h "
              "holds");

TEST(ShapeLimitsTest, RankLimitIsWhatTheKernelsHold) {
  EXPECT_TRUE(mlir::ztc::nn::isWithinRankLimit({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(mlir::ztc::nn::isWithinRankLimit({1, 1, 1, 1, 1, 1, 1, 1, 2}));
  ::ztc::Dims nine = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  // Dims drops what it cannot hold, which is why the importer refuses it.
  EXPECT_EQ(nine.rank, ::ztc::kMaxRank);
}
