//===- GradCheck.h - compiled gradients against finite differences --------===//
//
// `ztc gradcheck`: compiles a model's loss and gradients in double precision
// (ztc-promote-f64), runs them on random inputs, and compares every checked
// gradient element with a central finite difference of the compiled loss.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_GRADCHECK_H
#define ZTC_TOOLS_ZTC_GRADCHECK_H

#include "tools/ztc/Compile.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::ztc {

/// What `ztc gradcheck` compiles and how it checks.
struct GradCheckOptions {
  onnx::ImportOptions import;
  /// The loss (`loss`, `loss-input`, `labels`, `ignore-index`) and the
  /// frozen parameters; the check compiles them with precision fp64 and the
  /// entries loss_and_grads and loss. The optimizer options are unused.
  TrainingPipelineOptions training;
  /// Seeds the random inputs, the random key and the sampled elements.
  uint64_t seed = 0;
  /// The largest relative error a checked element may have.
  double tolerance = 1e-6;
};

/// Checks the gradients of the model at `modelPath` and prints one line per
/// parameter (sorted by name) and a summary to `os`. Fails after reporting
/// an error (diagnostics on `context`, runtime errors on stderr); otherwise
/// returns whether every checked element is within the tolerance.
///
/// The rules (docs in the implementation file's header):
///   - random inputs from the seed: floats normal(0, 1); integers uniform in
///     [0, B) where B is the smallest extent they index (a gather's table
///     rows, a loss's classes), or {0, 1} when they index nothing;
///   - the random key (training-mode Dropout's masks): the one of the seed,
///     the same in every call;
///   - parameters: the model's initializers, converted to f64;
///   - elements: all of a parameter with at most 16, else 16 distinct ones
///     drawn from the seed;
///   - numeric derivative: (L(p + h) - L(p - h)) / 2h, h = 1e-6 max(1, |p|);
///   - error: |analytic - numeric| / max(1, |analytic|, |numeric|).
FailureOr<bool> gradCheck(MLIRContext &context, llvm::StringRef modelPath,
                          const GradCheckOptions &options,
                          llvm::raw_ostream &os);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_GRADCHECK_H
