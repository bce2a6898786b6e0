//===- CudaPrinter.cpp - the CUDA target's spellings ----------------------===//
//
// CUDA over runtime/kernels/CudaKernels.cuh. A fused kernel is a __global__
// function printed ahead of its entry and launched on the entry's current
// stream; streams are the context's cudaStream_t, events its cudaEvent_t.
// Library calls, checks and loss records take the stream last.
//
//===----------------------------------------------------------------------===//

#include "codegen/Printing.h"
#include "codegen/TargetPrinter.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::ztc::codegen;

namespace {

class CudaPrinter final : public TargetPrinter {
public:
  CudaPrinter() : TargetPrinter(::ztc::rt::Target::Cuda) {}

  StringRef libraryNamespace() const override { return "ztc::cuda::"; }
  bool callsTakeStream() const override { return true; }
  bool vectorMath(StringRef) const override { return false; }
  bool readsBoolsAsBytes() const override { return false; }

  int64_t elementwiseRun(ValueRange, MemRefType, int64_t count) const override {
    return count;
  }
  // __restrict__ unless an output is also an input (an in-place update):
  // the compiler may then move a read past a write.
  std::string pointer(bool aliased) const override {
    return aliased ? " *" : " *__restrict__ ";
  }
  std::string storeElement(StringRef out, Type, StringRef, StringRef converted,
                           StringRef index) const override {
    return out.str() + "[" + index.str() + "] = " + converted.str() + ";";
  }

  void printElementwise(EntryText &entry,
                        const ElementwiseLoop &loop) override {
    // CUDA: a grid-stride kernel ahead of the entry, launched here.
    std::string kernelName = entry.newKernelName();
    llvm::raw_string_ostream k(entry.kernels);
    k << "__global__ void " << kernelName << "("
      << llvm::join(loop.params, ", ") << ") {\n"
      << "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; "
         "i < "
      << loop.count << "; i += (int64_t)gridDim.x * blockDim.x) {\n"
      << loop.body << loop.storeAll("i", "    ") << "  }\n}\n\n";
    entry.body << "  " << kernelName << "<<<" << blocksFor(loop.count)
               << ", 256, 0, stream>>>(" << llvm::join(loop.args, ", ")
               << ");\n";
  }

  void printElementwiseGroup(EntryText &entry,
                             ArrayRef<ElementwiseLoop> loops) override {
    // One kernel: its blocks are split among the loops, each taking the
    // blocks it would have had alone and striding over its elements with
    // them. Each loop's parameters are renamed m<k>_<name> and bound to
    // their own names in its branch, so its body prints unchanged.
    std::string kernelName = entry.newKernelName();
    llvm::raw_string_ostream k(entry.kernels);
    SmallVector<std::string> params, args;
    std::string branches;
    int64_t total = 0;
    for (auto [member, loop] : llvm::enumerate(loops)) {
      int64_t blocks = blocksFor(loop.count);
      std::string prefix = "m" + std::to_string(member) + "_";
      std::string bound;
      for (const std::string &param : loop.params) {
        size_t split = parameterNameStart(param);
        params.push_back(param.substr(0, split) + prefix + param.substr(split));
        bound += "    " + param + " = " + prefix + param.substr(split) + ";\n";
      }
      args.append(loop.args.begin(), loop.args.end());
      std::string body;
      for (StringRef line : llvm::split(StringRef(loop.body).rtrim('\n'), '\n'))
        body += "  " + line.str() + "\n";
      branches += "  if (block < " + std::to_string(blocks) + ") {\n" + bound +
                  "    for (int64_t i = block * (int64_t)blockDim.x + "
                  "threadIdx.x; i < " +
                  std::to_string(loop.count) + "; i += (int64_t)" +
                  std::to_string(blocks) + " * blockDim.x) {\n" + body +
                  loop.storeAll("i", "      ") + "    }\n    return;\n  }\n" +
                  "  block -= " + std::to_string(blocks) + ";\n";
      total += blocks;
    }
    k << "__global__ void " << kernelName << "(" << llvm::join(params, ", ")
      << ") {\n"
      << "  int64_t block = blockIdx.x;\n"
      << branches << "}\n\n";
    entry.body << "  " << kernelName << "<<<" << total << ", 256, 0, stream>>>("
               << llvm::join(args, ", ") << ");\n";
  }

  void printReduce(EntryText &entry, const ReduceLoop &loop) override {
    // CUDA: the library's reduceGroups (runtime/kernels/cuda/Reduce.cuh)
    // over a function object giving term r = o * inner + i of output k of
    // each output, so the split over threads and blocks, and the order the
    // terms add in, are the library's; the partial sums go to the op's
    // planned scratch.
    const size_t outputs = loop.values.size();
    std::string kernelName = entry.newKernelName();
    std::string sums =
        "ztc::cuda::Sums<" + loop.acc + ", " + std::to_string(outputs) + ">";
    llvm::raw_string_ostream k(entry.kernels);
    k << "struct " << kernelName << " {\n";
    for (auto [i, type] : llvm::enumerate(loop.inputTypes))
      k << "  const " << type << " *in" << i << ";\n";
    k << "  __host__ __device__ " << sums
      << " operator()(int64_t r, int64_t k) const {\n";
    if (loop.inner == 1)
      k << "    const int64_t o = r, i = 0;\n";
    else
      k << "    const int64_t o = r / " << loop.inner << ", i = r % "
        << loop.inner << ";\n";
    // The body is indented for the CPU's loops, four deeper than here.
    std::string body;
    for (StringRef line : llvm::split(StringRef(loop.body).rtrim('\n'), '\n'))
      body += line.drop_front(std::min<size_t>(4, line.size())).str() + "\n";
    k << "    (void)o; (void)i; (void)k;\n"
      << body << "    return " << sums << "{{" << llvm::join(loop.values, ", ")
      << "}};\n  }\n};\n\n";
    size_t inputs = loop.inputTypes.size();
    ArrayRef<std::string> args(loop.args);
    entry.body << "  ztc::cuda::reduceGroups<ztc::cuda::ReduceKind::"
               << (loop.mean ? "Mean" : "Sum") << ">(" << kernelName << "{"
               << llvm::join(args.take_front(inputs), ", ")
               << "}, ztc::cuda::detail::groupReducePlan(" << loop.outer << ", "
               << loop.kept << ", " << loop.inner
               << "), ztc::cuda::GroupOutputs<" << loop.outputType << ", "
               << outputs << ">{{" << llvm::join(args.drop_front(inputs), ", ")
               << "}}, " << loop.scratch << ", stream);\n";
  }

  void printStreamSwitch(llvm::raw_ostream &os, int64_t stream) const override {
    os << "  stream = static_cast<cudaStream_t>(ctx->streams[" << stream
       << "]);\n";
  }
  // Streams are the device's own.
  bool handsOver(int64_t) const override { return false; }
  void printHandOver(llvm::raw_ostream &, int64_t) const override {}
  void printHandOverEnd(llvm::raw_ostream &) const override {}
  void printSignal(llvm::raw_ostream &os, int64_t,
                   int64_t event) const override {
    os << "  cudaEventRecord(static_cast<cudaEvent_t>(ctx->events[" << event
       << "]), stream);\n";
  }
  void printWait(llvm::raw_ostream &os, int64_t, int64_t event) const override {
    os << "  cudaStreamWaitEvent(stream, "
          "static_cast<cudaEvent_t>(ctx->events["
       << event << "]), 0);\n";
  }

  void printIncludes(llvm::raw_ostream &os) const override {
    os << "#include \"kernels/CudaKernels.cuh\"\n";
  }
  StringRef scalarQualifier() const override { return "__host__ __device__"; }
  void printSharedFunctions(llvm::raw_ostream &) const override {}
  StringRef entryAttributes() const override { return ""; }
  void printEntryStart(llvm::raw_ostream &os) const override {
    os << "  cudaStream_t stream = static_cast<cudaStream_t>(ctx->streams[0]);"
          "\n";
  }
  // Last: the kernels' data error into the context's slot, on the device.
  void printEntryEnd(llvm::raw_ostream &os) const override {
    os << "  ztc::cuda::collectErrors(ctx->error, "
          "static_cast<cudaStream_t>(ctx->streams[0]));\n";
  }

private:
  /// The blocks of 256 threads a loop over `count` elements launches with.
  static int64_t blocksFor(int64_t count) {
    return std::min<int64_t>((count + 255) / 256, 65535);
  }
  /// Where the name of a kernel parameter ("const float *__restrict__ in0")
  /// starts.
  static size_t parameterNameStart(StringRef param) {
    size_t start = param.size();
    while (start > 0 &&
           (llvm::isAlnum(param[start - 1]) || param[start - 1] == '_'))
      --start;
    return start;
  }
};

} // namespace

std::unique_ptr<TargetPrinter> mlir::ztc::codegen::createCudaPrinter() {
  return std::make_unique<CudaPrinter>();
}
