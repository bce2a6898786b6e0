//===- Recompute.h - ztc-recompute's budget mode ----------------*- C++ -*-===//
//
// What the training pipeline hands ztc-recompute for `--recompute
// budget=...`: the budget's syntax, and the planner that measures a
// candidate plan by planning the rest of the step (the pass alone cannot:
// the peak is the arena ztc-plan-memory lays out after entries, the
// optimizer, lowering and fusion).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_TRAIN_RECOMPUTE_H
#define ZTC_PASSES_TRAIN_RECOMPUTE_H

#include "passes/OptionEnums.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mlir::ztc {

struct RecomputePassOptions;

/// `budget=BYTES` or `budget=FRACTION`: a byte count (`8GiB`, `7.5GB`,
/// `512MiB`, `6000000000`) or a share of the peak without recomputation
/// (`0.6`, `60%`).
struct RecomputeBudget {
  uint64_t bytes = 0;
  double fraction = 0;
};

/// `--recompute`'s value: a policy, with the budget's text for
/// `budget=...`.
struct RecomputeSpec {
  RecomputePolicy policy = RecomputePolicy::None;
  std::string budget;
};

/// Parses `--recompute`'s value (none, selective, full, sqrt,
/// budget=BYTES|FRACTION); on failure `error` says why, naming the flag.
std::optional<RecomputeSpec> parseRecomputeSpec(llvm::StringRef spec,
                                                std::string &error);
/// The value `--recompute` spells for `policy` and `budget`.
std::string recomputeSpec(RecomputePolicy policy, llvm::StringRef budget);
/// Parses the text after `budget=`; on failure `error` says why, naming
/// the flag.
std::optional<RecomputeBudget> parseRecomputeBudget(llvm::StringRef budget,
                                                    std::string &error);

/// Plans the rest of the step on `module` (a copy, rewritten by a
/// candidate plan) and returns its planned bytes per rank: parameters,
/// states, buffers, constants, data and the arena.
using RecomputePlanner = std::function<FailureOr<uint64_t>(ModuleOp module)>;

/// ztc-recompute with a planner, which budget mode needs.
std::unique_ptr<Pass> createRecomputePass(const RecomputePassOptions &options,
                                          RecomputePlanner planner);

} // namespace mlir::ztc

#endif // ZTC_PASSES_TRAIN_RECOMPUTE_H
