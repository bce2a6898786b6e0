//===- Emit.h - kernel dialect to C++ / CUDA source ---------------*- C++
//-*-===//
//
// Prints a planned kernel-dialect step function as one C++ source (CPU,
// OpenMP + the runtime's kernel library) or CUDA source, and describes its
// interface (bindings, outputs, arena size) for the artifact manifest.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_CODEGEN_EMIT_H
#define ZTC_CODEGEN_EMIT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::ztc::codegen {

enum class Target { Cpu, Cuda };

/// One entry of the step's `bindings` array.
struct Binding {
  /// Input: data given per call. Param: a weight. State: optimizer state,
  /// zero at the start. Hyper: a scalar the runtime writes before each call
  /// (learning rate, step). Constant: a compile-time value.
  enum class Role { Input, Param, State, Hyper, Constant } role;
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  /// The value, for constants.
  ElementsAttr value;
};

/// One output, read from the arena after the step.
struct Output {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t offset;
};

/// What the runtime needs to call an emitted step.
struct StepInterface {
  std::vector<Binding> bindings;
  std::vector<Output> outputs;
  int64_t arenaBytes = 0;
};

/// The runtime's name for an element type ("float32", ...), or "" if none.
std::string dtypeName(Type type);

/// Prints `func` (planned by ztc-plan-memory) as source for `target` into
/// `os` with the entry `ztc_forward`, and fills `step`. Emits a diagnostic
/// and fails on anything the emitter cannot print.
LogicalResult emitStep(func::FuncOp func, Target target, llvm::raw_ostream &os,
                       StepInterface &step);

/// A function to print and the C name of its entry.
struct Entry {
  func::FuncOp func;
  std::string name;
};

/// Prints several planned functions into one source (one prelude, one entry
/// each) and fills one StepInterface per entry. They share the arena, whose
/// size is the largest plan.
LogicalResult emitSteps(llvm::ArrayRef<Entry> entries, Target target,
                        llvm::raw_ostream &os,
                        std::vector<StepInterface> &steps);

} // namespace mlir::ztc::codegen

#endif // ZTC_CODEGEN_EMIT_H
