//===- HostStreamsTest.cpp - the CPU's streams ----------------------------===//
//
// runtime/backend/HostStreams: work handed to stream 1 runs on a thread of
// its own, in order; events order the two streams both ways; drain waits
// for everything handed over; the CPU backend makes host streams only when
// asked to (BackendOptions::streamThreads) and the step has several.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/HostStreams.h"
#include "runtime/backend/Backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

using namespace ztc::rt;

namespace {

const ztc_host_stream &stream(std::vector<void *> &tables, size_t i) {
  return *static_cast<const ztc_host_stream *>(tables[i]);
}

/// Hands `fn` to `s` (a plain function pointer, as the step's onStream
/// passes a trampoline).
template <typename Fn> void hand(const ztc_host_stream &s, Fn *fn) {
  s.enqueue(
      s.self, [](void *arg) { (*static_cast<Fn *>(arg))(); }, fn);
}

TEST(HostStreamsTest, WorkRunsInOrderOnAnotherThread) {
  HostStreams streams(2);
  streams.setEventCount(0);
  std::vector<void *> tables = streams.tables();
  ASSERT_EQ(tables.size(), 2u);
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::vector<std::function<void()>> work;
  for (int i = 0; i < 100; ++i)
    work.push_back([&, i] {
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    });
  for (auto &fn : work)
    hand(stream(tables, 1), &fn);
  streams.drain();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[i], i);
  for (std::thread::id id : threads)
    EXPECT_NE(id, std::this_thread::get_id());
}

TEST(HostStreamsTest, StreamZeroRunsAtOnce) {
  HostStreams streams(2);
  streams.setEventCount(1);
  std::vector<void *> tables = streams.tables();
  std::thread::id ranOn;
  auto fn = [&] { ranOn = std::this_thread::get_id(); };
  hand(stream(tables, 0), &fn);
  EXPECT_EQ(ranOn, std::this_thread::get_id());
  // Stream 0's signal completes at once: waiting for it returns.
  stream(tables, 0).signal(stream(tables, 0).self, 0);
  stream(tables, 0).wait(stream(tables, 0).self, 0);
}

TEST(HostStreamsTest, EventsOrderBothWays) {
  HostStreams streams(2);
  streams.setEventCount(2);
  std::vector<void *> tables = streams.tables();
  const ztc_host_stream &zero = stream(tables, 0), &one = stream(tables, 1);
  for (int round = 0; round < 3; ++round) {
    streams.reset();
    std::atomic<int> written{0};
    int seenByStreamOne = -1, result = 0;
    // Stream 1 waits for stream 0's event 0 before its work.
    one.wait(one.self, 0);
    auto read = [&] {
      seenByStreamOne = written.load();
      result = 42;
    };
    hand(one, &read);
    one.signal(one.self, 1);
    // Stream 0 works for a while, then signals: stream 1 must not have run.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(result, 0) << "stream 1 ran before the event it waits for";
    written.store(7);
    zero.signal(zero.self, 0);
    // Stream 0 waits for stream 1's event 1: its work is done by then.
    zero.wait(zero.self, 1);
    EXPECT_EQ(result, 42);
    EXPECT_EQ(seenByStreamOne, 7);
    streams.drain();
  }
}

TEST(HostStreamsTest, DrainWaitsForSlowWork) {
  HostStreams streams(3);
  streams.setEventCount(0);
  std::vector<void *> tables = streams.tables();
  std::atomic<int> done{0};
  auto slow = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    done.fetch_add(1);
  };
  hand(stream(tables, 1), &slow);
  hand(stream(tables, 2), &slow);
  streams.drain();
  EXPECT_EQ(done.load(), 2);
}

TEST(HostStreamsDeathTest, AnEventTheManifestDoesNotCountAborts) {
  EXPECT_DEATH(
      {
        HostStreams streams(2);
        streams.setEventCount(1);
        std::vector<void *> tables = streams.tables();
        stream(tables, 0).signal(stream(tables, 0).self, 3);
      },
      "the step uses event 3 but its manifest counts 1");
}

TEST(HostStreamsTest, CpuBackendMakesThemWhenAsked) {
  // Off (the default): program order on the caller, null streams.
  std::unique_ptr<Backend> inline_ = createCpuBackend();
  std::vector<void *> none = inline_->streams(2);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none[0], nullptr);
  EXPECT_EQ(none[1], nullptr);
  // On: one table per stream; a step of one stream still gets none.
  std::unique_ptr<Backend> threaded = createCpuBackend({true});
  EXPECT_EQ(threaded->streams(1), std::vector<void *>{nullptr});
  std::vector<void *> tables = threaded->streams(2);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_NE(tables[0], nullptr);
  EXPECT_NE(tables[1], nullptr);
  EXPECT_EQ(threaded->events(4), std::vector<void *>(4, nullptr));
}

} // namespace
