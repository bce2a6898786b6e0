//===- GraphReplay.cpp - when a backend records and replays entries -------===//

#include "runtime/backend/GraphReplay.h"

#include <utility>

namespace ztc::rt {

GraphReplayer::Key GraphReplayer::keyOf(ztc_entry_fn entry,
                                        const ztc_step_context &ctx) {
  auto address = [](const void *pointer) {
    return reinterpret_cast<uintptr_t>(pointer);
  };
  Key key = {reinterpret_cast<uintptr_t>(entry),
             address(ctx.bindings),
             address(ctx.arena),
             address(ctx.streams),
             uintptr_t(uint32_t(ctx.stream_count)),
             address(ctx.events),
             uintptr_t(uint32_t(ctx.event_count)),
             address(ctx.comm),
             uintptr_t(uint32_t(ctx.rank)),
             uintptr_t(uint32_t(ctx.world_size)),
             address(ctx.state),
             address(ctx.error)};
  // The streams and events themselves: a record waits on and signals the
  // ones it was made with.
  for (int32_t i = 0; i < ctx.stream_count; ++i)
    key.push_back(address(ctx.streams[i]));
  for (int32_t i = 0; i < ctx.event_count; ++i)
    key.push_back(address(ctx.events[i]));
  return key;
}

unsigned GraphReplayer::replay(ztc_entry_fn entry,
                               const ztc_step_context &ctx) {
  if (stopped_) {
    callDirect(entry, ctx);
    return 1;
  }
  Record &found = records_[keyOf(entry, ctx)];
  if (!found.record && found.directCalls < kCallsBeforeRecording) {
    ++found.directCalls;
    callDirect(entry, ctx);
    return 1;
  }
  if (found.record) {
    launch(found.record, entry, ctx);
    return 0;
  }
  // Recording runs the host code once; the launch runs what it recorded.
  std::string why;
  found.record = record(entry, ctx, why);
  if (!found.record) {
    stopped_ = true;
    notices_.push_back("CUDA graphs off, every step a direct call: " +
                       (why.empty() ? std::string("recording failed") : why));
    callDirect(entry, ctx);
    return 2;
  }
  launch(found.record, entry, ctx);
  return 1;
}

std::vector<std::string> GraphReplayer::takeNotices() {
  return std::exchange(notices_, {});
}

void GraphReplayer::destroyRecords() {
  for (auto &[key, found] : records_)
    if (found.record)
      destroy(found.record);
  records_.clear();
}

} // namespace ztc::rt
