//===- TrainerEval.cpp - --eval-data of a training run --------------------===//
//
// The held-out samples (as many on every rank) and the evaluate entry run
// over them after a step: the loss and, for a cross entropy, the accuracy
// over every rank's samples, logged and written to --metrics.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace ztc::rt::detail {

void TrainingRun::openEvalData() {
  const Entry *entry = manifest().find(EntryPurpose::Evaluate);
  evalEntry_ = artifact_.entry(EntryPurpose::Evaluate);
  if (!entry || !evalEntry_)
    throw Error("--eval-data needs an evaluate entry, which " +
                options_.artifactDir +
                " lacks (compiled by an older ztc or with --entries): "
                "recompile it");
  try {
    evalLoader_.emplace(manifest(), options_.evalDataDir, loader_.seed(),
                        /*partialBatches=*/true, options_.tokens);
  } catch (const Error &failure) {
    throw Error("--eval-data: " + std::string(failure.what()));
  }
  evalSamples_ = fewestOnAnyRank(comm_, evalLoader_->numSamples());
  evalCorrect_ = entry->outputIndex("correct");
  evalCounted_ = entry->outputIndex("counted");
  uint64_t global = evalLoader_->batchSize() * comm_.worldSize();
  // A cross entropy pads the last global batch with ignored labels; any
  // other loss evaluates the whole global batches the samples fill.
  evalBatches_ = crossEntropyEval() ? (evalSamples_ + global - 1) / global
                                    : evalSamples_ / global;
  if (evalBatches_ == 0)
    throw Error("--eval-data " + options_.evalDataDir + ": " +
                std::to_string(evalSamples_) +
                " samples do not fill one global batch of " +
                std::to_string(global) + " (" +
                std::to_string(evalLoader_->batchSize()) + " x " +
                std::to_string(comm_.worldSize()) +
                " ranks); a loss other than cross entropy cannot pad one");
  if (!crossEntropyEval())
    evalSamples_ = evalBatches_ * global;
}

EvalReport TrainingRun::evaluate(uint64_t step) {
  const Entry &entry = *manifest().find(EntryPurpose::Evaluate);
  plannedArena_ = std::max(plannedArena_, entry.arenaBytes);
  uint64_t batch = evalLoader_->batchSize();
  uint64_t global = batch * comm_.worldSize();
  int64_t ignore = manifest().train.ignoreIndex.value_or(-100);
  int lossOutput = entry.outputIndex("loss");
  // Weighted loss, weight, rows right, rows counted.
  double sums[4] = {0, 0, 0, 0};
  // Held-out rows are the artifact's full length; each batch's loss is
  // its mean.
  runner_.selectVariant(0);
  setLossWeight(1.0);
  auto scalar = [&](int index) {
    Tensor value = runner_.readArena(entry.outputs[size_t(index)]);
    return double(*value.data<float>());
  };
  for (uint64_t g = 0; g < evalBatches_; ++g) {
    std::vector<uint64_t> samples;
    uint64_t first = g * global + uint64_t(comm_.rank()) * batch;
    for (uint64_t k = first; k < first + batch && k < evalSamples_; ++k)
      samples.push_back(k);
    uploadBatch(evalLoader_->gather(samples, ignore));
    try {
      runner_.run(evalEntry_);
    } catch (const Error &failure) {
      throw Error("evaluation after step " + std::to_string(step) + ": " +
                  failure.what());
    }
    double loss = scalar(lossOutput);
    if (crossEntropyEval()) {
      double counted = scalar(evalCounted_);
      // A batch of padding alone has no loss (0 / 0).
      if (counted > 0) {
        sums[0] += loss * counted;
        sums[1] += counted;
      }
      sums[2] += scalar(evalCorrect_);
      sums[3] += counted;
    } else {
      sums[0] += loss;
      sums[1] += 1;
    }
  }
  if (comm_.worldSize() > 1)
    comm_.allReduceSum(sums, 4);
  EvalReport report;
  report.step = step;
  report.loss = sums[1] > 0 ? sums[0] / sums[1] : std::nan("");
  report.accuracy =
      crossEntropyEval() && sums[3] > 0 ? sums[2] / sums[3] : std::nan("");
  report.samples = evalSamples_;
  std::string text = printfString("eval after step %llu: loss %.6f",
                                  (unsigned long long)step, report.loss);
  if (crossEntropyEval())
    text += printfString("  accuracy %.2f%%", 100 * report.accuracy);
  text += "  (" + std::to_string(report.samples) + " samples of " +
          options_.evalDataDir + ")";
  reporter_->message(text);
  if (metrics_.is_open()) {
    nlohmann::ordered_json line = {{"step", step},
                                   {"eval_loss", report.loss},
                                   {"eval_samples", report.samples}};
    if (crossEntropyEval())
      line["eval_accuracy"] = report.accuracy;
    appendMetrics(line, step);
  }
  return report;
}

} // namespace ztc::rt::detail
