//===- CpuPrinter.cpp - the CPU target's spellings ------------------------===//
//
// C++ with OpenMP over runtime/kernels/CpuKernels.h. A fused kernel is a
// function of one loop (simd, parallel when large), defined once per
// distinct text and shared by every entry of the source: a transformer's
// layers repeat theirs, so the host compiler builds each loop once. Work of
// a stream other than 0 is handed to the runtime's thread for that stream
// (ztc::cpu::onStream); events are the runtime's flags.
//
//===----------------------------------------------------------------------===//

#include "codegen/Printing.h"
#include "codegen/TargetPrinter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::ztc::codegen;

namespace {

class CpuPrinter final : public TargetPrinter {
public:
  CpuPrinter() : TargetPrinter(::ztc::rt::Target::Cpu) {}

  StringRef libraryNamespace() const override { return "ztc::cpu::"; }
  bool callsTakeStream() const override { return false; }
  bool vectorMath(StringRef computeType) const override {
    return computeType == "float";
  }
  // GCC has no vector type for bool and leaves a loop that reads one
  // scalar (a ReLU's gradient).
  bool readsBoolsAsBytes() const override { return true; }

  int64_t elementwiseRun(ValueRange inputs, MemRefType output,
                         int64_t) const override {
    return broadcastRun(inputs, output);
  }
  // An in-place kernel reads the element it writes: no __restrict__.
  std::string pointer(bool) const override { return " *"; }
  std::string storeElement(StringRef out, Type elem, StringRef result,
                           StringRef converted,
                           StringRef index) const override {
    // A half result is stored as its bits (GCC does not vectorize a loop
    // that assigns a whole struct, f16 or bf16, through a pointer), a bool
    // as its byte.
    if (elem.isInteger(1))
      return "reinterpret_cast<unsigned char *>(" + out.str() + ")[" +
             index.str() + "] = static_cast<unsigned char>(" + result.str() +
             ");";
    if (isHalf(elem))
      return out.str() + "[" + index.str() + "].bits = " + converted.str() +
             ".bits;";
    return out.str() + "[" + index.str() + "] = " + converted.str() + ";";
  }

  void printElementwise(EntryText &entry,
                        const ElementwiseLoop &loop) override {
    // Iterations are independent (each writes its own elements; an in-place
    // kernel reads the element it writes, so the pointers are not
    // __restrict__), as the threads already assume: simd lets the compiler
    // vectorize selects and ztc::vecmath's math.
    std::string text;
    llvm::raw_string_ostream l(text);
    if (loop.split) {
      // r: the run's first output; j: the position in the run.
      if (loop.count >= 32768)
        l << "#pragma omp parallel for\n";
      std::string inner;
      for (StringRef line : llvm::split(StringRef(loop.body).rtrim('\n'), '\n'))
        inner += "  " + line.str() + "\n";
      l << "  for (int64_t r = 0; r < " << loop.count << "; r += " << loop.run
        << ") {\n"
        << "#pragma omp simd\n"
        << "    for (int64_t j = 0; j < " << loop.run << "; ++j) {\n"
        << inner << loop.storeAll("r + j", "      ") << "    }\n  }\n";
    } else {
      l << (loop.count >= 32768 ? "#pragma omp parallel for simd\n"
                                : "#pragma omp simd\n")
        << "  for (int64_t i = 0; i < " << loop.count << "; ++i) {\n"
        << loop.body << loop.storeAll("i", "    ") << "  }\n";
    }
    callFunction(entry, "ztc_elementwise", loop.params, loop.args, text);
  }

  void printReduce(EntryText &entry, const ReduceLoop &loop) override {
    // The terms of one output in the library reduction's order (reduce in
    // CpuKernels.h): with an inner group, each inner run summed in vector
    // lanes and the runs added in order (an output per thread); without,
    // rows read in memory order, the outputs side by side: up to
    // kReduceBlock outputs, the rows in reduceChunks chunks (a chunk per
    // thread) whose sums are added in order, else blocks of outputs over
    // every row (a block per thread). Threads change no result. Each of
    // several outputs has its own sums (suffix j), added beside the others.
    std::string text;
    llvm::raw_string_ostream l(text);
    const int64_t outer = loop.outer, kept = loop.kept, inner = loop.inner;
    const std::string &acc = loop.acc, &indented = loop.body;
    const size_t outputs = loop.values.size();
    int64_t work = outer * kept * inner;
    std::string parallel =
        work >= 32768 ? "#pragma omp parallel for\n" : std::string();
    // Statement `pattern` once per output, "#" replaced by its number.
    auto each = [&](StringRef pattern) {
      std::string lines;
      for (size_t j = 0; j < outputs; ++j) {
        std::string number = std::to_string(j), line;
        for (char c : pattern)
          line += c == '#' ? number : std::string(1, c);
        lines += line;
      }
      return lines;
    };
    // Each output's term added to its sum `target`#`index`.
    auto adds = [&](StringRef target, StringRef index) {
      std::string lines;
      for (size_t j = 0; j < outputs; ++j)
        lines += "        " + target.str() + std::to_string(j) + index.str() +
                 " += " + loop.values[j] + ";\n";
      return lines;
    };
    auto stores = [&](StringRef indent, StringRef sum) {
      std::string lines;
      for (size_t j = 0; j < outputs; ++j) {
        std::string out = "out" + std::to_string(j);
        std::string value = loop.stored(sum.str() + std::to_string(j));
        lines +=
            indent.str() + (loop.half ? out + "[k].bits = " + value + ".bits;\n"
                                      : out + "[k] = " + value + ";\n");
      }
      return lines;
    };
    if (inner > 1) {
      std::string runs;
      for (size_t j = 0; j < outputs; ++j)
        runs += (j ? ", run" : "run") + std::to_string(j);
      l << parallel << "  for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << each("    " + acc + " sum# = 0;\n") << "    for (int64_t o = 0; o < "
        << outer << "; ++o) {\n"
        << each("      " + acc + " run# = 0;\n")
        << "#pragma omp simd reduction(+ : " << runs << ")\n"
        << "      for (int64_t i = 0; i < " << inner << "; ++i) {\n"
        << indented << adds("run", "") << "      }\n"
        << each("      sum# += run#;\n") << "    }\n"
        << stores("    ", "sum") << "  }\n";
    } else if (kept <= 256) {
      l << "  constexpr int64_t chunks = ztc::cpu::detail::reduceChunks("
        << outer << ");\n"
        << each("  " + acc + " partial#[chunks][" + std::to_string(kept) +
                "];\n")
        << parallel << "  for (int64_t c = 0; c < chunks; ++c) {\n"
        << each("    " + acc + " *sums# = partial#[c];\n")
        << "    for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << each("      sums#[k] = 0;\n") << "    }\n"
        << "    for (int64_t o = " << outer << " * c / chunks; o < " << outer
        << " * (c + 1) / chunks; ++o) {\n"
        << "#pragma omp simd\n"
        << "      for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << indented << adds("sums", "[k]") << "      }\n    }\n  }\n"
        << "  for (int64_t k = 0; k < " << kept << "; ++k) {\n"
        << each("    " + acc + " sum# = partial#[0][k];\n")
        << "    for (int64_t c = 1; c < chunks; ++c) {\n"
        << each("      sum# += partial#[c][k];\n") << "    }\n"
        << stores("    ", "sum") << "  }\n";
    } else {
      l << "  const int64_t width = ztc::cpu::detail::reduceBlockWidth(" << kept
        << ", " << (work >= 32768 ? "true" : "false") << ");\n"
        << parallel << "  for (int64_t first = 0; first < " << kept
        << "; first += width) {\n"
        << "    const int64_t n = std::min<int64_t>(width, " << kept
        << " - first);\n"
        << each("    " + acc + " sums#[ztc::cpu::detail::kReduceBlock] = {};\n")
        << "    for (int64_t o = 0; o < " << outer << "; ++o) {\n"
        << "#pragma omp simd\n"
        << "      for (int64_t j = 0; j < n; ++j) {\n"
        << "        const int64_t k = first + j;\n"
        << indented << adds("sums", "[j]") << "      }\n    }\n"
        << "    for (int64_t j = 0; j < n; ++j) {\n"
        << "      const int64_t k = first + j;\n"
        << each("      const " + acc + " sum# = sums#[j];\n")
        << stores("      ", "sum") << "    }\n  }\n";
    }
    std::vector<std::string> params;
    for (auto [i, type] : llvm::enumerate(loop.inputTypes))
      params.push_back("const " + type + pointer(false) + "in" +
                       std::to_string(i));
    for (size_t j = 0; j < outputs; ++j)
      params.push_back(loop.outputType + pointer(false) + "out" +
                       std::to_string(j));
    callFunction(entry, "ztc_reduce", params, loop.args, text);
  }

  void printStreamSwitch(llvm::raw_ostream &os, int64_t stream) const override {
    os << "  // stream " << stream << "\n";
  }
  bool handsOver(int64_t stream) const override { return stream != 0; }
  void printHandOver(llvm::raw_ostream &os, int64_t stream) const override {
    os << "  ztc::cpu::onStream(ctx, " << stream << ", [=] {\n";
  }
  void printHandOverEnd(llvm::raw_ostream &os) const override {
    os << "  });\n";
  }
  void printSignal(llvm::raw_ostream &os, int64_t stream,
                   int64_t event) const override {
    os << "  ztc::cpu::signalEvent(ctx, " << stream << ", " << event << ");\n";
  }
  void printWait(llvm::raw_ostream &os, int64_t stream,
                 int64_t event) const override {
    os << "  ztc::cpu::waitEvent(ctx, " << stream << ", " << event << ");\n";
  }

  void printIncludes(llvm::raw_ostream &os) const override {
    // The entries are long straight lines of calls (GPT-2's training step
    // is some 8,000): GCC's -O2 spent three quarters of the step's build on
    // them (15 of 19 s) and -O1 a fifth of that, with the same step time;
    // the kernels they call keep -O2.
    os << "#include \"kernels/CpuKernels.h\"\n"
       << "#if defined(__GNUC__) && !defined(__clang__)\n"
       << "#define ZTC_ENTRY __attribute__((optimize(\"O1\")))\n"
       << "#else\n#define ZTC_ENTRY\n#endif\n";
  }
  StringRef scalarQualifier() const override { return ""; }
  void printSharedFunctions(llvm::raw_ostream &os) const override {
    os << functions.text;
  }
  StringRef entryAttributes() const override { return "ZTC_ENTRY "; }
  void printEntryStart(llvm::raw_ostream &) const override {}
  void printEntryEnd(llvm::raw_ostream &os) const override {
    os << "  ztc::cpu::collectErrors(ctx->error);\n";
  }

private:
  /// The functions of fused kernels, shared by the source's entries: one
  /// per distinct text.
  struct {
    std::string text;
    /// Each function's parameters and body, and its name.
    llvm::StringMap<std::string> names;
  } functions;

  /// Calls the function of `params` and `loop` with `args`, defining it
  /// (named `prefix` and a number) unless one of the same text exists.
  void callFunction(EntryText &entry, StringRef prefix,
                    ArrayRef<std::string> params, ArrayRef<std::string> args,
                    StringRef loop) {
    std::string key =
        "(" + llvm::join(params, ", ") + ") {\n" + loop.str() + "}\n";
    auto [found, added] = functions.names.try_emplace(
        key, prefix.str() + std::to_string(functions.names.size()));
    if (added)
      functions.text += "static void " + found->second + key + "\n";
    entry.body << "  " << found->second << "(" << llvm::join(args, ", ")
               << ");\n";
  }
};

} // namespace

std::unique_ptr<TargetPrinter> mlir::ztc::codegen::createCpuPrinter() {
  return std::make_unique<CpuPrinter>();
}
