//===- TargetPrinter.h - what the emitter prints per target -----*- C++ -*-===//
//
// The emitter (Emit.cpp) walks a planned step and decides what to print
// independently of the target: bindings, arena pointers, views, the scalar
// bodies of kernels, library calls as runtime/kernels/Library.def declares
// them, stream and event bookkeeping, the manifest's interface. Where the
// spelling depends on the target it asks the target's printer, behind this
// interface (Inductor's overrides per backend, IREE's TargetBackend): the
// library's namespace, how a fused kernel's loop runs (an OpenMP function
// on the CPU, a __global__ kernel on CUDA), streams, events and the
// entry's frame. Each target has its folder (codegen/Cpu, codegen/Cuda)
// and a row in runtime/backend/Target.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_CODEGEN_TARGETPRINTER_H
#define ZTC_CODEGEN_TARGETPRINTER_H

#include "runtime/backend/Target.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ValueRange.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlir::ztc::codegen {

/// Where one entry is printed: its body, in program order, and the
/// functions printed ahead of it (CUDA's __global__ kernels).
struct EntryText {
  /// The entry's C name (ztc_train_step).
  std::string name;
  llvm::raw_ostream &body;
  std::string &kernels;
  unsigned kernelCount = 0;

  /// A fresh name for a kernel of this entry.
  std::string newKernelName() {
    return name + "_kernel" + std::to_string(kernelCount++);
  }
};

/// A fused elementwise kernel, ready to print: `body` reads the inputs at
/// the element index (i; r + j when split) and computes the scalars,
/// `storeAll(index, indent)` writes every output.
struct ElementwiseLoop {
  std::vector<std::string> params, args;
  std::string body;
  std::function<std::string(llvm::StringRef, llvm::StringRef)> storeAll;
  /// The outputs; with `split`, the loop runs over runs of `run`
  /// consecutive outputs (TargetPrinter::elementwiseRun).
  int64_t count = 0, run = 0;
  bool split = false;
};

/// A kernel.reduce, ready to print: over group indices o (outer), k (kept),
/// i (inner), `body` (indented by four) computes the scalars from inputs
/// in0, in1, ... (of `inputTypes`, read through `args`' first
/// inputTypes.size() pointers) and `values` are the terms, one per output
/// out0, out1, ... (the rest of `args`), whose elements are `outputType`
/// (f16 or bf16 when `half`). The terms accumulate in `acc`; `mean`
/// divides each sum by the terms each output has (outer * inner) before it
/// is stored.
/// `scratch`, on targets with planned scratch, is the ztc::Scratch
/// argument of the op's scratch (or an empty one).
struct ReduceLoop {
  std::vector<std::string> inputTypes, args, values;
  std::string body, acc, outputType, scratch;
  bool half = false, mean = false;
  int64_t outer = 1, kept = 1, inner = 1;
  /// The output element from the sum held in `sum`.
  std::string stored(const std::string &sum) const {
    std::string total = mean ? "(" + sum + " / static_cast<" + acc + ">(" +
                                   std::to_string(outer * inner) + "))"
                             : sum;
    return half ? outputType + "(" + total + ")"
                : "static_cast<" + outputType + ">(" + total + ")";
  }
};

/// One target's spellings.
class TargetPrinter {
public:
  explicit TargetPrinter(::ztc::rt::Target target)
      : info(::ztc::rt::targetInfo(target)) {}
  virtual ~TargetPrinter();

  const ::ztc::rt::TargetInfo &info;

  /// The kernel library's namespace, with "::" (ztc::cpu::).
  virtual llvm::StringRef libraryNamespace() const = 0;
  /// Whether library calls, finite checks and loss records take the
  /// entry's `stream` as their last argument.
  virtual bool callsTakeStream() const = 0;

  // Scalar bodies.
  /// Whether math on scalars computed in `computeType` uses ztc::vecmath.
  virtual bool vectorMath(llvm::StringRef computeType) const = 0;
  /// Whether bool inputs are read as their byte.
  virtual bool readsBoolsAsBytes() const = 0;

  // Fused kernels.
  /// The outputs in a run whose inputs' indices move together (see
  /// Emit.cpp's broadcastRun); `count` when the loop is not split.
  virtual int64_t elementwiseRun(ValueRange inputs, MemRefType output,
                                 int64_t count) const = 0;
  /// The pointer declarator of a kernel parameter (" *" or
  /// " *__restrict__ "); `aliased`: an output is also an input.
  virtual std::string pointer(bool aliased) const = 0;
  /// The statement that stores `result`, converted to the element as
  /// `converted`, into `out[index]` for an output of element type `elem`.
  virtual std::string storeElement(llvm::StringRef out, Type elem,
                                   llvm::StringRef result,
                                   llvm::StringRef converted,
                                   llvm::StringRef index) const = 0;
  virtual void printElementwise(EntryText &entry,
                                const ElementwiseLoop &loop) = 0;
  virtual void printReduce(EntryText &entry, const ReduceLoop &loop) = 0;
  /// Loops of one launch group (kernel.launch_group, on a target that
  /// groups launches: TargetInfo::groupsLaunches), independent of each
  /// other, as one launch; by default each is printed alone, in order.
  virtual void printElementwiseGroup(EntryText &entry,
                                     llvm::ArrayRef<ElementwiseLoop> loops);

  // Streams and events.
  virtual void printStreamSwitch(llvm::raw_ostream &os,
                                 int64_t stream) const = 0;
  /// Whether work of `stream` is handed to the runtime's thread for it,
  /// between printHandOver and printHandOverEnd.
  virtual bool handsOver(int64_t stream) const = 0;
  virtual void printHandOver(llvm::raw_ostream &os, int64_t stream) const = 0;
  virtual void printHandOverEnd(llvm::raw_ostream &os) const = 0;
  virtual void printSignal(llvm::raw_ostream &os, int64_t stream,
                           int64_t event) const = 0;
  virtual void printWait(llvm::raw_ostream &os, int64_t stream,
                         int64_t event) const = 0;

  // The source and its entries.
  /// The library's header and what the target's source needs with it.
  virtual void printIncludes(llvm::raw_ostream &os) const = 0;
  /// The qualifier of the prelude's scalar helpers.
  virtual llvm::StringRef scalarQualifier() const = 0;
  /// Functions every entry of the source shares, after the prelude.
  virtual void printSharedFunctions(llvm::raw_ostream &os) const = 0;
  /// Attributes before an entry's `void`.
  virtual llvm::StringRef entryAttributes() const = 0;
  /// The entry's first statements after the bindings and the arena, and its
  /// last.
  virtual void printEntryStart(llvm::raw_ostream &os) const = 0;
  virtual void printEntryEnd(llvm::raw_ostream &os) const = 0;
};

/// The printer of each target (codegen/Cpu, codegen/Cuda).
std::unique_ptr<TargetPrinter> createCpuPrinter();
std::unique_ptr<TargetPrinter> createCudaPrinter();
std::unique_ptr<TargetPrinter> createTargetPrinter(::ztc::rt::Target target);

} // namespace mlir::ztc::codegen

#endif // ZTC_CODEGEN_TARGETPRINTER_H
