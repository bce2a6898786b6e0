//===- ManifestFuzzer.cpp - manifest.json and the step it describes -------===//
//
// Oracle: parseManifest accepts the text or throws ztc::rt::Error with a
// one-line message. With ZTC_FUZZ_ARTIFACT set to a compiled training
// artifact (scripts/fuzz.sh compiles the example MLP, its step built with
// AddressSanitizer), every manifest that parses is also loaded against that
// artifact's step: the loader must refuse any manifest that does not
// describe the step, and a manifest it accepts must run the step's train
// entry without a memory error.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/Error.h"
#include "runtime/Runner.h"
#include "runtime/backend/Backend.h"
#include "runtime/io/Manifest.h"
#include "test/fuzz/FuzzSupport.h"

#include <filesystem>

using namespace ztc;

namespace {

/// A copy of the artifact (its manifest replaced per input) whose step.so
/// is a link to the original, or null without ZTC_FUZZ_ARTIFACT.
const fuzz::ScratchDir *artifactCopy() {
  static const char *source = std::getenv("ZTC_FUZZ_ARTIFACT");
  if (!source || !*source)
    return nullptr;
  static const fuzz::ScratchDir dir("artifact");
  static const bool linked = [] {
    namespace fs = std::filesystem;
    for (const char *name : {"step.so", "init.safetensors"}) {
      fs::path from = fs::absolute(fs::path(source) / name);
      if (!fs::exists(from))
        fuzz::fail("ZTC_FUZZ_ARTIFACT", from.string() + " is missing");
      fs::create_symlink(from, fs::path(dir.path()) / name);
    }
    return true;
  }();
  (void)linked;
  return &dir;
}

/// Runs the main entry once with zero inputs, labels and hypers.
void runOnce(const rt::Artifact &artifact) {
  rt::Runner runner(artifact, rt::createCpuBackend());
  const rt::Manifest &manifest = artifact.manifest();
  for (size_t i = 0; i < manifest.bindings.size(); ++i) {
    const rt::Binding &binding = manifest.bindings[i];
    if (rt::isData(binding.role) || binding.role == rt::BindingRole::Hyper)
      runner.setBinding(i, rt::Tensor(binding.dtype, binding.shape));
  }
  runner.run();
  runner.synchronize();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    rt::parseManifest(text, "manifest.json");
  } catch (const rt::Error &error) {
    fuzz::requireOneLine(error.what(), "parseManifest");
    return 0;
  }
  const fuzz::ScratchDir *copy = artifactCopy();
  if (!copy)
    return 0;
  copy->write("manifest.json", data, size);
  try {
    rt::Artifact artifact = rt::Artifact::load(copy->path());
    runOnce(artifact);
  } catch (const rt::Error &error) {
    fuzz::requireOneLine(error.what(), "Artifact::load");
  }
  return 0;
}
