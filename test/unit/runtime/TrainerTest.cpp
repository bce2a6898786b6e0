//===- TrainerTest.cpp - the training loop end to end ---------------------===//
//
// A hand-written training step (linear regression y = x.w + b, MSE loss,
// plain SGD in place), with its grad entry and an accumulation entry, a
// training manifest and init.safetensors, is compiled with
// compileSharedObject and trained on synthetic data. The losses and final
// params are checked against a reference loop computed here in double;
// then the lr schedule, logging, checkpoint resume (bit-identical to an
// uninterrupted run), gradient dumps, accumulation, the random key and
// every error.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"

#include "TestUtil.h"
#include "runtime/Artifact.h"
#include "runtime/Error.h"
#include "runtime/Runner.h"
#include "runtime/backend/Compile.h"
#include "runtime/io/Npy.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/DataLoader.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <regex>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

using namespace ztc::rt;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

constexpr int kBatch = 4;
constexpr int kFeatures = 3;
constexpr int kSamples = 22; // 5 batches per epoch, 2 samples dropped

// Bindings: 0 x (input float32[4,3]), 1 y (input float32[4]), 2 w (param
// float32[3]), 3 b (param float32[]), 4 w.sq (state: sum of squared
// gradients), 5 last_step (state: the step hyper of the last update),
// 6 w.acc, 7 b.acc (states: accumulated gradients), 8 lr, 9 step (hypers).
// Arena: loss at 0, grad of w at 64, grad of b at 128.
constexpr char kStep[] = R"(#include "kernels/StepAbi.h"
#include "kernels/TrainState.h"
namespace {
float *at(void *const *bindings, int index) {
  return static_cast<float *>(bindings[index]);
}

void lossAndGrads(void *const *bindings, char *arena) {
  const float *x = at(bindings, 0), *y = at(bindings, 1);
  const float *w = at(bindings, 2), *b = at(bindings, 3);
  float *loss = reinterpret_cast<float *>(arena);
  float *gw = reinterpret_cast<float *>(arena + 64);
  float *gb = reinterpret_cast<float *>(arena + 128);
  float sum = 0;
  gw[0] = gw[1] = gw[2] = 0;
  *gb = 0;
  for (int i = 0; i < 4; ++i) {
    float prediction = *b;
    for (int j = 0; j < 3; ++j)
      prediction += x[i * 3 + j] * w[j];
    float residual = prediction - y[i];
    sum += residual * residual;
    for (int j = 0; j < 3; ++j)
      gw[j] += residual * x[i * 3 + j];
    *gb += residual;
  }
  *loss = sum / 4;
  for (int j = 0; j < 3; ++j)
    gw[j] *= 0.5f;
  *gb *= 0.5f;
}

void update(void *const *bindings, const float *gw, float gb) {
  float *w = at(bindings, 2), *b = at(bindings, 3);
  float *sq = at(bindings, 4), *lastStep = at(bindings, 5);
  float lr = *at(bindings, 8);
  for (int j = 0; j < 3; ++j) {
    w[j] -= lr * gw[j];
    sq[j] += gw[j] * gw[j];
  }
  *b -= lr * gb;
  *lastStep = *at(bindings, 9);
}
} // namespace

extern "C" void ztc_loss_and_grads(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  lossAndGrads(bindings, arena);
}

extern "C" void ztc_train_step(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  lossAndGrads(bindings, arena);
  ztc::recordLossInto(ctx->state, *reinterpret_cast<float *>(arena));
  update(bindings, reinterpret_cast<float *>(arena + 64),
         *reinterpret_cast<float *>(arena + 128));
}

// The step, except that its loss is NaN at optimizer step 7 (the step
// hyper, binding 9).
extern "C" void ztc_train_step_nan7(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  lossAndGrads(bindings, arena);
  float *loss = reinterpret_cast<float *>(arena);
  if (*at(bindings, 9) == 7.0f)
    *loss = __builtin_nanf("");
  ztc::recordLossInto(ctx->state, *loss);
  update(bindings, reinterpret_cast<float *>(arena + 64),
         *reinterpret_cast<float *>(arena + 128));
}

extern "C" void ztc_accumulate(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  lossAndGrads(bindings, arena);
  ztc::recordLossInto(ctx->state, *reinterpret_cast<float *>(arena));
  float *wAcc = at(bindings, 6), *bAcc = at(bindings, 7);
  for (int j = 0; j < 3; ++j)
    wAcc[j] += reinterpret_cast<float *>(arena + 64)[j];
  *bAcc += *reinterpret_cast<float *>(arena + 128);
}

// The last of 2 micro-batches: update with the mean gradient.
extern "C" void ztc_train_step_accum2(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  lossAndGrads(bindings, arena);
  ztc::recordLossInto(ctx->state, *reinterpret_cast<float *>(arena));
  float *wAcc = at(bindings, 6), *bAcc = at(bindings, 7);
  float gw[3];
  for (int j = 0; j < 3; ++j) {
    gw[j] = (wAcc[j] + reinterpret_cast<float *>(arena + 64)[j]) * 0.5f;
    wAcc[j] = 0;
  }
  float gb = (*bAcc + *reinterpret_cast<float *>(arena + 128)) * 0.5f;
  *bAcc = 0;
  update(bindings, gw, gb);
}
)";

// Appended to kStep (after an include of the kernel library): a train step
// whose gather reads w at the step hyper, so step 3 reads past w[3].
constexpr char kGatherAtStepEntry[] = R"(
extern "C" void ztc_train_step_gather(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  ztc_train_step(ctx);
  long long index = static_cast<long long>(*at(bindings, 9));
  float value;
  ztc::cpu::gather<float, long long>(at(bindings, 2), {3}, &index, {1},
                                     &value, {}, ztc::AxisParams{0});
}
)";

// Appended to kStep: entries that also record the random key of every call
// in the state `keys` (binding 11, int64[16]: the keys in call order, their
// count in the last entry), so a test sees what the trainer wrote into the
// `rng` hyper (binding 10).
constexpr char kRandomKeyEntries[] = R"(
namespace {
void recordKey(void *const *bindings) {
  const long long *key = static_cast<const long long *>(bindings[10]);
  long long *keys = static_cast<long long *>(bindings[11]);
  if (keys[15] < 15)
    keys[keys[15]++] = *key;
}
} // namespace

extern "C" void ztc_train_step_keys(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  recordKey(bindings);
  ztc_train_step_accum2(ctx);
}

extern "C" void ztc_accumulate_keys(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  recordKey(bindings);
  ztc_accumulate(ctx);
}

extern "C" void ztc_loss_and_grads_keys(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  recordKey(bindings);
  ztc_loss_and_grads(ctx);
}
)";

/// The entry of `manifest` for `purpose`, appended (without outputs) when
/// the manifest has none.
Entry &entryFor(Manifest &manifest, EntryPurpose purpose) {
  for (Entry &entry : manifest.entries)
    if (entry.purpose == purpose)
      return entry;
  manifest.entries.push_back({"", purpose, {}});
  return manifest.entries.back();
}

Manifest trainManifest() {
  Manifest manifest;
  manifest.kind = ArtifactKind::Train;
  manifest.arenaBytes = 256;
  manifest.bindings = {
      {BindingRole::Input, "x", "x", DType::Float32, {kBatch, kFeatures}},
      // The labels: data like an input, read by the loss.
      {BindingRole::Label, "y", "y", DType::Float32, {kBatch}},
      {BindingRole::Param, "w", "", DType::Float32, {kFeatures}},
      {BindingRole::Param, "b", "", DType::Float32, {}},
      {BindingRole::State, "w.sq", "", DType::Float32, {kFeatures}},
      {BindingRole::State, "last_step", "", DType::Float32, {}},
      {BindingRole::State, "w.acc", "", DType::Float32, {kFeatures}},
      {BindingRole::State, "b.acc", "", DType::Float32, {}},
      {BindingRole::Hyper, "lr", "", DType::Float32, {}},
      {BindingRole::Hyper, "step", "", DType::Float32, {}},
  };
  // The steps of kStep write the arena up to byte 132; the gradient
  // entry's plan reaches the whole arena.
  manifest.entries = {
      {"ztc_train_step",
       EntryPurpose::TrainStep,
       {{"loss", "loss", DType::Float32, {}, 0}},
       132},
      {"ztc_loss_and_grads",
       EntryPurpose::LossAndGrads,
       {{"w", "w", DType::Float32, {kFeatures}, 64},
        {"b", "b", DType::Float32, {}, 128}},
       256},
  };
  manifest.train.optimizer = "sgd";
  manifest.train.loss = "mse";
  manifest.train.batchSize = kBatch;
  manifest.train.schedule.lr = 0.1;
  return manifest;
}

/// Initial params: w = (0.5, -0.25, 0), b = 0.125.
SafeTensors trainInit() {
  SafeTensors init;
  Tensor w(DType::Float32, {kFeatures});
  w.data<float>()[0] = 0.5f;
  w.data<float>()[1] = -0.25f;
  Tensor b(DType::Float32, {});
  *b.data<float>() = 0.125f;
  init.tensors["w"] = w;
  init.tensors["b"] = b;
  return init;
}

/// Synthetic data: x uniform in [-1, 1], y = x.(1, -2, 0.5) + 0.3 + noise.
struct Data {
  std::vector<float> x, y;
};

Data makeData(int samples) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float truth[kFeatures] = {1.0f, -2.0f, 0.5f};
  Data data;
  for (int i = 0; i < samples; ++i) {
    float y = 0.3f + 0.01f * uniform(rng);
    for (int j = 0; j < kFeatures; ++j) {
      data.x.push_back(uniform(rng));
      y += data.x.back() * truth[j];
    }
    data.y.push_back(y);
  }
  return data;
}

void writeData(const std::string &dir, const Data &data) {
  std::filesystem::create_directories(dir);
  int64_t samples = static_cast<int64_t>(data.y.size());
  Tensor x(DType::Float32, {samples, kFeatures});
  Tensor y(DType::Float32, {samples});
  std::copy(data.x.begin(), data.x.end(), x.data<float>());
  std::copy(data.y.begin(), data.y.end(), y.data<float>());
  writeNpy(dir + "/x.npy", x);
  writeNpy(dir + "/y.npy", y);
}

/// The reference: the same model and SGD in double.
struct Reference {
  double w[kFeatures] = {0.5, -0.25, 0.0};
  double b = 0.125;
  double sq[kFeatures] = {0, 0, 0};

  /// Loss and gradients on the samples `batch`.
  double lossAndGrads(const Data &data, const std::vector<uint64_t> &batch,
                      double gw[kFeatures], double &gb) const {
    double loss = 0;
    gw[0] = gw[1] = gw[2] = gb = 0;
    for (uint64_t sample : batch) {
      double residual = b - data.y[sample];
      for (int j = 0; j < kFeatures; ++j)
        residual += data.x[sample * kFeatures + j] * w[j];
      loss += residual * residual;
      for (int j = 0; j < kFeatures; ++j)
        gw[j] += 2 * residual * data.x[sample * kFeatures + j] / kBatch;
      gb += 2 * residual / kBatch;
    }
    return loss / kBatch;
  }

  void update(const double gw[kFeatures], double gb, double lr) {
    for (int j = 0; j < kFeatures; ++j) {
      w[j] -= lr * gw[j];
      sq[j] += gw[j] * gw[j];
    }
    b -= lr * gb;
  }
};

/// The samples of micro-batch `index` (0-based over the run), as the
/// DataLoader documents: epoch permutations, floor(N / B) batches each.
std::vector<uint64_t> batchSamples(uint64_t index, uint64_t seed) {
  const uint64_t perEpoch = kSamples / kBatch;
  std::vector<uint64_t> order =
      epochPermutation(kSamples, seed, index / perEpoch);
  auto begin = order.begin() + (index % perEpoch) * kBatch;
  return std::vector<uint64_t>(begin, begin + kBatch);
}

/// Trains the reference for `steps` steps of `microBatches` micro-batches
/// with lr(step); returns the losses.
std::vector<double> trainReference(Reference &model, const Data &data,
                                   uint64_t steps, uint64_t seed,
                                   const std::function<double(uint64_t)> &lr,
                                   uint64_t microBatches = 1) {
  std::vector<double> losses;
  uint64_t micro = 0;
  for (uint64_t step = 1; step <= steps; ++step) {
    double gw[kFeatures] = {0, 0, 0}, gb = 0, loss = 0;
    for (uint64_t k = 0; k < microBatches; ++k) {
      double mw[kFeatures], mb;
      loss += model.lossAndGrads(data, batchSamples(micro++, seed), mw, mb);
      for (int j = 0; j < kFeatures; ++j)
        gw[j] += mw[j] / double(microBatches);
      gb += mb / double(microBatches);
    }
    losses.push_back(loss / double(microBatches));
    // The trainer writes lr into a float32 hyper.
    model.update(gw, gb, static_cast<float>(lr(step)));
  }
  return losses;
}

void expectClose(double actual, double expected, const std::string &what) {
  EXPECT_NEAR(actual, expected, 1e-5 * std::max(1.0, std::abs(expected)))
      << what;
}

float scalar(const Tensor &tensor) { return *tensor.data<float>(); }

class TrainerTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    shared_ = std::make_unique<TempDir>();
    writeText(*shared_ / "step.cpp", kStep);
    soPath_ = compileSharedObject(*shared_ / "step.cpp", Target::Cpu,
                                  *shared_ / "cache");
  }
  static void TearDownTestSuite() { shared_.reset(); }

  void SetUp() override {
    artifact_ = dir_ / "model.ztc";
    data_ = dir_ / "data";
    samples_ = makeData(kSamples);
    writeData(data_, samples_);
    writeArtifact(trainManifest());
  }

  /// (Re)writes the artifact with `manifest`.
  void writeArtifact(const Manifest &manifest,
                     const SafeTensors &init = trainInit()) {
    std::filesystem::create_directories(artifact_);
    writeText(artifact_ + "/manifest.json", printManifest(manifest));
    writeSafeTensors(artifact_ + "/init.safetensors", init);
    // A new file, never a rewrite of a mapped one (RTLD_NODELETE).
    std::filesystem::remove(artifact_ + "/step.so");
    std::filesystem::copy_file(soPath_, artifact_ + "/step.so");
  }

  /// Options for a quiet run of `steps` steps; log lines go to log_.
  TrainOptions options(uint64_t steps) {
    TrainOptions options;
    options.artifactDir = artifact_;
    options.dataDir = data_;
    options.steps = steps;
    options.seed = 7;
    // A report every step: one loss per step in TrainResult::losses.
    options.logEvery = 1;
    options.progressBar = false;
    options.log = [this](const std::string &line) { log_.push_back(line); };
    return options;
  }

  std::string trainError(const TrainOptions &options) {
    return ZTC_ERROR_MESSAGE(train(options));
  }

  static std::unique_ptr<TempDir> shared_;
  static std::string soPath_;

  TempDir dir_;
  std::string artifact_, data_;
  Data samples_;
  std::vector<std::string> log_;
};

std::unique_ptr<TempDir> TrainerTest::shared_;
std::string TrainerTest::soPath_;

} // namespace

TEST_F(TrainerTest, MatchesTheReferenceLoop) {
  Manifest manifest = trainManifest();
  manifest.train.schedule.lr = 0.5;
  writeArtifact(manifest);
  TrainOptions run = options(40);
  run.saveDir = dir_ / "ckpt";
  TrainResult result = train(run);
  ASSERT_EQ(result.losses.size(), 40u);
  EXPECT_EQ(result.firstStep, 1u);
  EXPECT_EQ(result.finalStep, 40u);

  Reference reference;
  std::vector<double> expected =
      trainReference(reference, samples_, 40, 7, [](uint64_t) { return 0.5; });
  for (size_t i = 0; i < 40; ++i)
    expectClose(result.losses[i], expected[i], "loss " + std::to_string(i));
  // Converges towards the noise floor.
  EXPECT_LT(result.losses.back(), 0.01 * result.losses.front());

  Checkpoint final = loadCheckpoint(dir_ / "ckpt", trainManifest());
  EXPECT_EQ(final.step, 40u);
  // 40 batches of 5 per epoch: the next batch is epoch 8, batch 0.
  EXPECT_EQ(final.epoch, 8u);
  EXPECT_EQ(final.batch, 0u);
  EXPECT_EQ(final.seed, 7u);
  for (int j = 0; j < kFeatures; ++j) {
    expectClose(final.tensors["w"].data<float>()[j], reference.w[j], "w");
    expectClose(final.tensors["w.sq"].data<float>()[j], reference.sq[j],
                "w.sq");
  }
  expectClose(scalar(final.tensors["b"]), reference.b, "b");
  // The step hyper counts optimizer steps from 1.
  EXPECT_EQ(scalar(final.tensors["last_step"]), 40.0f);
}

TEST_F(TrainerTest, EpochsDecideWhenStepsAreZero) {
  TrainOptions run = options(0);
  run.epochs = 3;
  TrainResult result = train(run);
  EXPECT_EQ(result.finalStep, 15u); // 3 epochs of 5 batches
}

TEST_F(TrainerTest, ScheduleFeedsTheLrHyper) {
  // warmup-decay over the run's 20 steps (total_steps 0), warmup 5, lr
  // 0.2: as DeepSpeed's engine runs it, step 1 at the constructor's rate
  // (min_lr 0) and step t >= 2 at i = t - 2, lr = 0.2 * i / 5 while i < 5,
  // then 0.2 * (20 - i) / 15.
  Manifest manifest = trainManifest();
  manifest.train.schedule.kind = LrScheduleKind::WarmupDecay;
  manifest.train.schedule.lr = 0.2;
  manifest.train.schedule.warmupSteps = 5;
  writeArtifact(manifest);
  TrainOptions run = options(20);
  run.logEvery = 1;
  run.saveDir = dir_ / "ckpt";
  TrainResult result = train(run);

  auto lr = [](uint64_t step) {
    double i = step == 1 ? 0 : double(step - 2);
    return i < 5 ? 0.2 * i / 5 : 0.2 * (20 - i) / 15;
  };
  Reference reference;
  std::vector<double> expected = trainReference(reference, samples_, 20, 7, lr);
  for (size_t i = 0; i < 20; ++i)
    expectClose(result.losses[i], expected[i], "loss " + std::to_string(i));
  Checkpoint final = loadCheckpoint(dir_ / "ckpt");
  for (int j = 0; j < kFeatures; ++j)
    expectClose(final.tensors["w"].data<float>()[j], reference.w[j], "w");
  expectClose(scalar(final.tensors["b"]), reference.b, "b");

  // The logged lr: 0 at steps 1 and 2 (the loss is unchanged by them), the
  // peak at step 7, 0.4 / 15 at step 20.
  auto lineOf = [&](uint64_t step) {
    std::string prefix = "step " + std::to_string(step) + "/20 ";
    for (const std::string &line : log_)
      if (line.rfind(prefix, 0) == 0)
        return line;
    return std::string();
  };
  EXPECT_NE(lineOf(1).find("  lr 0.000e+00  "), std::string::npos);
  EXPECT_NE(lineOf(2).find("  lr 0.000e+00  "), std::string::npos);
  EXPECT_NE(lineOf(4).find("  lr 8.000e-02  "), std::string::npos);
  EXPECT_NE(lineOf(7).find("  lr 2.000e-01  "), std::string::npos);
  EXPECT_NE(lineOf(20).find("  lr 2.667e-02  "), std::string::npos);
}

TEST_F(TrainerTest, LogLines) {
  TrainOptions run = options(12);
  run.logEvery = 5;
  run.saveDir = dir_ / "ckpt";
  TrainResult result = train(run);
  ASSERT_EQ(log_.size(), 6u);
  EXPECT_EQ(log_[0], "training " + artifact_ +
                         ": 22 samples, batches of 4 (5 per epoch), steps "
                         "1..12, optimizer sgd, lr schedule constant");
  std::regex line(R"(step (\d+)/12  loss (\d+\.\d{6})  lr 1\.000e-01  )"
                  R"(\d+\.\d samples/s)");
  // Every logEvery steps, and the last.
  const uint64_t steps[] = {5, 10, 12};
  ASSERT_EQ(result.loggedSteps, std::vector<uint64_t>(steps, steps + 3));
  for (int i = 0; i < 3; ++i) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(log_[i + 1], match, line)) << log_[i + 1];
    EXPECT_EQ(match[1], std::to_string(steps[i]));
    char loss[32];
    std::snprintf(loss, sizeof loss, "%.6f", result.losses[i]);
    EXPECT_EQ(match[2], loss);
  }
  EXPECT_EQ(log_[4], "saved checkpoint " + (dir_ / "ckpt") + " at step 12");
  // The measured high-water mark: the hand-written step's highest write is
  // b's gradient, at bytes 128..131 of its 256-byte arena.
  // The plan of the entries that ran (train_step's), not the whole arena.
  EXPECT_EQ(log_[5], "arena: 132 bytes planned, 132 written (high-water mark)");
  EXPECT_EQ(result.arenaTouched, 132u);
}

TEST_F(TrainerTest, ReadsTheLossOnlyWhenItReports) {
  // Per-step losses from a run that reports every step...
  TrainResult every = train(options(12));
  ASSERT_EQ(every.losses.size(), 12u);
  EXPECT_EQ(every.stateReads, 12u);
  // ...and a run that reports every 4: the trainer read the device state
  // three times, and each report is the mean of its four steps, summed on
  // the device in double as here.
  TrainOptions run = options(12);
  run.logEvery = 4;
  TrainResult result = train(run);
  EXPECT_EQ(result.stateReads, 3u);
  ASSERT_EQ(result.loggedSteps, (std::vector<uint64_t>{4, 8, 12}));
  for (size_t i = 0; i < 3; ++i) {
    double sum = 0;
    for (size_t k = 0; k < 4; ++k)
      sum += every.losses[4 * i + k];
    EXPECT_EQ(result.losses[i], static_cast<float>(sum / 4)) << i;
  }
}

TEST_F(TrainerTest, MetricsLines) {
  // Per-step losses, to check each line's mean against.
  TrainResult every = train(options(12));
  std::string file = dir_ / "metrics.jsonl";
  TrainOptions run = options(7);
  run.logEvery = 5;
  run.metricsFile = file;
  run.saveDir = dir_ / "ckpt";
  train(run);
  // A resumed run appends.
  run.steps = 12;
  run.resumeDir = run.saveDir;
  train(run);
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string text; std::getline(in, text);)
    lines.push_back(nlohmann::json::parse(text));
  // Every logEvery steps and the last of each run: 5, 7 | 10, 12.
  ASSERT_EQ(lines.size(), 4u);
  const uint64_t steps[] = {5, 7, 10, 12};
  const uint64_t firsts[] = {1, 6, 8, 11};
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json &line = lines[i];
    EXPECT_EQ(line["step"], steps[i]);
    // 22 samples in batches of 4: 5 batches per epoch.
    EXPECT_DOUBLE_EQ(line["epoch"].get<double>(), double(steps[i]) / 5);
    double sum = 0;
    for (uint64_t k = firsts[i]; k <= steps[i]; ++k)
      sum += every.losses[k - 1];
    EXPECT_NEAR(line["loss"].get<double>(),
                sum / double(steps[i] - firsts[i] + 1), 1e-6)
        << i;
    EXPECT_DOUBLE_EQ(line["learning_rate"].get<double>(), 0.1);
    EXPECT_TRUE(line["grad_norm"].is_null());
    EXPECT_TRUE(line["loss_scale"].is_null());
    EXPECT_EQ(line["skipped_steps"], 0);
    EXPECT_GT(line["samples_per_second"].get<double>(), 0);
    // One label per sample: no tokens.
    EXPECT_TRUE(line["tokens_per_second"].is_null());
    EXPECT_EQ(line["arena_bytes"], 256);
  }
  // A file that cannot be written is an error before the first step.
  run = options(3);
  run.metricsFile = dir_ / "no-such-directory/metrics.jsonl";
  EXPECT_EQ(trainError(run), "cannot write metrics file " + run.metricsFile +
                                 ": No such file or directory");
}

TEST_F(TrainerTest, PrefetchChangesNothing) {
  // Batches gathered on a background thread are the batches: the same
  // losses, the same checkpoint (its data position included).
  TrainOptions run = options(12);
  run.prefetchMinBytes = 0; // this test's batches are tiny
  run.saveDir = dir_ / "prefetched";
  run.saveEvery = 5;
  TrainResult prefetched = train(run);
  run.prefetch = false;
  run.saveDir = dir_ / "inline";
  TrainResult inlined = train(run);
  EXPECT_EQ(prefetched.losses, inlined.losses);
  Checkpoint a =
      loadCheckpoint(dir_ / "prefetched", Artifact::load(artifact_).manifest());
  Checkpoint b =
      loadCheckpoint(dir_ / "inline", Artifact::load(artifact_).manifest());
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.batch, b.batch);
  for (const auto &[name, tensor] : a.tensors)
    EXPECT_EQ(tensor.bytes, b.tensors.at(name).bytes) << name;
}

TEST_F(TrainerTest, CheckDataFindsTheFirstBadSample) {
  // A label outside [0, 3) at sample 5, with ignore index -1 allowed.
  Manifest manifest = trainManifest();
  manifest.bindings[1] = {BindingRole::Label, "y", "y", DType::Int64, {kBatch}};
  manifest.train.classes = 3;
  manifest.train.ignoreIndex = -1;
  writeArtifact(manifest);
  Tensor labels(DType::Int64, {kSamples});
  for (int64_t i = 0; i < kSamples; ++i)
    labels.data<int64_t>()[i] = i == 9 ? -1 : i % 3;
  labels.data<int64_t>()[5] = 3;
  writeNpy(data_ + "/y.npy", labels);
  TrainOptions run = options(1);
  run.checkData = true;
  EXPECT_EQ(trainError(run), "data check: y.npy: sample 5 has label 3, "
                             "outside [0, 3) (ignore_index -1)");
  // Labels fixed, a NaN in sample 8's feature 2.
  labels.data<int64_t>()[5] = 0;
  writeNpy(data_ + "/y.npy", labels);
  Tensor x(DType::Float32, {kSamples, kFeatures});
  x.data<float>()[8 * kFeatures + 2] = std::nanf("");
  writeNpy(data_ + "/x.npy", x);
  EXPECT_EQ(trainError(run), "data check: x.npy: sample 8 has a NaN "
                             "(element 2)");
  // Clean data passes the scan (the run's own step then runs).
  x.data<float>()[8 * kFeatures + 2] = 0.5f;
  writeNpy(data_ + "/x.npy", x);
  log_.clear();
  EXPECT_EQ(trainError(run), "");
  EXPECT_EQ(log_[1], "data check: 22 samples, no NaN or infinity, labels in "
                     "[0, 3): ok");
}

TEST_F(TrainerTest, OneTrainerPerCheckpointDirectory) {
  std::string dir = dir_ / "ckpt";
  TrainOptions run = options(2);
  run.saveDir = dir;
  {
    // Another writer holds the directory: the run refuses, naming it.
    CheckpointLock held(dir);
    EXPECT_EQ(trainError(run),
              dir + " is being written by another trainer (pid " +
                  std::to_string(::getpid()) +
                  "); give this run its own --save directory");
  }
  // Released: the run saves.
  EXPECT_EQ(trainError(run), "");
  EXPECT_EQ(loadCheckpoint(dir).step, 2u);
  // A writer that dies without releasing (SIGKILL) leaves no stale lock.
  pid_t child = ::fork();
  if (child == 0) {
    CheckpointLock held(dir);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  run.steps = 3;
  run.resumeDir = dir;
  EXPECT_EQ(trainError(run), "");
  EXPECT_EQ(loadCheckpoint(dir).step, 3u);
}

TEST_F(TrainerTest, NonFiniteLossNamesItsStep) {
  // The loss turns NaN at step 7; the trainer learns it at the report of
  // step 10 and names step 7.
  Manifest manifest = trainManifest();
  manifest.entries[0].name = "ztc_train_step_nan7";
  writeArtifact(manifest);
  TrainOptions run = options(12);
  run.logEvery = 10;
  // Step 7 reads batch 6: epoch 1 (5 batches per epoch), batch 1.
  std::vector<uint64_t> order = epochPermutation(kSamples, 7, 1);
  std::string samples;
  for (int k = 0; k < kBatch; ++k)
    samples += (k ? ", " : "") + std::to_string(order[kBatch + k]);
  std::string expected = "training diverged at step 7: the loss is nan (its "
                         "batch: samples " +
                         samples + ")";
  EXPECT_EQ(trainError(run), expected);
  // Reporting every step finds it at once, with the same step and batch.
  EXPECT_EQ(trainError(options(12)), expected);
}

TEST_F(TrainerTest, ProgressBarRedrawsOneLine) {
  TrainOptions run = options(12);
  run.progressBar = true;
  testing::internal::CaptureStderr();
  train(run);
  std::string bar = testing::internal::GetCapturedStderr();
  // Only the banner and the arena's report went to the log; the steps went
  // to the bar.
  EXPECT_EQ(log_.size(), 2u);
  EXPECT_NE(bar.find("\rstep 12/12 [########################] loss "),
            std::string::npos)
      << bar;
  EXPECT_NE(bar.find("samples/s  ETA 0:00:00"), std::string::npos) << bar;
  EXPECT_EQ(bar.find('\n'), bar.size() - 1) << bar;
}

TEST_F(TrainerTest, ResumeIsBitIdentical) {
  // A schedule that depends on the step, so a wrong step after resume
  // shows.
  Manifest manifest = trainManifest();
  manifest.train.schedule.kind = LrScheduleKind::WarmupCosine;
  manifest.train.schedule.warmupSteps = 4;
  manifest.train.schedule.totalSteps = 20;
  manifest.train.schedule.minLr = 0.01;
  writeArtifact(manifest);

  TrainOptions straight = options(20);
  straight.saveDir = dir_ / "straight";
  straight.saveEvery = 7;
  TrainResult whole = train(straight);
  std::vector<std::string> saves;
  for (const std::string &line : log_)
    if (line.rfind("saved checkpoint", 0) == 0)
      saves.push_back(line);
  ASSERT_EQ(saves.size(), 3u);
  EXPECT_EQ(saves[0], "saved checkpoint " + straight.saveDir + " at step 7");
  EXPECT_EQ(saves[1], "saved checkpoint " + straight.saveDir + " at step 14");
  EXPECT_EQ(log_[log_.size() - 2],
            "saved checkpoint " + straight.saveDir + " at step 20");

  TrainOptions first = options(10);
  first.saveDir = dir_ / "split";
  train(first);
  TrainOptions second = options(20);
  second.resumeDir = dir_ / "split";
  second.saveDir = dir_ / "split";
  log_.clear();
  TrainResult rest = train(second);
  EXPECT_EQ(log_[0], "resumed from " + second.resumeDir +
                         " at step 10 (epoch 2, batch 0)");
  EXPECT_EQ(rest.firstStep, 11u);
  EXPECT_EQ(rest.finalStep, 20u);
  ASSERT_EQ(rest.losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i)
    EXPECT_EQ(rest.losses[i], whole.losses[10 + i]) << i;

  Checkpoint a = loadCheckpoint(straight.saveDir, manifest);
  Checkpoint b = loadCheckpoint(second.saveDir, manifest);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.batch, b.batch);
  for (const auto &[name, tensor] : a.tensors)
    EXPECT_EQ(tensor.bytes, b.tensors.at(name).bytes) << name;

  // Resuming a finished run does nothing.
  log_.clear();
  TrainResult none = train(second);
  EXPECT_TRUE(none.losses.empty());
  EXPECT_EQ(none.finalStep, 20u);
  EXPECT_EQ(log_.back(),
            "the checkpoint is at step 20; nothing to do for 20 steps");
}

TEST_F(TrainerTest, ResumeMidEpoch) {
  // Stop at step 7 (epoch 1, batch 2) and continue with saveEvery.
  TrainOptions straight = options(13);
  TrainResult whole = train(straight);
  TrainOptions first = options(7);
  first.saveDir = dir_ / "ckpt";
  train(first);
  Checkpoint middle = loadCheckpoint(first.saveDir);
  EXPECT_EQ(middle.epoch, 1u);
  EXPECT_EQ(middle.batch, 2u);
  TrainOptions second = options(13);
  second.resumeDir = first.saveDir;
  TrainResult rest = train(second);
  ASSERT_EQ(rest.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(rest.losses[i], whole.losses[7 + i]) << i;
}

TEST_F(TrainerTest, DumpGradsWritesTheFirstBatch) {
  TrainOptions run = options(3);
  run.dumpGradsDir = dir_ / "grads";
  TrainResult dumped = train(run);
  TrainResult plain = train(options(3));
  EXPECT_EQ(dumped.losses, plain.losses); // the dump changes nothing

  Reference reference;
  double gw[kFeatures], gb;
  double loss = reference.lossAndGrads(samples_, batchSamples(0, 7), gw, gb);
  Tensor lossFile = readNpy(dir_ / "grads/loss.npy");
  Tensor w = readNpy(dir_ / "grads/grad/w.npy");
  Tensor b = readNpy(dir_ / "grads/grad/b.npy");
  ASSERT_EQ(lossFile.describe(), "float32[]");
  ASSERT_EQ(w.describe(), "float32[3]");
  ASSERT_EQ(b.describe(), "float32[]");
  expectClose(scalar(lossFile), loss, "loss");
  EXPECT_EQ(scalar(lossFile), dumped.losses[0]);
  for (int j = 0; j < kFeatures; ++j)
    expectClose(w.data<float>()[j], gw[j], "grad w");
  expectClose(scalar(b), gb, "grad b");
  EXPECT_EQ(log_[1], "wrote the loss and 2 gradient(s) of step 1 to " +
                         (dir_ / "grads"));
}

TEST_F(TrainerTest, GradientAccumulation) {
  Manifest manifest = trainManifest();
  manifest.train.gradAccum = 2;
  writeArtifact(manifest);
  EXPECT_EQ(trainError(options(4)),
            "train.grad_accum is 2, but gradient accumulation needs an "
            "accum_entry the artifact lacks");

  manifest.entries[0].name = "ztc_train_step_accum2";
  entryFor(manifest, EntryPurpose::Accumulate).name = "ztc_accumulate";
  writeArtifact(manifest);
  TrainOptions run = options(0);
  run.epochs = 2; // 5 micro-batches per epoch: 2 optimizer steps each
  run.saveDir = dir_ / "ckpt";
  TrainResult result = train(run);
  ASSERT_EQ(result.finalStep, 4u);

  Reference reference;
  std::vector<double> expected = trainReference(
      reference, samples_, 4, 7, [](uint64_t) { return 0.1; }, 2);
  for (size_t i = 0; i < 4; ++i)
    expectClose(result.losses[i], expected[i], "loss " + std::to_string(i));
  Checkpoint final = loadCheckpoint(run.saveDir);
  for (int j = 0; j < kFeatures; ++j)
    expectClose(final.tensors["w"].data<float>()[j], reference.w[j], "w");
  expectClose(scalar(final.tensors["b"]), reference.b, "b");
  // 8 micro-batches: the next is epoch 1, batch 3.
  EXPECT_EQ(final.epoch, 1u);
  EXPECT_EQ(final.batch, 3u);
}

// The trainer writes the `rng` hyper before every call: randomKey(seed,
// step, micro-batch), so each step and micro-batch draws new dropout masks,
// a resumed run draws the ones an uninterrupted run would, and the gradient
// dump uses the key of the first micro-batch it stands for.
TEST_F(TrainerTest, RandomKeyPerStepAndMicroBatch) {
  writeText(dir_ / "keys.cpp", std::string(kStep) + kRandomKeyEntries);
  std::string so =
      compileSharedObject(dir_ / "keys.cpp", Target::Cpu, *shared_ / "cache");
  Manifest manifest = trainManifest();
  manifest.bindings.push_back(
      {BindingRole::Hyper, "rng", "", DType::Int64, {}});
  manifest.bindings.push_back(
      {BindingRole::State, "keys", "", DType::Int64, {16}});
  manifest.entries[0].name = "ztc_train_step_keys";
  entryFor(manifest, EntryPurpose::Accumulate).name = "ztc_accumulate_keys";
  entryFor(manifest, EntryPurpose::LossAndGrads).name =
      "ztc_loss_and_grads_keys";
  manifest.train.gradAccum = 2;
  writeArtifact(manifest);
  std::filesystem::remove(artifact_ + "/step.so");
  std::filesystem::copy_file(so, artifact_ + "/step.so");
  auto keysOf = [&](const std::string &dir) {
    Tensor keys = loadCheckpoint(dir, manifest).tensors.at("keys");
    const int64_t *data = keys.data<int64_t>();
    return std::vector<int64_t>(data, data + data[15]);
  };

  TrainOptions straight = options(3);
  straight.saveDir = dir_ / "straight";
  train(straight);
  std::vector<int64_t> keys = keysOf(straight.saveDir);
  std::vector<int64_t> expected;
  for (uint64_t step = 1; step <= 3; ++step)
    for (uint64_t micro = 0; micro < 2; ++micro)
      expected.push_back(randomKey(7, step, micro));
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(std::set<int64_t>(keys.begin(), keys.end()).size(), 6u);

  TrainOptions first = options(1);
  first.saveDir = dir_ / "split";
  train(first);
  TrainOptions rest = options(3);
  rest.resumeDir = rest.saveDir = dir_ / "split";
  train(rest);
  EXPECT_EQ(keysOf(rest.saveDir), expected);

  TrainOptions other = options(1);
  other.seed = 8;
  other.saveDir = dir_ / "other";
  train(other);
  EXPECT_EQ(keysOf(other.saveDir),
            (std::vector<int64_t>{randomKey(8, 1, 0), randomKey(8, 1, 1)}));

  TrainOptions dump = options(1);
  dump.dumpGradsDir = dir_ / "grads";
  dump.saveDir = dir_ / "dumped";
  train(dump);
  EXPECT_EQ(keysOf(dump.saveDir),
            (std::vector<int64_t>{expected[0], expected[0], expected[1]}));
}

TEST_F(TrainerTest, NonFiniteLossStops) {
  Data poisoned = samples_;
  poisoned.x.assign(poisoned.x.size(), std::nanf(""));
  writeData(data_, poisoned);
  // The message names the step and its batch's samples (the first batch
  // of epoch 0 in the seed's order).
  auto batchOf = [](uint64_t epoch, uint64_t batch) {
    std::vector<uint64_t> order = epochPermutation(kSamples, 7, epoch);
    std::string text;
    for (int k = 0; k < kBatch; ++k)
      text += (k ? ", " : "") + std::to_string(order[batch * kBatch + k]);
    return text;
  };
  EXPECT_EQ(trainError(options(5)),
            "training diverged at step 1: the loss is nan (its batch: "
            "samples " +
                batchOf(0, 0) + ")");

  // A huge lr: step 1 is finite, its update overflows step 2's loss.
  writeData(data_, samples_);
  Manifest manifest = trainManifest();
  manifest.train.schedule.lr = 1e30;
  writeArtifact(manifest);
  EXPECT_EQ(trainError(options(5)),
            "training diverged at step 2: the loss is inf (its batch: "
            "samples " +
                batchOf(0, 1) + ")");
}

TEST_F(TrainerTest, KernelErrorsNameTheStep) {
  writeText(dir_ / "gather.cpp",
            std::string("#include \"kernels/CpuKernels.h\"\n") + kStep +
                kGatherAtStepEntry);
  std::string so =
      compileSharedObject(dir_ / "gather.cpp", Target::Cpu, *shared_ / "cache");
  Manifest manifest = trainManifest();
  manifest.entries[0].name = "ztc_train_step_gather";
  writeArtifact(manifest);
  std::filesystem::remove(artifact_ + "/step.so");
  std::filesystem::copy_file(so, artifact_ + "/step.so");
  EXPECT_EQ(trainError(options(5)),
            "step 3: gather: index 3 is outside [-3, 3)");
  // The steps before it run.
  EXPECT_EQ(trainError(options(2)), "");
}

TEST_F(TrainerTest, DataErrors) {
  writeNpy(data_ + "/y.npy", Tensor(DType::Float32, {21}));
  EXPECT_EQ(trainError(options(5)),
            "inputs disagree on the number of samples: x.npy has 22, y.npy "
            "has 21");
  writeNpy(data_ + "/y.npy", Tensor(DType::Float64, {22}));
  EXPECT_EQ(trainError(options(5)),
            "input 'y' (" + data_ +
                "/y.npy): expected float32[N] (samples of float32[]), got "
                "float64[22]");
  std::filesystem::remove(data_ + "/y.npy");
  EXPECT_EQ(trainError(options(5)),
            "missing input file(s) in " + data_ +
                ": y.npy (input 'y', batches of float32[4])");
}

TEST_F(TrainerTest, CheckpointErrors) {
  TrainOptions run = options(4);
  run.resumeDir = dir_ / "none";
  EXPECT_EQ(trainError(run), "no checkpoint in " + run.resumeDir +
                                 " (directory " + run.resumeDir +
                                 " does not exist)");

  // A checkpoint of another model.
  Checkpoint other;
  other.seed = 7;
  other.tensors["w"] = Tensor(DType::Float32, {4});
  saveCheckpoint(run.resumeDir, other);
  EXPECT_EQ(trainError(run),
            run.resumeDir +
                "/checkpoint.safetensors does not match the artifact: param "
                "'w': expected float32[3], got float32[4]; missing param 'b' "
                "(float32[]); missing state 'w.sq' (float32[3]); missing "
                "state 'last_step' (float32[]); missing state 'w.acc' "
                "(float32[3]); missing state 'b.acc' (float32[])");

  // A checkpoint of this model, but another data order or data set.
  TrainOptions save = options(2);
  save.saveDir = run.resumeDir;
  train(save);
  run.seed = 8;
  EXPECT_EQ(trainError(run),
            "the checkpoint in " + run.resumeDir +
                " was written with seed 7; this run has seed 8 (the data "
                "order would differ)");
  run.seed = 7;
  Data more = makeData(kSamples + 4);
  writeData(data_, more);
  EXPECT_EQ(trainError(run), "the checkpoint in " + run.resumeDir +
                                 " was written with 22 samples; this run "
                                 "has 26");

  // Counters out of range, as a corrupted or edited checkpoint has them:
  // refused before anything is restored.
  writeData(data_, makeData(kSamples));
  const Checkpoint saved = loadCheckpoint(run.resumeDir);
  auto resumeWith = [&](uint64_t step, uint64_t epoch, uint64_t batch) {
    Checkpoint edited = saved;
    edited.step = step;
    edited.epoch = epoch;
    edited.batch = batch;
    saveCheckpoint(run.resumeDir, edited);
    return trainError(run);
  };
  const std::string path = run.resumeDir + "/checkpoint.safetensors";
  EXPECT_EQ(resumeWith(2, 0, 5),
            path + ": batch 5 is outside an epoch of this data (5 batches)");
  // 5 batches per epoch: the last epoch whose batch 1 is within 2^53.
  const uint64_t lastEpoch = ((uint64_t(1) << 53) - 1) / 5;
  EXPECT_EQ(resumeWith(2, lastEpoch + 1, 1),
            path + ": epoch " + std::to_string(lastEpoch + 1) +
                " is out of range (the data position, in batches of this "
                "data, must be at most 2^53)");
  EXPECT_EQ(resumeWith(2, std::numeric_limits<uint64_t>::max(), 0),
            path + ": epoch 18446744073709551615 is out of range (the data "
                   "position, in batches of this data, must be at most 2^53)");
  EXPECT_EQ(resumeWith((uint64_t(1) << 53) + 1, 0, 2),
            path + ": step 9007199254740993 is out of range (at most 2^53)");
}

TEST_F(TrainerTest, ArtifactAndOptionErrors) {
  Manifest forward = trainManifest();
  forward.kind = ArtifactKind::Forward;
  writeArtifact(forward);
  EXPECT_EQ(trainError(options(1)),
            artifact_ + ": not a training artifact (manifest kind 'forward')");

  Manifest noGrad = trainManifest();
  noGrad.entries.pop_back(); // loss_and_grads
  writeArtifact(noGrad);
  TrainOptions dump = options(1);
  dump.dumpGradsDir = dir_ / "grads";
  EXPECT_EQ(trainError(dump),
            "--dump-grads needs a grad_entry the artifact lacks");

  Manifest unknownHyper = trainManifest();
  unknownHyper.bindings[8].name = "beta1";
  writeArtifact(unknownHyper);
  EXPECT_EQ(trainError(options(1)),
            "hyper 'beta1' is not one the trainer writes (known: lr, step, "
            "loss_weight, rng)");

  Manifest fixedLr = trainManifest();
  fixedLr.bindings.erase(fixedLr.bindings.begin() + 8);
  fixedLr.train.schedule.kind = LrScheduleKind::Warmup;
  writeArtifact(fixedLr);
  EXPECT_EQ(trainError(options(1)),
            "lr schedule 'warmup' needs an 'lr' hyper binding the artifact "
            "lacks");

  writeArtifact(trainManifest());
  TrainOptions saveEvery = options(4);
  saveEvery.saveEvery = 2;
  EXPECT_EQ(trainError(saveEvery), "--save-every needs --save DIR");

  TrainOptions nothing = options(0);
  nothing.epochs = 0;
  EXPECT_EQ(trainError(nothing),
            "nothing to train: 0 steps (steps 0, epochs 0, 5 batches per "
            "epoch, grad_accum 1)");
}

TEST(TrainManifestTest, RoundTripsAndKeepsForwardManifestsUnchanged) {
  Manifest manifest = trainManifest();
  entryFor(manifest, EntryPurpose::Accumulate).name = "ztc_accumulate";
  manifest.train.schedule.kind = LrScheduleKind::WarmupCosine;
  manifest.train.schedule.warmupType = WarmupType::Log;
  manifest.train.schedule.totalSteps = 100;
  manifest.train.schedule.warmupMinRatio = 0.25;
  manifest.train.gradAccum = 3;
  manifest.train.recompute = RecomputeReport{"selective", 1000, 4000, 70, 900};
  std::string text = printManifest(manifest);
  Manifest parsed = parseManifest(text, "m.json");
  EXPECT_EQ(printManifest(parsed), text);
  ASSERT_TRUE(parsed.train.recompute);
  EXPECT_EQ(parsed.train.recompute->policy, "selective");
  EXPECT_EQ(parsed.train.recompute->savedBytes, 1000u);
  EXPECT_EQ(parsed.train.recompute->baselineSavedBytes, 4000u);
  EXPECT_EQ(parsed.train.recompute->recomputeFlops, 70u);
  EXPECT_EQ(parsed.train.recompute->stepFlops, 900u);
  EXPECT_EQ(parsed.kind, ArtifactKind::Train);
  EXPECT_EQ(parsed.main().name, "ztc_train_step");
  EXPECT_EQ(parsed.find(EntryPurpose::LossAndGrads)->name,
            "ztc_loss_and_grads");
  EXPECT_EQ(parsed.find(EntryPurpose::Accumulate)->name, "ztc_accumulate");
  EXPECT_EQ(parsed.find(EntryPurpose::LossAndGrads)->outputs.size(), 2u);
  EXPECT_EQ(parsed.bindings[4].role, BindingRole::State);
  EXPECT_EQ(parsed.bindings[8].role, BindingRole::Hyper);
  EXPECT_EQ(parsed.train.schedule.warmupMinRatio, 0.25);
  EXPECT_EQ(parsed.train.gradAccum, 3u);

  // The one-cycle and lr-range-test parameters and the warmup ratio
  // travel too.
  ScheduleConfig &schedule = manifest.train.schedule;
  schedule.kind = LrScheduleKind::OneCycle;
  schedule.warmupRatio = 0.1;
  schedule.cycleFirstStepSize = 20;
  schedule.cycleSecondStepSize = 30;
  schedule.decayLrRate = 0.5;
  schedule.decayStepSize = 10;
  text = printManifest(manifest);
  ScheduleConfig cycle = parseManifest(text, "m.json").train.schedule;
  EXPECT_EQ(cycle.kind, LrScheduleKind::OneCycle);
  EXPECT_EQ(cycle.warmupRatio, 0.1);
  EXPECT_EQ(cycle.cycleFirstStepSize, 20u);
  EXPECT_EQ(cycle.cycleSecondStepSize, 30u);
  EXPECT_EQ(cycle.decayLrRate, 0.5);
  EXPECT_EQ(cycle.decayStepSize, 10u);
  schedule.kind = LrScheduleKind::LrRangeTest;
  schedule.rangeStepSize = 5;
  schedule.rangeStepRate = 2.0;
  schedule.rangeStaircase = true;
  text = printManifest(manifest);
  ScheduleConfig range = parseManifest(text, "m.json").train.schedule;
  EXPECT_EQ(range.kind, LrScheduleKind::LrRangeTest);
  EXPECT_EQ(range.rangeStepSize, 5u);
  EXPECT_EQ(range.rangeStepRate, 2.0);
  EXPECT_TRUE(range.rangeStaircase);

  // A forward manifest prints no training fields.
  Manifest forward;
  forward.arenaBytes = 8;
  forward.entries = {{"ztc_forward", EntryPurpose::Forward, {}}};
  std::string forwardText = printManifest(forward);
  EXPECT_EQ(forwardText.find("kind"), std::string::npos);
  EXPECT_EQ(forwardText.find("train"), std::string::npos);
  EXPECT_EQ(forwardText.find("grad"), std::string::npos);
}

TEST(TrainManifestTest, ParsesTheDocumentedExample) {
  Manifest manifest = parseManifest(R"({
    "format": 2, "abi": 5, "kind": "train", "target": "cpu",
    "source": "step.cpp", "arena_bytes": 8192, "streams": 1, "events": 0,
    "bindings": [
      {"role": "input", "name": "x", "file": "x", "dtype": "float32",
       "shape": [32, 64]},
      {"role": "input", "name": "labels", "file": "labels",
       "dtype": "int64", "shape": [32]},
      {"role": "param", "name": "fc.weight", "dtype": "float32",
       "shape": [10, 64]},
      {"role": "state", "name": "fc.weight.exp_avg", "dtype": "float32",
       "shape": [10, 64]},
      {"role": "hyper", "name": "lr", "dtype": "float32", "shape": []},
      {"role": "hyper", "name": "step", "dtype": "float32", "shape": []}
    ],
    "entries": [
      {"name": "ztc_train_step", "purpose": "train_step",
       "outputs": [{"name": "loss", "file": "loss", "dtype": "float32",
                    "shape": [], "offset": 1024}]},
      {"name": "ztc_loss_and_grads", "purpose": "loss_and_grads",
       "outputs": [{"name": "fc.weight", "file": "fc.weight",
                    "dtype": "float32", "shape": [10, 64],
                    "offset": 4096}]}
    ],
    "train": {"optimizer": "adamw", "lr": 0.001,
              "lr_schedule": "warmup-decay", "warmup_steps": 10,
              "total_steps": 100, "min_lr": 0.0, "warmup_type": "log",
              "batch_size": 32, "grad_accum": 1, "loss": "cross_entropy"}
  })",
                                    "m.json");
  EXPECT_EQ(manifest.kind, ArtifactKind::Train);
  EXPECT_EQ(manifest.train.optimizer, "adamw");
  EXPECT_EQ(manifest.train.loss, "cross_entropy");
  EXPECT_EQ(manifest.train.schedule.kind, LrScheduleKind::WarmupDecay);
  EXPECT_EQ(manifest.train.schedule.warmupType, WarmupType::Log);
  EXPECT_EQ(manifest.train.schedule.lr, 0.001);
  EXPECT_EQ(manifest.train.schedule.warmupSteps, 10u);
  EXPECT_EQ(manifest.train.schedule.totalSteps, 100u);
  EXPECT_EQ(manifest.train.batchSize, 32u);
  EXPECT_EQ(manifest.find(EntryPurpose::LossAndGrads)->outputs[0].offset,
            4096u);
  EXPECT_EQ(manifest.main().outputIndex("loss"), 0);
  // Manifests written before recomputation have no report.
  EXPECT_FALSE(manifest.train.recompute);
}

TEST(TrainManifestTest, Errors) {
  auto error = [](const Manifest &manifest) {
    return ZTC_ERROR_MESSAGE(parseManifest(printManifest(manifest), "m.json"));
  };
  auto textError = [](const std::string &text) {
    return ZTC_ERROR_MESSAGE(parseManifest(text, "m.json"));
  };

  Manifest noLoss = trainManifest();
  noLoss.entries[0].outputs[0].name = "total";
  EXPECT_EQ(error(noLoss), "m.json: training manifest has no output 'loss'");
  Manifest vectorLoss = trainManifest();
  vectorLoss.entries[0].outputs[0].shape = {2};
  EXPECT_EQ(error(vectorLoss), "m.json: training manifest output 'loss' must "
                               "be float32[], got float32[2]");
  Manifest uneven = trainManifest();
  uneven.bindings[1].shape = {8};
  EXPECT_EQ(error(uneven), "m.json: training manifest inputs disagree on the "
                           "batch size: 'x' has 4, 'y' has 8");
  Manifest batch = trainManifest();
  batch.train.batchSize = 8;
  EXPECT_EQ(error(batch), "m.json: training manifest has train.batch_size 8 "
                          "but its inputs hold batches of 4");
  Manifest scalarInput = trainManifest();
  scalarInput.bindings[1].shape = {};
  EXPECT_EQ(error(scalarInput), "m.json: training manifest input 'y' "
                                "(float32[]) has no batch dimension");
  Manifest orphan = trainManifest();
  orphan.entries[1].outputs[0].name = "v";
  orphan.entries[1].outputs[0].file = "v";
  EXPECT_EQ(error(orphan),
            "m.json: training manifest grad output 'v' names no param");
  Manifest shape = trainManifest();
  shape.entries[1].outputs[1].shape = {1};
  EXPECT_EQ(error(shape), "m.json: training manifest grad output 'b' is "
                          "float32[1]; expected float32 in the param's shape "
                          "float32[]");
  Manifest gradsFirst = trainManifest();
  std::swap(gradsFirst.entries[0], gradsFirst.entries[1]);
  EXPECT_EQ(error(gradsFirst),
            "m.json: training manifest starts with a loss_and_grads entry; "
            "expected train_step (or loss, for a gradient check)");
  Manifest outside = trainManifest();
  outside.entries[1].outputs[0].offset = 250;
  EXPECT_EQ(error(outside),
            "m.json: entry 1 ('ztc_loss_and_grads') output 0 ('w') "
            "(float32[3] at offset 250) lies outside the 256-byte arena");
  Manifest hyper = trainManifest();
  hyper.bindings[8].shape = {1};
  EXPECT_EQ(error(hyper), "m.json: binding 8 ('lr') is a hyper of shape "
                          "float32[1]; hypers are scalars");

  std::string head =
      R"({"format":2,"abi":5,"target":"cpu","source":"s","arena_bytes":8,)"
      R"("streams":1,"events":0,)"
      R"("bindings":[{"role":"input","name":"x","dtype":"float32",)"
      R"("shape":[2]}],"entries":[{"name":"e","purpose":"train_step",)"
      R"("outputs":[{"name":"loss","dtype":"float32","shape":[],)"
      R"("offset":0}]}],)";
  EXPECT_EQ(textError(head + R"("kind":"eval"})"),
            "m.json: manifest has unknown kind 'eval' (known: forward, train)");
  EXPECT_EQ(textError(head + R"("kind":"train"})"),
            "m.json: manifest has no field 'train'");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"lr":0.1}})"),
            "m.json: train config has no field 'optimizer'");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":"fast"}})"),
            "m.json: train config field 'lr' is not a number");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":0.1,"lr_schedule":"cosine"}})"),
            "m.json: train config has unknown lr_schedule 'cosine' (known: "
            "constant, warmup, warmup-decay, warmup-cosine, one-cycle, "
            "lr-range-test, trainer-constant, trainer-constant-with-warmup, "
            "trainer-linear, trainer-cosine)");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":0.1,"flags":{"lr":1}}})"),
            "m.json: train config has flag 'lr' whose value is not a string");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":0.1,"warmup_type":"exp"}})"),
            "m.json: train config has unknown warmup_type 'exp' (known: "
            "linear, log)");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":0.1,"grad_accum":0}})"),
            "m.json: train config has grad_accum 0; it counts micro-batches "
            "per step (>= 1)");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":-0.1}})"),
            "m.json: train config has a negative lr, min_lr, "
            "warmup_min_ratio, warmup_ratio, decay_lr_rate or "
            "lr_range_test_step_rate");
  EXPECT_EQ(textError(head + R"("kind":"train","train":{"optimizer":"sgd",)"
                             R"("lr":0.1,"recompute":{"policy":"full"}}})"),
            "m.json: train recompute has no field 'saved_activation_bytes'");
  // The smallest valid training manifest.
  Manifest minimal = parseManifest(
      head + R"("kind":"train","train":{"optimizer":"sgd","lr":0.1}})",
      "m.json");
  EXPECT_EQ(minimal.train.schedule.kind, LrScheduleKind::Constant);
  EXPECT_EQ(minimal.train.gradAccum, 1u);
}
