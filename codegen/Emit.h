//===- Emit.h - kernel dialect to C++ / CUDA source -------------*- C++ -*-===//
//
// Prints planned kernel-dialect entry functions as one C++ source (CPU,
// OpenMP + the runtime's kernel library) or CUDA source, and describes
// their interface for the artifact manifest in the manifest's own types
// (runtime/io/Manifest.h): the schema is declared once, there.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_CODEGEN_EMIT_H
#define ZTC_CODEGEN_EMIT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

#include "runtime/io/Manifest.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::ztc::codegen {

using Target = ::ztc::rt::Target;

/// What the runtime needs to call one emitted entry: its outputs, arena,
/// streams and events.
struct StepInterface {
  std::vector<::ztc::rt::Output> outputs;
  int64_t arenaBytes = 0;
  /// Streams the entry runs on (the highest kernel.stream + 1) and events
  /// it signals (ztc_step_context::streams, ::events).
  int64_t streams = 1, events = 0;
  /// The entry's collectives, in program order (the manifest's "dist").
  std::vector<::ztc::rt::Collective> collectives;
};

/// What every entry of one source shares: the bindings array (arguments,
/// then constants), the values of its constants, by binding name, and the
/// finite checks of all entries, numbered from 1 in the order printed.
struct SharedInterface {
  std::vector<::ztc::rt::Binding> bindings;
  std::map<std::string, ElementsAttr> constants;
  std::vector<::ztc::rt::FiniteCheck> finiteChecks;
};

/// The runtime's element type for `type`; an error at `where`, naming
/// `what`, when the runtime has none: never a silent default.
FailureOr<::ztc::rt::DType> runtimeDType(Type type, Operation *where,
                                         const llvm::Twine &what);

/// A function to print and the C name of its entry.
struct Entry {
  func::FuncOp func;
  std::string name;
};

/// Prints several planned functions (ztc-plan-memory) into one source (one
/// prelude, one entry each), fills one StepInterface per entry and the
/// shared bindings. They share the arena, whose size is the largest plan.
/// Emits a diagnostic and fails on anything the emitter cannot print.
LogicalResult emitSteps(llvm::ArrayRef<Entry> entries, Target target,
                        llvm::raw_ostream &os,
                        std::vector<StepInterface> &steps,
                        SharedInterface &shared);

} // namespace mlir::ztc::codegen

#endif // ZTC_CODEGEN_EMIT_H
