//===- Compile.h - ONNX model to a ztc artifact -----------------*- C++ -*-===//
//
// The compiler half of `ztc compile`, `ztc run` and `ztc emit`: import, run
// one pipeline of passes/Pipelines, print the entries' source, then gather
// what the runtime needs to execute it (manifest, initial values). No IR
// work happens here: that is the pipelines' job.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_COMPILE_H
#define ZTC_TOOLS_ZTC_COMPILE_H

#include "codegen/Emit.h"
#include "dialects/Onnx/Import/Importer.h"
#include "passes/Pipelines/Pipelines.h"

#include "runtime/Artifact.h"
#include "runtime/Tensor.h"

#include <array>
#include <map>
#include <set>
#include <string>

namespace mlir::ztc {

/// Everything an artifact directory holds, in memory.
struct ArtifactContents {
  ::ztc::rt::Manifest manifest;
  std::string source;
  std::map<std::string, ::ztc::rt::Tensor> initialValues;
  /// The ONNX model compiled (absolute path), for `ztc export`.
  std::string sourceModel;
  /// memory.json: the step's memory report (MemoryReport.h), for `ztc
  /// inspect`; empty for forward artifacts.
  std::string memoryReport;
  /// For --recompute budget=...: the budget, the planned bytes and how the
  /// plan was chosen, as `ztc compile` prints them; empty otherwise.
  std::string recomputeBudget;
  /// Training artifacts: the planned bytes per rank (the memory report's
  /// total: bindings and arena).
  uint64_t plannedBytes = 0;
  /// Training artifacts: the params no entry writes (--freeze, ztc-lora).
  std::set<std::string> frozenParams;
  /// QLoRA's NF4 weights (train.nf4): binding name -> the model's [rows,
  /// cols], whose float value readParameterValues quantizes into the
  /// binding and its parts.
  std::map<std::string, std::array<int64_t, 2>> nf4Weights;
};

/// The little-endian bytes of a constant, one byte per bool (the layout of
/// init.safetensors).
std::vector<uint8_t> constantBytes(ElementsAttr value);

/// Fills the manifest of `artifact` (bindings, entries, outputs, arena) and
/// the constants' values from the planned entries of `module`, printing
/// their source for `target`. Parameter values are not read (see
/// readParameterValues). Fails with a diagnostic on an element type the
/// runtime does not know.
LogicalResult emitArtifact(ModuleOp module, codegen::Target target,
                           ArtifactContents &artifact);

/// Copies each param binding's value from the model's initializers into
/// the artifact's initial values (weights never pass through the IR).
LogicalResult readParameterValues(MLIRContext &context,
                                  llvm::StringRef modelPath,
                                  ArtifactContents &artifact);

/// Compiles the training step of the model at `modelPath` for `target` with
/// the training pipeline (passes/Pipelines): entries `ztc_train_step`,
/// `ztc_loss_and_grads`, `ztc_evaluate` and, when accumulating,
/// `ztc_accumulate`.
/// `options` must verify. When `kernelIR` is given, the planned kernel
/// module is printed to it.
LogicalResult compileTraining(MLIRContext &context, llvm::StringRef modelPath,
                              const onnx::ImportOptions &importOptions,
                              const TrainingPipelineOptions &options,
                              codegen::Target target,
                              ArtifactContents &artifact,
                              llvm::raw_ostream *kernelIR = nullptr);

/// Runs the training pipeline on the model at `modelPath` and returns the
/// planned kernel module, without emitting anything (`ztc inspect`). Null
/// after reporting a failure.
OwningOpRef<ModuleOp> planTraining(MLIRContext &context,
                                   llvm::StringRef modelPath,
                                   const onnx::ImportOptions &importOptions,
                                   const TrainingPipelineOptions &options);

/// Compiles the forward step of the model at `modelPath` for `target`
/// (entry `ztc_forward`). Diagnostics go to `context`; fails after
/// reporting.
LogicalResult compileForward(MLIRContext &context, llvm::StringRef modelPath,
                             const onnx::ImportOptions &options,
                             codegen::Target target,
                             ArtifactContents &artifact);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_COMPILE_H
