//===- Compile.cpp - ONNX model to a ztc artifact -----------------*- C++
//-*-===//
//
// Runs one pipeline of passes/Pipelines on the imported model, prints the
// entries it built, and converts the emitter's interface into the runtime's
// manifest, reading parameter values from the ONNX model and constant
// values from the IR.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Compile.h"

#include "passes/Passes.h"
#include "passes/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::ztc;
namespace rt = ::ztc::rt;

/// The little-endian bytes of a constant, one byte per bool.
std::vector<uint8_t> mlir::ztc::constantBytes(ElementsAttr value) {
  auto dense = cast<DenseElementsAttr>(value);
  Type elem = dense.getElementType();
  std::vector<uint8_t> bytes;
  if (elem.isInteger(1)) {
    for (bool bit : dense.getValues<bool>())
      bytes.push_back(bit);
    return bytes;
  }
  size_t width = elem.getIntOrFloatBitWidth() / 8;
  ArrayRef<char> raw = dense.getRawData();
  int64_t count = dense.getNumElements();
  bytes.resize(count * width);
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(bytes.data() + i * width,
                raw.data() + (dense.isSplat() ? 0 : i * width), width);
  return bytes;
}

namespace {

rt::BindingRole toRole(codegen::Binding::Role role) {
  switch (role) {
  case codegen::Binding::Role::Input:
    return rt::BindingRole::Input;
  case codegen::Binding::Role::Param:
    return rt::BindingRole::Param;
  case codegen::Binding::Role::State:
    return rt::BindingRole::State;
  case codegen::Binding::Role::Hyper:
    return rt::BindingRole::Hyper;
  case codegen::Binding::Role::Constant:
    return rt::BindingRole::Constant;
  }
  return rt::BindingRole::Input;
}

/// The runtime's element type named `name`; an error at `func` when the
/// runtime has none (never a silent default).
FailureOr<rt::DType> toDType(func::FuncOp func, const std::string &name,
                             const std::string &what) {
  if (std::optional<rt::DType> dtype = rt::parseDType(name))
    return *dtype;
  return func.emitError(what) << " has an element type the runtime does not "
                                 "support ('"
                              << name << "')";
}

FailureOr<std::vector<rt::Output>>
toOutputs(func::FuncOp func, const std::vector<codegen::Output> &outputs) {
  std::vector<rt::Output> result;
  for (const codegen::Output &output : outputs) {
    rt::Output entry;
    entry.name = output.name;
    entry.file = rt::fileStemFor(output.name);
    FailureOr<rt::DType> dtype =
        toDType(func, output.dtype, "output '" + output.name + "'");
    if (failed(dtype))
      return failure();
    entry.dtype = *dtype;
    entry.shape = output.shape;
    entry.offset = output.offset;
    result.push_back(std::move(entry));
  }
  return result;
}

/// Imports the model and runs `build`'s pipeline on it.
OwningOpRef<ModuleOp>
compileModule(MLIRContext &context, StringRef modelPath,
              const onnx::ImportOptions &options,
              function_ref<void(OpPassManager &)> build) {
  OwningOpRef<ModuleOp> module =
      onnx::importOnnxFile(context, modelPath, options);
  if (!module)
    return nullptr;
  PassManager pm(&context);
  build(pm);
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

} // namespace

LogicalResult mlir::ztc::emitArtifact(ModuleOp module, codegen::Target target,
                                      ArtifactContents &artifact) {
  SmallVector<codegen::Entry> entries;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    entries.push_back(
        codegen::Entry{func, "ztc_" + func.getSymName().str()});
  if (entries.empty())
    return module.emitError("the module has no entry to emit");
  std::vector<codegen::StepInterface> steps;
  llvm::raw_string_ostream source(artifact.source);
  if (failed(codegen::emitSteps(entries, target, source, steps)))
    return failure();

  rt::Manifest &manifest = artifact.manifest;
  manifest.target =
      target == codegen::Target::Cuda ? rt::Target::Cuda : rt::Target::Cpu;
  manifest.source = target == codegen::Target::Cuda ? "step.cu" : "step.cpp";
  for (const codegen::StepInterface &step : steps)
    manifest.arenaBytes =
        std::max<uint64_t>(manifest.arenaBytes, step.arenaBytes);
  func::FuncOp first = entries.front().func;
  for (const codegen::Binding &binding : steps.front().bindings) {
    rt::Binding entry;
    entry.name = binding.name;
    entry.file = rt::fileStemFor(binding.name);
    FailureOr<rt::DType> dtype =
        toDType(first, binding.dtype, "binding '" + binding.name + "'");
    if (failed(dtype))
      return failure();
    entry.dtype = *dtype;
    entry.shape = binding.shape;
    entry.role = toRole(binding.role);
    if (binding.role == codegen::Binding::Role::Constant) {
      rt::Tensor tensor(entry.dtype, entry.shape);
      tensor.bytes = constantBytes(binding.value);
      artifact.initialValues[binding.name] = std::move(tensor);
    }
    manifest.bindings.push_back(std::move(entry));
  }

  // The manifest's entries: the main one (forward, train_step, or loss for
  // a gradient check), the gradient entry and the accumulation entry.
  for (auto [entry, step] : llvm::zip(entries, steps)) {
    FailureOr<std::vector<rt::Output>> outputs =
        toOutputs(entry.func, step.outputs);
    if (failed(outputs))
      return failure();
    StringRef kind = train::entryKind(entry.func);
    if (kind == "forward" || kind == "train_step" || kind == "loss") {
      manifest.entry = entry.name;
      manifest.outputs = std::move(*outputs);
    } else if (kind == "loss_and_grads") {
      manifest.gradEntry = entry.name;
      manifest.gradOutputs = std::move(*outputs);
    } else if (kind == "accumulate") {
      manifest.accumEntry = entry.name;
      manifest.accumOutputs = std::move(*outputs);
    } else {
      return entry.func.emitError("function '")
             << entry.func.getSymName()
             << "' is not an entry (train.entry); run ztc-build-entries";
    }
  }
  if (manifest.entry.empty())
    return module.emitError("the module has no forward, train_step or loss "
                            "entry");
  return success();
}

LogicalResult mlir::ztc::readParameterValues(MLIRContext &context,
                                             StringRef modelPath,
                                             ArtifactContents &artifact) {
  llvm::StringMap<const rt::Binding *> params;
  for (const rt::Binding &binding : artifact.manifest.bindings)
    if (binding.role == rt::BindingRole::Param)
      params[binding.name] = &binding;
  return onnx::readInitializers(
      context, modelPath, [&](StringRef name, StringRef bytes) {
        auto it = params.find(name);
        if (it == params.end())
          return success();
        rt::Tensor tensor(it->second->dtype, it->second->shape);
        tensor.bytes.assign(bytes.begin(), bytes.end());
        artifact.initialValues[name.str()] = std::move(tensor);
        return success();
      });
}

LogicalResult mlir::ztc::compileForward(MLIRContext &context,
                                        StringRef modelPath,
                                        const onnx::ImportOptions &options,
                                        codegen::Target target,
                                        ArtifactContents &artifact) {
  OwningOpRef<ModuleOp> module =
      compileModule(context, modelPath, options, buildForwardPipeline);
  if (!module || failed(emitArtifact(*module, target, artifact)))
    return failure();
  return readParameterValues(context, modelPath, artifact);
}

LogicalResult mlir::ztc::compileTraining(
    MLIRContext &context, StringRef modelPath,
    const onnx::ImportOptions &importOptions,
    const TrainingPipelineOptions &options, codegen::Target target,
    ArtifactContents &artifact, llvm::raw_ostream *kernelIR) {
  OwningOpRef<ModuleOp> module = compileModule(
      context, modelPath, importOptions,
      [&](OpPassManager &pm) { buildTrainingPipeline(pm, options); });
  if (!module)
    return failure();
  if (kernelIR)
    *kernelIR << *module << "\n";
  // The loss the pipeline chose (`auto` resolved).
  std::string lossKind = options.loss;
  if (auto step = module->lookupSymbol<func::FuncOp>("train_step"))
    if (auto built = step->getAttrOfType<StringAttr>(train::kLossAttr))
      lossKind = built.str();
  if (failed(emitArtifact(*module, target, artifact)) ||
      failed(readParameterValues(context, modelPath, artifact)))
    return failure();

  SmallString<256> absolute(modelPath);
  llvm::sys::fs::make_absolute(absolute);
  artifact.sourceModel = absolute.str().str();
  rt::Manifest &manifest = artifact.manifest;
  manifest.kind = rt::ArtifactKind::Train;
  rt::TrainConfig &config = manifest.train;
  config.optimizer = options.optimizer;
  config.loss = lossKind;
  config.schedule.kind = *rt::parseScheduleKind(options.lrSchedule);
  config.schedule.lr = options.lr;
  config.schedule.minLr = options.minLr;
  config.schedule.warmupSteps = options.warmupSteps;
  config.schedule.totalSteps = options.totalSteps;
  config.batchSize = importOptions.batchSize;
  config.gradAccum = options.gradAccum;
  return success();
}
