//===- Compile.cpp - ONNX model to a ztc artifact -----------------*- C++ -*-===//
//
// Runs the pipelines of passes/Pipelines, prints the step, and converts the
// emitter's interface into the runtime's manifest, reading parameter values
// from the ONNX model and constant values from the IR.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Compile.h"

#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ztc;
namespace rt = ::ztc::rt;

namespace {

/// The little-endian bytes of a constant, one byte per bool.
std::vector<uint8_t> constantBytes(ElementsAttr value) {
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

rt::DType toDType(const std::string &name) {
  return rt::parseDType(name).value_or(rt::DType::Float32);
}

} // namespace

LogicalResult mlir::ztc::compileForward(MLIRContext &context,
                                        StringRef modelPath,
                                        const onnx::ImportOptions &options,
                                        codegen::Target target,
                                        ArtifactContents &artifact) {
  OwningOpRef<ModuleOp> module =
      onnx::importOnnxFile(context, modelPath, options);
  if (!module)
    return failure();
  PassManager toNN(&context);
  buildOnnxToNNPipeline(toNN);
  if (failed(toNN.run(*module)))
    return failure();
  // Every intermediate value as its own buffer: the baseline the memory
  // plan is measured against.
  int64_t tensorBytes = 0;
  module->walk([&](Operation *op) {
    if (isa_and_nonnull<nn::NNDialect>(op->getDialect()))
      for (Type type : op->getResultTypes())
        if (auto tensor = dyn_cast<RankedTensorType>(type))
          tensorBytes += tensor.getNumElements() *
                         ((tensor.getElementTypeBitWidth() + 7) / 8);
  });
  auto funcs = module->getOps<func::FuncOp>();
  if (funcs.empty())
    return module->emitError("the model has no step function");
  func::FuncOp func = *funcs.begin();
  PassManager toKernel(&context);
  buildNNToKernelPipeline(toKernel);
  if (failed(toKernel.run(*module)))
    return failure();

  func->setAttr("kernel.tensor_bytes",
                Builder(&context).getI64IntegerAttr(tensorBytes));
  codegen::StepInterface step;
  llvm::raw_string_ostream source(artifact.source);
  if (failed(codegen::emitStep(func, target, source, step)))
    return failure();

  rt::Manifest &manifest = artifact.manifest;
  manifest.target =
      target == codegen::Target::Cuda ? rt::Target::Cuda : rt::Target::Cpu;
  manifest.source = target == codegen::Target::Cuda ? "step.cu" : "step.cpp";
  manifest.arenaBytes = step.arenaBytes;
  llvm::StringSet<> params;
  for (const codegen::Binding &binding : step.bindings) {
    rt::Binding entry;
    entry.name = binding.name;
    entry.file = rt::fileStemFor(binding.name);
    entry.dtype = toDType(binding.dtype);
    entry.shape = binding.shape;
    switch (binding.role) {
    case codegen::Binding::Role::Input:
      entry.role = rt::BindingRole::Input;
      break;
    case codegen::Binding::Role::Param:
      entry.role = rt::BindingRole::Param;
      params.insert(binding.name);
      break;
    case codegen::Binding::Role::Constant: {
      entry.role = rt::BindingRole::Constant;
      rt::Tensor tensor(entry.dtype, entry.shape);
      tensor.bytes = constantBytes(binding.value);
      artifact.initialValues[binding.name] = std::move(tensor);
      break;
    }
    }
    manifest.bindings.push_back(std::move(entry));
  }
  for (const codegen::Output &output : step.outputs) {
    rt::Output entry;
    entry.name = output.name;
    entry.file = rt::fileStemFor(output.name);
    entry.dtype = toDType(output.dtype);
    entry.shape = output.shape;
    entry.offset = output.offset;
    manifest.outputs.push_back(std::move(entry));
  }

  // Parameter values come straight from the model (weights never passed
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
