//===- TrainerMetrics.cpp - reports and --metrics of a training run -------===//
//
// The Reporter's log lines and progress bar, and the --metrics file: one
// JSON line per logged step (and per evaluation) with the fields of the
// Hugging Face Trainer's log_history.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ztc::rt::detail {

namespace {

double secondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

/// "1:02:03" for a duration in seconds.
std::string formatDuration(double seconds) {
  auto total = static_cast<long long>(seconds + 0.5);
  return printfString("%lld:%02lld:%02lld", total / 3600, total / 60 % 60,
                      total % 60);
}

} // namespace

std::string printfString(const char *pattern, ...) {
  char buffer[512];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(buffer, sizeof buffer, pattern, args);
  va_end(args);
  return buffer;
}

Reporter::Reporter(const TrainOptions &options, uint64_t lastStep,
                   uint64_t samplesPerStep)
    : log_(options.log), bar_(options.progressBar), logEvery_(options.logEvery),
      lastStep_(lastStep), samplesPerStep_(double(samplesPerStep)) {
  if (!log_)
    log_ = [](const std::string &text) {
      std::fprintf(stderr, "%s\n", text.c_str());
    };
}

bool Reporter::due(uint64_t step) const {
  if (step == lastStep_)
    return true;
  if (bar_)
    return !drawn_ || secondsBetween(lastDraw_, Clock::now()) >= 0.1;
  return logEvery_ != 0 && step % logEvery_ == 0;
}

void Reporter::step(uint64_t step, float loss, double lr,
                    const std::string &extra) {
  Clock::time_point now = Clock::now();
  if (bar_) {
    drawBar(step, loss, lr, extra, now);
    return;
  }
  double seconds = std::max(secondsBetween(lastLine_, now), 1e-9);
  double rate = samplesPerStep_ * double(step - lastLineStep_) / seconds;
  std::string tokens;
  if (haveTokens_)
    tokens = printfString(
        "  %.0f tokens/s (%.1f%% padding)", double(real_) / seconds,
        positions_ ? 100.0 * (1.0 - double(real_) / double(positions_)) : 0.0);
  log_(printfString("step %llu/%llu  loss %.6f  lr %.3e%s  %.1f samples/s%s",
                    static_cast<unsigned long long>(step),
                    static_cast<unsigned long long>(lastStep_), loss, lr,
                    extra.c_str(), rate, tokens.c_str()));
  lastLine_ = now;
  lastLineStep_ = step;
}

void Reporter::drawBar(uint64_t step, float loss, double lr,
                       const std::string &extra, Clock::time_point now) {
  constexpr int kWidth = 24;
  double elapsed = std::max(secondsBetween(start_, now), 1e-9);
  uint64_t done = step - firstStep_;
  double fraction = double(step) / double(lastStep_);
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  double eta = elapsed / double(done) * double(lastStep_ - step);
  std::string line = printfString(
      "\rstep %llu/%llu [%s] loss %.6f  lr %.3e%s  %.1f samples/s  ETA %s"
      "\033[K",
      static_cast<unsigned long long>(step),
      static_cast<unsigned long long>(lastStep_), bar.c_str(), loss, lr,
      extra.c_str(), samplesPerStep_ * double(done) / elapsed,
      formatDuration(eta).c_str());
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
  lastDraw_ = now;
}

void Reporter::clearBar() {
  if (drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  drawn_ = false;
}

void TrainingRun::openMetrics(uint64_t step) {
  if (options_.metricsFile.empty() || comm_.rank() != 0)
    return;
  metrics_.open(options_.metricsFile, options_.resumeDir.empty()
                                          ? std::ios::out | std::ios::trunc
                                          : std::ios::out | std::ios::app);
  if (!metrics_)
    throw Error("cannot write metrics file " + options_.metricsFile + ": " +
                std::strerror(errno));
  metricsLast_ = Clock::now();
  metricsLastStep_ = step;
  // Tokens per sample: the labels' elements per sample when there is one
  // per position (a language model), else none.
  for (const Binding &binding : manifest().bindings)
    if (binding.role == BindingRole::Label && binding.shape.size() >= 2) {
      tokensPerSample_ = 1;
      for (size_t d = 1; d < binding.shape.size(); ++d)
        tokensPerSample_ *= uint64_t(binding.shape[d]);
    }
}

void TrainingRun::appendMetrics(const nlohmann::ordered_json &line,
                                uint64_t step) {
  metrics_ << line.dump() << "\n";
  metrics_.flush();
  if (!metrics_)
    throw Error("cannot write metrics file " + options_.metricsFile +
                " at step " + std::to_string(step) + ": " +
                std::strerror(errno));
}

void TrainingRun::writeMetrics(uint64_t step, double lr) {
  Clock::time_point now = Clock::now();
  double seconds = std::max(secondsBetween(metricsLast_, now), 1e-9);
  double samples = double(step - metricsLastStep_) *
                   double(loader_.batchSize() * microBatches_);
  nlohmann::ordered_json line = {
      {"step", step},
      {"epoch", double(step * microBatches_) /
                    double(std::max<uint64_t>(1, loader_.batchesPerEpoch()))},
      {"loss", metricsCalls_ ? metricsLossSum_ / double(metricsCalls_) : 0.0},
      {"learning_rate", lr},
      {"grad_norm", gradNormState_ >= 0
                        ? nlohmann::ordered_json(stateValue(gradNormState_))
                        : nlohmann::ordered_json(nullptr)},
      {"loss_scale", dynamicScaling() ? nlohmann::ordered_json(lossScale_)
                                      : nlohmann::ordered_json(nullptr)},
      {"skipped_steps", skippedSteps_},
      {"samples_per_second", samples / seconds},
      {"arena_bytes", runner_.arenaBytes()}};
  line["tokens_per_second"] =
      tokensPerSample_
          ? nlohmann::ordered_json(samples * double(tokensPerSample_) / seconds)
          : nlohmann::ordered_json(nullptr);
  if (loader_.tokenMode()) {
    // A token dataset: the labels that count, on every rank, and the
    // share of positions that are padding.
    line["real_tokens"] = metricsReal_;
    line["tokens_per_second"] = double(metricsReal_) / seconds;
    line["padding_fraction"] =
        metricsPositions_
            ? 1.0 - double(metricsReal_) / double(metricsPositions_)
            : 0.0;
  }
  metricsReal_ = metricsPositions_ = 0;
  appendMetrics(line, step);
  metricsLossSum_ = 0;
  metricsCalls_ = 0;
  metricsLast_ = now;
  metricsLastStep_ = step;
}

} // namespace ztc::rt::detail
