//===- Artifact.h - a compiled model on disk --------------------*- C++ -*-===//
//
// An artifact directory (model.ztc/) holds manifest.json
// (runtime/io/Manifest.h: what the compiled step expects), the step's source
// (step.cpp or step.cu) with the command this machine built it with
// (step.build), step.so (the compiled step; rebuilt from the source when
// absent) and init.safetensors (parameter and constant values, by name). This
// file loads the shared object, resolves its entries, and reads the initial
// values. Errors throw ztc::rt::Error naming the file.
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_ARTIFACT_H
#define ZTC_RUNTIME_ARTIFACT_H

#include "runtime/Tensor.h"
#include "runtime/backend/Backend.h"
#include "runtime/io/Manifest.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

class SafeTensorsReader;
struct SafeTensorsEntry;

/// Compiles the step source of the artifact in `directory` (its manifest's
/// `source`) for the manifest's target with this machine's compiler,
/// cached under defaultCacheDir(), and places the result as
/// `directory`/step.so.
void buildStep(const std::string &directory, const Manifest &manifest);

/// A loaded artifact: manifest parsed, step.so opened, entry resolved.
class Artifact {
public:
  /// Loads `directory`/manifest.json and `directory`/step.so, resolving
  /// every entry and checking the step ABI version. An artifact shipped
  /// without step.so (`ztc compile --no-build`) is built first (buildStep).
  static Artifact load(const std::string &directory);

  Artifact(Artifact &&other) noexcept;
  Artifact &operator=(Artifact &&other) noexcept;
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;
  ~Artifact();

  const std::string &directory() const { return directory_; }
  const Manifest &manifest() const { return manifest_; }
  /// The main entry (forward, train_step or loss).
  EntryFn entry() const { return entry_; }
  /// The entry for `purpose`, null when the manifest lists none.
  EntryFn entry(EntryPurpose purpose) const;
  /// entry(LossAndGrads) and entry(Accumulate).
  EntryFn gradEntry() const { return entry(EntryPurpose::LossAndGrads); }
  EntryFn accumEntry() const { return entry(EntryPurpose::Accumulate); }
  std::string initPath() const { return directory_ + "/init.safetensors"; }

  /// Reads init.safetensors and returns the value of every param and
  /// constant binding, and of each state binding it has a value for,
  /// checked against the manifest's dtype and shape; with `constantsOnly`
  /// (the step of a sequence bucket, whose params are the main one's), of
  /// every constant only.
  std::map<std::string, Tensor>
  loadInitialValues(bool constantsOnly = false) const;

  /// The same values one at a time, for callers that hold each only while
  /// they copy it (the runner: memory then holds the bindings and one
  /// tensor, not the whole file besides). Opens init.safetensors when a
  /// binding needs it; `next(binding)` is the binding's checked value, or
  /// nullopt when it has none (data, hypers, a state the file lacks).
  class InitialValues {
  public:
    InitialValues(const Artifact &artifact, bool constantsOnly);
    ~InitialValues();
    std::optional<Tensor> next(const Binding &binding);
    /// The same value handed to `sink(offset, bytes, count)` in pieces of
    /// at most 16 MiB, so that no whole copy of it exists; false (and no
    /// call) when the binding has none. Not for a sharded binding, whose
    /// runner keeps the whole value.
    bool
    stream(const Binding &binding,
           const std::function<void(uint64_t, const void *, uint64_t)> &sink);

  private:
    /// The binding's entry in the file, checked; null when it has none.
    const SafeTensorsEntry *find(const Binding &binding);

    const Artifact &artifact_;
    bool constantsOnly_;
    std::unique_ptr<SafeTensorsReader> init_;
  };

private:
  Artifact() = default;

  std::string directory_;
  Manifest manifest_;
  void *handle_ = nullptr;
  EntryFn entry_ = nullptr;
  /// One per manifest entry, in its order.
  std::vector<EntryFn> entries_;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_ARTIFACT_H
