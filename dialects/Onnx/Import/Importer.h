//===- Importer.h - ONNX protobuf to onnx dialect ---------------*- C++ -*-===//
//
// Reads an ONNX model (binary protobuf or the ONNX text format) and builds a
// module holding one `func.func @main` in the onnx dialect. Weights are never
// copied: float initializers become function arguments named after them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_ONNX_IMPORT_IMPORTER_H
#define ZTC_DIALECTS_ONNX_IMPORT_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::ztc::onnx {

/// Options that shape an import.
struct ImportOptions {
  /// Static shapes for graph inputs, by ONNX name; they bind dynamic (or
  /// symbolic) dimensions. Symbolic names bound this way also bind the same
  /// names in other inputs and outputs.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// When positive, binds a dynamic first dimension of every graph input
  /// (the batch) that `inputShapes` does not bind.
  int64_t batchSize = 0;
  /// When positive (with batchSize), also binds a dynamic second dimension
  /// (the sequence) of those inputs to this length (`ztc compile
  /// --seq-buckets`: one step per length); some input must have one.
  int64_t sequenceLength = 0;
  /// Asked for the shape of a graph input with dynamic dimensions that
  /// `inputShapes` does not bind (e.g. from the data a run is given).
  /// Without a shape, it may set its second argument to why (a missing or
  /// unreadable data file), which the import reports for that input.
  std::function<std::optional<llvm::SmallVector<int64_t>>(llvm::StringRef,
                                                          std::string &)>
      shapeFor;
  /// Graph inputs to specialize as constants, by ONNX name, each read from
  /// a serialized TensorProto file (the ONNX test-data format). Inputs that
  /// determine shapes (Reshape targets, axes, ...) must be constants.
  llvm::StringMap<std::string> constantInputs;
  /// Rank-0 float initializers with at most this many elements become
  /// constants (scalars such as a 1/sqrt(d) factor, not weights).
  int64_t maxConstantFloatElements = 1;
  /// How the unbound-dimension error tells the user to bind one (the
  /// command's own options).
  std::string bindHint = "--input-shape";
};

/// Parses a `--input-shape` value `NAME=D0xD1x...` (rank 0: `NAME=`) into
/// `options`. Returns an error message on malformed text.
llvm::Error parseInputShape(llvm::StringRef text, ImportOptions &options);

/// Parses a `--constant-input` value `NAME=FILE.pb` into `options`.
llvm::Error parseConstantInput(llvm::StringRef text, ImportOptions &options);

/// Imports the model at `path`. Emits diagnostics on `context` and returns
/// null on failure; the caller sees every problem found, not just the first.
OwningOpRef<ModuleOp> importOnnxFile(MLIRContext &context, llvm::StringRef path,
                                     const ImportOptions &options);

/// Imports a model given as bytes (binary protobuf or text format);
/// `displayName` names it in diagnostics and `baseDir` resolves external data.
OwningOpRef<ModuleOp> importOnnxBytes(MLIRContext &context,
                                      llvm::StringRef bytes,
                                      llvm::StringRef displayName,
                                      llvm::StringRef baseDir,
                                      const ImportOptions &options);

/// Calls `fn` with the name and little-endian bytes (one byte per bool) of
/// every initializer of the model at `path`, reading external data as
/// needed; stops at the first failure. Diagnostics go to `context`.
LogicalResult
readInitializers(MLIRContext &context, llvm::StringRef path,
                 llvm::function_ref<LogicalResult(llvm::StringRef name,
                                                  llvm::StringRef bytes)>
                     fn);

/// The state-dict names of the model at `path` beyond its initializer
/// names, from the `ztc.initializers` metadata python/ztc_export.py writes:
/// `tied` maps a parameter's initializer to its other names. Sets
/// `hasRoles` to whether the model has that metadata.
LogicalResult
readTiedParameters(MLIRContext &context, llvm::StringRef path, bool &hasRoles,
                   std::map<std::string, std::vector<std::string>> &tied);

/// The external data files the initializers of the model at `path` name
/// (each once, resolved against the model's directory, in first-use
/// order). Diagnostics go to `context`.
FailureOr<std::vector<std::string>> externalDataFiles(MLIRContext &context,
                                                      llvm::StringRef path);

/// What `writeModelWithInitializers` changed besides the weights.
struct ExportSummary {
  /// Training-mode nodes switched to inference (`inference` only).
  unsigned batchNorms = 0, dropouts = 0;
};

/// Writes the model at `path` to `outputPath` with the initializers named in
/// `values` replaced by those little-endian bytes (shapes and types stay).
/// With `inference`, training-mode BatchNormalization (running statistics
/// normalize; the statistics outputs go) and Dropout (the identity) switch
/// to inference; a statistics output something reads is an error naming the
/// node. Weights go to `outputPath`.data when they would not fit a protobuf;
/// the file appears atomically (temporary + rename).
LogicalResult writeModelWithInitializers(
    MLIRContext &context, llvm::StringRef path, llvm::StringRef outputPath,
    const std::map<std::string, std::vector<uint8_t>> &values,
    bool inference = false, ExportSummary *summary = nullptr);

} // namespace mlir::ztc::onnx

#endif // ZTC_DIALECTS_ONNX_IMPORT_IMPORTER_H
