//===- Emit.cpp - kernel dialect to C++ / CUDA source ---------------------===//
//
// The emitter walks the straight-line body of a planned step function:
//   - arguments and kernel.constant become pointers into `bindings`,
//   - kernel.alloc becomes a pointer at its planned arena offset,
//   - kernel.view reuses its source's pointer,
//   - kernel.elementwise becomes a call of a function of one loop (CPU,
//     OpenMP) or a launch of a __global__ kernel (CUDA) whose body prints
//     the scalar arith/math ops; on the CPU, kernels whose text is the same
//     (a transformer's layers repeat theirs) share one function, so the
//     host compiler builds each loop once,
//   - kernel.reduce becomes a function of loops over its kept and reduced
//     indices (CPU) or a kernel of one block per output (CUDA),
//   - kernel.call becomes a call into the runtime's kernel library.
// Every kernel is preceded by a comment naming the ONNX nodes it computes.
//
//===----------------------------------------------------------------------===//

#include "codegen/Emit.h"

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

/// The C++ type buffers of `type` store.
std::string storageType(Type type) {
  if (type.isF32())
    return "float";
  if (type.isF64())
    return "double";
  if (type.isF16())
    return "ztc::f16";
  if (type.isBF16())
    return "ztc::bf16";
  if (type.isSignlessInteger(64))
    return "int64_t";
  if (type.isSignlessInteger(32))
    return "int32_t";
  if (type.isSignlessInteger(8))
    return "int8_t";
  return "bool";
}

/// The C++ type scalars of `type` are computed in.
std::string computeType(Type type) {
  if (type.isF16() || type.isBF16())
    return "float";
  return storageType(type);
}

bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

std::string dimsLiteral(ArrayRef<int64_t> shape, Target target) {
  return std::string(target == Target::Cuda ? "ztc::cuda::Dims{"
                                            : "ztc::cpu::Dims{") +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ", ") +
         "}";
}

std::string floatLiteral(double value, Type type) {
  if (std::isnan(value))
    return "NAN";
  if (std::isinf(value))
    return value > 0 ? "INFINITY" : "(-INFINITY)";
  std::string text = llvm::formatv("{0:e16}", value).str();
  return type.isF64() ? text : "static_cast<float>(" + text + ")";
}

/// The CPU's elementwise functions of one source, shared by its entries:
/// one per distinct text.
struct CpuKernels {
  std::string text;
  /// Each function's parameters and body, and its name.
  llvm::StringMap<std::string> names;
};

/// Prints one step.
class Emitter {
public:
  Emitter(Target target, StringRef entryName, StepInterface &step,
          SharedInterface &shared, CpuKernels &cpuKernels)
      : target(target), entryName(entryName.str()), step(step), shared(shared),
        bindings(shared.bindings), cpuKernels(cpuKernels), out(entryText) {}

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
  LogicalResult emitReduce(kernel::ReduceOp op);
  /// Calls the CPU function of `params` and `loop` with `args`, defining
  /// it (named `prefix` and a number) unless one of the same text exists.
  void callCpuFunction(StringRef prefix, ArrayRef<std::string> params,
                       ArrayRef<std::string> args, StringRef loop);
  LogicalResult emitCall(kernel::CallOp op);
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

  Target target;
  std::string entryName;
  StepInterface &step;
  /// What every entry of the source shares: bindings and constants.
  SharedInterface &shared;
  std::vector<rt::Binding> &bindings;
  CpuKernels &cpuKernels;
  /// The entry function's body, printed as ops are visited.
  std::string entryText;
  llvm::raw_string_ostream out;
  DenseMap<Value, std::string> names;
  /// Kernels (CUDA) printed ahead of the entry.
  std::string kernels;
  unsigned kernelCount = 0;
  std::string newCudaKernelName() {
    return entryName + "_kernel" + std::to_string(kernelCount++);
  }
  /// The stream the printed code enqueues on now, and each signalled
  /// event's index in ctx->events.
  int64_t currentStream = 0;
  DenseMap<Value, int64_t> eventIndex;

  /// Points `stream` at `op`'s stream (kernel.stream) before its work.
  void switchStream(Operation *op);
};

void Emitter::switchStream(Operation *op) {
  int64_t stream = kernel::streamOf(op);
  step.streams = std::max(step.streams, stream + 1);
  if (stream == currentStream)
    return;
  currentStream = stream;
  if (target == Target::Cuda)
    out << "  stream = static_cast<cudaStream_t>(ctx->streams[" << stream
        << "]);\n";
  else
    out << "  // stream " << stream << "\n";
}

void Emitter::comment(Operation *op) {
  SmallVector<std::string> nodes;
  train::collectNodeNames(op->getLoc(), nodes);
  out << "  // ";
  if (auto call = dyn_cast<kernel::CallOp>(op))
    out << call.getCallee();
  else if (auto reduce = dyn_cast<kernel::ReduceOp>(op))
    out << "reduce " << reduce.getKind();
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
    return target == Target::Cpu && computeType(type) == "float";
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
          // Float exp and erf on the CPU: ztc::vecmath's, which the loop
          // vectorizes (runtime/kernels/VecMath.h); libm's are calls.
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

/// Whether `input`, broadcast to `output`, has the output's innermost
/// dimension that is not 1 (false for an output of ones).
static bool readsInnermost(MemRefType input, MemRefType output) {
  ArrayRef<int64_t> in = input.getShape(), out = output.getShape();
  for (int64_t k = int64_t(out.size()) - 1; k >= 0; --k)
    if (out[k] != 1) {
      int64_t at = k - int64_t(out.size() - in.size());
      return at >= 0 && in[at] == out[k];
    }
  return false;
}

/// The elements of the innermost output dimensions over which every input
/// is either read in order (it has those dimensions) or not at all (they
/// are broadcast): in a run of that many consecutive outputs, each input's
/// index is its index at the run's start, plus the position in the run if
/// `readsInnermost`. A bias added to rows, a row statistic or a per-channel
/// scale of NCHW data runs over the row, the row or the image plane.
static int64_t broadcastRun(ValueRange inputs, MemRefType output) {
  ArrayRef<int64_t> out = output.getShape();
  int64_t run = 1;
  for (int64_t k = int64_t(out.size()) - 1; k >= 0; --k) {
    if (out[k] == 1)
      continue;
    for (Value input : inputs) {
      auto type = cast<MemRefType>(input.getType());
      ArrayRef<int64_t> in = type.getShape();
      int64_t at = k - int64_t(out.size() - in.size());
      if ((at >= 0 && in[at] == out[k]) != readsInnermost(type, output))
        return run;
    }
    run *= out[k];
  }
  return run;
}

void Emitter::callCpuFunction(StringRef prefix, ArrayRef<std::string> params,
                              ArrayRef<std::string> args, StringRef loop) {
  std::string key =
      "(" + llvm::join(params, ", ") + ") {\n" + loop.str() + "}\n";
  auto [found, added] = cpuKernels.names.try_emplace(
      key, prefix.str() + std::to_string(cpuKernels.names.size()));
  if (added)
    cpuKernels.text += "static void " + found->second + key + "\n";
  out << "  " << found->second << "(" << llvm::join(args, ", ") << ");\n";
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
    // On the CPU a bool is read as its byte: GCC has no vector type for
    // bool and leaves such a loop scalar (a ReLU's gradient).
    if (target == Target::Cpu && type.getElementType().isInteger(1))
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
  // On the CPU, a broadcast splits the loop into runs (see broadcastRun):
  // the outer loop computes each input's index once per run, the inner one
  // reads the inputs in order, so it vectorizes without gathers.
  int64_t run =
      target == Target::Cpu ? broadcastRun(op.getInputs(), outType) : count;
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
  // CUDA's pointers are __restrict__ unless an output is also an input (an
  // in-place update): the compiler may then move a read past a write.
  bool inPlace = llvm::any_of(op.getOutputs(), [&](Value output) {
    return llvm::any_of(op.getInputs(), [&](Value input) {
      return kernel::rootBuffer(input) == kernel::rootBuffer(output);
    });
  });
  std::string pointer =
      target == Target::Cuda && !inPlace ? " *__restrict__ " : " *";
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
    if (target == Target::Cuda) {
      stores.push_back([=](StringRef index) {
        return outName + "[" + index.str() + "] = " + store + ";";
      });
      continue;
    }
    // On the CPU a half result is stored as its bits (GCC does not
    // vectorize a loop that assigns a whole struct, f16 or bf16, through a
    // pointer), a bool as its byte.
    std::string cpuStore =
        isHalf(outElem) ? ".bits = " + store + ".bits" : " = " + store;
    std::string cpuOut = outName;
    if (outElem.isInteger(1)) {
      cpuOut = "reinterpret_cast<unsigned char *>(" + outName + ")";
      cpuStore = " = static_cast<unsigned char>(" + result + ")";
    }
    stores.push_back([=](StringRef index) {
      return cpuOut + "[" + index.str() + "]" + cpuStore + ";";
    });
  }
  auto storeAll = [&](StringRef index, StringRef indent) {
    std::string text;
    for (auto &store : stores)
      text += indent.str() + store(index) + "\n";
    return text;
  };

  if (target == Target::Cpu) {
    // Iterations are independent (each writes its own elements; an in-place
    // kernel reads the element it writes, so the pointers are not
    // __restrict__), as the threads already assume: simd lets the compiler
    // vectorize selects and ztc::vecmath's math.
    std::string loop;
    llvm::raw_string_ostream l(loop);
    if (split) {
      // r: the run's first output; j: the position in the run.
      if (count >= 32768)
        l << "#pragma omp parallel for\n";
      std::string inner;
      for (StringRef line : llvm::split(StringRef(body).rtrim('\n'), '\n'))
        inner += "  " + line.str() + "\n";
      l << "  for (int64_t r = 0; r < " << count << "; r += " << run << ") {\n"
        << "#pragma omp simd\n"
        << "    for (int64_t j = 0; j < " << run << "; ++j) {\n"
        << inner << storeAll("r + j", "      ") << "    }\n  }\n";
    } else {
      l << (count >= 32768 ? "#pragma omp parallel for simd\n"
                           : "#pragma omp simd\n")
        << "  for (int64_t i = 0; i < " << count << "; ++i) {\n"
        << body << storeAll("i", "    ") << "  }\n";
    }
    callCpuFunction("ztc_elementwise", params, args, loop);
    return success();
  }
  // CUDA: a grid-stride kernel ahead of the entry, launched here.
  std::string kernelName = newCudaKernelName();
  llvm::raw_string_ostream k(kernels);
  k << "__global__ void " << kernelName << "(" << llvm::join(params, ", ")
    << ") {\n"
    << "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; "
       "i < "
    << count << "; i += (int64_t)gridDim.x * blockDim.x) {\n"
    << body << storeAll("i", "    ") << "  }\n}\n\n";
  int64_t blocks = std::min<int64_t>((count + 255) / 256, 65535);
  out << "  " << kernelName << "<<<" << blocks << ", 256, 0, stream>>>("
      << llvm::join(args, ", ") << ");\n";
  return success();
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
  std::string value = scalars.lookup(op.getYielded());
  Type outElem = cast<MemRefType>(op.getOutput().getType()).getElementType();
  // Sums accumulate in f32, f64 ones in f64; a mean divides at the end.
  std::string acc = outElem.isF64() ? "double" : "float";
  std::string total = op.getKind() == "mean"
                          ? "(sum / static_cast<" + acc + ">(" +
                                std::to_string(op.getCount()) + "))"
                          : "sum";
  std::string stored =
      isHalf(outElem)
          ? storageType(outElem) + "(" + total + ")"
          : "static_cast<" + storageType(outElem) + ">(" + total + ")";
  SmallVector<std::string> params, args;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    auto type = cast<MemRefType>(input.getType());
    params.push_back("const " + storageType(type.getElementType()) +
                     (target == Target::Cuda ? " *__restrict__ in" : " *in") +
                     std::to_string(i));
    args.push_back(name(input));
  }
  params.push_back(storageType(outElem) +
                   (target == Target::Cuda ? " *__restrict__ out" : " *out"));
  args.push_back(name(op.getOutput()));
  std::string indented;
  for (StringRef line : llvm::split(StringRef(body).rtrim('\n'), '\n'))
    indented += "    " + line.str() + "\n";

  if (target == Target::Cpu) {
    // The terms of one output in the library reduction's order (reduce in
    // CpuKernels.h): with an inner group, each inner run summed in vector
    // lanes and the runs added in order (an output per thread); without,
    // rows read in memory order, the outputs side by side: up to
    // kReduceBlock outputs, the rows in reduceChunks chunks (a chunk per
    // thread) whose sums are added in order, else blocks of outputs over
    // every row (a block per thread). Threads change no result.
    std::string loop;
    llvm::raw_string_ostream l(loop);
    int64_t work = outer * kept * inner;
    std::string parallel =
        work >= 32768 ? "#pragma omp parallel for\n" : std::string();
    std::string store = isHalf(outElem) ? "out[k].bits = " + stored + ".bits;"
                                        : "out[k] = " + stored + ";";
    if (inner > 1) {
      l << parallel << "  for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << "    " << acc << " sum = 0;\n"
        << "    for (int64_t o = 0; o < " << outer << "; ++o) {\n"
        << "      " << acc << " run = 0;\n"
        << "#pragma omp simd reduction(+ : run)\n"
        << "      for (int64_t i = 0; i < " << inner << "; ++i) {\n"
        << indented << "        run += " << value << ";\n"
        << "      }\n      sum += run;\n    }\n"
        << "    " << store << "\n  }\n";
    } else if (kept <= 256) {
      l << "  constexpr int64_t chunks = ztc::cpu::detail::reduceChunks("
        << outer << ");\n"
        << "  " << acc << " partial[chunks][" << kept << "];\n"
        << parallel << "  for (int64_t c = 0; c < chunks; ++c) {\n"
        << "    " << acc << " *sums = partial[c];\n"
        << "    for (int64_t k = 0; k < " << kept << "; ++k)\n"
        << "      sums[k] = 0;\n"
        << "    for (int64_t o = " << outer << " * c / chunks; o < " << outer
        << " * (c + 1) / chunks; ++o) {\n"
        << "#pragma omp simd\n"
        << "      for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << indented << "        sums[k] += " << value << ";\n"
        << "      }\n    }\n  }\n"
        << "  for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << "    " << acc << " sum = partial[0][k];\n"
        << "    for (int64_t c = 1; c < chunks; ++c)\n"
        << "      sum += partial[c][k];\n"
        << "    " << store << "\n  }\n";
    } else {
      l << "  const int64_t width = ztc::cpu::detail::reduceBlockWidth(" << kept
        << ", " << (work >= 32768 ? "true" : "false") << ");\n"
        << parallel << "  for (int64_t first = 0; first < " << kept
        << "; first += width) {\n"
        << "    const int64_t n = std::min<int64_t>(width, " << kept
        << " - first);\n"
        << "    " << acc << " sums[ztc::cpu::detail::kReduceBlock] = {};\n"
        << "    for (int64_t o = 0; o < " << outer << "; ++o) {\n"
        << "#pragma omp simd\n"
        << "      for (int64_t j = 0; j < n; ++j) {\n"
        << "        const int64_t k = first + j;\n"
        << indented << "        sums[j] += " << value << ";\n"
        << "      }\n    }\n"
        << "    for (int64_t j = 0; j < n; ++j) {\n"
        << "      const int64_t k = first + j;\n"
        << "      const " << acc << " sum = sums[j];\n"
        << "      " << store << "\n    }\n  }\n";
    }
    callCpuFunction("ztc_reduce", params, args, loop);
    return success();
  }
  // CUDA: a block per output (grid-stride over the outputs); its threads
  // take the terms in turn, then add their sums in a fixed tree, so the
  // result does not depend on scheduling.
  std::string kernelName = newCudaKernelName();
  llvm::raw_string_ostream k(kernels);
  k << "__global__ void " << kernelName << "(" << llvm::join(params, ", ")
    << ") {\n"
    << "  __shared__ " << acc << " partial[256];\n"
    << "  for (int64_t k = blockIdx.x; k < " << kept << "; k += gridDim.x) {\n"
    << "    " << acc << " sum = 0;\n"
    << "    for (int64_t r = threadIdx.x; r < " << outer * inner
    << "; r += blockDim.x) {\n"
    << "      const int64_t o = r / " << inner << ", i = r % " << inner << ";\n"
    << "      (void)o; (void)i;\n"
    << indented << "      sum += " << value << ";\n    }\n"
    << "    partial[threadIdx.x] = sum;\n    __syncthreads();\n"
    << "    for (int half = blockDim.x / 2; half > 0; half /= 2) {\n"
    << "      if (threadIdx.x < half)\n"
    << "        partial[threadIdx.x] += partial[threadIdx.x + half];\n"
    << "      __syncthreads();\n    }\n"
    << "    if (threadIdx.x == 0) {\n"
    << "      sum = partial[0];\n"
    << "      out[k] = " << stored << ";\n    }\n"
    << "    __syncthreads();\n  }\n}\n\n";
  int64_t blocks = std::min<int64_t>(kept, 65535);
  out << "  " << kernelName << "<<<" << blocks << ", 256, 0, stream>>>("
      << llvm::join(args, ", ") << ");\n";
  return success();
}

LogicalResult Emitter::emitCall(kernel::CallOp op) {
  comment(op);
  // Configuration through the library table's typed accessors: a key the
  // kernel does not declare is a bug here, not a silent default.
  auto intValue = [&](StringRef key) { return kernel::configInt(op, key); };
  auto boolValue = [&](StringRef key) {
    return kernel::configBool(op, key) ? "true" : "false";
  };
  auto floatValue = [&](StringRef key) {
    return floatLiteral(kernel::configFloat(op, key),
                        Float64Type::get(op.getContext()));
  };
  auto dims = [&](Value v) {
    return dimsLiteral(cast<MemRefType>(v.getType()).getShape(), target);
  };
  auto elem = [&](Value v) {
    return storageType(cast<MemRefType>(v.getType()).getElementType());
  };
  // Arrays are declared in a block so names never clash.
  std::string decls;
  unsigned arrays = 0;
  auto array = [&](StringRef key) {
    std::string id = "c" + std::to_string(arrays++);
    SmallVector<std::string> values;
    for (int64_t v : kernel::configInts(op, key))
      values.push_back(std::to_string(v));
    decls += "    static const int64_t " + id + "[] = {" +
             llvm::join(values, ", ") + (values.empty() ? "0" : "") + "};\n";
    return id;
  };
  ValueRange in = op.getInputs();
  Value output = op.getOutputs().front();
  std::string T = elem(output);
  std::string x = name(in[0]), y = name(output);
  auto optional = [&](unsigned i) {
    return i < in.size() ? name(in[i]) : std::string("nullptr");
  };
  StringRef callee = op.getCallee();
  std::string call;
  // Convolutions over NHWC tensors (ztc-channels-last) take a trailing
  // flag; the CUDA library has NCHW convolutions only.
  std::string channelsLast;
  if (callee.starts_with("conv2d") && kernel::configBool(op, "channels_last")) {
    if (target == Target::Cuda)
      return op.emitOpError("'")
             << callee
             << "' over channels-last tensors: the CUDA kernels take NCHW "
                "(compile with --conv-layout nchw)";
    channelsLast = ", true";
  }
  std::string ns = target == Target::Cuda ? "ztc::cuda::" : "ztc::cpu::";
  if (callee == "matmul") {
    // Operands stored transposed (ztc-fold-transposes) keep their shapes.
    call =
        llvm::formatv("matmul<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8})", T,
                      x, dims(in[0]), name(in[1]), dims(in[1]), y, dims(output),
                      boolValue("transpose_a"), boolValue("transpose_b"));
  } else if (callee == "matmul_nf4") {
    ArrayRef<int64_t> shape = kernel::configInts(op, "weight_shape");
    call = llvm::formatv(
        "matmulNf4<{0}>({1}, {2}, reinterpret_cast<const uint8_t *>({3}), "
        "reinterpret_cast<const uint8_t *>({4}), {5}, {6}, {7}, {8}, {9}, "
        "{10}, {11})",
        T, x, dims(in[0]), name(in[1]), name(in[2]), name(in[3]), name(in[4]),
        shape[0], shape[1], boolValue("transpose_b"), y, dims(output));
  } else if (callee == "conv2d") {
    std::string s = array("strides"), p = array("pads"), d = array("dilations");
    call = llvm::formatv("conv2d<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
                         "{9}, {10}, {11}{12})",
                         T, x, dims(in[0]), name(in[1]), dims(in[1]),
                         optional(2), y, dims(output), s, p, d,
                         intValue("group"), channelsLast);
  } else if (callee == "max_pool2d") {
    std::string k = array("kernel"), s = array("strides"), p = array("pads"),
                d = array("dilations");
    call = llvm::formatv("maxPool2d<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                         "{8})",
                         T, x, dims(in[0]), y, dims(output), k, s, p, d);
  } else if (callee == "avg_pool2d") {
    std::string k = array("kernel"), s = array("strides"), p = array("pads");
    call = llvm::formatv("avgPool2d<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                         "{8})",
                         T, x, dims(in[0]), y, dims(output), k, s, p,
                         boolValue("count_include_pad"));
  } else if (callee == "softmax" || callee == "log_softmax") {
    call = llvm::formatv("{0}<{1}>({2}, {3}, {4}, {5})",
                         callee == "softmax" ? "softmax" : "logSoftmax", T, x,
                         dims(in[0]), intValue("axis"), y);
  } else if (callee == "layer_norm") {
    call = llvm::formatv("layerNorm<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7})", T,
                         x, dims(in[0]), intValue("axis"), name(in[1]),
                         optional(2), floatValue("epsilon"), y);
  } else if (callee == "layer_norm_backward") {
    call = llvm::formatv(
        "layerNormBackward<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7})", T, x,
        dims(in[0]), intValue("axis"), name(in[1]), name(in[2]),
        floatValue("epsilon"), y);
  } else if (callee == "batch_norm") {
    call =
        llvm::formatv("batchNorm<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8})",
                      T, x, dims(in[0]), name(in[1]), name(in[2]), name(in[3]),
                      name(in[4]), floatValue("epsilon"), y);
  } else if (callee.starts_with("reduce_") && callee != "reduce_scatter") {
    uint64_t mask = 0;
    for (int64_t axis : kernel::configInts(op, "axes"))
      mask |= uint64_t(1) << axis;
    StringRef kind = callee == "reduce_sum"    ? "Sum"
                     : callee == "reduce_mean" ? "Mean"
                                               : "Max";
    call = llvm::formatv("reduce<{0}, {5}ReduceKind::{1}>({2}, {3}, {4}ull, "
                         "{6})",
                         T, kind, x, dims(in[0]), mask, ns, y);
  } else if (callee == "transpose") {
    std::string p = array("perm");
    call = llvm::formatv("transpose<{0}>({1}, {2}, {3}, {4})", T, x,
                         dims(in[0]), p, y);
  } else if (callee == "slice") {
    std::string s = array("starts"), st = array("steps");
    call = llvm::formatv("slice<{0}>({1}, {2}, {3}, {4}, {5}, {6})", T, x,
                         dims(in[0]), s, st, y, dims(output));
  } else if (callee == "gather") {
    call = llvm::formatv("gather<{0}, {1}>({2}, {3}, {4}, {5}, {6}, {7})", T,
                         elem(in[1]), x, dims(in[0]), name(in[1]), dims(in[1]),
                         intValue("axis"), y);
  } else if (callee == "trilu") {
    call =
        llvm::formatv("trilu<{0}>({1}, {2}, {3}, {4}, {5})", T, x, dims(in[0]),
                      boolValue("upper"), intValue("diagonal"), y);
  } else if (callee == "copy_into") {
    call = llvm::formatv("copyInto<{0}>({1}, {2}, {3}, {4}, {5}, {6})", T, x,
                         dims(in[0]), y, dims(output), intValue("axis"),
                         intValue("offset"));
  } else if (callee == "nll_loss") {
    // An absent reduction is nn.nll_loss's default, mean.
    StringRef reduction = kernel::configString(op, "reduction");
    int code = reduction == "none" ? 0 : reduction == "sum" ? 1 : 2;
    bool hasIgnore = kernel::hasConfig(op, "ignore_index");
    call = llvm::formatv(
        "nllLoss<{0}, {1}>({2}, {3}, {4}, {5}, {6}, {7}, {8}LL, {9})", T,
        elem(in[1]), x, dims(in[0]), name(in[1]), optional(2), code,
        hasIgnore ? "true" : "false", intValue("ignore_index"), y);
  } else if (callee == "random_uniform") {
    // The stream prints unsigned: every 64-bit value is a valid literal.
    call = llvm::formatv("randomUniform<{0}>({1}, {2}ull, {3}, {4})", T, x,
                         static_cast<uint64_t>(intValue("stream")), y,
                         dims(output));
  } else if (callee == "conv2d_backward_data") {
    std::string s = array("strides"), p = array("pads"), d = array("dilations");
    call =
        llvm::formatv("conv2dBackwardData<{0}>({1}, {2}, {3}, {4}, {5}, "
                      "{6}, {7}, {8}, {9}, {10}{11})",
                      T, x, dims(in[0]), name(in[1]), dims(in[1]), y,
                      dims(output), s, p, d, intValue("group"), channelsLast);
  } else if (callee == "conv2d_backward_filter") {
    std::string s = array("strides"), p = array("pads"), d = array("dilations");
    call =
        llvm::formatv("conv2dBackwardFilter<{0}>({1}, {2}, {3}, {4}, {5}, "
                      "{6}, {7}, {8}, {9}, {10}{11})",
                      T, x, dims(in[0]), name(in[1]), dims(in[1]), y,
                      dims(output), s, p, d, intValue("group"), channelsLast);
  } else if (callee == "max_pool2d_backward") {
    std::string k = array("kernel"), s = array("strides"), p = array("pads"),
                d = array("dilations");
    call = llvm::formatv("maxPool2dBackward<{0}>({1}, {2}, {3}, {4}, {5}, "
                         "{6}, {7}, {8}, {9})",
                         T, x, dims(in[0]), name(in[1]), dims(in[1]), y, k, s,
                         p, d);
  } else if (callee == "avg_pool2d_backward") {
    std::string k = array("kernel"), s = array("strides"), p = array("pads");
    call = llvm::formatv("avgPool2dBackward<{0}>({1}, {2}, {3}, {4}, {5}, "
                         "{6}, {7}, {8})",
                         T, x, dims(in[0]), y, dims(output), k, s, p,
                         boolValue("count_include_pad"));
  } else if (callee == "scatter_add") {
    call = llvm::formatv("scatterAdd<{0}, {1}>({2}, {3}, {4}, {5}, {6}, {7}, "
                         "{8})",
                         T, elem(in[1]), x, dims(in[0]), name(in[1]),
                         dims(in[1]), name(in[2]), intValue("axis"), y);
  } else if (callee == "insert_slice") {
    std::string st = array("starts"), sp = array("steps");
    call =
        llvm::formatv("insertSlice<{0}>({1}, {2}, {3}, {4}, {5}, {6}, "
                      "{7})",
                      T, x, dims(in[0]), name(in[1]), dims(in[1]), st, sp, y);
  } else if (callee == "adam8bit") {
    // In: param, grad, codes and scales of each moment, lr, step. Out: the
    // parameter, codes and scales (possibly the inputs' own buffers).
    ValueRange outs = op.getOutputs();
    SmallVector<std::string> args;
    for (Value v : in)
      args.push_back(name(v));
    for (Value v : outs)
      args.push_back(name(v));
    args.push_back(
        std::to_string(cast<MemRefType>(in[0].getType()).getNumElements()) +
        "LL");
    for (StringRef key : {"beta1", "beta2", "eps", "weight_decay"})
      args.push_back(floatValue(key));
    call = "adam8bit(" + llvm::join(args, ", ") + ")";
  } else if (callee == "all_reduce" || callee == "reduce_scatter" ||
             callee == "all_gather" || callee == "shard") {
    // n: the elements of the smaller side (StepAbi.h's ztc_comm).
    auto count = [](Value v) {
      return cast<MemRefType>(v.getType()).getNumElements();
    };
    int64_t n = std::min(count(in[0]), count(output));
    StringRef fn = callee == "all_reduce"       ? "allReduce"
                   : callee == "reduce_scatter" ? "reduceScatter"
                   : callee == "all_gather"     ? "allGather"
                                                : "shard";
    call = llvm::formatv("{0}<{1}>(ctx, {2}, {3}, {4})", fn, T, x, y, n);
    if (callee != "shard") {
      ::ztc::rt::Collective collective;
      collective.entry = entryName;
      collective.op = callee.str();
      FailureOr<rt::DType> dtype =
          runtimeDType(cast<MemRefType>(output.getType()).getElementType(), op,
                       "a collective");
      if (failed(dtype))
        return failure();
      collective.dtype = *dtype;
      collective.elements = std::max(count(in[0]), count(output));
      step.collectives.push_back(std::move(collective));
    }
  } else {
    return op.emitOpError("the emitter has no call for this kernel");
  }
  if (target == Target::Cuda)
    call.insert(call.size() - 1, ", stream");
  out << "  {\n" << decls << "    " << ns << call << ";\n  }\n";
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
    if (isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
            kernel::RecordLossOp, kernel::CheckFiniteOp, kernel::SignalOp,
            kernel::WaitOp>(op))
      switchStream(&op);
    // On the CPU, work of a stream other than 0 is handed to the runtime's
    // thread for that stream (kernels/CpuKernels.h, onStream), which runs
    // it in order after what was handed to it before.
    bool handOver = target == Target::Cpu && kernel::streamOf(&op) != 0 &&
                    isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
                        kernel::RecordLossOp, kernel::CheckFiniteOp>(op);
    if (handOver)
      out << "  ztc::cpu::onStream(ctx, " << kernel::streamOf(&op)
          << ", [=] {\n";
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
            .Case([&](kernel::SignalOp signal) {
              int64_t index = step.events++;
              eventIndex[signal.getEvent()] = index;
              if (target == Target::Cuda)
                out << "  cudaEventRecord(static_cast<cudaEvent_t>(ctx->events["
                    << index << "]), stream);\n";
              else
                out << "  ztc::cpu::signalEvent(ctx, " << currentStream << ", "
                    << index << ");\n";
              return success();
            })
            .Case([&](kernel::WaitOp wait) {
              int64_t index = eventIndex.lookup(wait.getEvent());
              if (target == Target::Cuda)
                out << "  cudaStreamWaitEvent(stream, "
                       "static_cast<cudaEvent_t>(ctx->events["
                    << index << "]), 0);\n";
              else
                out << "  ztc::cpu::waitEvent(ctx, " << currentStream << ", "
                    << index << ");\n";
              return success();
            })
            .Case([&](kernel::CheckFiniteOp check) {
              shared.finiteChecks.push_back({check.getNode().str(),
                                             check.getOp().str(),
                                             check.getPass().str()});
              auto type = cast<MemRefType>(check.getBuffer().getType());
              out << "  // check_finite " << shared.finiteChecks.size() << ": "
                  << shared.finiteChecks.back().describe() << "\n";
              out << "  "
                  << (target == Target::Cuda ? "ztc::cuda::" : "ztc::cpu::")
                  << "checkFinite(ctx->state, " << name(check.getBuffer())
                  << ", " << type.getNumElements() << ", "
                  << shared.finiteChecks.size()
                  << (target == Target::Cuda ? ", stream" : "") << ");\n";
              return success();
            })
            .Case([&](kernel::RecordLossOp record) {
              comment(record);
              out << "  "
                  << (target == Target::Cuda ? "ztc::cuda::" : "ztc::cpu::")
                  << "recordLoss(ctx->state, " << name(record.getLoss())
                  << (target == Target::Cuda ? ", stream" : "") << ");\n";
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
      out << "  });\n";
  }

  return success();
}

/// The file header and the scalar helpers every step source starts with.
void printPrelude(llvm::raw_ostream &os, Target target, func::FuncOp func,
                  int64_t arenaBytes) {
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
  if (target == Target::Cpu)
    // The entries are long straight lines of calls (GPT-2's training step
    // is some 8,000): GCC's -O2 spent three quarters of the step's build on
    // them (15 of 19 s) and -O1 a fifth of that, with the same step time;
    // the kernels they call keep -O2.
    os << "#include \"kernels/CpuKernels.h\"\n"
       << "#if defined(__GNUC__) && !defined(__clang__)\n"
       << "#define ZTC_ENTRY __attribute__((optimize(\"O1\")))\n"
       << "#else\n#define ZTC_ENTRY\n#endif\n";
  else
    os << "#include \"kernels/CudaKernels.cuh\"\n";
  os << R"(#include <cmath>
#include <cstdint>

#define ZTC_SCALAR static inline )"
     << (target == Target::Cuda ? "__host__ __device__" : "") << R"(
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
  os << "extern \"C\" " << (target == Target::Cpu ? "ZTC_ENTRY " : "")
     << "void " << entryName << "(const ztc_step_context *ctx) {\n"
     << "  void *const *bindings = ctx->bindings;\n"
     << "  char *arena = ctx->arena;\n"
     << "  (void)bindings;\n  (void)arena;\n";
  if (target == Target::Cuda)
    os << "  cudaStream_t stream = static_cast<cudaStream_t>(ctx->streams[0]);"
          "\n";
  os << entryText;
  // Last: the kernels' data error into the context's slot, on the device.
  if (target == Target::Cuda)
    os << "  ztc::cuda::collectErrors(ctx->error, "
          "static_cast<cudaStream_t>(ctx->streams[0]));\n";
  else
    os << "  ztc::cpu::collectErrors(ctx->error);\n";
  os << "}\n\n";
}

} // namespace

LogicalResult codegen::emitSteps(ArrayRef<Entry> entries, Target target,
                                 llvm::raw_ostream &os,
                                 std::vector<StepInterface> &steps,
                                 SharedInterface &shared) {
  steps.assign(entries.size(), StepInterface());
  SmallVector<std::unique_ptr<Emitter>> emitters;
  CpuKernels cpuKernels;
  int64_t arena = 0;
  for (auto [entry, step] : llvm::zip(entries, steps)) {
    emitters.push_back(std::make_unique<Emitter>(target, entry.name, step,
                                                 shared, cpuKernels));
    if (failed(emitters.back()->run(entry.func)))
      return failure();
    arena = std::max(arena, step.arenaBytes);
  }
  printPrelude(os, target, entries.front().func, arena);
  os << cpuKernels.text;
  for (auto &emitter : emitters)
    emitter->printEntry(os);
  return success();
}
