//===- Emit.cpp - kernel dialect to C++ / CUDA source ---------------------===//
//
// The emitter walks the straight-line body of a planned step function and
// prints it through the target's printer (TargetPrinter.h; codegen/Cpu,
// codegen/Cuda), which spells what depends on the target:
//   - arguments and kernel.constant become pointers into `bindings`,
//   - kernel.alloc becomes a pointer at its planned arena offset,
//   - kernel.view reuses its source's pointer,
//   - kernel.elementwise becomes a loop whose body prints the scalar
//     arith/math ops (the printer makes it a function or a kernel),
//   - kernel.reduce becomes loops over its kept and reduced indices,
//   - kernel.call becomes a call into the runtime's kernel library, as
//     runtime/kernels/Library.def declares it, and a collective a call of
//     the function its kind names there, on the step context,
//   - streams, events, checks and loss records become the printer's calls.
// Every kernel is preceded by a comment naming the ONNX nodes it computes.
//
//===----------------------------------------------------------------------===//

#include "codegen/Emit.h"
#include "codegen/Printing.h"
#include "codegen/TargetPrinter.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/Train/IR/TrainOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::codegen;
namespace rt = ::ztc::rt;

FailureOr<rt::DType> codegen::runtimeDType(Type type, Operation *where,
                                           const llvm::Twine &what) {
  if (type.isF32())
    return rt::DType::Float32;
  if (type.isF64())
    return rt::DType::Float64;
  if (type.isF16())
    return rt::DType::Float16;
  if (type.isBF16())
    return rt::DType::BFloat16;
  if (type.isSignlessInteger(64))
    return rt::DType::Int64;
  if (type.isSignlessInteger(32))
    return rt::DType::Int32;
  if (type.isSignlessInteger(8))
    return rt::DType::Int8;
  if (type.isSignlessInteger(1))
    return rt::DType::Bool;
  return where->emitError(what) << " has element type " << type
                                << ", which the runtime does not support";
}

namespace {

/// The manifest's role for a binding: the role of the same name (the
/// train dialect and the manifest spell roles alike).
rt::BindingRole runtimeRole(train::BindingRole role) {
  return *rt::parseRole(train::stringifyBindingRole(role).str());
}

/// Prints one step.
class Emitter {
public:
  Emitter(TargetPrinter &printer, StringRef entryName, StepInterface &step,
          SharedInterface &shared)
      : printer(printer), entryName(entryName.str()), step(step),
        shared(shared), bindings(shared.bindings),
        out(entryText), entryOut{entryName.str(), out, kernels} {}

  /// Collects the entry's body and kernels, and fills `step`.
  LogicalResult run(func::FuncOp func);
  /// Prints the kernels and the entry function.
  void printEntry(llvm::raw_ostream &os);

private:
  std::string name(Value value) { return names.lookup(value); }
  std::string bind(Value value, StringRef prefix) {
    std::string text = prefix.str() + std::to_string(names.size());
    names[value] = text;
    return text;
  }
  void comment(Operation *op);
  LogicalResult emitElementwise(kernel::ElementwiseOp op);
  /// Prints the loops of the launch group collected so far, if any.
  void flushGroup();
  LogicalResult emitReduce(kernel::ReduceOp op);
  LogicalResult emitCall(kernel::CallOp op);
  LogicalResult emitCollective(kernel::CollectiveOpInterface op);
  /// Prints a read of each input into a scalar (input i at `index(its
  /// type)`, named a<i>), then the body's ops (t0, t1, ...), into `b`.
  LogicalResult printBody(ValueRange inputs, Block &block,
                          llvm::function_ref<std::string(MemRefType)> index,
                          DenseMap<Value, std::string> &scalars,
                          llvm::raw_ostream &b);
  FailureOr<std::string> scalarExpr(Operation &op,
                                    DenseMap<Value, std::string> &scalars);
  std::string indexExpr(MemRefType input, MemRefType output,
                        StringRef at = "i", int64_t run = 1);

  TargetPrinter &printer;
  std::string entryName;
  StepInterface &step;
  /// What every entry of the source shares: bindings and constants.
  SharedInterface &shared;
  std::vector<rt::Binding> &bindings;
  /// The entry function's body, printed as ops are visited, and the
  /// kernels printed ahead of it.
  std::string entryText;
  llvm::raw_string_ostream out;
  std::string kernels;
  EntryText entryOut;
  DenseMap<Value, std::string> names;
  /// ", stream" where the target's calls take it.
  StringRef streamArgument() const {
    return printer.callsTakeStream() ? ", stream" : "";
  }
  /// The dims literal of `shape` in the target's library.
  std::string dims(ArrayRef<int64_t> shape) const {
    return printer.libraryNamespace().str() + "Dims{" +
           llvm::join(llvm::map_range(
                          shape, [](int64_t d) { return std::to_string(d); }),
                      ", ") +
           "}";
  }
  /// The stream the printed code enqueues on now, and each signalled
  /// event's index in ctx->events.
  int64_t currentStream = 0;
  DenseMap<Value, int64_t> eventIndex;

  /// The loops of the launch group being collected (kernel.launch_group,
  /// where the target groups launches), its number, and the groups already
  /// printed: a group's loops are consecutive.
  SmallVector<ElementwiseLoop> groupLoops;
  std::optional<int64_t> group;
  llvm::SmallDenseSet<int64_t> printedGroups;

  /// Points `stream` at `op`'s stream (kernel.stream) before its work.
  void switchStream(Operation *op);
};

void Emitter::switchStream(Operation *op) {
  int64_t stream = kernel::streamOf(op);
  step.streams = std::max(step.streams, stream + 1);
  if (stream == currentStream)
    return;
  currentStream = stream;
  printer.printStreamSwitch(out, stream);
}

void Emitter::comment(Operation *op) {
  SmallVector<std::string> nodes;
  train::collectNodeNames(op->getLoc(), nodes);
  out << "  // ";
  if (auto call = dyn_cast<kernel::CallOp>(op))
    out << call.getCallee();
  else if (auto collective = dyn_cast<kernel::CollectiveOpInterface>(op))
    out << kernel::stringifyCollectiveKind(collective.getKind());
  else if (auto reduce = dyn_cast<kernel::ReduceOp>(op))
    out << "reduce " << kernel::stringifyReduceKind(reduce.getKind());
  else if (isa<kernel::RecordLossOp>(op))
    out << "record_loss";
  else
    out << "elementwise";
  if (!nodes.empty())
    out << " for ONNX node" << (nodes.size() > 1 ? "s " : " ")
        << llvm::join(nodes, ", ");
  out << "\n";
}

/// The linear index into `input` (broadcast to `output`) at the output
/// index named `at`, a multiple of `run` (a product of the innermost output
/// dimensions): the coordinates in those dimensions are 0 and left out.
std::string Emitter::indexExpr(MemRefType input, MemRefType output,
                               StringRef at, int64_t run) {
  if (input.getShape() == output.getShape())
    return at.str();
  if (input.getNumElements() == 1)
    return "0";
  ArrayRef<int64_t> in = input.getShape(), out = output.getShape();
  size_t lead = out.size() - in.size();
  SmallVector<std::string> terms;
  int64_t inStride = 1;
  for (int64_t k = in.size() - 1; k >= 0; --k) {
    int64_t outStride = 1;
    for (size_t j = lead + k + 1; j < out.size(); ++j)
      outStride *= out[j];
    if (in[k] != 1 && outStride * out[lead + k] > run) {
      std::string coord =
          outStride == 1
              ? llvm::formatv("({0} % {1})", at, out[lead + k]).str()
              : llvm::formatv("(({0} / {1}) % {2})", at, outStride,
                              out[lead + k])
                    .str();
      terms.push_back(inStride == 1 ? coord
                                    : coord + " * " + std::to_string(inStride));
    }
    inStride *= in[k];
  }
  return terms.empty() ? "0" : llvm::join(terms, " + ");
}

FailureOr<std::string>
Emitter::scalarExpr(Operation &op, DenseMap<Value, std::string> &scalars) {
  auto arg = [&](unsigned i) { return scalars.lookup(op.getOperand(i)); };
  auto bin = [&](StringRef symbol) {
    return "(" + arg(0) + " " + symbol.str() + " " + arg(1) + ")";
  };
  // Values computed in float (f32, and f16/bf16 widened to it).
  auto vectorMath = [&](Type type) {
    return printer.vectorMath(computeType(type));
  };
  auto call = [&](StringRef fn) {
    SmallVector<std::string> args;
    for (unsigned i = 0; i < op.getNumOperands(); ++i)
      args.push_back(arg(i));
    return fn.str() + "(" + llvm::join(args, ", ") + ")";
  };
  std::string expr =
      TypeSwitch<Operation *, std::string>(&op)
          .Case([&](arith::ConstantOp c) -> std::string {
            if (auto f = dyn_cast<FloatAttr>(c.getValue()))
              return floatLiteral(f.getValueAsDouble(), f.getType());
            if (auto i = dyn_cast<IntegerAttr>(c.getValue())) {
              if (i.getType().isInteger(1))
                return i.getValue().isZero() ? "false" : "true";
              return "static_cast<" + computeType(i.getType()) + ">(" +
                     std::to_string(i.getValue().getSExtValue()) + "LL)";
            }
            return "";
          })
          .Case<arith::AddFOp, arith::AddIOp>([&](auto) { return bin("+"); })
          .Case<arith::SubFOp, arith::SubIOp>([&](auto) { return bin("-"); })
          .Case<arith::MulFOp, arith::MulIOp>([&](auto) { return bin("*"); })
          .Case<arith::DivFOp, arith::DivSIOp>([&](auto) { return bin("/"); })
          .Case<arith::AndIOp>([&](auto) { return bin("&"); })
          .Case<arith::OrIOp>([&](auto) { return bin("|"); })
          .Case<arith::XOrIOp>([&](auto) { return bin("^"); })
          .Case([&](arith::NegFOp) { return "(-" + arg(0) + ")"; })
          .Case<arith::MaximumFOp>([&](auto) { return call("ztc_maximum"); })
          .Case<arith::MinimumFOp>([&](auto) { return call("ztc_minimum"); })
          .Case<arith::MaxSIOp>([&](auto) { return call("ztc_max"); })
          .Case<arith::MinSIOp>([&](auto) { return call("ztc_min"); })
          .Case([&](arith::CmpFOp cmp) -> std::string {
            switch (cmp.getPredicate()) {
            case arith::CmpFPredicate::OEQ:
              return bin("==");
            case arith::CmpFPredicate::OLT:
              return bin("<");
            case arith::CmpFPredicate::OGT:
              return bin(">");
            case arith::CmpFPredicate::UNE:
              return bin("!=");
            default:
              return "";
            }
          })
          .Case([&](arith::CmpIOp cmp) -> std::string {
            switch (cmp.getPredicate()) {
            case arith::CmpIPredicate::eq:
              return bin("==");
            case arith::CmpIPredicate::ne:
              return bin("!=");
            case arith::CmpIPredicate::slt:
              return bin("<");
            case arith::CmpIPredicate::sgt:
              return bin(">");
            default:
              return "";
            }
          })
          .Case([&](arith::SelectOp) {
            return "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
          })
          .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp,
                arith::FPToSIOp, arith::UIToFPOp, arith::ExtSIOp,
                arith::ExtUIOp, arith::TruncIOp>([&](Operation *cast) {
            return "static_cast<" + computeType(cast->getResult(0).getType()) +
                   ">(" + arg(0) + ")";
          })
          // Float exp and erf where the target vectorizes them (the CPU:
          // ztc::vecmath's, runtime/kernels/VecMath.h); libm's are calls.
          .Case([&](math::ExpOp exp) {
            return call(vectorMath(exp.getType()) ? "ztc::vecmath::exp"
                                                  : "std::exp");
          })
          .Case([&](math::LogOp) { return call("std::log"); })
          .Case([&](math::Log1pOp) { return call("std::log1p"); })
          .Case([&](math::TanhOp) { return call("std::tanh"); })
          .Case([&](math::SqrtOp) { return call("std::sqrt"); })
          .Case([&](math::SinOp) { return call("std::sin"); })
          .Case([&](math::CosOp) { return call("std::cos"); })
          .Case([&](math::ErfOp erf) {
            return call(vectorMath(erf.getType()) ? "ztc::vecmath::erf"
                                                  : "std::erf");
          })
          .Case([&](math::AbsFOp) { return call("std::fabs"); })
          .Case([&](math::PowFOp) { return call("std::pow"); })
          .Case([&](math::AbsIOp) { return call("ztc_absi"); })
          .Case([&](math::IPowIOp) { return call("ztc_ipow"); })
          .Default([](Operation *) { return std::string(); });
  if (expr.empty()) {
    op.emitError("the emitter cannot print this scalar op");
    return failure();
  }
  // 16-bit results round like a 16-bit operation would (bf16 in float
  // lanes: runtime/kernels/Half.h's roundToBFloat16), except a gradient
  // formula's intermediates (kernel.unrounded), which the store or an
  // explicit cast rounds.
  Type type = op.getResult(0).getType();
  if (op.hasAttr(kernel::kUnroundedAttr) && !isa<arith::TruncFOp>(op))
    return expr;
  if (type.isBF16())
    expr = "ztc::roundToBFloat16(" + expr + ")";
  else if (isHalf(type))
    expr = "static_cast<float>(" + storageType(type) + "(" + expr + "))";
  return expr;
}

LogicalResult
Emitter::printBody(ValueRange inputs, Block &block,
                   llvm::function_ref<std::string(MemRefType)> index,
                   DenseMap<Value, std::string> &scalars,
                   llvm::raw_ostream &b) {
  for (auto [i, input, arg] : llvm::enumerate(inputs, block.getArguments())) {
    auto type = cast<MemRefType>(input.getType());
    std::string scalar = "a" + std::to_string(i);
    scalars[arg] = scalar;
    // A bool read as its byte where the target asks (the CPU).
    if (printer.readsBoolsAsBytes() && type.getElementType().isInteger(1))
      b << "    const bool " << scalar
        << " = reinterpret_cast<const unsigned char *>(in" << i << ")["
        << index(type) << "] != 0;\n";
    else
      b << "    const " << computeType(type.getElementType()) << " " << scalar
        << " = static_cast<" << computeType(type.getElementType()) << ">("
        << "in" << i << "[" << index(type) << "]);\n";
  }
  unsigned temp = 0;
  for (Operation &inner : block.without_terminator()) {
    FailureOr<std::string> expr = scalarExpr(inner, scalars);
    if (failed(expr))
      return failure();
    std::string t = "t" + std::to_string(temp++);
    scalars[inner.getResult(0)] = t;
    b << "    const " << computeType(inner.getResult(0).getType()) << " " << t
      << " = " << *expr << ";\n";
  }
  return success();
}

LogicalResult Emitter::emitElementwise(kernel::ElementwiseOp op) {
  auto outType = cast<MemRefType>(op.getOutput().getType());
  int64_t count = outType.getNumElements();
  comment(op);
  std::string body;
  llvm::raw_string_ostream b(body);
  DenseMap<Value, std::string> scalars;
  Block &block = op.getBody().front();
  // A target may split the loop into runs (see broadcastRun): the outer
  // loop computes each input's index once per run, the inner one reads the
  // inputs in order, so it vectorizes without gathers.
  int64_t run = printer.elementwiseRun(op.getInputs(), outType, count);
  bool split = run < count && run >= 16;
  auto index = [&](MemRefType type) {
    if (!split)
      return indexExpr(type, outType);
    std::string index = indexExpr(type, outType, "r", run);
    if (readsInnermost(type, outType))
      index = index == "0" ? "j" : index + " + j";
    return index;
  };
  if (failed(printBody(op.getInputs(), block, index, scalars, b)))
    return failure();
  // Whether an output is also an input (an in-place update).
  bool inPlace = llvm::any_of(op.getOutputs(), [&](Value output) {
    return llvm::any_of(op.getInputs(), [&](Value input) {
      return kernel::rootBuffer(input) == kernel::rootBuffer(output);
    });
  });
  std::string pointer = printer.pointer(inPlace);
  SmallVector<std::string> params, args;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    auto type = cast<MemRefType>(input.getType());
    params.push_back("const " + storageType(type.getElementType()) + pointer +
                     "in" + std::to_string(i));
    args.push_back(name(input));
  }
  // One output is `out`, several out0, out1, ...; each stored after every
  // input element is read (an output may be an input, updated in place).
  // `stores` take the element's index.
  bool several = op.getOutputs().size() > 1;
  SmallVector<std::function<std::string(StringRef)>> stores;
  for (auto [i, output, yielded] :
       llvm::enumerate(op.getOutputs(), op.getYielded())) {
    Type outElem = cast<MemRefType>(output.getType()).getElementType();
    std::string outName = several ? "out" + std::to_string(i) : "out";
    std::string result = scalars.lookup(yielded);
    std::string store =
        isHalf(outElem)
            ? storageType(outElem) + "(" + result + ")"
            : "static_cast<" + storageType(outElem) + ">(" + result + ")";
    params.push_back(storageType(outElem) + pointer + outName);
    args.push_back(name(output));
    stores.push_back([=, &printer = printer](StringRef index) {
      return printer.storeElement(outName, outElem, result, store, index);
    });
  }
  // By value: a launch group's loops are printed after this returns.
  auto storeAll = [stores](StringRef index, StringRef indent) {
    std::string text;
    for (auto &store : stores)
      text += indent.str() + store(index) + "\n";
    return text;
  };

  ElementwiseLoop loop;
  loop.params.assign(params.begin(), params.end());
  loop.args.assign(args.begin(), args.end());
  loop.body = body;
  loop.storeAll = storeAll;
  loop.count = count;
  loop.run = run;
  loop.split = split;
  std::optional<int64_t> member = kernel::launchGroupOf(op);
  if (!member || !printer.info.groupsLaunches) {
    printer.printElementwise(entryOut, loop);
    return success();
  }
  if (member != group) {
    flushGroup();
    if (printedGroups.contains(*member))
      return op.emitOpError("is in launch group ")
             << *member
             << ", whose loops are not consecutive (only allocations, views "
                "and constants may lie between them)";
    group = member;
  }
  groupLoops.push_back(std::move(loop));
  return success();
}

void Emitter::flushGroup() {
  if (!group)
    return;
  printer.printElementwiseGroup(entryOut, groupLoops);
  printedGroups.insert(*group);
  groupLoops.clear();
  group.reset();
}

LogicalResult Emitter::emitReduce(kernel::ReduceOp op) {
  ArrayRef<int64_t> space = op.getSpace(), axes = op.getAxes();
  std::optional<kernel::ReductionGroups> groups =
      kernel::reductionGroups(space, axes);
  if (!groups)
    return op.emitOpError("reduces axes that do not group as [reduced, "
                          "kept, reduced], which the emitter has no loops for");
  int64_t outer = groups->outer, kept = groups->kept, inner = groups->inner;
  comment(op);
  // The input index at group indices o (outer), k (kept), i (inner).
  std::string error;
  auto index = [&](MemRefType type) -> std::string {
    std::optional<std::array<int64_t, 3>> strides =
        kernel::groupStrides(type.getShape(), space, axes);
    if (!strides) {
      error = "input of type " + std::to_string(type.getRank()) +
              "-d does not broadcast group by group";
      return "0";
    }
    SmallVector<std::string> terms;
    const char *names[] = {"o", "k", "i"};
    for (int g = 0; g < 3; ++g)
      if ((*strides)[g] == 1)
        terms.push_back(names[g]);
      else if ((*strides)[g] > 1)
        terms.push_back(std::string(names[g]) + " * " +
                        std::to_string((*strides)[g]));
    return terms.empty() ? "0" : llvm::join(terms, " + ");
  };
  std::string body;
  llvm::raw_string_ostream b(body);
  DenseMap<Value, std::string> scalars;
  if (failed(
          printBody(op.getInputs(), op.getBody().front(), index, scalars, b)))
    return failure();
  if (!error.empty())
    return op.emitOpError(error);
  Type outElem =
      cast<MemRefType>(op.getOutputs().front().getType()).getElementType();
  ReduceLoop loop;
  for (Value yielded : op.getYielded())
    loop.values.push_back(scalars.lookup(yielded));
  for (Value input : op.getInputs()) {
    loop.inputTypes.push_back(
        storageType(cast<MemRefType>(input.getType()).getElementType()));
    loop.args.push_back(name(input));
  }
  for (Value output : op.getOutputs())
    loop.args.push_back(name(output));
  for (StringRef line : llvm::split(StringRef(body).rtrim('\n'), '\n'))
    loop.body += "    " + line.str() + "\n";
  // Sums accumulate in f32, f64 ones in f64; a mean divides at the end.
  loop.acc = outElem.isF64() ? "double" : "float";
  loop.outputType = storageType(outElem);
  loop.half = isHalf(outElem);
  loop.mean = op.getKind() == kernel::ReduceKind::mean;
  loop.outer = outer;
  loop.kept = kept;
  loop.inner = inner;
  if (printer.info.plannedScratch) {
    loop.scratch = "ztc::Scratch{}";
    if (Value scratch = op.getScratch())
      loop.scratch =
          "ztc::Scratch{" + name(scratch) + ", " +
          std::to_string(cast<MemRefType>(scratch.getType()).getNumElements()) +
          "}";
  }
  printer.printReduce(entryOut, loop);
  return success();
}

LogicalResult Emitter::emitCall(kernel::CallOp op) {
  comment(op);
  const kernel::LibraryKernel &kernel = kernel::libraryKernelOf(op);
  ValueRange in = op.getInputs(), outs = op.getOutputs();
  auto dims = [&](Value v) {
    return this->dims(cast<MemRefType>(v.getType()).getShape());
  };
  auto elem = [&](Value v) {
    return storageType(cast<MemRefType>(v.getType()).getElementType());
  };
  std::string ns = printer.libraryNamespace().str();
  SmallVector<std::string> args;
  // Template parameters: T when a letter is T or C (its compute type),
  // then I (the first integer operand's type) when one is I.
  std::string letters = (kernel.inputs + kernel.outputs).str();
  SmallVector<std::string> templateArgs;
  if (llvm::any_of(letters,
                   [](char c) { return llvm::toUpper(c) == 'T' || c == 'C'; }))
    templateArgs.push_back(storageType(kernel::templateElementType(op)));
  for (auto [i, letter] : llvm::enumerate(kernel.inputs))
    if (letter == 'I' && i < in.size()) {
      templateArgs.push_back(elem(in[i]));
      break;
    }
  // Every operand as (pointer, dims): inputs, absent optional ones as
  // (nullptr, {}), then outputs.
  for (unsigned i = 0; i < kernel.maxInputs(); ++i) {
    if (i < in.size()) {
      args.push_back(name(in[i]));
      args.push_back(dims(in[i]));
    } else {
      args.push_back("nullptr");
      args.push_back(this->dims({}));
    }
  }
  for (Value v : outs) {
    args.push_back(name(v));
    args.push_back(dims(v));
  }
  // The parameter struct, its fields in Library.def's order; arrays are
  // declared in a block so their names never clash.
  std::string decls;
  unsigned arrays = 0;
  SmallVector<std::string> fields;
  for (const kernel::ConfigField &field : kernel.config) {
    switch (field.kind) {
    case kernel::ConfigKind::Int:
    case kernel::ConfigKind::Bits:
      fields.push_back(intLiteral(kernel::configInt(op, field.name)));
      break;
    case kernel::ConfigKind::MaybeInt:
      if (op.getConfig().get(field.name))
        fields.push_back("ztc::MaybeInt{true, " +
                         intLiteral(kernel::configInt(op, field.name)) + "}");
      else
        fields.push_back("ztc::MaybeInt{}");
      break;
    case kernel::ConfigKind::Bool:
    case kernel::ConfigKind::Flag:
      fields.push_back(kernel::configBool(op, field.name) ? "true" : "false");
      break;
    case kernel::ConfigKind::Float:
    case kernel::ConfigKind::MaybeFloat:
      fields.push_back(floatLiteral(kernel::configFloat(op, field.name),
                                    Float64Type::get(op.getContext())));
      break;
    case kernel::ConfigKind::Reduction: {
      StringRef reduction = kernel::configString(op, field.name);
      fields.push_back(std::string("ztc::Reduction::") +
                       (reduction == "none"  ? "None"
                        : reduction == "sum" ? "Sum"
                                             : "Mean"));
      break;
    }
    case kernel::ConfigKind::MaybeInts:
      if (!op.getConfig().get(field.name)) {
        fields.push_back("ztc::Ints{}");
        break;
      }
      [[fallthrough]];
    case kernel::ConfigKind::Ints: {
      std::string id = "c" + std::to_string(arrays++);
      ArrayRef<int64_t> values = kernel::configInts(op, field.name);
      SmallVector<std::string> texts;
      for (int64_t v : values)
        texts.push_back(intLiteral(v));
      decls += "    static const int64_t " + id + "[] = {" +
               llvm::join(texts, ", ") + (values.empty() ? "0" : "") + "};\n";
      fields.push_back("ztc::Ints{" + id + ", " +
                       std::to_string(values.size()) + "}");
      break;
    }
    }
  }
  args.push_back("ztc::" + kernel.paramsType.str() + "{" +
                 llvm::join(fields, ", ") + "}");
  // The planned scratch (ztc-plan-scratch), where the target's kernels take
  // it: none when the call needs none.
  if (printer.info.plannedScratch && kernel.takesScratch()) {
    if (Value scratch = op.getScratch())
      args.push_back(
          "ztc::Scratch{" + name(scratch) + ", " +
          std::to_string(cast<MemRefType>(scratch.getType()).getNumElements()) +
          "}");
    else
      args.push_back("ztc::Scratch{}");
  }
  if (printer.callsTakeStream())
    args.push_back("stream");
  std::string templ =
      templateArgs.empty() ? "" : "<" + llvm::join(templateArgs, ", ") + ">";
  out << "  {\n"
      << decls << "    " << ns << kernel.cppName << templ << "("
      << llvm::join(args, ", ") << ");\n  }\n";
  return success();
}

LogicalResult Emitter::emitCollective(kernel::CollectiveOpInterface op) {
  comment(op);
  Value in = op.getInput(), output = op.getOutput();
  auto count = [](Value v) {
    return cast<MemRefType>(v.getType()).getNumElements();
  };
  Type element = cast<MemRefType>(output.getType()).getElementType();
  if (op.communicates()) {
    rt::Collective collective;
    collective.entry = entryName;
    collective.op =
        static_cast<rt::CollectiveOp>(kernel::collectiveCode(op.getKind()));
    FailureOr<rt::DType> dtype = runtimeDType(element, op, "a collective");
    if (failed(dtype))
      return failure();
    collective.dtype = *dtype;
    collective.elements = op.getElements();
    step.collectives.push_back(std::move(collective));
  }
  // n: the elements of the smaller side (StepAbi.h's ztc_comm).
  SmallVector<std::string> args = {
      "ctx", name(in), name(output),
      std::to_string(std::min(count(in), count(output)))};
  if (printer.callsTakeStream())
    args.push_back("stream");
  out << "  {\n    " << printer.libraryNamespace()
      << kernel::collectiveFunction(op.getKind()) << "<" << storageType(element)
      << ">(" << llvm::join(args, ", ") << ");\n  }\n";
  return success();
}

LogicalResult Emitter::run(func::FuncOp func) {
  Block &block = func.getBody().front();
  auto arena = func->getAttrOfType<IntegerAttr>("kernel.arena_bytes");
  if (!arena)
    return func.emitError("the step has no memory plan; run ztc-plan-memory");
  step.arenaBytes = arena.getInt();

  // Bindings: arguments (inputs and parameters), then constants.
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    auto type = cast<MemRefType>(arg.getType());
    train::BindingAttr bound = train::getBinding(func, i);
    if (!bound)
      return func.emitError("argument ")
             << i << " has no train.binding: the runtime cannot bind it";
    rt::Binding binding;
    binding.role = runtimeRole(bound.getRole());
    binding.name = bound.getName().str();
    binding.file = rt::fileStemFor(binding.name);
    FailureOr<rt::DType> dtype = runtimeDType(
        type.getElementType(), func, "argument '" + binding.name + "'");
    if (failed(dtype))
      return failure();
    binding.dtype = *dtype;
    binding.shape.assign(type.getShape().begin(), type.getShape().end());
    if (auto full = func.getArgAttrOfType<DenseI64ArrayAttr>(
            i, dist::DistDialect::kFullShapeAttr))
      binding.fullShape.assign(full.asArrayRef().begin(),
                               full.asArrayRef().end());
    if (auto of = func.getArgAttrOfType<StringAttr>(i, train::kCopyOfAttr))
      binding.copyOf = of.str();
    // Entries share one bindings array, matched by name: an argument
    // another entry already bound reuses its slot.
    auto existing = llvm::find_if(bindings, [&](const rt::Binding &other) {
      return other.name == binding.name;
    });
    size_t slot = existing - bindings.begin();
    if (existing == bindings.end()) {
      bindings.push_back(binding);
    } else if (existing->shape != binding.shape ||
               existing->fullShape != binding.fullShape ||
               existing->dtype != binding.dtype ||
               existing->role != binding.role ||
               existing->copyOf != binding.copyOf) {
      return func.emitError("argument ")
             << i << " ('" << binding.name
             << "') differs from the binding of the same name in another "
                "entry";
    }
    out << "  auto *" << bind(arg, "b") << " = static_cast<"
        << storageType(type.getElementType()) << " *>(bindings[" << slot
        << "]);  // " << binding.name << "\n";
  }

  for (Operation &op : block) {
    // A launch group ends at the first op that runs anything else: another
    // op, or a loop outside it.
    if (!isa<kernel::AllocOp, kernel::ViewOp, kernel::ConstantOp>(op) &&
        !(group && isa<kernel::ElementwiseOp>(op) &&
          kernel::launchGroupOf(&op) == group))
      flushGroup();
    if (isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
            kernel::CollectiveOp, kernel::RecordLossOp, kernel::CheckFiniteOp,
            kernel::SignalOp, kernel::WaitOp>(op))
      switchStream(&op);
    // Work a target hands to the runtime's thread for its stream (the CPU:
    // kernels/CpuKernels.h, onStream), which runs it in order after what
    // was handed to it before.
    bool handOver =
        printer.handsOver(kernel::streamOf(&op)) &&
        isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
            kernel::CollectiveOp, kernel::RecordLossOp, kernel::CheckFiniteOp>(
            op);
    if (handOver)
      printer.printHandOver(out, kernel::streamOf(&op));
    LogicalResult result =
        TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](kernel::ConstantOp c) -> LogicalResult {
              auto type = cast<MemRefType>(c.getType());
              rt::Binding binding;
              binding.role = rt::BindingRole::Constant;
              binding.name = "__const" + std::to_string(bindings.size());
              binding.file = rt::fileStemFor(binding.name);
              FailureOr<rt::DType> dtype =
                  runtimeDType(type.getElementType(), c, "a constant");
              if (failed(dtype))
                return failure();
              binding.dtype = *dtype;
              binding.shape.assign(type.getShape().begin(),
                                   type.getShape().end());
              shared.constants[binding.name] = c.getValue();
              out << "  auto *" << bind(c.getResult(), "k") << " = static_cast<"
                  << storageType(type.getElementType()) << " *>(bindings["
                  << bindings.size() << "]);\n";
              bindings.push_back(std::move(binding));
              return success();
            })
            .Case([&](kernel::AllocOp alloc) -> LogicalResult {
              auto type = cast<MemRefType>(alloc.getType());
              if (!alloc.getOffset())
                return alloc.emitOpError("has no planned offset");
              out << "  auto *" << bind(alloc.getResult(), "v")
                  << " = reinterpret_cast<"
                  << storageType(type.getElementType()) << " *>(arena + "
                  << *alloc.getOffset() << ");\n";
              return success();
            })
            .Case([&](kernel::ViewOp view) {
              names[view.getResult()] = name(view.getSource());
              return success();
            })
            .Case([&](kernel::ElementwiseOp e) { return emitElementwise(e); })
            .Case([&](kernel::ReduceOp r) { return emitReduce(r); })
            .Case([&](kernel::CallOp c) { return emitCall(c); })
            .Case([&](kernel::CollectiveOpInterface c) {
              return emitCollective(c);
            })
            .Case([&](kernel::SignalOp signal) {
              int64_t index = step.events++;
              eventIndex[signal.getEvent()] = index;
              printer.printSignal(out, currentStream, index);
              return success();
            })
            .Case([&](kernel::WaitOp wait) {
              int64_t index = eventIndex.lookup(wait.getEvent());
              printer.printWait(out, currentStream, index);
              return success();
            })
            .Case([&](kernel::CheckFiniteOp check) {
              shared.finiteChecks.push_back(
                  {check.getNode().str(), check.getOp().str(),
                   kernel::stringifyFinitePass(check.getPass()).str()});
              auto type = cast<MemRefType>(check.getBuffer().getType());
              out << "  // check_finite " << shared.finiteChecks.size() << ": "
                  << shared.finiteChecks.back().describe() << "\n";
              out << "  " << printer.libraryNamespace()
                  << "checkFinite(ctx->state, " << name(check.getBuffer())
                  << ", " << type.getNumElements() << ", "
                  << shared.finiteChecks.size() << streamArgument() << ");\n";
              return success();
            })
            .Case([&](kernel::RecordLossOp record) {
              comment(record);
              out << "  " << printer.libraryNamespace()
                  << "recordLoss(ctx->state, " << name(record.getLoss())
                  << streamArgument() << ");\n";
              return success();
            })
            .Case([&](func::ReturnOp ret) -> LogicalResult {
              for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
                auto alloc =
                    kernel::rootBuffer(value).getDefiningOp<kernel::AllocOp>();
                if (!alloc)
                  return ret.emitOpError("returns a buffer outside the arena");
                auto type = cast<MemRefType>(value.getType());
                auto nameAttr =
                    func.getResultAttrOfType<StringAttr>(i, "onnx.name");
                rt::Output output;
                output.name =
                    nameAttr ? nameAttr.str() : "out" + std::to_string(i);
                output.file = rt::fileStemFor(output.name);
                FailureOr<rt::DType> dtype = runtimeDType(
                    type.getElementType(), ret, "output '" + output.name + "'");
                if (failed(dtype))
                  return failure();
                output.dtype = *dtype;
                output.shape.assign(type.getShape().begin(),
                                    type.getShape().end());
                output.offset = static_cast<uint64_t>(*alloc.getOffset());
                step.outputs.push_back(std::move(output));
              }
              return success();
            })
            .Default([&](Operation *other) {
              return other->emitOpError("the emitter cannot print this op");
            });
    if (failed(result))
      return failure();
    if (handOver)
      printer.printHandOverEnd(out);
  }

  return success();
}

/// The file header and the scalar helpers every step source starts with.
void printPrelude(llvm::raw_ostream &os, const TargetPrinter &printer,
                  func::FuncOp func, int64_t arenaBytes) {
  os << "// Generated by ztc; do not edit.\n";
  if (auto source =
          func->getParentOfType<ModuleOp>()->getAttrOfType<StringAttr>(
              "onnx.source"))
    // The file name only: the same model compiled from another directory
    // gives the same source, so the compiled step is reused.
    os << "// Model: " << llvm::sys::path::filename(source.getValue()) << "\n";
  os << "// Arena: " << arenaBytes << " bytes (planned peak).\n";
  if (auto unplanned =
          func->getAttrOfType<IntegerAttr>("kernel.unplanned_bytes"))
    os << "// Buffers after fusion, one each: " << unplanned.getInt()
       << " bytes.\n";
  if (auto tensors = func->getAttrOfType<IntegerAttr>("kernel.tensor_bytes"))
    os << "// Intermediate tensors before fusion: " << tensors.getInt()
       << " bytes.\n";
  printer.printIncludes(os);
  os << R"(#include <cmath>
#include <cstdint>

#define ZTC_SCALAR static inline )"
     << printer.scalarQualifier() << R"(
template <class T> ZTC_SCALAR T ztc_maximum(T a, T b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}
template <class T> ZTC_SCALAR T ztc_minimum(T a, T b) {
  return (a != a || b != b) ? a + b : (a < b ? a : b);
}
template <class T> ZTC_SCALAR T ztc_max(T a, T b) { return a > b ? a : b; }
template <class T> ZTC_SCALAR T ztc_min(T a, T b) { return a < b ? a : b; }
template <class T> ZTC_SCALAR T ztc_absi(T a) { return a < 0 ? -a : a; }
template <class T> ZTC_SCALAR T ztc_ipow(T base, T exp) {
  T result = 1;
  for (; exp > 0; --exp)
    result *= base;
  return exp < 0 ? T(0) : result;
}

)";
}

/// Prints the entry function once its body is collected.
void Emitter::printEntry(llvm::raw_ostream &os) {
  os << kernels;
  // The step ABI (runtime/kernels/StepAbi.h): one context, work enqueued
  // on its stream, nothing copied to the host, no synchronization.
  os << "extern \"C\" " << printer.entryAttributes() << "void " << entryName
     << "(const ztc_step_context *ctx) {\n"
     << "  void *const *bindings = ctx->bindings;\n"
     << "  char *arena = ctx->arena;\n"
     << "  (void)bindings;\n  (void)arena;\n";
  printer.printEntryStart(os);
  os << entryText;
  // Last: the kernels' data error into the context's slot.
  printer.printEntryEnd(os);
  os << "}\n\n";
}

} // namespace

LogicalResult codegen::emitSteps(ArrayRef<Entry> entries, Target target,
                                 llvm::raw_ostream &os,
                                 std::vector<StepInterface> &steps,
                                 SharedInterface &shared) {
  steps.assign(entries.size(), StepInterface());
  std::unique_ptr<TargetPrinter> printer = createTargetPrinter(target);
  SmallVector<std::unique_ptr<Emitter>> emitters;
  int64_t arena = 0;
  for (auto [entry, step] : llvm::zip(entries, steps)) {
    emitters.push_back(
        std::make_unique<Emitter>(*printer, entry.name, step, shared));
    if (failed(emitters.back()->run(entry.func)))
      return failure();
    arena = std::max(arena, step.arenaBytes);
  }
  printPrelude(os, *printer, entries.front().func, arena);
  printer->printSharedFunctions(os);
  for (auto &emitter : emitters)
    emitter->printEntry(os);
  return success();
}
