//===- RunnerTest.cpp - end to end: artifact, compile, run ----------------===//
//
// A hand-written step.cpp (logits = x @ w + b, ids + 1) with its manifest and
// init.safetensors is compiled with compileSharedObject and run through
// runForward and the Runner; then every bad-input case is checked for its
// documented message, and the random key a run writes.
//
//===----------------------------------------------------------------------===//

#include "runtime/Runner.h"

#include "FakeDevice.h"
#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/backend/Compile.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"
#include "runtime/io/SafeTensors.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

using namespace ztc::rt;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

// Bindings: 0 x (input "input:0"), 1 w (param), 2 b (param), 3 ids (input),
// 4 mask (constant). Arena: ids_plus_one at 0 (16 bytes), logits at 64.
constexpr char kStep[] = R"(#include "kernels/CpuKernels.h"
extern "C" void ztc_forward(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  const float *x = static_cast<const float *>(bindings[0]);
  const float *w = static_cast<const float *>(bindings[1]);
  const float *b = static_cast<const float *>(bindings[2]);
  const long long *ids = static_cast<const long long *>(bindings[3]);
  const bool *mask = static_cast<const bool *>(bindings[4]);
  float *logits = reinterpret_cast<float *>(arena + 64);
  ztc::cpu::matmul<float>(x, {2, 3}, w, {3, 4}, logits, {2, 4},
                          ztc::MatmulParams{});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      logits[i * 4 + j] = mask[j] ? logits[i * 4 + j] + b[j] : 0.0f;
  long long *next = reinterpret_cast<long long *>(arena);
  for (int i = 0; i < 2; ++i)
    next[i] = ids[i] + 1;
}
)";

// Writes one byte past a 16-byte arena.
constexpr char kOverflowStep[] = R"(#include "kernels/StepAbi.h"
extern "C" void ztc_forward(const ztc_step_context *ctx) {
  ctx->arena[16] = 1;
}
)";

// y = table[ids] through the kernel library's gather: a bad id is an error
// the kernel records; the entry moves it into the context's error slot, as
// generated entries do last, and the runner reports it.
constexpr char kGatherStep[] = R"(#include "kernels/CpuKernels.h"
extern "C" void ztc_forward(const ztc_step_context *ctx) {
  void *const *bindings = ctx->bindings;
  char *arena = ctx->arena;
  const float *table = static_cast<const float *>(bindings[0]);
  const long long *ids = static_cast<const long long *>(bindings[1]);
  ztc::cpu::gather<float, long long>(table, {3}, ids, {2},
                                     reinterpret_cast<float *>(arena), {2},
                                     ztc::AxisParams{0});
  ztc::cpu::collectErrors(ctx->error);
}
)";

// Copies the `rng` hyper (binding 0, int64) to the arena: what the runner
// wrote as the random key.
constexpr char kKeyStep[] = R"(#include "kernels/StepAbi.h"
extern "C" void ztc_forward(const ztc_step_context *ctx) {
  *reinterpret_cast<long long *>(ctx->arena) =
      *static_cast<const long long *>(ctx->bindings[0]);
}
)";

Manifest stepManifest() {
  Manifest manifest;
  manifest.arenaBytes = 96;
  manifest.bindings = {
      {BindingRole::Input, "input:0", "input_0", DType::Float32, {2, 3}},
      {BindingRole::Param, "fc.weight", "", DType::Float32, {3, 4}},
      {BindingRole::Param, "fc.bias", "", DType::Float32, {4}},
      {BindingRole::Input, "ids", "ids", DType::Int64, {2}},
      {BindingRole::Constant, "__const0", "", DType::Bool, {4}},
  };
  manifest.entries = {{"ztc_forward",
                       EntryPurpose::Forward,
                       {
                           {"logits", "logits", DType::Float32, {2, 4}, 64},
                           {"ids/next", "ids_next", DType::Int64, {2}, 0},
                       }}};
  return manifest;
}

Tensor floats(std::vector<int64_t> shape, float start) {
  Tensor tensor(DType::Float32, std::move(shape));
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    tensor.data<float>()[i] = start + 0.5f * static_cast<float>(i);
  return tensor;
}

Tensor int64s(std::vector<int64_t> values) {
  Tensor tensor(DType::Int64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    tensor.data<int64_t>()[i] = values[i];
  return tensor;
}

SafeTensors stepInit() {
  SafeTensors init;
  init.tensors["fc.weight"] = floats({3, 4}, -1.0f);
  init.tensors["fc.bias"] = floats({4}, 10.0f);
  Tensor mask(DType::Bool, {4});
  mask.bytes = {1, 1, 0, 1};
  init.tensors["__const0"] = mask;
  return init;
}

/// Writes an artifact directory with the given parts.
void writeArtifact(const std::string &dir, const Manifest &manifest,
                   const SafeTensors &init, const std::string &soPath) {
  std::filesystem::create_directories(dir);
  writeText(dir + "/manifest.json", printManifest(manifest));
  writeSafeTensors(dir + "/init.safetensors", init);
  if (!soPath.empty()) {
    // A new file, never an in-place rewrite: a loaded step stays mapped
    // (RTLD_NODELETE) and rewriting its pages would corrupt it.
    std::filesystem::remove(dir + "/step.so");
    std::filesystem::copy_file(soPath, dir + "/step.so");
  }
}

class RunnerTest : public ::testing::Test {
protected:
  /// Compiles the step once for the whole suite.
  static void SetUpTestSuite() {
    shared_ = std::make_unique<TempDir>();
    writeText(*shared_ / "step.cpp", kStep);
    auto start = std::chrono::steady_clock::now();
    bool hit = true;
    soPath_ = compileSharedObject(*shared_ / "step.cpp", Target::Cpu,
                                  *shared_ / "cache", {}, &hit);
    firstCompileSeconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    firstCompileHit_ = hit;
  }
  static void TearDownTestSuite() { shared_.reset(); }

  void SetUp() override {
    artifact_ = dir_ / "model.ztc";
    data_ = dir_ / "data";
    writeArtifact(artifact_, stepManifest(), stepInit(), soPath_);
    std::filesystem::create_directories(data_);
    writeNpy(data_ + "/input_0.npy", floats({2, 3}, 1.0f));
    writeNpy(data_ + "/ids.npy", int64s({7, -3}));
  }

  /// Compiles `source` as NAME.cpp (in the suite's cache); the .so path.
  std::string compileStep(const std::string &name, const char *source) {
    writeText(dir_ / (name + ".cpp"), source);
    return compileSharedObject(dir_ / (name + ".cpp"), Target::Cpu,
                               *shared_ / "cache");
  }

  std::string runError(const std::string &artifact) {
    return ZTC_ERROR_MESSAGE(runForward(artifact, data_, dir_ / "out"));
  }

  static std::unique_ptr<TempDir> shared_;
  static std::string soPath_;
  static double firstCompileSeconds_;
  static bool firstCompileHit_;

  TempDir dir_;
  std::string artifact_, data_;
};

std::unique_ptr<TempDir> RunnerTest::shared_;
std::string RunnerTest::soPath_;
double RunnerTest::firstCompileSeconds_ = 0;
bool RunnerTest::firstCompileHit_ = true;

} // namespace

TEST_F(RunnerTest, RunsTheStepAndWritesOutputs) {
  runForward(artifact_, data_, dir_ / "out");

  Tensor logits = readNpy(dir_ / "out/logits.npy");
  ASSERT_EQ(logits.describe(), "float32[2,4]");
  Tensor x = floats({2, 3}, 1.0f), w = floats({3, 4}, -1.0f);
  Tensor b = floats({4}, 10.0f);
  const bool mask[] = {true, true, false, true};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      float expected = 0;
      for (int k = 0; k < 3; ++k)
        expected += x.data<float>()[i * 3 + k] * w.data<float>()[k * 4 + j];
      expected = mask[j] ? expected + b.data<float>()[j] : 0.0f;
      EXPECT_FLOAT_EQ(logits.data<float>()[i * 4 + j], expected) << i << j;
    }
  Tensor next = readNpy(dir_ / "out/ids_next.npy");
  ASSERT_EQ(next.describe(), "int64[2]");
  EXPECT_EQ(next.data<int64_t>()[0], 8);
  EXPECT_EQ(next.data<int64_t>()[1], -2);
}

TEST_F(RunnerTest, ArenaHasExactlyThePlannedSize) {
  Artifact artifact = Artifact::load(artifact_);
  Runner runner(artifact, createCpuBackend());
  EXPECT_EQ(runner.arenaBytes(), 96u);
  EXPECT_EQ(runner.arenaBytes(), artifact.manifest().arenaBytes);
  // The Runner API without files: set inputs, run, read an output.
  runner.setInput("input:0", floats({2, 3}, 0.0f));
  runner.setInput("ids", int64s({1, 2}));
  runner.run();
  EXPECT_EQ(runner.output(1).data<int64_t>()[1], 3);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.setInput("ids", int64s({1, 2, 3}))),
            "input 'ids': expected int64[2], got int64[3]");
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.setInput("nope", int64s({1}))),
            "the artifact has no input 'nope'");
}

TEST_F(RunnerTest, PlanLargerThanTheDeviceIsRefusedBeforeAllocating) {
  // The arena (96 bytes and the 64-byte guard), the bindings (w 48, b 16,
  // the two inputs 24 and 16, the outputs) and the training state must fit
  // in what the device has free; a step that does not is refused, naming
  // the bytes, before anything is allocated.
  Artifact artifact = Artifact::load(artifact_);
  std::string error = ZTC_ERROR_MESSAGE(
      Runner(artifact, std::make_unique<test::FakeDevice>(200, 1000)));
  EXPECT_EQ(error.rfind(artifact_ + ": the step needs ", 0), 0u) << error;
  EXPECT_NE(error.find(" bytes of device memory per rank (96 in its arena, "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("but the device has 200 bytes free of 1000: compile "
                       "it with a higher --zero stage"),
            std::string::npos)
      << error;
  // With room it runs as on the CPU.
  auto roomy = std::make_unique<test::FakeDevice>(1 << 20, 1 << 20);
  test::FakeDevice *enough = roomy.get();
  Runner runner(artifact, std::move(roomy));
  EXPECT_GT(enough->allocations, 0);
  EXPECT_EQ(runner.arenaBytes(), 96u);
}

namespace {

/// An asynchronous device as the Runner sees CUDA, with the CPU's memory
/// and calls underneath: it logs every upload, release, wait, call and
/// synchronization, and which upload slot's buffers each call read.
class AsyncDevice final : public test::OverCpu {
public:
  void copyIn(void *device, const void *host, size_t bytes) override {
    log.push_back("copy in");
    test::OverCpu::copyIn(device, host, bytes);
  }
  void copyOut(void *host, const void *device, size_t bytes) override {
    log.push_back("copy out");
    test::OverCpu::copyOut(host, device, bytes);
  }
  void call(EntryFn entry, const ztc_step_context &ctx) override {
    if (hostCode)
      hostCode();
    run("call", entry, ctx);
  }
  /// Without `recorded` set, says recording failed and calls directly,
  /// running the entry's host code (`hostCode`) twice the first time (the
  /// failed recording, then the direct call) and once after; with it, as
  /// GraphReplayer does: a direct call, a recording, then launches of the
  /// record, which do not run the host code.
  unsigned replay(EntryFn entry, const ztc_step_context &ctx) override {
    const unsigned call = replays_++;
    const unsigned hostRuns =
        recorded ? (call < 2 ? 1 : 0) : (call == 0 ? 2 : 1);
    for (unsigned i = 0; i < hostRuns && hostCode; ++i)
      hostCode();
    run("replay", entry, ctx);
    if (!told_ && !recorded)
      notices_.push_back("CUDA graphs off, every step a direct call: test");
    told_ = true;
    return hostRuns;
  }
  std::vector<std::string> takeNotices() override {
    return std::exchange(notices_, {});
  }
  void upload(unsigned slot, const std::vector<UploadCopy> &copies) override {
    log.push_back("upload " + std::to_string(slot));
    for (const UploadCopy &copy : copies) {
      slotOf_[copy.device] = slot;
      cpu_->copyIn(copy.device, copy.host, copy.bytes);
    }
  }
  void releaseUpload(unsigned slot) override {
    log.push_back("release " + std::to_string(slot));
  }
  void waitUploadRead(unsigned slot) override {
    log.push_back("wait read " + std::to_string(slot));
  }
  void synchronize() override { log.push_back("synchronize"); }
  bool asynchronous() const override { return true; }

  std::vector<std::string> log;
  bool recorded = false;
  std::function<void()> hostCode;

private:
  /// "call reads 1: 8": the slot of the call's `ids` (binding 3) and the
  /// first id plus one, which the step writes to the arena.
  void run(const char *how, EntryFn entry, const ztc_step_context &ctx) {
    cpu_->call(entry, ctx);
    auto found = slotOf_.find(ctx.bindings[3]);
    std::string slot =
        found == slotOf_.end() ? "?" : std::to_string(found->second);
    log.push_back(std::string(how) + " reads " + slot + ": " +
                  std::to_string(*reinterpret_cast<int64_t *>(ctx.arena)));
  }

  std::map<const void *, unsigned> slotOf_;
  std::vector<std::string> notices_;
  bool told_ = false;
  unsigned replays_ = 0;
};

} // namespace

// On an asynchronous backend each call's inputs go up into the slot the
// call before did not use, after the host waited only for that slot's
// upload two calls back (its staging memory); the call is ordered after
// its upload and releases the slot; nothing waits for the device between
// calls, and the results are those of the inputs each call was given.
TEST_F(RunnerTest, UploadsAreDoubleBufferedWithoutWaitingBetweenCalls) {
  Artifact artifact = Artifact::load(artifact_);
  auto owned = std::make_unique<AsyncDevice>();
  AsyncDevice *device = owned.get();
  Runner runner(artifact, std::move(owned));
  std::vector<std::string> notices;
  runner.setNotice(
      [&](const std::string &notice) { notices.push_back(notice); });
  runner.setInput("input:0", floats({2, 3}, 0.0f));
  device->log.clear();
  for (int64_t id : {7, 20, 33}) {
    runner.setInput("ids", int64s({id, 0}));
    runner.run();
  }
  EXPECT_EQ(device->log,
            (std::vector<std::string>{
                "wait read 0", "upload 0", "replay reads 0: 8", "release 0",
                "wait read 1", "upload 1", "replay reads 1: 21", "release 1",
                "wait read 0", "upload 0", "replay reads 0: 34", "release 0"}));
  // The backend's notice reached the caller once.
  EXPECT_EQ(notices, (std::vector<std::string>{
                         "CUDA graphs off, every step a direct call: test"}));
  // Reads wait for the device (and the host reads what it set last).
  device->log.clear();
  EXPECT_EQ(runner.output(1).data<int64_t>()[0], 34);
  EXPECT_EQ(device->log.at(0), "synchronize");
  EXPECT_EQ(runner.binding(3).data<int64_t>()[0], 33);

  // Without graphs every call is direct; the slots go on alternating.
  runner.setGraphs(false);
  device->log.clear();
  runner.setInput("ids", int64s({1, 0}));
  runner.run();
  EXPECT_EQ(device->log,
            (std::vector<std::string>{"wait read 1", "upload 1",
                                      "call reads 1: 2", "release 1"}));
}

namespace {

/// Two ranks in name only, whose collectives may or may not be recorded.
class TwoRanks final : public Communicator {
public:
  TwoRanks() : Communicator(0, 2) {}
  const char *kind() const override { return "two"; }
  void allReduceSum(double *, int64_t) override {}
  std::vector<std::string> allGatherBytes(const std::string &bytes) override {
    return {bytes, bytes};
  }
  void barrier() override {}
  [[noreturn]] void abortAll(int status) override { std::exit(status); }
  bool graphCapturable() const override { return capturable; }
  bool capturable = false;
  /// What a collective's host code counts.
  void send(uint64_t elements) { elementsMoved_ += elements; }

protected:
  int32_t allReduce(const void *, void *, int64_t, int32_t, void *) override {
    return 0;
  }
  int32_t reduceScatter(const void *, void *, int64_t, int32_t,
                        void *) override {
    return 0;
  }
  int32_t allGather(const void *, void *, int64_t, int32_t, void *) override {
    return 0;
  }
};

} // namespace

/// The suite's step compiled for two ranks, run on an AsyncDevice with
/// `comm` as its communicator and its inputs set.
struct TwoRankStep {
  TwoRankStep(const std::string &path, Manifest manifest, const std::string &so)
      : artifact(load(path, std::move(manifest), so)),
        owned(std::make_unique<AsyncDevice>()), device(owned.get()),
        runner(artifact, std::move(owned)) {
    runner.setCommunicator(&comm);
    runner.setInput("input:0", floats({2, 3}, 0.0f));
    runner.setInput("ids", int64s({7, 0}));
  }
  static Artifact load(const std::string &path, Manifest manifest,
                       const std::string &so) {
    manifest.dist.worldSize = 2;
    writeArtifact(path, manifest, stepInit(), so);
    return Artifact::load(path);
  }

  Artifact artifact;
  std::unique_ptr<AsyncDevice> owned;
  AsyncDevice *device;
  TwoRanks comm; // outlives the runner that points at it
  Runner runner;
};

// A replay would run a step's collectives without the communicator's host
// code, so a step compiled for several ranks is replayed only when its
// communicator allows it.
TEST_F(RunnerTest, StepsOfSeveralRanksReplayOnlyWhereTheCommunicatorAllows) {
  TwoRankStep step(artifact_, stepManifest(), soPath_);
  step.device->log.clear();
  step.runner.run();
  step.comm.capturable = true;
  step.runner.run();
  EXPECT_EQ(step.device->log,
            (std::vector<std::string>{
                "wait read 0", "upload 0", "call reads 0: 8", "release 0",
                "wait read 1", "upload 1", "replay reads 1: 8", "release 1"}));
}

// A replayed record runs its collectives without the communicator's host
// code, which counts the elements they move: the Runner counts again, for
// each replay, what the call that last ran the host code moved.
TEST_F(RunnerTest, ReplayedStepsCountWhatTheirCollectivesMove) {
  TwoRankStep step(artifact_, stepManifest(), soPath_);
  step.comm.capturable = true;
  step.device->recorded = true;
  step.device->hostCode = [&] { step.comm.send(100); };
  for (int i = 0; i < 5; ++i)
    step.runner.run();
  EXPECT_EQ(step.comm.elementsMoved(), 500u);
  // Direct calls count themselves.
  step.comm.capturable = false;
  step.runner.run();
  EXPECT_EQ(step.comm.elementsMoved(), 600u);
}

// A recording that fails has run the collectives' host code without
// sending anything, and the direct call after it runs it again: the call
// still counts once.
TEST_F(RunnerTest, AFailedRecordingCountsItsCollectivesOnce) {
  TwoRankStep step(artifact_, stepManifest(), soPath_);
  step.runner.setNotice([](const std::string &) {});
  step.comm.capturable = true;
  step.device->hostCode = [&] { step.comm.send(100); };
  for (int i = 0; i < 3; ++i)
    step.runner.run();
  EXPECT_EQ(step.comm.elementsMoved(), 300u);
}

// A synchronous backend (the CPU) copies inputs when they are set, as
// before: no staging, no upload slots.
TEST_F(RunnerTest, SynchronousBackendsCopyInputsWhenSet) {
  Artifact artifact = Artifact::load(artifact_);
  auto owned = std::make_unique<test::FakeDevice>(1 << 20, 1 << 20);
  test::FakeDevice *device = owned.get();
  Runner runner(artifact, std::move(owned));
  int before = device->allocations;
  runner.setInput("input:0", floats({2, 3}, 0.0f));
  runner.setInput("ids", int64s({4, 5}));
  runner.run();
  EXPECT_EQ(device->allocations, before);
  EXPECT_EQ(runner.output(1).data<int64_t>()[1], 6);
}

TEST_F(RunnerTest, SecondCompileIsACacheHit) {
  EXPECT_FALSE(firstCompileHit_);
  bool hit = false;
  auto start = std::chrono::steady_clock::now();
  std::string again = compileSharedObject(*shared_ / "step.cpp", Target::Cpu,
                                          *shared_ / "cache", {}, &hit);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_TRUE(hit);
  EXPECT_EQ(again, soPath_);
  EXPECT_LT(seconds, 0.5);
  EXPECT_LT(seconds, firstCompileSeconds_);
}

TEST_F(RunnerTest, MissingInputFile) {
  std::filesystem::remove(data_ + "/ids.npy");
  EXPECT_EQ(runError(artifact_), "missing input file(s) in " + data_ +
                                     ": ids.npy (input 'ids', int64[2])");
  std::filesystem::remove(data_ + "/input_0.npy");
  EXPECT_EQ(runError(artifact_),
            "missing input file(s) in " + data_ +
                ": input_0.npy (input 'input:0', float32[2,3]), ids.npy "
                "(input 'ids', int64[2])");
  EXPECT_EQ(
      ZTC_ERROR_MESSAGE(runForward(artifact_, dir_ / "nowhere", dir_ / "out")),
      "data directory " + (dir_ / "nowhere") + " does not exist");
}

TEST_F(RunnerTest, ExtraInputFile) {
  writeNpy(data_ + "/labels.npy", int64s({1, 2}));
  writeNpy(data_ + "/input:0.npy", floats({2, 3}, 0.0f));
  writeText(data_ + "/README.txt", "not an array; ignored");
  EXPECT_EQ(runError(artifact_),
            "unexpected file(s) in " + data_ +
                " match no input: input:0.npy, labels.npy (expected: ids.npy, "
                "input_0.npy)");
}

TEST_F(RunnerTest, WrongShape) {
  writeNpy(data_ + "/input_0.npy", floats({3, 2}, 1.0f));
  EXPECT_EQ(runError(artifact_), "input 'input:0' (" + data_ +
                                     "/input_0.npy): expected float32[2,3], "
                                     "got float32[3,2]");
}

TEST_F(RunnerTest, WrongDType) {
  Tensor ids(DType::Int32, {2});
  writeNpy(data_ + "/ids.npy", ids);
  EXPECT_EQ(runError(artifact_),
            "input 'ids' (" + data_ +
                "/ids.npy): expected int64[2], got int32[2]");
}

TEST_F(RunnerTest, CorruptNpy) {
  writeText(data_ + "/ids.npy", "garbage");
  EXPECT_EQ(runError(artifact_),
            "input 'ids': " + data_ + "/ids.npy: not a .npy file (bad magic)");
  std::string bytes = ztc::rt::readFile(data_ + "/input_0.npy");
  writeText(data_ + "/input_0.npy", bytes.substr(0, bytes.size() - 4));
  writeNpy(data_ + "/ids.npy", int64s({7, -3}));
  EXPECT_EQ(runError(artifact_),
            "input 'input:0': " + data_ +
                "/input_0.npy: truncated data: float32[2,3] needs 24 bytes, "
                "the file has 20");
}

TEST_F(RunnerTest, InitValuesAreChecked) {
  SafeTensors init = stepInit();
  init.tensors["fc.weight"] = floats({4, 3}, 0.0f);
  writeSafeTensors(artifact_ + "/init.safetensors", init);
  EXPECT_EQ(runError(artifact_),
            artifact_ + "/init.safetensors: param 'fc.weight': expected "
                        "float32[3,4], got float32[4,3]");
  init.tensors.erase("__const0");
  init.tensors["fc.weight"] = floats({3, 4}, 0.0f);
  writeSafeTensors(artifact_ + "/init.safetensors", init);
  EXPECT_EQ(runError(artifact_),
            artifact_ + "/init.safetensors: no tensor for constant '__const0' "
                        "(bool[4])");
}

TEST_F(RunnerTest, ArtifactErrors) {
  // Neither the compiled step nor its source.
  std::filesystem::remove(artifact_ + "/step.so");
  EXPECT_EQ(runError(artifact_),
            artifact_ + ": neither step.so nor its source step.cpp is there");
  // A step.so that is not a shared object.
  writeText(artifact_ + "/step.so", "not an ELF file");
  std::string message = runError(artifact_);
  EXPECT_EQ(
      message.rfind(artifact_ + "/step.so: cannot load the compiled step: ", 0),
      0u)
      << message;

  Manifest manifest = stepManifest();
  manifest.entries[0].name = "ztc_missing";
  writeArtifact(artifact_, manifest, stepInit(), soPath_);
  message = runError(artifact_);
  EXPECT_EQ(
      message.rfind(artifact_ + "/step.so: entry 'ztc_missing' not found: ", 0),
      0u)
      << message;

  std::string error;
  EXPECT_FALSE(tryRunForward(artifact_, data_, dir_ / "out", error));
  EXPECT_EQ(
      error.rfind(artifact_ + "/step.so: entry 'ztc_missing' not found: ", 0),
      0u)
      << error;

  // runForward picks the backend from the manifest; a Runner given a
  // backend for another target refuses it.
  manifest = stepManifest();
  manifest.target = Target::Cuda;
  writeArtifact(artifact_, manifest, stepInit(), soPath_);
  Artifact artifact = Artifact::load(artifact_);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(Runner(artifact, createCpuBackend())),
            artifact_ + ": the artifact targets cuda, the backend runs cpu");
}

TEST_F(RunnerTest, WritingPastTheArenaIsCaught) {
  std::string so = compileStep("overflow", kOverflowStep);
  Manifest manifest;
  manifest.arenaBytes = 16;
  manifest.entries = {{"ztc_forward", EntryPurpose::Forward, {}}};
  std::string artifact = dir_ / "overflow.ztc";
  writeArtifact(artifact, manifest, {}, so);
  std::filesystem::create_directories(dir_ / "empty");
  EXPECT_EQ(
      ZTC_ERROR_MESSAGE(runForward(artifact, dir_ / "empty", dir_ / "out")),
      artifact + ": generated code wrote past the end of the 16-byte arena");
}

// runForward writes the random key of its seed into the `rng` hyper; a
// Runner that runs before any key is written refuses.
TEST_F(RunnerTest, RandomKeyComesFromTheSeed) {
  std::string so = compileStep("key", kKeyStep);
  Manifest manifest;
  manifest.arenaBytes = 64;
  manifest.bindings = {{BindingRole::Hyper, "rng", "", DType::Int64, {}}};
  manifest.entries = {{"ztc_forward",
                       EntryPurpose::Forward,
                       {{"key", "key", DType::Int64, {}, 0}}}};
  std::string artifact = dir_ / "key.ztc";
  writeArtifact(artifact, manifest, {}, so);
  std::filesystem::create_directories(dir_ / "empty");
  for (uint64_t seed : {0u, 1u, 12345u}) {
    runForward(artifact, dir_ / "empty", dir_ / "out", seed);
    EXPECT_EQ(*readNpy(dir_ / "out/key.npy").data<int64_t>(),
              randomKey(seed, 0, 0))
        << "seed " << seed;
  }

  Artifact loaded = Artifact::load(artifact);
  Runner runner(loaded, createCpuBackend());
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.run()), "hyper 'rng' was not set");
  runner.setRandomKey(-5);
  runner.run();
  EXPECT_EQ(*runner.output(0).data<int64_t>(), -5);

  // A key of another type is refused, not reinterpreted.
  manifest.bindings[0].dtype = DType::Float32;
  writeArtifact(artifact, manifest, {}, so);
  Artifact floatKey = Artifact::load(artifact);
  Runner wrong(floatKey, createCpuBackend());
  EXPECT_EQ(ZTC_ERROR_MESSAGE(wrong.setRandomKey(1)),
            "hyper 'rng': expected float32[], got int64[]");
}

// Keys of neighbouring seeds, steps and micro-batches are all different,
// and the same arguments give the same key.
TEST(RandomKeyTest, NeighboursGetDistinctKeys) {
  std::set<int64_t> keys;
  for (uint64_t seed = 0; seed < 16; ++seed)
    for (uint64_t step = 0; step < 64; ++step)
      for (uint64_t micro = 0; micro < 4; ++micro)
        keys.insert(randomKey(seed, step, micro));
  EXPECT_EQ(keys.size(), 16u * 64u * 4u);
  EXPECT_EQ(randomKey(3, 10, 1), randomKey(3, 10, 1));
}

// A step whose device recorded a data error in the context's error slot
// (what the CUDA library's collectErrors kernel writes): the runner reads
// it with the library's words and clears it.
constexpr char kSlotStep[] = R"(#include "kernels/StepAbi.h"
extern "C" void ztc_forward(const ztc_step_context *ctx) {
  if (*static_cast<const long long *>(ctx->bindings[0]) == 0)
    return;
  ctx->error->kind = ZTC_ERROR_LOSS_TARGET;
  ctx->error->value = 12;
  ctx->error->low = 0;
  ctx->error->high = 10;
  ctx->error->has_ignore = 1;
  ctx->error->ignore = -100;
}
)";

TEST_F(RunnerTest, TheErrorSlotIsReadAndCleared) {
  std::string so = compileStep("slot", kSlotStep);
  Manifest manifest;
  manifest.arenaBytes = 64;
  manifest.bindings = {{BindingRole::Input, "bad", "bad", DType::Int64, {}}};
  manifest.entries = {{"ztc_forward", EntryPurpose::Forward, {}}};
  std::string artifactDir = dir_ / "slot.ztc";
  writeArtifact(artifactDir, manifest, {}, so);
  Artifact artifact = Artifact::load(artifactDir);
  Runner runner(artifact, createCpuBackend());
  Tensor flag(DType::Int64, {});
  *flag.data<int64_t>() = 1;
  runner.setInput("bad", flag);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.run()),
            "nll_loss: target 12 is outside [0, 10) (ignore_index -100)");
  *flag.data<int64_t>() = 0;
  runner.setInput("bad", flag);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.run()), "");
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.synchronize()), "");
}

TEST_F(RunnerTest, KernelDataErrorsAreReportedAndCleared) {
  std::string so = compileStep("gather", kGatherStep);
  Manifest manifest;
  manifest.arenaBytes = 64;
  manifest.bindings = {
      {BindingRole::Param, "table", "", DType::Float32, {3}},
      {BindingRole::Input, "ids", "ids", DType::Int64, {2}},
  };
  manifest.entries = {{"ztc_forward",
                       EntryPurpose::Forward,
                       {{"y", "y", DType::Float32, {2}, 0}}}};
  SafeTensors init;
  init.tensors["table"] = floats({3}, 1.0f); // 1, 1.5, 2
  std::string artifactDir = dir_ / "gather.ztc";
  writeArtifact(artifactDir, manifest, init, so);

  // ztc run: the kernel's message, nothing written.
  std::filesystem::create_directories(dir_ / "bad");
  writeNpy(dir_ / "bad/ids.npy", int64s({1, 7}));
  EXPECT_EQ(
      ZTC_ERROR_MESSAGE(runForward(artifactDir, dir_ / "bad", dir_ / "out")),
      "gather: index 7 is outside [-3, 3)");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out/y.npy"));

  // The error does not outlive its call: a good call after a bad one runs.
  Artifact artifact = Artifact::load(artifactDir);
  Runner runner(artifact, createCpuBackend());
  runner.setInput("ids", int64s({-4, 0}));
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.run()),
            "gather: index -4 is outside [-3, 3)");
  runner.setInput("ids", int64s({2, -3}));
  EXPECT_EQ(ZTC_ERROR_MESSAGE(runner.run()), "");
  Tensor y = runner.output(0);
  EXPECT_EQ(y.data<float>()[0], 2.0f);
  EXPECT_EQ(y.data<float>()[1], 1.0f);
}

// A param's copy (ZeRO stage 3's bf16 block of it) is written from the
// param's initial value and again whenever the param is set, rounded to
// nearest even; checkpoints leave it out.
TEST_F(RunnerTest, CopiesFollowTheirParam) {
  Manifest manifest = stepManifest();
  Binding copy{BindingRole::State, "fc.weight.bf16", "", DType::BFloat16,
               {3, 4}};
  copy.copyOf = "fc.weight";
  manifest.bindings.push_back(copy);
  std::string dir = dir_ / "copies.ztc";
  writeArtifact(dir, manifest, stepInit(), soPath_);
  Artifact artifact = Artifact::load(dir);
  Runner runner(artifact, createCpuBackend());
  // -1.0 + 0.5 i: every value is exact in bf16.
  Tensor initial = runner.binding(5);
  EXPECT_EQ(initial.bytes, convertFloats(floats({3, 4}, -1.0f).bytes,
                                         DType::Float32, DType::BFloat16));

  // 1 + 2^-8 lies halfway between two bf16 values and rounds to the even
  // one, 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  Tensor weight = floats({3, 4}, 0.0f);
  weight.data<float>()[0] = 1.0f + 1.0f / 256;
  weight.data<float>()[1] = 1.0f + 3.0f / 256;
  runner.setBinding(1, weight);
  Tensor rounded = runner.binding(5);
  const uint16_t *bits = rounded.data<uint16_t>();
  EXPECT_EQ(bits[0], 0x3f80);
  EXPECT_EQ(bits[1], 0x3f82);
  EXPECT_EQ(bits[2], 0x3f80); // 1.0 exactly
  EXPECT_FALSE(isCheckpointed(manifest.bindings[5]));
  EXPECT_TRUE(isCheckpointed(manifest.bindings[1]));
}

TEST(ManifestTest, CopiesNameAParamOfTheirLayout) {
  Manifest manifest = stepManifest();
  Binding copy{BindingRole::State, "fc.bias.bf16", "", DType::BFloat16, {4}};
  copy.copyOf = "fc.bias";
  manifest.bindings.push_back(copy);
  Manifest parsed = parseManifest(printManifest(manifest), "m.json");
  EXPECT_EQ(parsed.bindings[5].copyOf, "fc.bias");
  EXPECT_EQ(printManifest(parsed), printManifest(manifest));

  auto error = [](const std::string &bindings) {
    return ZTC_ERROR_MESSAGE(parseManifest(
        R"({"format":2,"abi":5,"target":"cpu","source":"s","arena_bytes":8,)"
        R"("streams":1,"events":0,"bindings":[)" +
            bindings +
            R"(],"entries":[{"name":"e","purpose":"forward","outputs":[]}]})",
        "m.json"));
  };
  std::string param =
      R"({"role":"param","name":"w","dtype":"float32","shape":[4]},)";
  EXPECT_EQ(error(param + R"({"role":"param","name":"c","dtype":"bfloat16",)"
                          R"("shape":[4],"copy_of":"w"})"),
            "m.json: binding 1 ('c') is a copy (copy_of) but not a state");
  EXPECT_EQ(error(param + R"({"role":"state","name":"c","dtype":"bfloat16",)"
                          R"("shape":[4],"copy_of":"v"})"),
            "m.json: binding 1 ('c') is a copy of 'v', which is no param");
  EXPECT_EQ(error(param + R"({"role":"state","name":"c","dtype":"int8",)"
                          R"("shape":[4],"copy_of":"w"})"),
            "m.json: binding 1 ('c') is a int8 copy of the float32 param "
            "'w'; copies are of floats, in floats");
  EXPECT_EQ(error(param + R"({"role":"state","name":"c","dtype":"bfloat16",)"
                          R"("shape":[2],"full_shape":[4],"copy_of":"w"})"),
            "m.json: binding 1 ('c') has shape bfloat16[2] (a shard) but its "
            "param 'w' has float32[4]; a copy has its param's layout");
}

TEST(ManifestTest, ParsesAndValidates) {
  Manifest manifest = stepManifest();
  Manifest parsed = parseManifest(printManifest(manifest), "m.json");
  EXPECT_EQ(printManifest(parsed), printManifest(manifest));
  EXPECT_EQ(parsed.bindings[0].file, "input_0");
  EXPECT_EQ(fileStemFor("a/b:c d.e-f_g"), "a_b_c_d.e-f_g");

  // "file" defaults to the sanitized name.
  Manifest noFile = parseManifest(
      R"({"format":2,"abi":5,"target":"cpu","source":"step.cpp",
          "arena_bytes":8,"streams":1,"events":0,
          "bindings":[{"role":"input","name":"x:0","dtype":"float32",
          "shape":[2]}],
          "entries":[{"name":"e","purpose":"forward","outputs":[]}]})",
      "m.json");
  EXPECT_EQ(noFile.bindings[0].file, "x_0");
  // An entry without "arena_bytes" reaches as far as the arena.
  EXPECT_EQ(noFile.entries[0].arenaBytes, 8u);

  // Every role of the IR's train.binding round-trips; labels are data (a
  // file stem), buffers are weights.
  Manifest roles = stepManifest();
  roles.bindings.push_back(
      {BindingRole::Label, "labels", "labels", DType::Int64, {2}});
  roles.bindings.push_back(
      {BindingRole::Buffer, "bn.running_mean", "", DType::Float32, {4}});
  Manifest parsedRoles = parseManifest(printManifest(roles), "m.json");
  EXPECT_EQ(parsedRoles.bindings[5].role, BindingRole::Label);
  EXPECT_EQ(parsedRoles.bindings[5].file, "labels");
  EXPECT_EQ(parsedRoles.bindings[6].role, BindingRole::Buffer);
  EXPECT_TRUE(isData(BindingRole::Label) && isWeight(BindingRole::Buffer));
  EXPECT_FALSE(isData(BindingRole::Buffer) || isWeight(BindingRole::Label));

  auto error = [](const std::string &text) {
    return ZTC_ERROR_MESSAGE(parseManifest(text, "m.json"));
  };
  std::string head =
      R"({"format":2,"abi":5,"target":"cpu","source":"s","arena_bytes":8,)"
      R"("streams":1,"events":0,)";
  // A manifest with the given bindings (JSON objects) and one forward
  // entry with the given outputs.
  auto manifestWith = [&](const std::string &bindings,
                          const std::string &outputs = "") {
    return head + R"("bindings":[)" + bindings +
           R"(],"entries":[{"name":"e","purpose":"forward","outputs":[)" +
           outputs + "]}]}";
  };
  EXPECT_EQ(error(R"({"format":1})"),
            "m.json: manifest has format 1; this runtime reads 2");
  EXPECT_EQ(error(R"({"format":2,"abi":1,"target":"cpu"})"),
            "m.json: manifest was compiled for step ABI 1; this runtime "
            "calls ABI 5 (recompile the model)");
  EXPECT_EQ(error(head + R"("entries":[]})"),
            "m.json: manifest has no field 'bindings'");
  EXPECT_EQ(error(R"({"format":2,"abi":5,"target":"cpu","source":"s",)"
                  R"("arena_bytes":8,"streams":0,"events":0})"),
            "m.json: manifest has 0 streams and 0 events; expected 1 to 64 "
            "streams and at most 4096 events");
  EXPECT_EQ(error(head + R"("bindings":[],"entries":[]})"),
            "m.json: manifest lists no entry");
  EXPECT_EQ(error(head + R"("bindings":[],"entries":[{"name":"e",)"
                         R"("purpose":"eval","outputs":[]}]})"),
            "m.json: entry 0 ('e') has unknown purpose 'eval' (known: "
            "forward, train_step, accumulate, loss_and_grads, loss)");
  EXPECT_EQ(error(head + R"("bindings":[],"entries":[)"
                         R"({"name":"e","purpose":"forward","outputs":[]},)"
                         R"({"name":"f","purpose":"forward","outputs":[]}]})"),
            "m.json: entry 1 ('f') repeats a purpose or name of an earlier "
            "entry");
  EXPECT_EQ(error(head + R"("bindings":[],"entries":[{"name":"e",)"
                         R"("purpose":"forward","outputs":[],)"
                         R"("arena_bytes":9}]})"),
            "m.json: entry 0 ('e') reaches 9 bytes into an arena of 8");
  EXPECT_EQ(error(manifestWith(
                R"({"role":"input","name":"x","dtype":"float8","shape":[1]})")),
            "m.json: binding 0 ('x') has unknown dtype 'float8'");
  EXPECT_EQ(error(manifestWith(
                R"({"role":"grad","name":"x","dtype":"float32","shape":[1]})")),
            "m.json: binding 0 ('x') has unknown role 'grad'");
  EXPECT_EQ(error(manifestWith(R"({"role":"input","name":"x","file":"../x",)"
                               R"("dtype":"float32","shape":[1]})")),
            "m.json: binding 0 ('x') has invalid file stem '../x'");
  EXPECT_EQ(error(manifestWith("", R"({"name":"y","dtype":"float32",)"
                                   R"("shape":[4],"offset":0})")),
            "m.json: entry 0 ('e') output 0 ('y') (float32[4] at offset 0) "
            "lies outside the 8-byte arena");
  EXPECT_EQ(error(manifestWith(
                R"({"role":"input","name":"a:b","dtype":"bool","shape":[]},)"
                R"({"role":"input","name":"a/b","dtype":"bool","shape":[]})")),
            "m.json: binding 1 ('a/b') reuses input file 'a_b.npy'");
  EXPECT_NE(error("{").find("m.json: invalid JSON"), std::string::npos);
}
