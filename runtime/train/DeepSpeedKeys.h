//===- DeepSpeedKeys.h - every key of DeepSpeed's config --------*- C++ -*-===//
//
// The inventory of the keys DeepSpeed 0.19's config defines, each with what
// ztc does with it, so that no real DeepSpeed key is ever called unknown and
// none that changes the mathematics is ever ignored:
//
//   Read    a section reader in DeepSpeedConfig.cpp honours it (sets a
//           flag, or checks it against what ztc computes);
//   Note    accepted with a note: it places or tunes, and what is computed
//           is the same without it (offloading on the CPU backend, bucket
//           sizes ztc has no use for);
//   Warn    ignored with a warning: it asks for something ztc does not do
//           but that does not change the update (logging, profiling);
//   Refuse  an error when set: it changes what is computed and is not built.
//
// A Note, Warn or Refuse key says nothing when its value is DeepSpeed's
// default (`quietWhen`), "auto" or null. test/fixtures/deepspeed/keys.json,
// recorded from the real package by test/fixtures/deepspeed/record.py,
// lists DeepSpeed's keys; DeepSpeedKeysTest checks that each is here.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_TRAIN_DEEPSPEEDKEYS_H
#define ZTC_RUNTIME_TRAIN_DEEPSPEEDKEYS_H

#include <string>
#include <vector>

namespace ztc::rt {

enum class KeyUse { Read, Note, Warn, Refuse };

struct DeepSpeedKey {
  /// "" for the top level, else the dotted section: "zero_optimization",
  /// "zero_optimization.offload_param", "bf16".
  const char *section;
  const char *key;
  KeyUse use;
  /// DeepSpeed's default, as JSON text, at which a Note, Warn or Refuse key
  /// says nothing; "off": a section that is false, or has "enabled": false;
  /// "": it always speaks.
  const char *quietWhen;
  /// Read: what it sets; otherwise the reason, as the message gives it.
  const char *why;
  /// DeepSpeed's other name for this key (a pydantic alias, or a
  /// deprecated name), or null.
  const char *alias = nullptr;
};

/// The entry of `key` in `section` (by its name or its alias), or null.
const DeepSpeedKey *findDeepSpeedKey(const std::string &section,
                                     const std::string &key);

/// Every entry, in the table's order.
const std::vector<DeepSpeedKey> &deepSpeedKeys();

} // namespace ztc::rt

#endif // ZTC_RUNTIME_TRAIN_DEEPSPEEDKEYS_H
