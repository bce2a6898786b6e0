//===- Pipelines.cpp - pass and dialect registration --------------*- C++
//-*-===//
//
// Registers ztc's passes and named pipelines, so that `ztc-opt
// --pass-pipeline=...` reproduces what the `ztc` driver runs.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Onnx/IR/OnnxOps.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void ztc::buildOnnxToNNPipeline(OpPassManager &pm) {
  // Convert node by node; the converters fold shape subgraphs as they go.
  pm.addNestedPass<func::FuncOp>(createConvertOnnxToNNPass());
  // Canonicalize folds what only becomes constant after conversion and drops
  // dead shape computations; CSE merges repeated constants.
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());
}

void ztc::buildNNToKernelPipeline(OpPassManager &pm) {
  // Expand optimizer updates into nn arithmetic, bufferize, let matmuls read
  // transposed operands in place, fuse elementwise chains (fewer buffers to
  // place), then place what is left in the arena.
  pm.addNestedPass<func::FuncOp>(createLowerTrainPass());
  pm.addNestedPass<func::FuncOp>(createConvertNNToKernelPass());
  pm.addNestedPass<func::FuncOp>(createFoldTransposesPass());
  pm.addNestedPass<func::FuncOp>(createFusePass());
  pm.addNestedPass<func::FuncOp>(createPlanMemoryPass());
}

void ztc::registerAllPasses() {
  registerZtcPasses();
  PassPipelineRegistration<>(
      "ztc-import-pipeline",
      "Take an imported onnx module to the nn dialect (ztc import --emit nn)",
      [](OpPassManager &pm) { buildOnnxToNNPipeline(pm); });
  PassPipelineRegistration<>(
      "ztc-lower-to-kernel-pipeline",
      "Lower an nn step to fused kernels with a memory plan (ztc run)",
      [](OpPassManager &pm) { buildNNToKernelPipeline(pm); });
}

void ztc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<func::FuncDialect, arith::ArithDialect, math::MathDialect,
                  onnx::OnnxDialect, nn::NNDialect, train::TrainDialect,
                  kernel::KernelDialect>();
}
