//===- ImportFuzzer.cpp - ONNX import through conversion to nn ------------===//
//
// Built twice: ztc-fuzz-onnx-binary takes protobuf inputs and
// ztc-fuzz-onnx-text the text format (ZTC_FUZZ_TEXT); each rejects the
// other's inputs (they start with '<'), so the two corpora stay apart.
// Each input is imported and converted to the nn dialect with the pass
// pipeline `ztc import --emit nn` runs.
//
// Oracle: the module converts (and verifies after every pass), or at least
// one error with a non-empty message says why; text-format errors are one
// line. The context is rebuilt every few thousand inputs so uniqued
// attributes do not grow without bound.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/Importer.h"
#include "passes/Passes.h"
#include "passes/Pipelines/Pipelines.h"
#include "test/fuzz/FuzzSupport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <memory>

using namespace mlir;
namespace fz = ::ztc::fuzz;

namespace {

constexpr unsigned kInputsPerContext = 2000;

MLIRContext &freshContext() {
  static std::unique_ptr<MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses == kInputsPerContext) {
    uses = 0;
    context.reset();
    DialectRegistry registry;
    mlir::ztc::registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry,
                                            MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->printOpOnDiagnostic(false);
  }
  return *context;
}

bool looksLikeText(StringRef bytes) {
  StringRef trimmed = bytes.ltrim();
  while (trimmed.starts_with("#"))
    trimmed = trimmed.split('\n').second.ltrim();
  return trimmed.starts_with("<");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StringRef bytes(reinterpret_cast<const char *>(data), size);
  if (looksLikeText(bytes) != bool(ZTC_FUZZ_TEXT))
    return -1; // the other target's input: keep it out of this corpus
  static const fz::ScratchDir baseDir("import");
  MLIRContext &context = freshContext();

  std::vector<std::string> errors;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      errors.push_back(diag.str());
    return success();
  });
  mlir::ztc::onnx::ImportOptions options;
  options.batchSize = 2;
  OwningOpRef<ModuleOp> module = mlir::ztc::onnx::importOnnxBytes(
      context, bytes, "model.onnx", baseDir.path(), options);
  bool ok = bool(module);
  if (ok) {
    PassManager pm(&context);
    mlir::ztc::buildOnnxToNNPipeline(pm);
    ok = succeeded(pm.run(*module));
  }
  if (ok)
    return 0;
  if (errors.empty())
    fz::fail("import", "failed without an error");
  for (const std::string &error : errors) {
    if (error.empty())
      fz::fail("import", "an empty error message");
    if (ZTC_FUZZ_TEXT)
      fz::requireOneLine(error, "text import");
  }
  return 0;
}
