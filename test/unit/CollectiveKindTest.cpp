//===- CollectiveKindTest.cpp - collective kinds are the runtime's --------===//
//
// The kinds of kernel.collective are defined once, in ODS; the runtime
// knows the communicating ones by their step-ABI code and the manifest by
// name. A kind's value is its code (KernelOps.cpp asserts it against
// Library.def's rows) and its spelling the manifest's name, which the
// loader parses back; shard, which stays on its rank, is neither.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kernel/IR/KernelOps.h"
#include "runtime/io/Manifest.h"

#include "gtest/gtest.h"

namespace kernel = mlir::ztc::kernel;
namespace rt = ::ztc::rt;

TEST(CollectiveKindTest, CommunicatingKindsAreTheManifestsCollectives) {
  for (unsigned value = 0; value <= kernel::getMaxEnumValForCollectiveKind();
       ++value) {
    std::optional<kernel::CollectiveKind> kind =
        kernel::symbolizeCollectiveKind(value);
    ASSERT_TRUE(kind);
    std::string name = kernel::stringifyCollectiveKind(*kind).str();
    int32_t code = kernel::collectiveCode(*kind);
    if (*kind == kernel::CollectiveKind::shard) {
      EXPECT_EQ(code, -1);
      EXPECT_FALSE(rt::parseCollectiveOp(name));
      continue;
    }
    EXPECT_EQ(code, static_cast<int32_t>(value)) << name;
    EXPECT_EQ(std::string(rt::collectiveOpName(rt::CollectiveOp(code))), name);
    EXPECT_EQ(rt::parseCollectiveOp(name), rt::CollectiveOp(code)) << name;
  }
}

TEST(CollectiveKindTest, EachKindCallsItsLibraryFunction) {
  EXPECT_EQ(kernel::collectiveFunction(kernel::CollectiveKind::all_reduce),
            "allReduce");
  EXPECT_EQ(kernel::collectiveFunction(kernel::CollectiveKind::reduce_scatter),
            "reduceScatter");
  EXPECT_EQ(kernel::collectiveFunction(kernel::CollectiveKind::all_gather),
            "allGather");
  EXPECT_EQ(kernel::collectiveFunction(kernel::CollectiveKind::shard), "shard");
}
