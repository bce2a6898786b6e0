//===- TrainState.h - the step's device-side training state -----*- C++ -*-===//
//
// kernel.record_loss in one body for both kernel libraries: the CPU library
// calls it on the host thread, the CUDA library from a one-thread kernel on
// the step's stream, so the state evolves identically on both and the host
// reads it only when it wants to (runtime/kernels/StepAbi.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_TRAINSTATE_H
#define ZTC_RUNTIME_KERNELS_TRAINSTATE_H

#include "Half.h"
#include "StepAbi.h"

namespace ztc {

/// Counts the call, adds `loss` to the sum, and keeps the first non-finite
/// loss with the call it came from. A null state (an entry run without
/// one) records nothing.
template <typename T>
ZTC_HOST_DEVICE inline void recordLossInto(ztc_train_state *state, T loss) {
  if (!state)
    return;
  double value = static_cast<double>(loss);
  state->calls += 1;
  state->loss_sum += value;
  // A NaN compares unequal to itself; an infinity minus itself is NaN.
  bool finite = value == value && (value - value) == (value - value);
  if (!finite && state->first_nonfinite_call == 0) {
    state->first_nonfinite_call = state->calls;
    state->first_nonfinite_loss = value;
  }
}

/// kernel.check_finite: whether `value` is a NaN or an infinity (for any
/// float type that converts to float).
template <typename T> ZTC_HOST_DEVICE inline bool nonFinite(T value) {
  float f = static_cast<float>(value);
  return !(f == f) || (f - f) != (f - f);
}

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_TRAINSTATE_H
