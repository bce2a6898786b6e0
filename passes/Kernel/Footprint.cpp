//===- Footprint.cpp - the planned bytes of a training step ---------------===//

#include "passes/Kernel/Footprint.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "dialects/Train/IR/TrainOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ztc;

FailureOr<StepFootprint> mlir::ztc::measureFootprint(ModuleOp module) {
  StepFootprint footprint;
  llvm::StringSet<> bound;
  DenseSet<Attribute> constants;
  // Parameters with half gradients, by name (any entry's list).
  llvm::StringSet<> halfGradients;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (auto names = func->getAttrOfType<ArrayAttr>(train::kHalfGradientsAttr))
      for (auto name : names.getAsRange<StringAttr>())
        halfGradients.insert(name.getValue());
  // Parameters some entry writes: those that train and so have gradients
  // (a frozen one, by --freeze or ztc-lora, has none).
  llvm::StringSet<> trained;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    for (unsigned index : kernel::writtenArguments(func))
      trained.insert(train::bindingName(func, index));
  uint64_t gradientBytes = 0;
  auto bytesOf = [](Type type) {
    return uint64_t(nn::storageBytes(cast<MemRefType>(type)));
  };
  for (func::FuncOp func : module.getOps<func::FuncOp>()) {
    auto arena = func->getAttrOfType<IntegerAttr>("kernel.arena_bytes");
    if (!arena)
      continue;
    footprint.arena = std::max<uint64_t>(footprint.arena, arena.getInt());
    if (auto reserved =
            func->getAttrOfType<IntegerAttr>(kernel::kReservedBytesAttr))
      footprint.reserved =
          std::max<uint64_t>(footprint.reserved, reserved.getInt());
    if (auto sets = func->getAttrOfType<IntegerAttr>(kernel::kInputSetsAttr))
      footprint.inputSets =
          std::max<uint64_t>(footprint.inputSets, sets.getInt());
    if (!footprint.entry || func.getSymName() == "train_step")
      footprint.entry = func;
    if (auto world =
            func->getAttrOfType<IntegerAttr>(dist::DistDialect::kWorldSizeAttr))
      footprint.worldSize = world.getInt();
    if (auto stage =
            func->getAttrOfType<IntegerAttr>(dist::DistDialect::kZeroStageAttr))
      footprint.zeroStage = stage.getInt();
    // Bindings are shared by name across entries; count each once.
    for (BlockArgument arg : func.getArguments()) {
      train::BindingAttr binding = train::getBinding(func, arg.getArgNumber());
      if (!binding || !bound.insert(binding.getName().getValue()).second)
        continue;
      uint64_t bytes = bytesOf(arg.getType());
      switch (binding.getRole()) {
      case train::BindingRole::Param: {
        footprint.params += bytes;
        auto type = cast<MemRefType>(arg.getType());
        uint64_t count = type.getNumElements();
        auto full = func.getArgAttrOfType<DenseI64ArrayAttr>(
            arg.getArgNumber(), dist::DistDialect::kFullShapeAttr);
        if (full) {
          count = 1;
          for (int64_t d : full.asArrayRef())
            count *= uint64_t(d);
        }
        // An NF4 weight (QLoRA) counts the model's elements once, in its
        // packed codes; its scales are bytes of it, not parameters.
        if (auto nf4 = func.getArgAttrOfType<DenseI64ArrayAttr>(
                arg.getArgNumber(), train::kNf4Attr))
          count = uint64_t(nf4[0]) * uint64_t(nf4[1]);
        else if (train::nf4WeightOf(func, arg.getArgNumber()))
          count = 0;
        footprint.paramCount += count;
        if (!trained.contains(binding.getName().getValue()))
          break;
        if (halfGradients.contains(binding.getName().getValue())) {
          gradientBytes += 2 * count;
          // Stage 3 gathers the copy for each use; stages 1 and 2 gather
          // it once a step, to live as a cast copy would.
          if (!full || footprint.zeroStage < 3)
            footprint.workingCopies += 2 * count;
        } else {
          gradientBytes += count * uint64_t(nn::storageBytes(MemRefType::get(
                                       {1}, type.getElementType())));
        }
        break;
      }
      case train::BindingRole::Buffer:
        footprint.buffers += bytes;
        break;
      case train::BindingRole::State:
        // Stage 3's persistent half blocks are the working copies' shards.
        if (func.getArgAttr(arg.getArgNumber(), train::kCopyOfAttr)) {
          footprint.copies += bytes;
          footprint.workingCopies += bytes;
        } else {
          footprint.states += bytes;
        }
        break;
      default:
        footprint.data += bytes * footprint.inputSets;
      }
    }
    for (auto constant : func.getOps<kernel::ConstantOp>())
      if (constants.insert(constant.getValue()).second)
        footprint.constants += bytesOf(constant.getType());
  }
  if (!footprint.entry)
    return module.emitError("the module has no planned entry (run the "
                            "training pipeline)");
  footprint.gradients = footprint.zeroStage >= 2
                            ? gradientBytes / footprint.worldSize
                            : gradientBytes;
  return footprint;
}

std::optional<uint64_t> mlir::ztc::parseByteCount(llvm::StringRef text,
                                                  std::string &error) {
  size_t digits = text.find_first_not_of("0123456789.eE+");
  llvm::StringRef number = text.take_front(digits),
                  unit = text.drop_front(number.size());
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || !std::isfinite(value) ||
      value < 0) {
    error = "'" + text.str() + "' is not a byte count";
    return std::nullopt;
  }
  static const std::pair<const char *, double> units[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", 1 << 10},
      {"MiB", 1 << 20},
      {"GiB", double(1 << 30)},
      {"TiB", double(1ull << 40)}};
  for (auto [name, scale] : units)
    if (unit == name) {
      double bytes = value * scale;
      if (bytes >= 9.0e18) {
        error = "a byte count beyond 2^63";
        return std::nullopt;
      }
      return uint64_t(bytes);
    }
  error = "unknown unit '" + unit.str() + "'";
  return std::nullopt;
}

std::string mlir::ztc::bytesText(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? llvm::formatv("{0} B", bytes).str()
                   : llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}
