//===- Compile.cpp - ONNX model to a ztc artifact -----------------*- C++
//-*-===//
//
// Runs the pipelines of passes/Pipelines, prints the step, and converts the
// emitter's interface into the runtime's manifest, reading parameter values
// from the ONNX model and constant values from the IR. A training artifact
// holds two entries: the training step and loss-and-gradients.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Compile.h"

#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
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

static rt::DType toDType(const std::string &name) {
  return rt::parseDType(name).value_or(rt::DType::Float32);
}

rt::BindingRole mlir::ztc::toRole(codegen::Binding::Role role) {
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

std::vector<rt::Output>
mlir::ztc::toOutputs(const std::vector<codegen::Output> &outputs) {
  std::vector<rt::Output> result;
  for (const codegen::Output &output : outputs) {
    rt::Output entry;
    entry.name = output.name;
    entry.file = rt::fileStemFor(output.name);
    entry.dtype = toDType(output.dtype);
    entry.shape = output.shape;
    entry.offset = output.offset;
    result.push_back(std::move(entry));
  }
  return result;
}

namespace {

/// The bytes of every intermediate nn value, each as its own buffer: the
/// baseline the memory plan is measured against.
int64_t intermediateBytes(func::FuncOp func) {
  int64_t bytes = 0;
  func.walk([&](Operation *op) {
    if (isa_and_nonnull<nn::NNDialect>(op->getDialect()))
      for (Type type : op->getResultTypes())
        if (auto tensor = dyn_cast<RankedTensorType>(type))
          bytes += tensor.getNumElements() *
                   ((tensor.getElementTypeBitWidth() + 7) / 8);
  });
  return bytes;
}

/// Imports the model and converts it to nn; returns its step function.
FailureOr<func::FuncOp> importToNN(MLIRContext &context, StringRef modelPath,
                                   const onnx::ImportOptions &options,
                                   OwningOpRef<ModuleOp> &module) {
  module = onnx::importOnnxFile(context, modelPath, options);
  if (!module)
    return failure();
  PassManager pm(&context);
  buildOnnxToNNPipeline(pm);
  if (failed(pm.run(*module)))
    return failure();
  auto funcs = module->getOps<func::FuncOp>();
  if (funcs.empty())
    return module->emitError("the model has no step function");
  return *funcs.begin();
}

/// Lowers every function of the module to planned kernels, prints `entries`
/// and fills the manifest's bindings, outputs and initial values.
LogicalResult lowerAndEmit(MLIRContext &context, ModuleOp module,
                           ArrayRef<codegen::Entry> entries,
                           StringRef modelPath, codegen::Target target,
                           ArtifactContents &artifact,
                           std::vector<codegen::StepInterface> &steps) {
  for (const codegen::Entry &entry : entries)
    entry.func->setAttr(
        "kernel.tensor_bytes",
        Builder(&context).getI64IntegerAttr(intermediateBytes(entry.func)));
  PassManager pm(&context);
  buildNNToKernelPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  llvm::raw_string_ostream source(artifact.source);
  if (failed(codegen::emitSteps(entries, target, source, steps)))
    return failure();

  rt::Manifest &manifest = artifact.manifest;
  manifest.target =
      target == codegen::Target::Cuda ? rt::Target::Cuda : rt::Target::Cpu;
  manifest.source = target == codegen::Target::Cuda ? "step.cu" : "step.cpp";
  manifest.entry = entries.front().name;
  for (const codegen::StepInterface &step : steps)
    manifest.arenaBytes =
        std::max<uint64_t>(manifest.arenaBytes, step.arenaBytes);
  llvm::StringSet<> params;
  for (const codegen::Binding &binding : steps.front().bindings) {
    rt::Binding entry;
    entry.name = binding.name;
    entry.file = rt::fileStemFor(binding.name);
    entry.dtype = toDType(binding.dtype);
    entry.shape = binding.shape;
    entry.role = toRole(binding.role);
    if (binding.role == codegen::Binding::Role::Param)
      params.insert(binding.name);
    if (binding.role == codegen::Binding::Role::Constant) {
      rt::Tensor tensor(entry.dtype, entry.shape);
      tensor.bytes = constantBytes(binding.value);
      artifact.initialValues[binding.name] = std::move(tensor);
    }
    manifest.bindings.push_back(std::move(entry));
  }
  manifest.outputs = toOutputs(steps.front().outputs);

  // Parameter values come straight from the model (weights never pass
  // through the IR).
  return onnx::readInitializers(
      context, modelPath, [&](StringRef name, StringRef bytes) {
        if (!params.contains(name))
          return success();
        rt::Tensor tensor;
        for (const rt::Binding &binding : manifest.bindings)
          if (binding.name == name) {
            tensor.dtype = binding.dtype;
            tensor.shape = binding.shape;
          }
        tensor.bytes.assign(bytes.begin(), bytes.end());
        artifact.initialValues[name.str()] = std::move(tensor);
        return success();
      });
}

/// Gradient accumulation over `microBatches` micro-batches. `step` returns
/// the loss and gradients (train.grad_of). Adds a state `<param>.grad_accum`
/// per gradient to `step` and to a new function `accumulate`, which returns
/// the loss and the accumulators plus its gradients as updates; `step` then
/// hands the optimizer (accumulator + gradient) / microBatches and resets
/// the accumulators to zero.
LogicalResult addGradientAccumulation(func::FuncOp step, unsigned microBatches,
                                      func::FuncOp &accumulate) {
  OpBuilder b(step.getContext());
  accumulate = step.clone();
  accumulate.setName("accumulate");
  step->getBlock()->getParent()->getParentOfType<ModuleOp>().push_back(
      accumulate);
  auto scalar = [&](Location loc, double value) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(value)));
  };
  for (func::FuncOp func : {accumulate, step}) {
    bool isStep = func == step;
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    SmallVector<Value> results = {ret.getOperand(0)};
    SmallVector<DictionaryAttr> attrs = {func.getResultAttrDict(0)};
    SmallVector<std::pair<Value, std::string>> resets;
    unsigned count = func.getNumResults();
    for (unsigned i = 1; i < count; ++i) {
      // State updates (running statistics) happen in every micro-batch.
      if (func.getResultAttr(i, train::kUpdateOfAttr)) {
        results.push_back(ret.getOperand(i));
        attrs.push_back(func.getResultAttrDict(i));
        continue;
      }
      auto of = func.getResultAttrOfType<StringAttr>(i, train::kGradOfAttr);
      if (!of)
        return func.emitError("result ") << i << " is not a gradient";
      std::string name = of.str() + ".grad_accum";
      Value grad = ret.getOperand(i);
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(
              index, grad.getType(),
              b.getDictionaryAttr(
                  {b.getNamedAttr("onnx.name", b.getStringAttr(name)),
                   b.getNamedAttr(train::kStateAttr, b.getUnitAttr())}),
              func.getLoc())))
        return failure();
      b.setInsertionPoint(ret);
      Location loc = grad.getLoc();
      Value sum = nn::AddOp::create(b, loc, func.getArgument(index), grad);
      if (!isStep) {
        results.push_back(sum);
        attrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(train::kUpdateOfAttr, b.getStringAttr(name))));
        continue;
      }
      results.push_back(
          nn::MulOp::create(b, loc, sum, scalar(loc, 1.0 / microBatches)));
      attrs.push_back(func.getResultAttrDict(i));
      auto shape = cast<RankedTensorType>(grad.getType()).getShape();
      resets.emplace_back(
          nn::BroadcastToOp::create(b, loc, scalar(loc, 0.0), shape), name);
    }
    for (auto &[zeros, name] : resets) {
      results.push_back(zeros);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(train::kUpdateOfAttr, b.getStringAttr(name))));
    }
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(attrs);
  }
  return success();
}

} // namespace

void mlir::ztc::addLossAndGradientPasses(OpPassManager &pm,
                                         const TrainingOptions &training) {
  AttachLossPassOptions loss;
  loss.loss = training.loss;
  loss.lossInput = training.lossInput;
  loss.labels = training.labels;
  loss.ignoreIndex = training.ignoreIndex;
  pm.addPass(createAttachLossPass(loss));
  AutodiffPassOptions autodiff;
  autodiff.frozen.assign(training.frozen.begin(), training.frozen.end());
  pm.addPass(createAutodiffPass(autodiff));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

LogicalResult mlir::ztc::compileForward(MLIRContext &context,
                                        StringRef modelPath,
                                        const onnx::ImportOptions &options,
                                        codegen::Target target,
                                        ArtifactContents &artifact) {
  OwningOpRef<ModuleOp> module;
  FailureOr<func::FuncOp> func =
      importToNN(context, modelPath, options, module);
  if (failed(func))
    return failure();
  // Inference returns the model's outputs; running statistics of a
  // training-mode model are not written back.
  train::eraseUpdateResults(*func);
  std::vector<codegen::StepInterface> steps;
  return lowerAndEmit(context, *module, {codegen::Entry{*func, "ztc_forward"}},
                      modelPath, target, artifact, steps);
}

LogicalResult mlir::ztc::compileTraining(MLIRContext &context,
                                         StringRef modelPath,
                                         const onnx::ImportOptions &options,
                                         const TrainingOptions &training,
                                         codegen::Target target,
                                         ArtifactContents &artifact) {
  OwningOpRef<ModuleOp> module;
  FailureOr<func::FuncOp> imported =
      importToNN(context, modelPath, options, module);
  if (failed(imported))
    return failure();
  func::FuncOp step = *imported;

  // Loss and gradients, shared by both entries.
  {
    PassManager pm(&context, func::FuncOp::getOperationName());
    addLossAndGradientPasses(pm, training);
    if (failed(pm.run(step)))
      return failure();
  }
  std::string lossKind = training.loss;
  if (auto built = step->getAttrOfType<StringAttr>(train::kLossAttr))
    lossKind = built.str();
  // The gradient entry: a copy before the update, results named after the
  // parameters they differentiate.
  func::FuncOp grads = step.clone();
  grads.setName("loss_and_grads");
  module->push_back(grads);
  // It leaves the model's state as it was (--dump-grads, gradcheck).
  train::eraseUpdateResults(grads);
  for (unsigned i = 1, e = grads.getNumResults(); i < e; ++i)
    if (auto of = grads.getResultAttrOfType<StringAttr>(i, train::kGradOfAttr))
      grads.setResultAttr(i, "onnx.name", of);
  func::FuncOp accumulate;
  if (training.gradAccum > 1 &&
      failed(addGradientAccumulation(step, training.gradAccum, accumulate)))
    return failure();
  {
    PassManager pm(&context, func::FuncOp::getOperationName());
    OptimizerPassOptions opt;
    opt.optimizer = training.optimizer;
    opt.momentum = training.momentum;
    opt.nesterov = training.nesterov;
    opt.weightDecay = training.weightDecay;
    opt.beta1 = training.beta1;
    opt.beta2 = training.beta2;
    opt.eps = training.eps;
    opt.clipGradNorm = training.clipGradNorm;
    pm.addPass(createOptimizerPass(opt));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(step)))
      return failure();
  }

  std::vector<codegen::StepInterface> steps;
  SmallVector<codegen::Entry> entries = {
      codegen::Entry{step, "ztc_train_step"},
      codegen::Entry{grads, "ztc_loss_and_grads"}};
  if (accumulate)
    entries.push_back(codegen::Entry{accumulate, "ztc_accumulate"});
  if (failed(lowerAndEmit(context, *module, entries, modelPath, target,
                          artifact, steps)))
    return failure();
  rt::Manifest &manifest = artifact.manifest;
  SmallString<256> absolute(modelPath);
  llvm::sys::fs::make_absolute(absolute);
  artifact.sourceModel = absolute.str().str();
  manifest.kind = rt::ArtifactKind::Train;
  manifest.gradEntry = "ztc_loss_and_grads";
  // The grad entry's outputs: its own loss, then one gradient per param.
  manifest.gradOutputs = toOutputs(steps[1].outputs);
  rt::TrainConfig &config = manifest.train;
  config.optimizer = training.optimizer;
  config.loss = lossKind;
  config.schedule = training.schedule;
  config.batchSize = options.batchSize;
  config.gradAccum = std::max<unsigned>(training.gradAccum, 1);
  if (accumulate) {
    manifest.accumEntry = "ztc_accumulate";
    manifest.accumOutputs = toOutputs(steps[2].outputs);
  }
  return success();
}
