//===- Consolidate.cpp - whole weights from a sharded checkpoint ---------===//

#include "runtime/train/Consolidate.h"

#include "runtime/Error.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/Sha256.h"
#include "runtime/train/ShardedCheckpoint.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace ztc::rt {
namespace {

/// A whole tensor is copied in pieces of at most this many bytes.
constexpr uint64_t kPieceBytes = 16 << 20;

} // namespace

ConsolidateResult consolidate(const std::string &dir, const std::string &output,
                              const std::string &dtype) {
  std::optional<DType> target;
  if (dtype == "fp32")
    target = DType::Float32;
  else if (dtype == "fp16")
    target = DType::Float16;
  else if (dtype == "bf16")
    target = DType::BFloat16;
  else if (!dtype.empty())
    throw Error("--dtype " + printable(dtype) +
                ": expected fp32, fp16 or bf16");
  if (!isShardedCheckpoint(dir))
    throw Error(dir + " holds no sharded checkpoint (no " + dir +
                "/latest): a one-rank checkpoint is whole already (ztc "
                "export turns it into a trained model)");
  ShardedIndex index = readShardedIndex(dir);
  std::vector<std::unique_ptr<SafeTensorsReader>> readers = openShards(index);

  // The weights, whole, in the index's order.
  std::vector<const Binding *> weights;
  std::vector<std::pair<std::string, Tensor>> layout;
  for (const Binding &binding : index.tensors) {
    if (binding.role != BindingRole::Param &&
        binding.role != BindingRole::Buffer)
      continue;
    weights.push_back(&binding);
    DType out = target && isFloat(binding.dtype) ? *target : binding.dtype;
    layout.push_back({binding.name, Tensor(out, {})});
    layout.back().second.shape =
        binding.sharded() ? binding.fullShape : binding.shape;
  }
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"ztc_step", std::to_string(index.step)},
      {"ztc_world_size", std::to_string(index.worldSize)},
      {"ztc_zero_stage", std::to_string(index.zeroStage)}};

  ConsolidateResult result;
  result.step = index.step;
  result.worldSize = index.worldSize;
  SafeTensorsWriter writer(output, layout, metadata);
  for (size_t t = 0; t < weights.size(); ++t) {
    const Binding &binding = *weights[t];
    DType out = layout[t].second.dtype;
    size_t element = dtypeSize(binding.dtype);
    auto copy = [&](SafeTensorsReader &reader, uint64_t from, uint64_t bytes) {
      std::vector<unsigned char> piece(bytes);
      reader.read(binding.name, from, bytes, piece.data());
      result.largestPiece = std::max<uint64_t>(result.largestPiece, bytes);
      std::vector<unsigned char> converted =
          convertFloats(piece, binding.dtype, out);
      writer.append(converted.data(), converted.size());
      result.bytes += converted.size();
    };
    if (binding.sharded()) {
      // Block r of rank r, up to the tensor's end (the rest is padding).
      uint64_t whole = uint64_t(*checkedByteSize(binding.fullShape, element));
      uint64_t block = uint64_t(binding.shape[0]) * element;
      for (size_t rank = 0; rank < readers.size() && rank * block < whole;
           ++rank)
        copy(*readers[rank], 0, std::min(block, whole - rank * block));
    } else {
      // Every rank holds it whole: rank 0's, in pieces.
      uint64_t whole = uint64_t(*checkedByteSize(binding.shape, element));
      uint64_t piece = std::max<uint64_t>(kPieceBytes / element, 1) * element;
      for (uint64_t at = 0; at < whole; at += piece)
        copy(*readers[0], at, std::min(piece, whole - at));
    }
    ++result.tensors;
  }
  writer.commit();
  return result;
}

std::string consolidateNoThrow(const std::string &dir,
                               const std::string &output,
                               const std::string &dtype,
                               ConsolidateResult &result) noexcept {
  try {
    result = consolidate(dir, output, dtype);
    return "";
  } catch (const std::exception &failure) {
    return failure.what();
  }
}

} // namespace ztc::rt
