//===- Compile.cpp - ONNX model to a ztc artifact -------------------------===//
//
// Runs one pipeline of passes/Pipelines on the imported model, prints the
// entries it built, and converts the emitter's interface into the runtime's
// manifest, reading parameter values from the ONNX model and constant
// values from the IR.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Compile.h"
#include "tools/ztc/MemoryReport.h"

#include "passes/Passes.h"
#include "passes/Pipelines/Pipelines.h"
#include "runtime/kernels/Nf4.h"
#include "runtime/kernels/Random.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

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

/// Imports the model and runs `build`'s pipeline on it.
OwningOpRef<ModuleOp> compileModule(MLIRContext &context, StringRef modelPath,
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

namespace {

/// Element i of `tensor` (the whole tensor) is -bound + 2 bound u_i, u_i
/// the i-th uniform draw of the attribute's seed (train.initial_uniform).
LogicalResult fillUniform(rt::Tensor &tensor, DictionaryAttr uniform) {
  double bound = uniform.getAs<FloatAttr>("bound").getValueAsDouble();
  uint64_t base = ::ztc::random::streamBase(
      uint64_t(uniform.getAs<IntegerAttr>("seed").getInt()), 0);
  size_t count = size_t(tensor.numElements());
  for (size_t at = 0; at < count; ++at) {
    double value =
        -bound + 2.0 * bound * double(::ztc::random::uniformAt(base, at));
    if (tensor.dtype == rt::DType::Float32)
      tensor.data<float>()[at] = float(value);
    else if (tensor.dtype == rt::DType::Float64)
      tensor.data<double>()[at] = value;
    else
      return failure();
  }
  return success();
}

} // namespace

LogicalResult mlir::ztc::emitArtifact(ModuleOp module, codegen::Target target,
                                      ArtifactContents &artifact) {
  SmallVector<codegen::Entry> entries;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    entries.push_back(codegen::Entry{func, "ztc_" + func.getSymName().str()});
  if (entries.empty())
    return module.emitError("the module has no entry to emit");
  std::vector<codegen::StepInterface> steps;
  codegen::SharedInterface shared;
  llvm::raw_string_ostream source(artifact.source);
  if (failed(codegen::emitSteps(entries, target, source, steps, shared)))
    return failure();

  rt::Manifest &manifest = artifact.manifest;
  manifest.target = target;
  manifest.source = rt::targetInfo(target).sourceName;
  for (const codegen::StepInterface &step : steps) {
    manifest.arenaBytes =
        std::max<uint64_t>(manifest.arenaBytes, step.arenaBytes);
    manifest.streams = std::max<uint64_t>(manifest.streams, step.streams);
    manifest.events = std::max<uint64_t>(manifest.events, step.events);
  }
  manifest.bindings = shared.bindings;
  manifest.finiteChecks = shared.finiteChecks;
  for (auto [entry, step] : llvm::zip(entries, steps)) {
    llvm::append_range(manifest.dist.collectives, step.collectives);
    func::FuncOp func = entry.func;
    if (auto world =
            func->getAttrOfType<IntegerAttr>(dist::DistDialect::kWorldSizeAttr))
      manifest.dist.worldSize = world.getInt();
    if (auto stage =
            func->getAttrOfType<IntegerAttr>(dist::DistDialect::kZeroStageAttr))
      manifest.dist.zeroStage = static_cast<unsigned>(stage.getInt());
  }
  for (const rt::Binding &binding : manifest.bindings)
    if (binding.role == rt::BindingRole::Constant) {
      rt::Tensor tensor(binding.dtype, binding.shape);
      tensor.bytes = constantBytes(shared.constants.at(binding.name));
      artifact.initialValues[binding.name] = std::move(tensor);
    }

  // Bindings whose first value is not zero and not the model's: a state's
  // splat (train.initial: the dynamic loss scale), or a param's uniform
  // random values (train.initial_uniform: ztc-lora's adapters), made whole;
  // a shard is a block of them.
  for (const codegen::Entry &entry : entries)
    for (unsigned i = 0, e = func::FuncOp(entry.func).getNumArguments(); i < e;
         ++i) {
      func::FuncOp func = entry.func;
      auto initial =
          func.getArgAttrOfType<DenseElementsAttr>(i, train::kInitialAttr);
      auto uniform =
          func.getArgAttrOfType<DictionaryAttr>(i, train::kInitialUniformAttr);
      StringRef name = train::bindingName(func, i);
      if ((!initial && !uniform) || artifact.initialValues.count(name.str()))
        continue;
      auto binding =
          llvm::find_if(manifest.bindings, [&](const rt::Binding &binding) {
            return binding.name == name;
          });
      if (binding == manifest.bindings.end())
        continue;
      rt::Tensor tensor(binding->dtype, binding->sharded() ? binding->fullShape
                                                           : binding->shape);
      if (initial) {
        std::vector<uint8_t> element = constantBytes(initial);
        size_t width = element.size() / size_t(initial.getNumElements());
        for (size_t at = 0; at + width <= tensor.bytes.size(); at += width)
          std::memcpy(tensor.bytes.data() + at, element.data(), width);
      } else if (failed(fillUniform(tensor, uniform))) {
        return func.emitError("param '")
               << name << "' starts from random values but is not f32 or f64";
      }
      artifact.initialValues[name.str()] = std::move(tensor);
    }

  // QLoRA: weights whose model value is quantized when it is read.
  for (const codegen::Entry &entry : entries) {
    func::FuncOp func = entry.func;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (auto shape =
              func.getArgAttrOfType<DenseI64ArrayAttr>(i, train::kNf4Attr))
        artifact.nf4Weights[train::bindingName(func, i).str()] = {shape[0],
                                                                  shape[1]};
  }

  // The manifest's entries: the main one (forward, train_step, or loss for
  // a gradient check), the gradient entry and the accumulation entry.
  for (auto [entry, step] : llvm::zip(entries, steps)) {
    std::optional<rt::EntryPurpose> purpose =
        rt::parsePurpose(train::entryKind(entry.func).str());
    if (!purpose)
      return entry.func.emitError("function '")
             << entry.func.getSymName()
             << "' is not an entry (train.entry); run ztc-build-entries";
    manifest.entries.push_back(
        {entry.name, *purpose, step.outputs, uint64_t(step.arenaBytes)});
  }
  // The main entry first: the one a run or a training step calls.
  auto isMain = [](const rt::Entry &entry) {
    return entry.purpose == rt::EntryPurpose::Forward ||
           entry.purpose == rt::EntryPurpose::TrainStep ||
           entry.purpose == rt::EntryPurpose::Loss;
  };
  auto main = llvm::find_if(manifest.entries, isMain);
  if (main == manifest.entries.end())
    return module.emitError("the module has no forward, train_step or loss "
                            "entry");
  std::rotate(manifest.entries.begin(), main, main + 1);
  // The interface the step is compiled for, which the loader checks the
  // manifest against.
  source << "extern \"C\" const unsigned long long " << rt::kInterfaceHashSymbol
         << " = " << llvm::format_hex(rt::interfaceHash(manifest), 18)
         << "ull;\n";
  return success();
}

/// The four parts of an NF4 weight (runtime/kernels/Nf4.h) from the
/// model's float32 value of `shape`, as initial values of `name` and its
/// parts' bindings.
static LogicalResult quantizeNf4(MLIRContext &context, StringRef name,
                                 StringRef bytes, std::array<int64_t, 2> shape,
                                 ArtifactContents &artifact) {
  namespace nf4 = ::ztc::nf4;
  namespace blockwise8bit = ::ztc::blockwise8bit;
  const int64_t n = shape[0] * shape[1], blocks = nf4::blocksOf(n);
  if (bytes.size() != size_t(n) * sizeof(float))
    return emitError(UnknownLoc::get(&context),
                     "--base-dtype nf4: the model's '")
           << name << "' is not " << shape[0] << "x" << shape[1]
           << " float32 values (" << bytes.size() << " bytes)";
  std::vector<float> weight(size_t(n), 0.0f);
  std::memcpy(weight.data(), bytes.data(), bytes.size());
  nf4::PartElements elements = nf4::partElements(n);
  rt::Tensor packed(rt::DType::Int8, {nf4::packedBytes(n)});
  rt::Tensor codes(rt::DType::Int8, {elements.absmax});
  rt::Tensor nested(rt::DType::Float32, {elements.nestedAbsmax});
  rt::Tensor offset(rt::DType::Float32, {elements.offset});
  std::vector<float> scales(static_cast<size_t>(blocks));
  nf4::quantize(weight.data(), n, packed.bytes.data(), scales.data());
  float mean = nf4::meanOf(scales.data(), blocks);
  const blockwise8bit::CodeTable &table = blockwise8bit::codeTable(true);
  nf4::quantizeScales(scales.data(), blocks, mean, table, codes.bytes.data(),
                      reinterpret_cast<float *>(nested.bytes.data()));
  std::memcpy(offset.bytes.data(), &mean, sizeof(float));
  rt::Tensor *parts[] = {&codes, &nested, &offset};
  artifact.initialValues[name.str()] = std::move(packed);
  for (auto [suffix, part] : llvm::zip(nf4::kPartSuffixes, parts))
    artifact.initialValues[(name + suffix).str()] = std::move(*part);
  return success();
}

LogicalResult mlir::ztc::readParameterValues(MLIRContext &context,
                                             StringRef modelPath,
                                             ArtifactContents &artifact) {
  llvm::StringMap<const rt::Binding *> params;
  for (const rt::Binding &binding : artifact.manifest.bindings)
    if (rt::isWeight(binding.role))
      params[binding.name] = &binding;
  return onnx::readInitializers(
      context, modelPath,
      [&](StringRef name, StringRef bytes) -> LogicalResult {
        auto it = params.find(name);
        if (it == params.end())
          return success();
        if (auto nf4 = artifact.nf4Weights.find(name.str());
            nf4 != artifact.nf4Weights.end())
          return quantizeNf4(context, name, bytes, nf4->second, artifact);
        // A shard's initial value is the whole tensor (Runner takes a
        // rank's block).
        rt::Tensor tensor(it->second->dtype, it->second->sharded()
                                                 ? it->second->fullShape
                                                 : it->second->shape);
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
      compileModule(context, modelPath, options, [&](OpPassManager &pm) {
        buildForwardPipeline(pm, KernelLoweringOptions::forTarget(target));
      });
  if (!module || failed(emitArtifact(*module, target, artifact)))
    return failure();
  return readParameterValues(context, modelPath, artifact);
}

OwningOpRef<ModuleOp>
mlir::ztc::planTraining(MLIRContext &context, StringRef modelPath,
                        const onnx::ImportOptions &importOptions,
                        const TrainingPipelineOptions &options) {
  return compileModule(
      context, modelPath, importOptions,
      [&](OpPassManager &pm) { buildTrainingPipeline(pm, options); });
}

LogicalResult
mlir::ztc::compileTraining(MLIRContext &context, StringRef modelPath,
                           const onnx::ImportOptions &importOptions,
                           const TrainingPipelineOptions &options,
                           codegen::Target target, ArtifactContents &artifact,
                           llvm::raw_ostream *kernelIR) {
  OwningOpRef<ModuleOp> module =
      planTraining(context, modelPath, importOptions, options);
  if (!module)
    return failure();
  if (kernelIR)
    *kernelIR << *module << "\n";
  FailureOr<MemoryReport> memory = buildMemoryReport(*module);
  if (failed(memory))
    return failure();
  artifact.plannedBytes = memory->total();
  for (const MemoryReport::Weight &weight : memory->weights)
    if (weight.role == "frozen")
      artifact.frozenParams.insert(weight.name);
  llvm::raw_string_ostream memoryJson(artifact.memoryReport);
  memoryJson << llvm::formatv("{0:2}", memoryReportToJson(*memory)) << "\n";
  // The loss the pipeline chose (`auto` resolved) and the classes its
  // labels index.
  std::string lossKind = spell(kLossKinds, options.loss.getValue()).str();
  uint64_t classes = 0;
  if (auto step = module->lookupSymbol<func::FuncOp>("train_step")) {
    if (auto built = step->getAttrOfType<StringAttr>(train::kLossAttr))
      lossKind = built.str();
    if (auto count = step->getAttrOfType<IntegerAttr>(train::kClassesAttr))
      classes = count.getInt();
  }
  if (failed(emitArtifact(*module, target, artifact)) ||
      failed(readParameterValues(context, modelPath, artifact)))
    return failure();

  SmallString<256> absolute(modelPath);
  llvm::sys::fs::make_absolute(absolute);
  artifact.sourceModel = absolute.str().str();
  rt::Manifest &manifest = artifact.manifest;
  manifest.kind = rt::ArtifactKind::Train;
  rt::TrainConfig &config = manifest.train;
  // The canonical name (adamw_bnb_8bit is adamw8bit).
  StringRef optimizer = spell(kOptimizerKinds, options.optimizer.getValue());
  config.optimizer = optimizer.str();
  config.loss = lossKind;
  config.schedule = options.scheduleConfig();
  config.batchSize = importOptions.batchSize;
  config.gradAccum = options.gradAccum;
  config.precision = spell(kPrecisions, options.precision.getValue()).str();
  config.classes = classes;
  // What the step compiles in, for ztc-train --config to check (which
  // compares numbers as numbers): each double to the last bit.
  auto number = [](double value) {
    return llvm::formatv("{0}", llvm::format("%.17g", value)).str();
  };
  std::map<std::string, std::string> &flags = config.compiledFlags;
  flags["weight-decay"] =
      number(options.weightDecay >= 0 ? double(options.weightDecay)
                                      : train::defaultWeightDecay(optimizer));
  flags["clip-grad-norm"] = number(options.clipGradNorm);
  if (options.optimizer == OptimizerKind::Sgd) {
    flags["momentum"] = number(options.momentum);
    flags["nesterov"] = options.nesterov ? "true" : "false";
  } else {
    auto [beta1, beta2] = options.adamBetas();
    flags["betas"] = number(beta1) + "," + number(beta2);
    flags["eps"] = number(options.eps);
  }
  if (options.precision == Precision::Fp16) {
    flags["loss-scale"] = number(options.lossScale);
    flags["initial-scale-power"] = std::to_string(options.initialScalePower);
    flags["loss-scale-window"] = std::to_string(options.lossScaleWindow);
    flags["hysteresis"] = std::to_string(options.hysteresis);
    flags["consecutive-hysteresis"] =
        options.consecutiveHysteresis ? "true" : "false";
    flags["min-loss-scale"] = number(options.minLossScale);
  }
  if (lossKind == "cross_entropy")
    config.ignoreIndex = options.ignoreIndex;
  // ztc-lora's adapters (train.lora, on each entry built from the model).
  for (func::FuncOp func : module->getOps<func::FuncOp>()) {
    auto lora = func->getAttrOfType<DictionaryAttr>(train::kLoraAttr);
    if (!lora)
      continue;
    rt::LoraConfig &out = config.lora.emplace();
    out.r = lora.getAs<IntegerAttr>("r").getInt();
    out.alpha = lora.getAs<FloatAttr>("alpha").getValueAsDouble();
    out.scale = lora.getAs<FloatAttr>("scale").getValueAsDouble();
    if (auto dropout = lora.getAs<FloatAttr>("dropout"))
      out.dropout = dropout.getValueAsDouble();
    if (auto rslora = lora.getAs<BoolAttr>("rslora"))
      out.rslora = rslora.getValue();
    if (auto bias = lora.getAs<StringAttr>("bias"))
      out.bias = bias.str();
    for (auto adapter :
         lora.getAs<ArrayAttr>("adapters").getAsRange<ArrayAttr>()) {
      auto field = [&](unsigned i) {
        return cast<StringAttr>(adapter[i]).str();
      };
      out.adapters.push_back({field(0), field(1), field(2), field(3)});
    }
    break;
  }
  // The memory report read ztc-recompute's figures (train.recompute).
  if (const std::optional<MemoryReport::Recompute> &figures =
          memory->recompute) {
    config.recompute = rt::RecomputeReport{
        memory->policy, figures->savedBytes, figures->baselineSavedBytes,
        figures->recomputeFlops, figures->stepFlops};
    if (figures->budgetBytes)
      artifact.recomputeBudget = llvm::formatv(
          "budget {0} bytes, planned {1} bytes; chosen: {2}",
          figures->budgetBytes, memory->total(), figures->budgetPlan);
  }
  return success();
}
