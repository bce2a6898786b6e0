//===- PlanScratch.cpp - the ztc-plan-scratch pass ------------------------===//
//
// Gives each library call whose CUDA kernel works in scratch memory, and each
// fused reduction split over blocks, a buffer of the plan, sized by the
// kernel's own arithmetic (runtime/kernels/cuda/Scratch.h). See the pass
// description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Kernel/IR/KernelOps.h"
#include "runtime/kernels/cuda/Scratch.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_PLANSCRATCHPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

//===----------------------------------------------------------------------===//
// A call's parameter struct, read from its config (Library.def's fields)
//===----------------------------------------------------------------------===//

struct ConfigReader {
  /// Mutable: ODS's accessors are not const.
  mutable kernel::CallOp call;

  ::ztc::library::Int readInt(StringRef name) const {
    return kernel::configInt(call, name);
  }
  ::ztc::library::Bits readBits(StringRef name) const {
    return kernel::configInt(call, name);
  }
  bool readBool(StringRef name) const { return kernel::configBool(call, name); }
  bool readFlag(StringRef name) const { return kernel::configBool(call, name); }
  double readFloat(StringRef name) const {
    return kernel::configFloat(call, name);
  }
  /// Absent: 0.
  double readMaybeFloat(StringRef name) const { return readFloat(name); }
  /// A view of the attribute's storage, which the context keeps.
  ::ztc::Ints readInts(StringRef name) const {
    ArrayRef<int64_t> values = kernel::configInts(call, name);
    return {values.data(), static_cast<int64_t>(values.size())};
  }
  /// Absent: empty.
  ::ztc::Ints readMaybeInts(StringRef name) const { return readInts(name); }
  ::ztc::MaybeInt readMaybeInt(StringRef name) const {
    if (!call.getConfig().get(name))
      return {};
    return {true, kernel::configInt(call, name)};
  }
  ::ztc::Reduction readReduction(StringRef name) const {
    StringRef reduction = kernel::configString(call, name);
    return reduction == "none"  ? ::ztc::Reduction::None
           : reduction == "sum" ? ::ztc::Reduction::Sum
                                : ::ztc::Reduction::Mean;
  }

  template <typename Params> Params read() const;
};

#define ZTC_FIELD(name, Kind) params.name = read##Kind(#name);
#define ZTC_CONFIG(Name, Fields)                                               \
  template <>                                                                  \
  [[maybe_unused]] ::ztc::Name##Params                                         \
  ConfigReader::read<::ztc::Name##Params>() const {                            \
    ::ztc::Name##Params params{};                                              \
    Fields return params;                                                      \
  }
#include "runtime/kernels/Library.def"

/// Each kernel's parameter struct, by the kernel's name.
#define ZTC_KERNEL(name, cpp, inputs, outputs, Config)                         \
  using name##Params = ::ztc::Config##Params;
#include "runtime/kernels/Library.def"

//===----------------------------------------------------------------------===//
// The bytes a call's CUDA kernel works in
//===----------------------------------------------------------------------===//

::ztc::Dims dimsOf(Value buffer) {
  ::ztc::Dims dims;
  for (int64_t extent : cast<MemRefType>(buffer.getType()).getShape())
    dims.d[dims.rank++] = extent;
  return dims;
}

/// The ZTC_SCRATCH function of `call`'s kernel for element type T.
template <typename T>
int64_t scratchBytes(kernel::CallOp call, const ::ztc::Dims *inputs,
                     const ::ztc::Dims *outputs) {
  ConfigReader config{call};
  switch (kernel::libraryKernelOf(call).id) {
#define ZTC_SCRATCH(name, bytes)                                               \
  case kernel::LibraryKernelId::name:                                          \
    return ::ztc::cuda::scratch::bytes<T>(inputs, outputs,                     \
                                          config.read<name##Params>());
#include "runtime/kernels/Library.def"
  default:
    return 0;
  }
}

/// The scratch bytes of `call`, whose kernel takes scratch, by the C++ type
/// of its template parameter T (kernel::templateElementType); failure for
/// an element type the CUDA library has no kernels for.
FailureOr<int64_t> scratchBytes(kernel::CallOp call) {
  ::ztc::Dims inputs[8], outputs[8];
  for (auto [i, input] : llvm::enumerate(call.getInputs()))
    inputs[i] = dimsOf(input);
  for (auto [i, output] : llvm::enumerate(call.getOutputs()))
    outputs[i] = dimsOf(output);
  Type element = kernel::templateElementType(call);
  if (element.isF32())
    return scratchBytes<float>(call, inputs, outputs);
  if (element.isF64())
    return scratchBytes<double>(call, inputs, outputs);
  if (element.isF16())
    return scratchBytes<::ztc::f16>(call, inputs, outputs);
  if (element.isBF16())
    return scratchBytes<::ztc::bf16>(call, inputs, outputs);
  if (element.isSignlessInteger(64))
    return scratchBytes<int64_t>(call, inputs, outputs);
  if (element.isSignlessInteger(32))
    return scratchBytes<int32_t>(call, inputs, outputs);
  if (element.isSignlessInteger(8))
    return scratchBytes<int8_t>(call, inputs, outputs);
  return call.emitOpError("'")
         << call.getCallee() << "' over " << element
         << ": the CUDA library has no such kernel to plan scratch for";
}

/// The partial sums of a fused reduction split over blocks: one
/// accumulator (f32, f64 for f64 outputs) per output, block and output
/// element (groupReducePlan). Reductions the emitter cannot group have none
/// (it refuses them).
int64_t reducePartialsBytes(kernel::ReduceOp reduce) {
  std::optional<kernel::ReductionGroups> groups =
      kernel::reductionGroups(reduce.getSpace(), reduce.getAxes());
  if (!groups)
    return 0;
  Type element =
      cast<MemRefType>(reduce.getOutputs().front().getType()).getElementType();
  int64_t accBytes = element.isF64() ? 8 : 4;
  return ::ztc::cuda::scratch::groupReducePartialsBytes(
      ::ztc::cuda::detail::groupReducePlan(groups->outer, groups->kept,
                                           groups->inner),
      accBytes * static_cast<int64_t>(reduce.getOutputs().size()));
}

struct PlanScratchPass
    : public mlir::ztc::impl::PlanScratchPassBase<PlanScratchPass> {
  using PlanScratchPassBase::PlanScratchPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (reservedBytes < 0 || inputSets < 1) {
      func.emitError("reserved-bytes must not be negative and input-sets at "
                     "least 1, got ")
          << static_cast<int64_t>(reservedBytes) << " and "
          << static_cast<int64_t>(inputSets);
      return signalPassFailure();
    }
    auto i64 = IntegerType::get(func.getContext(), 64);
    func->setAttr(kernel::kReservedBytesAttr,
                  IntegerAttr::get(i64, static_cast<int64_t>(reservedBytes)));
    func->setAttr(kernel::kInputSetsAttr,
                  IntegerAttr::get(i64, static_cast<int64_t>(inputSets)));
    func.walk([&](kernel::ReduceOp reduce) {
      if (reduce.getScratch())
        return;
      int64_t bytes = reducePartialsBytes(reduce);
      if (bytes == 0)
        return;
      OpBuilder b(reduce);
      auto type = MemRefType::get({bytes}, b.getI8Type());
      reduce.getScratchMutable().assign(
          kernel::AllocOp::create(b, reduce.getLoc(), type, IntegerAttr()));
    });
    WalkResult result = func.walk([&](kernel::CallOp call) {
      if (call.getScratch() || !kernel::libraryKernelOf(call).takesScratch())
        return WalkResult::advance();
      FailureOr<int64_t> bytes = scratchBytes(call);
      if (failed(bytes))
        return WalkResult::interrupt();
      if (*bytes == 0)
        return WalkResult::advance();
      OpBuilder b(call);
      auto type = MemRefType::get({*bytes}, b.getI8Type());
      Value scratch =
          kernel::AllocOp::create(b, call.getLoc(), type, IntegerAttr());
      call.getScratchMutable().assign(scratch);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
