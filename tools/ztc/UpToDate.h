//===- UpToDate.h - skip a compile whose inputs are unchanged ---*- C++ -*-===//
//
// `ztc compile` of a model it compiled before, into the same artifact, with
// the same flags, is a no-op, as `make` or ccache's direct mode make it: the
// artifact records a key (compile.key) over what the compile read (the ztc
// executable, the step kernels' headers, the command line, and the content
// of the model, its external data, the DeepSpeed config and constant-input
// files) and the size and modification time of every file it wrote; a
// recompile whose key and files match leaves the artifact as it is. GPT-2's
// 124M parameters are hashed in a quarter of a second, where importing and
// rewriting them took two.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_UPTODATE_H
#define ZTC_TOOLS_ZTC_UPTODATE_H

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::ztc {

/// The key of a compile: `args` is the command line after `ztc compile`,
/// `inputs` the files it reads besides the model (config, constant inputs).
/// None (with a diagnostic on `context`) when a file cannot be read: the
/// compile then reports it as it would anyway.
std::optional<std::string> compileKey(MLIRContext &context,
                                      llvm::ArrayRef<std::string> args,
                                      llvm::StringRef modelPath,
                                      llvm::ArrayRef<std::string> inputs);

/// The arena bytes of the artifact `dir` when it holds a complete compile
/// with `key` whose files are as that compile wrote them; none otherwise.
std::optional<int64_t> upToDateArena(llvm::StringRef dir, llvm::StringRef key);

/// Records `key` and the artifact's files in `dir`/compile.key (written
/// after the artifact is complete; an artifact without it recompiles).
/// Returns an error message, empty on success.
std::string recordCompileKey(llvm::StringRef dir, llvm::StringRef key,
                             int64_t arenaBytes);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_UPTODATE_H
