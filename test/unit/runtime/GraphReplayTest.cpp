//===- GraphReplayTest.cpp - when entries are recorded and replayed -------===//
//
// GraphReplayer's policy (runtime/backend/GraphReplay.h) against a fake
// device that logs each operation: a direct call first, a record at the
// second call, launches after; one record per entry and context; a failed
// recording turns every later call direct and is told once.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/GraphReplay.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ztc::rt;

namespace {

void entryA(const ztc_step_context *) {}
void entryB(const ztc_step_context *) {}

/// Logs "direct A", "record A", "launch A#1", "destroy #1"; recording fails
/// with `failWith` when it is set.
class FakeDevice final : public GraphReplayer {
public:
  ~FakeDevice() override { destroyRecords(); }

  std::vector<std::string> log;
  std::string failWith;
  std::vector<std::string> *destroyed = nullptr;

private:
  static const char *name(ztc_entry_fn entry) {
    return entry == entryA ? "A" : "B";
  }
  void callDirect(ztc_entry_fn entry, const ztc_step_context &) override {
    log.push_back(std::string("direct ") + name(entry));
  }
  void *record(ztc_entry_fn entry, const ztc_step_context &,
               std::string &why) override {
    log.push_back(std::string("record ") + name(entry));
    if (!failWith.empty()) {
      why = failWith;
      return nullptr;
    }
    return reinterpret_cast<void *>(++made_);
  }
  void launch(void *record, ztc_entry_fn entry,
              const ztc_step_context &) override {
    log.push_back(std::string("launch ") + name(entry) + "#" +
                  std::to_string(reinterpret_cast<uintptr_t>(record)));
  }
  void destroy(void *record) override {
    if (destroyed)
      destroyed->push_back("#" +
                           std::to_string(reinterpret_cast<uintptr_t>(record)));
  }
  uintptr_t made_ = 0;
};

/// A context over `bindings` and one stream.
ztc_step_context contextOf(void *const *bindings, void *const *streams) {
  ztc_step_context ctx{};
  ctx.bindings = bindings;
  ctx.streams = streams;
  ctx.stream_count = 1;
  return ctx;
}

/// One context with its arrays.
struct OneContext {
  int stream = 0;
  void *streams[1] = {&stream};
  void *bindings[1] = {nullptr};
  ztc_step_context ctx = contextOf(bindings, streams);
};

} // namespace

TEST(GraphReplayTest, CalledOnceThenRecordedOnceThenLaunched) {
  FakeDevice device;
  OneContext one;
  // How many times each call ran the entry's host code: the direct call
  // and the recording once, the launches of the record not at all.
  std::vector<unsigned> hostRuns;
  for (int i = 0; i < 4; ++i)
    hostRuns.push_back(device.replay(entryA, one.ctx));
  EXPECT_EQ(device.log,
            (std::vector<std::string>{"direct A", "record A", "launch A#1",
                                      "launch A#1", "launch A#1"}));
  EXPECT_EQ(hostRuns, (std::vector<unsigned>{1, 1, 0, 0}));
  EXPECT_TRUE(device.takeNotices().empty());
  EXPECT_EQ(device.records(), 1u);
}

TEST(GraphReplayTest, OneRecordPerEntryAndContext) {
  // Double-buffered uploads alternate two bindings arrays: each has its
  // own record, as has each entry.
  std::vector<std::string> destroyed;
  {
    FakeDevice device;
    device.destroyed = &destroyed;
    int stream = 0;
    void *streams[] = {&stream};
    void *first[] = {nullptr}, *second[] = {nullptr};
    ztc_step_context one = contextOf(first, streams);
    ztc_step_context two = contextOf(second, streams);
    for (int i = 0; i < 3; ++i) {
      device.replay(entryA, one);
      device.replay(entryA, two);
    }
    device.replay(entryB, one);
    device.replay(entryB, one);
    EXPECT_EQ(device.log,
              (std::vector<std::string>{"direct A", "direct A", "record A",
                                        "launch A#1", "record A", "launch A#2",
                                        "launch A#1", "launch A#2", "direct B",
                                        "record B", "launch B#3"}));
    EXPECT_EQ(device.records(), 3u);
  }
  // The backend's destructor destroys every record.
  EXPECT_EQ(destroyed, (std::vector<std::string>{"#1", "#2", "#3"}));
}

TEST(GraphReplayTest, ADifferentStreamIsADifferentRecord) {
  FakeDevice device;
  int a = 0, b = 0;
  void *streamsA[] = {&a}, *streamsB[] = {&b};
  void *bindings[] = {nullptr};
  device.replay(entryA, contextOf(bindings, streamsA));
  device.replay(entryA, contextOf(bindings, streamsB));
  EXPECT_EQ(device.log, (std::vector<std::string>{"direct A", "direct A"}));
}

TEST(GraphReplayTest, AFailedRecordingFallsBackForGoodAndSaysWhyOnce) {
  FakeDevice device;
  device.failWith = "cudaStreamEndCapture: cudaErrorStreamCaptureUnjoined";
  OneContext one;
  std::vector<unsigned> hostRuns;
  for (int i = 0; i < 4; ++i)
    hostRuns.push_back(device.replay(entryA, one.ctx));
  device.replay(entryB, one.ctx);
  device.replay(entryB, one.ctx);
  // The failed recording ran the host code but none of the work: that
  // call, and every one after it, is direct, and nothing is recorded again.
  EXPECT_EQ(hostRuns, (std::vector<unsigned>{1, 2, 1, 1}));
  EXPECT_EQ(device.log, (std::vector<std::string>{
                            "direct A", "record A", "direct A", "direct A",
                            "direct A", "direct B", "direct B"}));
  EXPECT_TRUE(device.stopped());
  EXPECT_EQ(device.takeNotices(),
            (std::vector<std::string>{
                "CUDA graphs off, every step a direct call: "
                "cudaStreamEndCapture: cudaErrorStreamCaptureUnjoined"}));
  EXPECT_TRUE(device.takeNotices().empty());
}
