//===- ztc-translate.cpp - kernel IR to C++ or CUDA source ----------------===//
//
// mlir-translate with ztc's emitter registered: planned kernel IR (what
// `ztc-opt --ztc-training-pipeline` or `ztc compile --emit-kernel-ir`
// prints) in, the step's source out, every function an entry named
// ztc_<symbol> as `ztc compile` names them. Codegen lit tests start here,
// and --verify-diagnostics checks the emitter's errors.
//
//===----------------------------------------------------------------------===//

#include "codegen/Emit.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include <deque>

using namespace mlir;
namespace codegen = mlir::ztc::codegen;

namespace {

LogicalResult emitModule(ModuleOp module, llvm::raw_ostream &os,
                         codegen::Target target) {
  SmallVector<codegen::Entry> entries;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    entries.push_back({func, "ztc_" + func.getSymName().str()});
  if (entries.empty())
    return module.emitError("the module has no entry to emit");
  std::vector<codegen::StepInterface> steps;
  codegen::SharedInterface shared;
  return codegen::emitSteps(entries, target, os, steps, shared);
}

void registerEmitters() {
  auto dialects = [](DialectRegistry &registry) {
    mlir::ztc::registerAllDialects(registry);
  };
  for (const ::ztc::rt::TargetInfo &info : ::ztc::rt::kTargets) {
    codegen::Target target = info.target;
    // The registry keeps references to the names: stable storage.
    static std::deque<std::string> names, descriptions;
    names.push_back(std::string("ztc-kernel-to-") + info.name);
    descriptions.push_back(std::string("Planned kernel IR to the ") +
                           info.name + " target's source (" + info.sourceName +
                           ")");
    TranslateFromMLIRRegistration(
        names.back(), descriptions.back(),
        [target](ModuleOp module, llvm::raw_ostream &os) {
          return emitModule(module, os, target);
        },
        dialects);
  }
}

} // namespace

int main(int argc, char **argv) {
  registerEmitters();
  return failed(mlirTranslateMain(argc, argv, "ztc kernel IR emitter\n"));
}
