//===- Artifact.h - a compiled model on disk --------------------*- C++ -*-===//
//
// An artifact directory (model.ztc/) holds manifest.json (what the compiled
// step expects: bindings in entry order, outputs as arena offsets, the arena
// size), step.so (the compiled step) and init.safetensors (parameter and
// constant values, by name). This file parses the manifest, loads the shared
// object and resolves its entry, and reads the initial values. Errors throw
// ztc::rt::Error naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_ARTIFACT_H
#define ZTC_RUNTIME_ARTIFACT_H

#include "runtime/Backend.h"
#include "runtime/Compile.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ztc::rt {

/// The manifest format this runtime reads.
constexpr int kManifestFormat = 1;

/// What a binding of the entry's `bindings` array holds.
enum class BindingRole { Input, Param, Constant };

/// One pointer of the entry's `bindings` array.
struct Binding {
  BindingRole role = BindingRole::Input;
  /// The ONNX name (params and constants: the key in init.safetensors).
  std::string name;
  /// Inputs only: the data file stem, `<dataDir>/<file>.npy`.
  std::string file;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;

  size_t byteSize() const;
  std::string describe() const { return describeType(dtype, shape); }
};

/// A result, read from the arena after the call.
struct Output {
  std::string name;
  /// The output file stem, `<outputDir>/<file>.npy`.
  std::string file;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  /// Byte offset into the arena.
  uint64_t offset = 0;

  size_t byteSize() const;
  std::string describe() const { return describeType(dtype, shape); }
};

/// manifest.json.
struct Manifest {
  int format = kManifestFormat;
  Target target = Target::Cpu;
  std::string entry = "ztc_forward";
  std::string source = "step.cpp";
  uint64_t arenaBytes = 0;
  std::vector<Binding> bindings;
  std::vector<Output> outputs;
};

/// Parses manifest JSON text; `path` names it in errors. Checks field types,
/// dtypes, shapes, unique file stems, and that outputs lie in the arena.
Manifest parseManifest(const std::string &text, const std::string &path);

/// Serializes `manifest` (the compiler's side; also used by tests).
std::string printManifest(const Manifest &manifest);

/// The file stem for an ONNX name: every character outside [A-Za-z0-9._-]
/// becomes '_'.
std::string fileStemFor(const std::string &name);

/// A loaded artifact: manifest parsed, step.so opened, entry resolved.
class Artifact {
public:
  /// Loads `directory`/manifest.json and `directory`/step.so.
  static Artifact load(const std::string &directory);

  Artifact(Artifact &&other) noexcept;
  Artifact &operator=(Artifact &&other) noexcept;
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;
  ~Artifact();

  const std::string &directory() const { return directory_; }
  const Manifest &manifest() const { return manifest_; }
  EntryFn entry() const { return entry_; }
  std::string initPath() const { return directory_ + "/init.safetensors"; }

  /// Reads init.safetensors and returns the value of every param and
  /// constant binding, checked against the manifest's dtype and shape.
  std::map<std::string, Tensor> loadInitialValues() const;

private:
  Artifact() = default;

  std::string directory_;
  Manifest manifest_;
  void *handle_ = nullptr;
  EntryFn entry_ = nullptr;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_ARTIFACT_H
