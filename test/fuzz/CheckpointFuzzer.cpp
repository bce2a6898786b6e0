//===- CheckpointFuzzer.cpp - safetensors and checkpoint loading ----------===//
//
// The input is a checkpoint.safetensors. Oracle: loading it for a fixed
// training manifest (two params, one optimizer state) and checking its data
// position against a fixed data set either succeeds with exactly the
// manifest's tensors and a position inside the data, or throws
// ztc::rt::Error with a one-line message. The safetensors reader runs on
// every input first.
//
//===----------------------------------------------------------------------===//

#include "runtime/Error.h"
#include "runtime/train/Checkpoint.h"
#include "test/fuzz/FuzzSupport.h"

using namespace ztc;

namespace {

rt::Manifest trainingManifest() {
  rt::Manifest manifest;
  manifest.kind = rt::ArtifactKind::Train;
  auto add = [&](rt::BindingRole role, const char *name,
                 std::vector<int64_t> shape) {
    rt::Binding binding;
    binding.role = role;
    binding.name = name;
    binding.shape = std::move(shape);
    manifest.bindings.push_back(binding);
  };
  add(rt::BindingRole::Input, "x", {4, 3});
  add(rt::BindingRole::Param, "w", {3, 2});
  add(rt::BindingRole::Param, "b", {2});
  add(rt::BindingRole::State, "w.exp_avg", {3, 2});
  return manifest;
}

/// The data the position is checked against: 10 batches per epoch.
constexpr uint64_t kBatchesPerEpoch = 10;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const fuzz::ScratchDir dir("checkpoint");
  static const rt::Manifest manifest = trainingManifest();
  dir.write("checkpoint.safetensors", data, size);
  try {
    rt::Checkpoint checkpoint = rt::loadCheckpoint(dir.path(), manifest);
    rt::checkDataPosition(checkpoint, kBatchesPerEpoch,
                          rt::checkpointPath(dir.path()));
    if (checkpoint.tensors.size() != 3 || checkpoint.batch >= kBatchesPerEpoch)
      fuzz::fail("loadCheckpoint", "accepted a checkpoint that does not "
                                   "match the manifest");
    for (const auto &[name, tensor] : checkpoint.tensors) {
      std::optional<int64_t> bytes =
          rt::checkedByteSize(tensor.shape, rt::dtypeSize(tensor.dtype));
      if (!bytes || static_cast<size_t>(*bytes) != tensor.bytes.size())
        fuzz::fail("loadCheckpoint",
                   "tensor " + name + " " + tensor.describe() + " holds " +
                       std::to_string(tensor.bytes.size()) + " bytes");
    }
  } catch (const rt::Error &error) {
    fuzz::requireOneLine(error.what(), "loadCheckpoint");
  }
  return 0;
}
