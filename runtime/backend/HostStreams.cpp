//===- HostStreams.cpp - the CPU's streams: threads run in order ----------===//

#include "runtime/backend/HostStreams.h"

#include <cstdio>
#include <cstdlib>

namespace ztc::rt {

namespace {

/// Checks of a condition before a waiting thread sleeps: a few
/// microseconds. Longer spins starve the other thread when ranks share the
/// cores (4000 made a 2-rank step on 2 cores five times slower).
constexpr int kSpins = 100;

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

} // namespace

HostStreams::HostStreams(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    auto stream = std::make_unique<Stream>();
    stream->owner = this;
    stream->table.self = stream.get();
    if (i == 0) {
      stream->table.enqueue = runNow;
      stream->table.signal = signalNow;
      stream->table.wait = waitNow;
    } else {
      stream->table.enqueue = enqueue;
      stream->table.signal = signal;
      stream->table.wait = wait;
    }
    streams_.push_back(std::move(stream));
  }
  for (size_t i = 1; i < streams_.size(); ++i) {
    Stream *stream = streams_[i].get();
    stream->thread = std::thread([this, stream] { serve(*stream); });
  }
}

HostStreams::~HostStreams() {
  stopping_.store(true);
  wake();
  for (auto &stream : streams_)
    if (stream->thread.joinable())
      stream->thread.join();
}

std::vector<void *> HostStreams::tables() {
  std::vector<void *> tables;
  for (auto &stream : streams_)
    tables.push_back(&stream->table);
  return tables;
}

void HostStreams::setEventCount(size_t count) {
  done_ = std::make_unique<std::atomic<unsigned char>[]>(count);
  eventCount_ = count;
  reset();
}

void HostStreams::reset() {
  for (size_t i = 0; i < eventCount_; ++i)
    done_[i].store(0, std::memory_order_relaxed);
}

void HostStreams::drain() {
  await([&] {
    for (size_t i = 1; i < streams_.size(); ++i)
      if (streams_[i]->finished.load() != streams_[i]->handed.load())
        return false;
    return true;
  });
}

template <typename Ready> void HostStreams::await(Ready ready) {
  for (int i = 0; i < kSpins; ++i) {
    if (ready())
      return;
    relax();
  }
  std::unique_lock<std::mutex> lock(sleepMutex_);
  sleepers_.fetch_add(1);
  changed_.wait(lock, ready);
  sleepers_.fetch_sub(1);
}

void HostStreams::wake() {
  // A sleeper counts itself before its last check, under the mutex; taking
  // the mutex here means it is either before that check (and sees the
  // change) or asleep (and is woken).
  if (sleepers_.load() == 0)
    return;
  std::lock_guard<std::mutex> lock(sleepMutex_);
  changed_.notify_all();
}

void HostStreams::push(Stream &stream, Task task) {
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    stream.queue.push_back(task);
  }
  stream.handed.fetch_add(1);
  wake();
}

void HostStreams::checkEvent(int32_t event) const {
  if (event >= 0 && size_t(event) < eventCount_)
    return;
  // The generated step and its manifest disagree: a wait could never end.
  std::fprintf(stderr,
               "error: the step uses event %d but its manifest counts %zu "
               "(recompile the model)\n",
               event, eventCount_);
  std::abort();
}

void HostStreams::complete(int32_t event) {
  checkEvent(event);
  done_[event].store(1);
  wake();
}

void HostStreams::awaitEvent(int32_t event) {
  checkEvent(event);
  await([&] { return done_[event].load() != 0; });
}

void HostStreams::serve(Stream &stream) {
  size_t taken = 0;
  for (;;) {
    await([&] { return stopping_.load() || stream.handed.load() != taken; });
    if (stream.handed.load() == taken)
      return; // stopping, nothing left
    Task task;
    {
      std::lock_guard<std::mutex> lock(queueMutex_);
      task = stream.queue.front();
      stream.queue.pop_front();
    }
    ++taken;
    switch (task.kind) {
    case Task::Work:
      task.work(task.arg);
      break;
    case Task::Signal:
      complete(task.event);
      break;
    case Task::Wait:
      awaitEvent(task.event);
      break;
    }
    stream.finished.fetch_add(1);
    wake();
  }
}

void HostStreams::enqueue(void *self, void (*work)(void *), void *arg) {
  auto *stream = static_cast<Stream *>(self);
  stream->owner->push(*stream, {Task::Work, work, arg, 0});
}

void HostStreams::signal(void *self, int32_t event) {
  auto *stream = static_cast<Stream *>(self);
  stream->owner->push(*stream, {Task::Signal, nullptr, nullptr, event});
}

void HostStreams::wait(void *self, int32_t event) {
  auto *stream = static_cast<Stream *>(self);
  stream->owner->push(*stream, {Task::Wait, nullptr, nullptr, event});
}

void HostStreams::runNow(void *, void (*work)(void *), void *arg) { work(arg); }

void HostStreams::signalNow(void *self, int32_t event) {
  static_cast<Stream *>(self)->owner->complete(event);
}

void HostStreams::waitNow(void *self, int32_t event) {
  static_cast<Stream *>(self)->owner->awaitEvent(event);
}

} // namespace ztc::rt
