//===- CmdTrain.cpp - `ztc train` -----------------------------------------===//
//
// `ztc train ...`: the runtime-only trainer, ztc-train, next to this binary,
// started with the same arguments.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mlir;

namespace ztc::driver {

/// `ztc train ...` is `ztc-train ...`: the runtime-only trainer next to this
/// binary runs the training (one implementation; mpirun starts ztc-train
/// itself). Returns only when it cannot be started.
int runTrain(int argc, char **argv) {
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&runTrain));
  SmallString<256> trainer(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(trainer, "ztc-train");
  std::vector<char *> args;
  // Messages then start with "ztc: error:", as every other command's.
  std::string name = "ztc";
  args.push_back(name.data());
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(trainer.c_str(), args.data());
  llvm::errs() << "ztc: error: cannot start " << trainer << ": "
               << std::strerror(errno) << "\n";
  return 1;
}

} // namespace ztc::driver
