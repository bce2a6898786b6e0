//===- GraphReplay.h - when a backend records and replays -------*- C++ -*-===//
//
// The policy behind Backend::replay, apart from the device, so that it is
// tested without one (test/unit/runtime/GraphReplayTest.cpp): an entry is
// called directly the first time it runs with a context, recorded the
// second time (the first call warmed up what the entry creates lazily:
// cuBLAS's handle, the kernels' modules) and replayed from then on. A
// record is kept per entry and context, because a record bakes in the
// device pointers the context carries. When a recording fails, every later
// call is direct, and the reason is told once. CudaBackend supplies the
// three device operations (capture, launch, destroy) with CUDA graphs.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_BACKEND_GRAPHREPLAY_H
#define ZTC_RUNTIME_BACKEND_GRAPHREPLAY_H

#include "runtime/kernels/StepAbi.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ztc::rt {

class GraphReplayer {
public:
  virtual ~GraphReplayer() = default;

  /// Direct calls with a context before the one that records it.
  static constexpr unsigned kCallsBeforeRecording = 1;

  /// Runs entry(ctx): directly, or by recording it and launching the
  /// record, or by launching the record made earlier. Returns how many
  /// times the entry's host code ran (Backend::replay).
  unsigned replay(ztc_entry_fn entry, const ztc_step_context &ctx);
  /// The notices since the last take: why recording stopped.
  std::vector<std::string> takeNotices();
  /// Whether recording has failed, so that every call is direct.
  bool stopped() const { return stopped_; }
  /// How many records there are.
  size_t records() const { return records_.size(); }

protected:
  /// Destroys every record; a deriving backend calls it in its destructor,
  /// while it can still destroy them.
  void destroyRecords();

  /// Calls entry(ctx) directly.
  virtual void callDirect(ztc_entry_fn entry, const ztc_step_context &ctx) = 0;
  /// Records entry(ctx) without running its work: the record, or null with
  /// `why` set (naming the call that failed).
  virtual void *record(ztc_entry_fn entry, const ztc_step_context &ctx,
                       std::string &why) = 0;
  /// Enqueues the work of `record`, made from `entry`, on the context's
  /// stream 0.
  virtual void launch(void *record, ztc_entry_fn entry,
                      const ztc_step_context &ctx) = 0;
  virtual void destroy(void *record) = 0;

private:
  /// What identifies a record: the entry and every value of the context
  /// the entry's host code reads (the arrays by address; their contents by
  /// the caller's promise, Backend::replay).
  using Key = std::vector<uintptr_t>;
  static Key keyOf(ztc_entry_fn entry, const ztc_step_context &ctx);

  struct Record {
    unsigned directCalls = 0;
    void *record = nullptr;
  };
  std::map<Key, Record> records_;
  bool stopped_ = false;
  std::vector<std::string> notices_;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_BACKEND_GRAPHREPLAY_H
