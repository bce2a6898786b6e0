//===- TrainerState.cpp - a training run's device state -------------------===//
//
// The bindings the trainer writes (hypers, the batch, the loss weight) and
// the device-side training state it reads back: the mean loss, the first
// non-finite loss or finite check, and dynamic loss scaling's states.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"
#include "runtime/kernels/StepAbi.h"

namespace ztc::rt::detail {

namespace {

/// A scalar of `dtype` holding `value` (hypers).
Tensor scalarTensor(DType dtype, double value, const std::string &name) {
  Tensor tensor(dtype, {});
  switch (dtype) {
  case DType::Float32:
    *tensor.data<float>() = static_cast<float>(value);
    return tensor;
  case DType::Float64:
    *tensor.data<double>() = value;
    return tensor;
  case DType::Int64:
    *tensor.data<int64_t>() = static_cast<int64_t>(value);
    return tensor;
  case DType::Int32:
    *tensor.data<int32_t>() = static_cast<int32_t>(value);
    return tensor;
  default:
    throw Error("hyper '" + name + "' is " + tensor.describe() +
                "; hypers must be float32, float64, int64 or int32");
  }
}

} // namespace

void TrainingRun::findHypers() {
  const std::vector<Binding> &bindings = manifest().bindings;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (bindings[i].role == BindingRole::State &&
        bindings[i].dtype == DType::Float32 && bindings[i].shape.empty()) {
      if (bindings[i].name == "loss_scale")
        scaleState_ = static_cast<int>(i);
      else if (bindings[i].name == "loss_scale.skipped_steps")
        skippedState_ = static_cast<int>(i);
      else if (bindings[i].name == "loss_scale.failed_at")
        failedState_ = static_cast<int>(i);
      else if (bindings[i].name == kGradNormState)
        gradNormState_ = static_cast<int>(i);
    }
    if (bindings[i].role != BindingRole::Hyper)
      continue;
    if (bindings[i].name == "lr")
      lrHyper_ = static_cast<int>(i);
    else if (bindings[i].name == "step")
      stepHyper_ = static_cast<int>(i);
    else if (bindings[i].name == "loss_weight")
      lossWeightHyper_ = static_cast<int>(i);
    else if (bindings[i].name != kRandomKeyHyper) // Runner::setRandomKey
      throw Error("hyper '" + bindings[i].name +
                  "' is not one the trainer writes (known: lr, step, "
                  "loss_weight, " +
                  kRandomKeyHyper + ")");
  }
}

void TrainingRun::setHypers(uint64_t step, double lr) {
  if (lrHyper_ >= 0) {
    size_t index = static_cast<size_t>(lrHyper_);
    runner_.setBinding(
        index, scalarTensor(manifest().bindings[index].dtype, lr, "lr"));
  }
  if (stepHyper_ >= 0) {
    size_t index = static_cast<size_t>(stepHyper_);
    runner_.setBinding(index, scalarTensor(manifest().bindings[index].dtype,
                                           static_cast<double>(step), "step"));
  }
}

void TrainingRun::uploadBatch(const std::vector<Tensor> &batch) {
  const std::vector<size_t> &indices = loader_.bindingIndices();
  for (size_t i = 0; i < indices.size(); ++i)
    runner_.setBinding(indices[i], batch[i]);
}

void TrainingRun::setLossWeight(double weight) {
  if (lossWeightHyper_ < 0)
    return;
  size_t index = size_t(lossWeightHyper_);
  runner_.setBinding(index, scalarTensor(manifest().bindings[index].dtype,
                                         weight, "loss_weight"));
}

std::string TrainingRun::describeCheck(int64_t check) const {
  const std::vector<FiniteCheck> &checks = manifest().finiteChecks;
  if (check < 1 || uint64_t(check) > checks.size())
    return "finite check " + std::to_string(check) +
           ", which the manifest does not list";
  return checks[size_t(check - 1)].describe();
}

float TrainingRun::takeLoss(uint64_t step) {
  if (pendingCalls_ == 0)
    throw Error("step " + std::to_string(step) +
                ": the step recorded no loss (an artifact compiled without "
                "kernel.record_loss; recompile it)");
  float loss = static_cast<float>(pendingLossSum_ / double(pendingCalls_));
  pendingLossSum_ = 0;
  pendingCalls_ = 0;
  return loss;
}

void TrainingRun::readState(uint64_t step) {
  uint64_t first = intervalStart_;
  ztc_train_state state;
  try {
    state = runner_.trainState();
  } catch (const Error &failure) {
    // An asynchronous backend reports a failed call when the host waits.
    throw Error("steps " + std::to_string(first) + ".." + std::to_string(step) +
                ": " + failure.what());
  }
  runner_.resetTrainState();
  intervalStart_ = step + 1;
  if (comm_.worldSize() > 1) {
    // The reported loss is the mean over ranks; a rank that diverged
    // stops every rank at the same report.
    double sums[3] = {state.loss_sum, double(state.calls),
                      state.first_nonfinite_call != 0 ? 1.0 : 0.0};
    comm_.allReduceSum(sums, 3);
    if (sums[2] > 0 && state.first_nonfinite_call == 0 && !dynamicScaling())
      throw Error("training diverged on another rank between steps " +
                  std::to_string(first) + " and " + std::to_string(step) +
                  " (that rank names the step and its batch)");
    state.loss_sum = sums[0];
    state.calls = int64_t(sums[1]);
  }
  metricsLossSum_ += state.loss_sum;
  metricsCalls_ += state.calls;
  pendingLossSum_ += state.loss_sum;
  pendingCalls_ += uint64_t(state.calls);
  if (state.first_nonfinite_check != 0) {
    std::string where = "the first NaN or infinity was written by " +
                        describeCheck(state.first_nonfinite_check);
    if (!dynamicScaling())
      throw Error("step " + std::to_string(step) +
                  " (--check-finite): " + where);
    // Under dynamic loss scaling the step was skipped; the note is kept
    // for the report should the scale fail at its minimum.
    lastOverflow_ = "step " + std::to_string(step) + ": " + where;
    reporter_->message(lastOverflow_ + " (an overflow: the update is "
                                       "skipped)");
  }
  std::vector<DataPosition> positions = std::move(callPositions_);
  callPositions_.clear();
  // Under dynamic loss scaling an overflowing step is skipped, not
  // trained on; the scaler's failure at its minimum is what stops a run.
  if (state.first_nonfinite_call != 0 && !dynamicScaling()) {
    uint64_t call = uint64_t(state.first_nonfinite_call - 1);
    uint64_t at = first + call / microBatches_;
    double loss = state.first_nonfinite_loss;
    std::string batch;
    if (call < positions.size())
      batch = " (its " + std::string(microBatches_ > 1 ? "micro-" : "") +
              "batch: samples " + listSamples(positions[call]) + ")";
    throw Error("training diverged at step " + std::to_string(at) +
                ": the loss is " +
                (loss != loss ? "nan"
                 : loss > 0   ? "inf"
                              : "-inf") +
                batch);
  }
}

float TrainingRun::stateValue(int index) const {
  Tensor value = runner_.binding(static_cast<size_t>(index));
  return *value.data<float>();
}

std::string TrainingRun::readLossScale(uint64_t step) {
  if (!dynamicScaling())
    return "";
  lossScale_ = stateValue(scaleState_);
  skippedSteps_ = static_cast<uint64_t>(stateValue(skippedState_));
  if (float failedAt = stateValue(failedState_); failedAt != 0) {
    auto at = static_cast<uint64_t>(failedAt);
    throw Error(
        "step " + std::to_string(at) +
        ": the gradients overflow in fp16 at the minimum loss scale (" +
        printfString("%.10g", lossScale_) +
        ") with no hysteresis left; training stops (" +
        (at == step
             ? "step " + std::to_string(at)
             : "steps " + std::to_string(at) + ".." + std::to_string(step)) +
        " applied no update, so the parameters are those after step " +
        std::to_string(at - 1) + "). " +
        (lastOverflow_.empty()
             ? std::string("Compile with --check-finite to name the ONNX "
                           "node that overflows, ")
             : "At " + lastOverflow_ + ". Compile ") +
        "with a lower --min-loss-scale, or with --precision bf16 "
        "(float32's range, no scaling)");
  }
  return printfString("  loss scale %.10g  skipped %llu", lossScale_,
                      static_cast<unsigned long long>(skippedSteps_));
}

} // namespace ztc::rt::detail
