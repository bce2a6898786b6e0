//===- Artifact.cpp - a compiled model on disk ----------------------------===//
//
// Manifest parsing is strict about what the runtime uses (a wrong field is a
// compiler bug better caught here than as a crash in generated code) and
// ignores fields it does not use (memory-plan breakdown, training config).
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"

#include "runtime/Error.h"
#include "runtime/File.h"
#include "runtime/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <set>

#include <dlfcn.h>

namespace ztc::rt {

namespace {

using nlohmann::json;

const char *roleName(BindingRole role) {
  switch (role) {
  case BindingRole::Input:
    return "input";
  case BindingRole::Param:
    return "param";
  case BindingRole::Constant:
    return "constant";
  }
  return "?";
}

/// Reads typed fields of one JSON object, with errors naming `where`.
class ObjectReader {
public:
  ObjectReader(const json &object, std::string path, std::string where)
      : object_(object), path_(std::move(path)), where_(std::move(where)) {
    if (!object_.is_object())
      fail("is not an object");
  }

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path_ + ": " + where_ + " " + what);
  }

  const json &get(const char *key) const {
    auto it = object_.find(key);
    if (it == object_.end())
      fail(std::string("has no field '") + key + "'");
    return *it;
  }

  bool has(const char *key) const { return object_.contains(key); }

  std::string string(const char *key) const {
    const json &value = get(key);
    if (!value.is_string())
      fail(std::string("field '") + key + "' is not a string");
    return value.get<std::string>();
  }

  uint64_t unsignedInt(const char *key) const {
    const json &value = get(key);
    if (!value.is_number_unsigned())
      fail(std::string("field '") + key + "' is not a non-negative integer");
    return value.get<uint64_t>();
  }

  DType dtype() const {
    std::string name = string("dtype");
    std::optional<DType> dtype = parseDType(name);
    if (!dtype)
      fail("has unknown dtype '" + name + "'");
    return *dtype;
  }

  std::vector<int64_t> shape() const {
    const json &value = get("shape");
    if (!value.is_array())
      fail("field 'shape' is not an array");
    std::vector<int64_t> shape;
    for (const json &dim : value) {
      if (!dim.is_number_unsigned())
        fail("field 'shape' has a non-integer or negative entry");
      shape.push_back(dim.get<int64_t>());
    }
    return shape;
  }

  /// The "file" field, or the stem derived from `name`; must be a plain stem.
  std::string file(const std::string &name) const {
    std::string file = has("file") ? string("file") : fileStemFor(name);
    if (file.empty() || file != fileStemFor(file) || file == "." ||
        file == "..")
      fail("has invalid file stem '" + file + "'");
    return file;
  }

private:
  const json &object_;
  std::string path_;
  std::string where_;
};

/// "binding 3 ('fc1.weight')": how errors name an array entry.
std::string entryName(const char *kind, size_t index, const json &entry) {
  std::string name = std::string(kind) + " " + std::to_string(index);
  if (entry.is_object() && entry.contains("name") && entry["name"].is_string())
    name += " ('" + entry["name"].get<std::string>() + "')";
  return name;
}

size_t byteSizeOf(DType dtype, const std::vector<int64_t> &shape) {
  return static_cast<size_t>(
      checkedByteSize(shape, dtypeSize(dtype)).value_or(0));
}

} // namespace

size_t Binding::byteSize() const { return byteSizeOf(dtype, shape); }
size_t Output::byteSize() const { return byteSizeOf(dtype, shape); }

std::string fileStemFor(const std::string &name) {
  std::string stem = name;
  for (char &c : stem) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!keep)
      c = '_';
  }
  return stem;
}

Manifest parseManifest(const std::string &text, const std::string &path) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &error) {
    throw Error(path + ": invalid JSON: " + error.what());
  }
  ObjectReader top(root, path, "manifest");
  Manifest manifest;
  uint64_t format = top.unsignedInt("format");
  if (format != static_cast<uint64_t>(kManifestFormat))
    top.fail("has format " + std::to_string(format) + "; this runtime reads " +
             std::to_string(kManifestFormat));
  std::string target = top.string("target");
  if (!parseTarget(target))
    top.fail("has unknown target '" + target + "'");
  manifest.target = *parseTarget(target);
  manifest.entry = top.string("entry");
  manifest.source = top.string("source");
  manifest.arenaBytes = top.unsignedInt("arena_bytes");

  const json &bindings = top.get("bindings");
  const json &outputs = top.get("outputs");
  if (!bindings.is_array() || !outputs.is_array())
    top.fail("fields 'bindings' and 'outputs' must be arrays");

  std::set<std::string> inputFiles, outputFiles;
  for (size_t i = 0; i < bindings.size(); ++i) {
    ObjectReader reader(bindings[i], path,
                        entryName("binding", i, bindings[i]));
    Binding binding;
    std::string role = reader.string("role");
    if (role == "input")
      binding.role = BindingRole::Input;
    else if (role == "param")
      binding.role = BindingRole::Param;
    else if (role == "constant")
      binding.role = BindingRole::Constant;
    else
      reader.fail("has unknown role '" + role + "'");
    binding.name = reader.string("name");
    binding.dtype = reader.dtype();
    binding.shape = reader.shape();
    if (!checkedByteSize(binding.shape, dtypeSize(binding.dtype)))
      reader.fail("has a shape too large to allocate");
    if (binding.role == BindingRole::Input) {
      binding.file = reader.file(binding.name);
      if (!inputFiles.insert(binding.file).second)
        reader.fail("reuses input file '" + binding.file + ".npy'");
    }
    manifest.bindings.push_back(std::move(binding));
  }

  for (size_t i = 0; i < outputs.size(); ++i) {
    ObjectReader reader(outputs[i], path, entryName("output", i, outputs[i]));
    Output output;
    output.name = reader.string("name");
    output.file = reader.file(output.name);
    output.dtype = reader.dtype();
    output.shape = reader.shape();
    output.offset = reader.unsignedInt("offset");
    if (!checkedByteSize(output.shape, dtypeSize(output.dtype)))
      reader.fail("has a shape too large to allocate");
    if (output.offset > manifest.arenaBytes ||
        output.byteSize() > manifest.arenaBytes - output.offset)
      reader.fail("(" + output.describe() + " at offset " +
                  std::to_string(output.offset) + ") lies outside the " +
                  std::to_string(manifest.arenaBytes) + "-byte arena");
    if (!outputFiles.insert(output.file).second)
      reader.fail("reuses output file '" + output.file + ".npy'");
    manifest.outputs.push_back(std::move(output));
  }
  return manifest;
}

std::string printManifest(const Manifest &manifest) {
  json root = {{"format", manifest.format},
               {"target", targetName(manifest.target)},
               {"entry", manifest.entry},
               {"source", manifest.source},
               {"arena_bytes", manifest.arenaBytes}};
  json bindings = json::array();
  for (const Binding &binding : manifest.bindings) {
    json entry = {{"role", roleName(binding.role)},
                  {"name", binding.name},
                  {"dtype", dtypeName(binding.dtype)},
                  {"shape", binding.shape}};
    if (binding.role == BindingRole::Input)
      entry["file"] = binding.file;
    bindings.push_back(std::move(entry));
  }
  json outputs = json::array();
  for (const Output &output : manifest.outputs)
    outputs.push_back({{"name", output.name},
                       {"file", output.file},
                       {"dtype", dtypeName(output.dtype)},
                       {"shape", output.shape},
                       {"offset", output.offset}});
  root["bindings"] = std::move(bindings);
  root["outputs"] = std::move(outputs);
  return root.dump(2) + "\n";
}

Artifact Artifact::load(const std::string &directory) {
  Artifact artifact;
  artifact.directory_ = directory;
  std::string manifestPath = directory + "/manifest.json";
  artifact.manifest_ = parseManifest(readFile(manifestPath), manifestPath);

  std::string soPath = directory + "/step.so";
  // RTLD_LOCAL: two artifacts in one process keep their own symbols.
  // RTLD_NODELETE: the step's OpenMP worker threads outlive the call (they
  // idle in libgomp until exit), so its code and libgomp must stay mapped
  // even after the Artifact is destroyed.
  artifact.handle_ =
      ::dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!artifact.handle_)
    throw Error(soPath + ": cannot load the compiled step: " + ::dlerror());
  ::dlerror();
  void *symbol = ::dlsym(artifact.handle_, artifact.manifest_.entry.c_str());
  if (!symbol) {
    const char *message = ::dlerror();
    throw Error(soPath + ": entry '" + artifact.manifest_.entry +
                "' not found: " + (message ? message : "null symbol"));
  }
  artifact.entry_ = reinterpret_cast<EntryFn>(symbol);
  return artifact;
}

Artifact::Artifact(Artifact &&other) noexcept { *this = std::move(other); }

Artifact &Artifact::operator=(Artifact &&other) noexcept {
  std::swap(directory_, other.directory_);
  std::swap(manifest_, other.manifest_);
  std::swap(handle_, other.handle_);
  std::swap(entry_, other.entry_);
  return *this;
}

Artifact::~Artifact() {
  if (handle_)
    ::dlclose(handle_);
}

std::map<std::string, Tensor> Artifact::loadInitialValues() const {
  bool needed = false;
  for (const Binding &binding : manifest_.bindings)
    needed |= binding.role != BindingRole::Input;
  std::map<std::string, Tensor> values;
  if (!needed)
    return values;
  std::string path = initPath();
  SafeTensors init = readSafeTensors(path);
  for (const Binding &binding : manifest_.bindings) {
    if (binding.role == BindingRole::Input)
      continue;
    auto it = init.tensors.find(binding.name);
    if (it == init.tensors.end())
      throw Error(path + ": no tensor for " + roleName(binding.role) + " '" +
                  binding.name + "' (" + binding.describe() + ")");
    const Tensor &value = it->second;
    if (value.dtype != binding.dtype || value.shape != binding.shape)
      throw Error(path + ": " + roleName(binding.role) + " '" + binding.name +
                  "': expected " + binding.describe() + ", got " +
                  value.describe());
    values[binding.name] = std::move(it->second);
  }
  return values;
}

} // namespace ztc::rt
