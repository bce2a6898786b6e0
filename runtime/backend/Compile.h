//===- Compile.h - build generated code into a shared object ----*- C++ -*-===//
//
// Compiles an artifact's step.cpp (host C++ compiler, OpenMP, OpenBLAS) or
// step.cu (nvcc, cuBLASLt) into a shared object, cached under a directory by
// the SHA-256 of everything that determines the result: the source text, the
// command line, the compiler's version text, and the runtime's kernel
// headers. An unchanged recompile returns the cached object without running
// the compiler. Objects enter the cache atomically, so concurrent compiles
// (one per rank) are safe.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_COMPILE_H
#define ZTC_RUNTIME_COMPILE_H

#include "runtime/backend/Target.h"

#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

class Sha256;

/// The runtime/ directory generated code is compiled with -I pointing at:
/// $ZTC_RUNTIME_DIR when set (a runtime built on one machine and run on
/// another, where the source tree lies elsewhere), else the source
/// directory this library was built from.
std::string defaultRuntimeIncludeDir();

/// Adds every file under `includeDir`/kernels, its family folders (cpu/,
/// cuda/) included, to `hash`, in order of relative path: generated code
/// includes them, so a changed kernel must change every key over a step
/// (the build cache's, ztc compile's). Throws Error when there are none.
void hashKernelHeaders(Sha256 &hash, const std::string &includeDir);

/// The host compiler generated CPU steps are built with by default.
std::string defaultStepCompiler();

struct CompileOptions {
  /// Directory that holds kernels/ (passed as -I). Empty: the default above.
  std::string runtimeIncludeDir;
  /// Host compiler for Target::Cpu (ZTC_STEP_CXX of Config.h: "c++",
  /// or the sanitizer build's clang).
  std::string cxx = defaultStepCompiler();
  /// nvcc for Target::Cuda. Empty: $CUDA_HOME/bin/nvcc, else nvcc on PATH.
  std::string nvcc;
  /// Appended to the command line (part of the cache key).
  std::vector<std::string> extraFlags;
  /// CPU: compile with the kernel header precompiled once per cache
  /// directory, compiler and flags (pch-*/ in the cache). The object does
  /// the same either way (with GCC it is the same bytes); only the time
  /// differs.
  bool precompiledHeader = true;
};

/// Compiles `sourcePath` for `target` and returns the path of the shared
/// object, `cacheDir/<sha256>.so` (cacheDir is created if missing). Sets
/// `*cacheHit` when the object was already cached. Throws Error on failure;
/// a compiler failure reports the command and the first 20 lines of output.
std::string compileSharedObject(const std::string &sourcePath, Target target,
                                const std::string &cacheDir,
                                const CompileOptions &options = {},
                                bool *cacheHit = nullptr);

/// compileSharedObject for callers built without exceptions: returns false
/// and sets `error` instead of throwing.
bool tryCompileSharedObject(const std::string &sourcePath, Target target,
                            const std::string &cacheDir,
                            const CompileOptions &options, std::string &soPath,
                            std::string &error) noexcept;

/// Where compiled steps are cached: $ZTC_CACHE_DIR, else
/// $XDG_CACHE_HOME/ztc, else ~/.cache/ztc, else a directory under the
/// system's temporary directory.
std::string defaultCacheDir();

/// The instruction-set level generated CPU code is built for on this
/// machine: "-march=x86-64-v4" (AVX-512) or "-march=x86-64-v3" (AVX2)
/// where the processor has it, else "" (the compiler's baseline).
std::string hostIsaFlag();

/// Whether this processor runs code built with `flag` (one of
/// hostIsaFlag's answers, or any other argument, which says nothing about
/// the processor).
bool hostRunsIsa(const std::string &flag);

/// The GPU architectures CUDA steps are built for: $ZTC_CUDA_ARCHS, compute
/// capabilities separated by commas ("90", "80,90", "90a"), by default 80
/// and 90. Throws Error, naming the variable, on anything else.
std::vector<std::string> cudaArchitectures();

/// The command line compileSharedObject runs (for messages and tests).
std::vector<std::string> compileCommand(const std::string &sourcePath,
                                        Target target,
                                        const std::string &outputPath,
                                        const CompileOptions &options);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_COMPILE_H
