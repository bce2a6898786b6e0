//===- MemoryReport.h - where a compiled step's memory goes -----*- C++ -*-===//
//
// `ztc inspect --memory`: the per-rank memory of a planned training step
// before anything runs. Bindings (parameters, optimizer state, buffers,
// constants, data) are fixed; the arena's buffers are classified by what
// wrote them and drawn over the step's ops from their live ranges (the ones
// the planner placed them by). `ztc compile` stores the report in the
// artifact as memory.json; `ztc inspect` prints it, as text, JSON or an SVG
// timeline.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_MEMORYREPORT_H
#define ZTC_TOOLS_ZTC_MEMORYREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::ztc {

/// What an arena buffer holds, by what wrote it: a forward kernel (an
/// activation: those alive in the backward are the saved ones), a kernel
/// ztc-recompute cloned into the backward, a kernel whose result an
/// optimizer update or the entry's results read (a gradient), or anything
/// else (workspace: the backward's temporaries).
enum class ArenaRole { Activation, Recompute, Gradient, Workspace };
constexpr size_t kArenaRoles = 4;
/// "activations", "recomputation", "gradients", "workspace".
const char *arenaRoleName(ArenaRole role);

struct MemoryReport {
  /// The entry reported (the one with the largest arena: train_step).
  std::string entry;
  /// The recompute policy ("none" when the step has no report).
  std::string policy = "none";
  /// The compute precision: "fp32" (as the model is written), "bf16" or
  /// "fp16" (train.precision).
  std::string precision = "fp32";
  /// How many parameters. Bytes per parameter, as the ZeRO paper counts
  /// them: (params + working copies + gradients + states) / paramCount.
  uint64_t paramCount = 0;
  /// Mixed precision: the parameters' half working copies (2 bytes each,
  /// in the arena), where the step keeps them from forward to backward; at
  /// stage 3, the persistent half blocks of the sharded ones (`copies`).
  uint64_t workingCopies = 0;
  /// Stage 3 under mixed precision: the bindings holding the parameters'
  /// persistent half blocks.
  uint64_t copies = 0;
  /// One rank's gradient bytes as the ZeRO paper counts them (a share from
  /// stage 2 on), and the ranks and stage the step was compiled for.
  uint64_t gradients = 0, worldSize = 1, zeroStage = 0;
  /// Bytes of the bindings, by role, and of the arena (the planned peak:
  /// the arena the runtime allocates, shared by every entry).
  uint64_t params = 0, buffers = 0, states = 0, constants = 0, data = 0,
           arena = 0;
  /// The target library's device memory besides the plan, once per process
  /// (CUDA: cuBLAS's workspace), and the largest scratch buffer a kernel of
  /// the entry works in (in the arena: planned by ztc-plan-scratch).
  uint64_t reserved = 0, scratch = 0;
  /// How many sets of the per-call bindings (`data`) the runtime keeps:
  /// CUDA uploads the next call's while one runs.
  uint64_t inputSets = 1;
  uint64_t total() const {
    return params + buffers + states + copies + constants + data + arena +
           reserved;
  }
  /// The entry's ops, and the op at which the most arena bytes are live.
  uint64_t ops = 0, peakAt = 0;
  /// The entry's kernels, what a GPU launches (a library call may launch
  /// several): fused elementwise and reduction loops (a launch group's
  /// loops once), library calls, and the rest (collectives, loss records,
  /// finite checks).
  uint64_t loops = 0, calls = 0, otherKernels = 0;
  uint64_t kernels() const { return loops + calls + otherKernels; }
  /// Live arena bytes per role at `peakAt`.
  std::array<uint64_t, kArenaRoles> peakRoles{};
  uint64_t peakLive() const {
    return peakRoles[0] + peakRoles[1] + peakRoles[2] + peakRoles[3];
  }
  /// The buffers live at `peakAt`, largest first: role, bytes, offset and
  /// the ONNX nodes of the kernel that wrote it.
  struct Tensor {
    ArenaRole role = ArenaRole::Workspace;
    uint64_t bytes = 0, offset = 0;
    std::string nodes;
  };
  std::vector<Tensor> atPeak;
  /// Live arena bytes per role after each op (ops entries).
  std::vector<std::array<uint64_t, kArenaRoles>> timeline;
  /// ztc-recompute's figures (train.recompute), when present.
  struct Recompute {
    uint64_t savedBytes = 0, baselineSavedBytes = 0, recomputeFlops = 0,
             stepFlops = 0;
    /// Budget mode (--recompute budget=...): the budget in bytes (0
    /// otherwise) and how the plan was chosen.
    uint64_t budgetBytes = 0;
    std::string budgetPlan;
  };
  std::optional<Recompute> recompute;
  /// The collectives of each entry, one line per entry, op and element
  /// type: how many calls, their elements (the larger side: what an
  /// all-reduce reduces, what an all-gather writes), and the elements one
  /// rank sends for them in a bandwidth-optimal ring (and receives: a ring
  /// receives what it sends), as the runtime counts them; `streamed`: the
  /// calls on a stream of their own, overlapping compute (--overlap-comm).
  struct Collectives {
    std::string entry, op, dtype;
    uint64_t calls = 0, elements = 0, sent = 0, streamed = 0;
  };
  std::vector<Collectives> communication;

  /// The weights the step binds, in argument order: each parameter,
  /// "trained" (the step updates it) or "frozen" (--freeze: it does not),
  /// and each buffer, "buffer" or "updated buffer" (training-mode
  /// BatchNorm's running statistics). The shape is the whole tensor's (a
  /// ZeRO stage 3 shard's full shape). Empty in reports of older
  /// compilers.
  struct Weight {
    std::string name, role, dtype;
    std::vector<int64_t> shape;
    /// An NF4 weight's packed codes (QLoRA): the model's [rows, cols];
    /// `nf4Of` names the weight a part (its scales) belongs to.
    std::vector<int64_t> nf4Shape;
    std::string nf4Of;
    uint64_t elements() const {
      uint64_t count = 1;
      for (int64_t dim : shape)
        count *= uint64_t(dim);
      return count;
    }
  };
  std::vector<Weight> weights;
};

/// The report of a planned module (after the training pipeline). Fails with
/// a diagnostic when the module has no planned entry.
FailureOr<MemoryReport> buildMemoryReport(ModuleOp module);

/// memory.json: the report as JSON, and back (`error` says what is wrong
/// with a file that does not parse as one).
llvm::json::Value memoryReportToJson(const MemoryReport &report);
std::optional<MemoryReport> memoryReportFromJson(const llvm::json::Value &json,
                                                 std::string &error);

/// The report for a terminal: totals, the arena at its fullest point by
/// role, recomputation, and the largest tensors alive then.
void printMemoryReport(const MemoryReport &report, llvm::raw_ostream &os);
/// One row per report, side by side (`ztc inspect --recompute all`).
void printMemoryComparison(llvm::ArrayRef<MemoryReport> reports,
                           llvm::raw_ostream &os);
/// `ztc inspect --comm`: per entry, the collectives and the elements each
/// rank sends and receives per call of the entry.
void printCommunication(const MemoryReport &report, llvm::raw_ostream &os);
/// `ztc inspect --weights`: the counts by role, then one line per weight.
void printWeights(const MemoryReport &report, llvm::raw_ostream &os);
/// The timeline as an SVG: live arena bytes over the step's ops, stacked by
/// role, the fullest point marked.
void writeMemorySvg(const MemoryReport &report, llvm::raw_ostream &os);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_MEMORYREPORT_H
