//===- DsConfigFuzzer.cpp - DeepSpeed configs (--config) ------------------===//
//
// Oracle: parseDeepSpeedConfig accepts the text or throws ztc::rt::Error
// with a one-line message. A config it accepts has settings that each name
// a flag and a key, notices that each name a key, offloads to the CPU, and
// its notices (worded for the CPU and for CUDA) and batch identity give
// one-line messages (or none) for any flags.
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
  for (const rt::ConfigOffload &offload : config.offloads)
    if (offload.key.empty() || offload.device != "cpu")
      fuzz::fail("offloads", "an offload without a key, or not to the CPU");
  for (bool deviceMemory : {false, true})
    for (bool strict : {false, true}) {
      rt::DeepSpeedConfig worded = config;
      rt::addOffloadNotices(worded, deviceMemory);
      std::vector<std::string> warnings, notes;
      std::string error = rt::checkNotices(worded, strict, warnings, &notes);
      if (!error.empty())
        fuzz::requireOneLine(error, "checkNotices");
      for (const std::string &warning : warnings)
        fuzz::requireOneLine(warning, "checkNotices warning");
      for (const std::string &note : notes)
        fuzz::requireOneLine(note, "checkNotices note");
      if (strict && !warnings.empty())
        fuzz::fail("checkNotices", "--strict left a warning");
      // An offload is a note on the CPU and a warning (or an error) on
      // CUDA.
      size_t readerNotes = 0;
      for (const rt::ConfigNotice &notice : config.notices)
        readerNotes += notice.note;
      if (notes.size() !=
          readerNotes + (deviceMemory ? 0 : config.offloads.size()))
        fuzz::fail("addOffloadNotices", "offload notes for the wrong target");
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
