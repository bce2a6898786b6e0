//===- Plot.h - training curves from a metrics file -------------*- C++ -*-===//
//
// `ztc plot METRICS.jsonl -o curves.svg`: the loss, the learning rate, the
// gradient norm and the loss scale of a run (`ztc-train --metrics`) against
// the step, as one SVG with four panels, and two more for the held-out loss
// and accuracy when the run evaluated (`--eval-data`). No Python: the
// drawing is plain SVG text.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_PLOT_H
#define ZTC_TOOLS_ZTC_PLOT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::ztc {

/// Reads the JSON lines of `text` (from `path`, for messages) and writes
/// the SVG to `os`. Returns "" or the error: the file and line of a line
/// that is not a JSON object with a numeric `step`.
std::string plotMetrics(llvm::StringRef path, llvm::StringRef text,
                        llvm::raw_ostream &os);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_PLOT_H
