//===- DsConfigFuzzer.cpp - DeepSpeed configs (--config) ------------------===//
//
// Oracle: parseDeepSpeedConfig accepts the text or throws ztc::rt::Error
// with a one-line message. A config it accepts has settings that each name
// a flag and a key, notices that each name a key, and its notices and
// batch identity give one-line messages (or none) for any flags.
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/train/DeepSpeedConfig.h"
#include "test/fuzz/FuzzSupport.h"

using namespace ztc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  rt::DeepSpeedConfig config;
  try {
    config = rt::parseDeepSpeedConfig("ds_config.json", text);
  } catch (const rt::Error &error) {
    fuzz::requireOneLine(error.what(), "parseDeepSpeedConfig");
    return 0;
  }
  for (const rt::ConfigSetting &setting : config.settings) {
    if (setting.flag.empty() || setting.key.empty())
      fuzz::fail("settings", "a setting without a flag or a key");
    if (setting.source != rt::ConfigSource::Auto && setting.value.empty())
      fuzz::fail("settings", setting.key + " has no value");
  }
  for (bool strict : {false, true}) {
    std::vector<std::string> warnings;
    std::string error = rt::checkNotices(config, strict, warnings);
    if (!error.empty())
      fuzz::requireOneLine(error, "checkNotices");
    for (const std::string &warning : warnings)
      fuzz::requireOneLine(warning, "checkNotices warning");
    if (strict && !warnings.empty())
      fuzz::fail("checkNotices", "--strict left a warning");
  }
  for (uint64_t world : {1, 3}) {
    rt::BatchSizes sizes;
    std::string error = rt::resolveBatchSizes(config, 0, 0, world, sizes);
    if (!error.empty())
      fuzz::requireOneLine(error, "resolveBatchSizes");
    else if (sizes.micro * sizes.accum * world != sizes.global ||
             sizes.micro == 0 || sizes.accum == 0)
      fuzz::fail("resolveBatchSizes", "sizes that break the identity");
  }
  return 0;
}
