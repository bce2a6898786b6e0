//===- Consolidate.h - whole weights from a sharded checkpoint --*- C++ -*-===//
//
// `ztc consolidate CKPT -o model.safetensors [--dtype fp32|fp16|bf16]`:
// the parameters and buffers of the latest step of a sharded checkpoint
// (ShardedCheckpoint.h), whole, in one safetensors file that the
// `safetensors` package and PyTorch open. Every rank's file is checked
// against its SHA-256 first. Tensors are streamed: each tensor's blocks
// are read rank by rank and appended to the output, so memory holds one
// block (at most a tensor's 1/N, or 16 MiB of a whole tensor) whatever the
// model's size and the world size. Optimizer states are left out (they
// are training state, not weights).
//
// Errors (ztc::rt::Error): those of loading the index (ShardedCheckpoint.h,
// without the run's checks), and
//   DIR holds no sharded checkpoint (no DIR/latest): a one-rank checkpoint
//     is whole already (ztc export turns it into a trained model)
//   DIR/step-.../rank-00002/checkpoint.safetensors: SHA-256 differs from
//     the index (the file is corrupt or truncated)
//   --dtype int8: expected fp32, fp16 or bf16
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_CONSOLIDATE_H
#define ZTC_RUNTIME_CONSOLIDATE_H

#include <cstdint>
#include <string>

namespace ztc::rt {

struct ConsolidateResult {
  uint64_t step = 0, worldSize = 0, tensors = 0;
  /// Bytes of the output's tensors, and the largest piece held at once.
  uint64_t bytes = 0, largestPiece = 0;
};

/// See the file comment; `dtype` is "" (the checkpoint's), "fp32", "fp16"
/// or "bf16".
ConsolidateResult consolidate(const std::string &dir, const std::string &output,
                              const std::string &dtype);

/// The same for callers built without exceptions: "" on success, else the
/// message.
std::string consolidateNoThrow(const std::string &dir,
                               const std::string &output,
                               const std::string &dtype,
                               ConsolidateResult &result) noexcept;

} // namespace ztc::rt

#endif // ZTC_RUNTIME_CONSOLIDATE_H
