//===- HostStreams.h - the CPU's streams: threads run in order --*- C++ -*-===//
//
// A step compiled with collectives on stream 1 (ztc-schedule-collectives)
// hands that stream's work to a thread of its own, so a rank computes while
// its last gradient bucket is reduced or its next parameters are gathered.
// Stream 0 is the thread that calls the entry. Events order the streams as
// cudaEventRecord / cudaStreamWaitEvent do on a GPU.
//
// Hand-overs are frequent (two per collective) and short, so a waiting
// thread spins briefly before it sleeps.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_BACKEND_HOSTSTREAMS_H
#define ZTC_RUNTIME_BACKEND_HOSTSTREAMS_H

#include "runtime/kernels/StepAbi.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ztc::rt {

class HostStreams {
public:
  /// Stream 0 (the caller) and `count - 1` threads.
  explicit HostStreams(size_t count);
  /// Runs what was handed over, then ends the threads.
  ~HostStreams();
  HostStreams(const HostStreams &) = delete;
  HostStreams &operator=(const HostStreams &) = delete;

  /// One const ztc_host_stream * per stream, for ztc_step_context::streams.
  std::vector<void *> tables();
  /// Entries signal events 0 to `count - 1`. The threads are idle.
  void setEventCount(size_t count);
  /// Before a call: every event not yet completed. The threads are idle.
  void reset();
  /// After a call: waits until every thread has run all it was handed.
  void drain();

private:
  struct Task {
    enum Kind { Work, Signal, Wait } kind;
    void (*work)(void *) = nullptr;
    void *arg = nullptr;
    int32_t event = 0;
  };
  struct Stream {
    HostStreams *owner = nullptr;
    ztc_host_stream table{};
    /// Guarded by the owner's queueMutex_.
    std::deque<Task> queue;
    /// Tasks handed over and tasks finished.
    std::atomic<size_t> handed{0}, finished{0};
    std::thread thread;
  };

  static void enqueue(void *self, void (*work)(void *), void *arg);
  static void signal(void *self, int32_t event);
  static void wait(void *self, int32_t event);
  static void runNow(void *self, void (*work)(void *), void *arg);
  static void signalNow(void *self, int32_t event);
  static void waitNow(void *self, int32_t event);

  void push(Stream &stream, Task task);
  void complete(int32_t event);
  void awaitEvent(int32_t event);
  /// Spins, then sleeps, until `ready()`.
  template <typename Ready> void await(Ready ready);
  /// Wakes the sleepers after a change `await` may be waiting for.
  void wake();
  /// Aborts on an event the manifest does not count.
  void checkEvent(int32_t event) const;
  void serve(Stream &stream);

  std::mutex queueMutex_;
  std::mutex sleepMutex_;
  std::condition_variable changed_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::unique_ptr<std::atomic<unsigned char>[]> done_;
  size_t eventCount_ = 0;
  std::vector<std::unique_ptr<Stream>> streams_;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_BACKEND_HOSTSTREAMS_H
