//===- Artifact.cpp - a compiled model on disk ----------------------------===//
//
// Loading: the manifest (Manifest.cpp), the compiled step (built from its
// source when absent, or when built for vector instructions this processor
// lacks), its entries, and the initial values.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/SafeTensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <cstdlib>
#include <dlfcn.h>

namespace ztc::rt {

void buildStep(const std::string &directory, const Manifest &manifest) {
  std::string sourcePath = directory + "/" + manifest.source;
  std::string soPath = compileSharedObject(sourcePath, manifest.target,
                                           defaultCacheDir() + "/so");
  std::filesystem::path step = std::filesystem::path(directory) / "step.so";
  std::filesystem::remove(step);
  // A hard link into the cache when it shares the filesystem, else a copy.
  std::error_code linkError;
  std::filesystem::create_hard_link(soPath, step, linkError);
  if (linkError)
    std::filesystem::copy_file(
        soPath, step, std::filesystem::copy_options::overwrite_existing);
}

namespace {

/// Whether this processor runs the instructions step.so was built for, as
/// its build command (step.build, one argument per line) says; yes when
/// there is none.
bool builtForThisProcessor(const std::string &directory) {
  std::ifstream command(directory + "/step.build");
  for (std::string arg; std::getline(command, arg);)
    if (!hostRunsIsa(arg))
      return false;
  return true;
}

} // namespace

Artifact Artifact::load(const std::string &directory) {
  Artifact artifact;
  artifact.directory_ = directory;
  std::string manifestPath = directory + "/manifest.json";
  artifact.manifest_ = parseManifest(readFile(manifestPath), manifestPath);

  std::string soPath = directory + "/step.so";
  bool sourceThere =
      std::filesystem::exists(directory + "/" + artifact.manifest_.source);
  if (!std::filesystem::exists(soPath)) {
    if (!sourceThere)
      throw Error(directory + ": neither step.so nor its source " +
                  artifact.manifest_.source + " is there");
    buildStep(directory, artifact.manifest_);
  } else if (sourceThere && !builtForThisProcessor(directory)) {
    // Built on a machine with vector instructions this one lacks.
    buildStep(directory, artifact.manifest_);
  }
  // Idle OpenMP threads spin briefly, then sleep (unless the user chose):
  // a step is a sequence of short parallel loops with little between them,
  // so a worker that spins a few microseconds catches the next one without
  // the wake-up a sleeping one needs, while on a busy machine it gives the
  // core back before stealing much of it. On the 4-layer GPT's step, 2
  // threads on 2 cores: sleeping at once (OMP_WAIT_POLICY=PASSIVE) 148 ms,
  // 300 spins 103 ms; two or four trainers sharing the cores took as long
  // either way (5% longer for two), where libgomp's default spinning made
  // two trainers thirty times slower. libgomp reads this when the step
  // loads it.
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
    ::setenv("GOMP_SPINCOUNT", "300", /*overwrite=*/0);
  // RTLD_LOCAL: two artifacts in one process keep their own symbols.
  // RTLD_NODELETE: the step's OpenMP worker threads outlive the call (they
  // idle in libgomp until exit), so its code and libgomp must stay mapped
  // even after the Artifact is destroyed.
  artifact.handle_ =
      ::dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!artifact.handle_)
    throw Error(soPath + ": cannot load the compiled step: " + ::dlerror());
  auto resolve = [&](const std::string &name) -> EntryFn {
    ::dlerror();
    void *symbol = ::dlsym(artifact.handle_, name.c_str());
    if (!symbol) {
      const char *message = ::dlerror();
      throw Error(soPath + ": entry '" + name +
                  "' not found: " + (message ? message : "null symbol"));
    }
    return reinterpret_cast<EntryFn>(symbol);
  };
  // The step states the interface it was compiled for (steps ztc emits
  // always do): a manifest that describes another one would have the step
  // read or write outside its buffers.
  ::dlerror();
  if (auto *compiled = static_cast<const unsigned long long *>(
          ::dlsym(artifact.handle_, kInterfaceHashSymbol))) {
    uint64_t described = interfaceHash(artifact.manifest_);
    if (*compiled != described)
      throw Error(manifestPath +
                  " does not describe the compiled step: its bindings, "
                  "entries or arena differ from what step.so was compiled "
                  "for (recompile the model, or restore the manifest)");
  }
  for (const Entry &entry : artifact.manifest_.entries)
    artifact.entries_.push_back(resolve(entry.name));
  artifact.entry_ = artifact.entries_.front();
  return artifact;
}

EntryFn Artifact::entry(EntryPurpose purpose) const {
  for (size_t i = 0; i < manifest_.entries.size(); ++i)
    if (manifest_.entries[i].purpose == purpose)
      return entries_[i];
  return nullptr;
}

Artifact::Artifact(Artifact &&other) noexcept { *this = std::move(other); }

Artifact &Artifact::operator=(Artifact &&other) noexcept {
  std::swap(directory_, other.directory_);
  std::swap(manifest_, other.manifest_);
  std::swap(handle_, other.handle_);
  std::swap(entry_, other.entry_);
  std::swap(entries_, other.entries_);
  return *this;
}

Artifact::~Artifact() {
  if (handle_)
    ::dlclose(handle_);
}

Artifact::InitialValues::InitialValues(const Artifact &artifact,
                                       bool constantsOnly)
    : artifact_(artifact), constantsOnly_(constantsOnly) {
  // Inputs and hypers are written before each call; states start at zero
  // unless init.safetensors has a value.
  bool needed = false;
  for (const Binding &binding : artifact.manifest_.bindings)
    needed |= binding.role == BindingRole::Constant ||
              (!constantsOnly && isWeight(binding.role));
  if (needed)
    init_ = std::make_unique<SafeTensorsReader>(artifact.initPath());
}

Artifact::InitialValues::~InitialValues() = default;

const SafeTensorsEntry *Artifact::InitialValues::find(const Binding &binding) {
  bool fromInit = constantsOnly_ ? binding.role == BindingRole::Constant
                                 : isWeight(binding.role) ||
                                       binding.role == BindingRole::Constant ||
                                       binding.role == BindingRole::State;
  if (!fromInit || !init_)
    return nullptr;
  std::string path = artifact_.initPath();
  auto it = init_->entries().find(binding.name);
  if (it == init_->entries().end() && binding.role == BindingRole::State)
    return nullptr;
  if (it == init_->entries().end())
    throw Error(path + ": no tensor for " + roleName(binding.role) + " '" +
                binding.name + "' (" + binding.describe() + ")");
  // A shard's initial value is the whole tensor; the runner takes its
  // rank's block.
  const std::vector<int64_t> &shape =
      binding.sharded() ? binding.fullShape : binding.shape;
  if (it->second.dtype != binding.dtype || it->second.shape != shape)
    throw Error(path + ": " + roleName(binding.role) + " '" + binding.name +
                "': expected " + describeType(binding.dtype, shape) + ", got " +
                describeType(it->second.dtype, it->second.shape));
  return &it->second;
}

std::optional<Tensor> Artifact::InitialValues::next(const Binding &binding) {
  if (!find(binding))
    return std::nullopt;
  return init_->read(binding.name);
}

bool Artifact::InitialValues::stream(
    const Binding &binding,
    const std::function<void(uint64_t, const void *, uint64_t)> &sink) {
  const SafeTensorsEntry *entry = find(binding);
  if (!entry)
    return false;
  constexpr uint64_t kPiece = uint64_t(16) << 20;
  std::vector<uint8_t> piece(std::min(entry->bytes, kPiece));
  for (uint64_t from = 0; from < entry->bytes; from += kPiece) {
    uint64_t count = std::min(kPiece, entry->bytes - from);
    init_->read(binding.name, from, count, piece.data());
    sink(from, piece.data(), count);
  }
  return true;
}

std::map<std::string, Tensor>
Artifact::loadInitialValues(bool constantsOnly) const {
  InitialValues values(*this, constantsOnly);
  std::map<std::string, Tensor> all;
  for (const Binding &binding : manifest_.bindings)
    if (std::optional<Tensor> value = values.next(binding))
      all[binding.name] = std::move(*value);
  return all;
}

} // namespace ztc::rt
