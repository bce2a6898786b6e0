//===- CmdPlot.cpp - `ztc plot` -------------------------------------------===//
//
// `ztc plot METRICS.jsonl -o curves.svg`: a run's curves (ztc-train
// --metrics) against the step, as an SVG (Plot.h).
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "tools/ztc/Plot.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &plotCommand() {
  static cl::SubCommand command(
      "plot", "Draw a run's loss, learning rate, gradient norm "
              "and loss scale "
              "against the step (ztc-train --metrics) as an SVG");
  return command;
}

namespace {

cl::opt<std::string> plotInput(cl::Positional, cl::desc("METRICS.jsonl"),
                               cl::Required, cl::sub(plotCommand()));
cl::opt<std::string> plotOutput("o", cl::desc("Write the SVG to FILE"),
                                cl::value_desc("FILE"), cl::Required,
                                cl::sub(plotCommand()));

} // namespace

int runPlot() {
  auto fail = [](const Twine &message) {
    llvm::errs() << "ztc: error: " << message << "\n";
    return 1;
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(plotInput);
  if (!file)
    return fail(plotInput + ": " + file.getError().message());
  std::string svg;
  llvm::raw_string_ostream os(svg);
  if (std::string error = mz::plotMetrics(plotInput, (*file)->getBuffer(), os);
      !error.empty())
    return fail(error);
  if (std::string error = writeOutput(plotOutput, svg); !error.empty())
    return fail(error);
  llvm::errs() << "ztc: wrote " << plotOutput << "\n";
  return 0;
}

} // namespace ztc::driver
