//===- StepError.h - the words for a step's data error ----------*- C++ -*-===//
//
// One wording for what ztc_step_error (StepAbi.h) records, used by both
// kernel libraries (their lastError()) and by the runtime, which reads the
// context's error slot: "gather: index 70 is outside [-64, 64)",
// "nll_loss: target 12 is outside [0, 10) (ignore_index -100)". Host code
// only.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_STEPERROR_H
#define ZTC_RUNTIME_KERNELS_STEPERROR_H

#include "StepAbi.h"

#include <string>

namespace ztc {

/// A record of `kind`: `value` outside [low, high), with nll_loss's
/// ignore_index when it has one.
inline ztc_step_error makeStepError(int32_t kind, int64_t value, int64_t low,
                                    int64_t high, bool hasIgnore = false,
                                    int64_t ignore = 0) {
  ztc_step_error error{};
  error.kind = kind;
  error.value = value;
  error.low = low;
  error.high = high;
  error.has_ignore = hasIgnore;
  error.ignore = ignore;
  return error;
}

/// The message for `error`; "" when it records nothing.
inline std::string describeStepError(const ztc_step_error &error) {
  const char *what = nullptr;
  switch (error.kind) {
  case ZTC_ERROR_GATHER_INDEX:
    what = "gather: index";
    break;
  case ZTC_ERROR_SCATTER_INDEX:
    what = "scatter_add: index";
    break;
  case ZTC_ERROR_LOSS_TARGET:
    what = "nll_loss: target";
    break;
  case ZTC_ERROR_COLLECTIVE: {
    const char *names[] = {"all_reduce", "reduce_scatter", "all_gather"};
    const char *name =
        error.low >= 0 && error.low < 3 ? names[error.low] : "a collective";
    return std::string(name) + ": the communicator failed (error " +
           std::to_string(error.value) + ")";
  }
  default:
    return error.kind == ZTC_ERROR_NONE ? "" : "unknown data error";
  }
  std::string text = std::string(what) + " " + std::to_string(error.value) +
                     " is outside [" + std::to_string(error.low) + ", " +
                     std::to_string(error.high) + ")";
  if (error.has_ignore)
    text += " (ignore_index " + std::to_string(error.ignore) + ")";
  return text;
}

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_STEPERROR_H
