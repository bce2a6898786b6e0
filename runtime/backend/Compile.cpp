//===- Compile.cpp - build generated code into a shared object ------------===//
//
// Runs the compiler with posix_spawnp (no shell, so paths need no quoting)
// and captures its merged stdout/stderr through a pipe.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Compile.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/Sha256.h"
#include "ztc/runtime/Config.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace ztc::rt {

namespace {

/// Bumped when the meaning of a cache key changes.
constexpr char kCacheKeyVersion[] = "ztc-compile-v1";
constexpr int kReportedLines = 20;

struct CommandResult {
  int exitCode = 0;
  std::string output;
};

std::string joinCommand(const std::vector<std::string> &argv) {
  std::string text;
  for (const std::string &arg : argv) {
    if (!text.empty())
      text += ' ';
    bool plain =
        !arg.empty() && arg.find_first_of(" \t'\"\\$") == std::string::npos;
    text += plain ? arg : "'" + arg + "'";
  }
  return text;
}

/// Runs `argv` (looked up on PATH) with stdin from /dev/null; returns its
/// exit code and merged stdout/stderr. Throws if it cannot be started.
CommandResult runCommand(const std::vector<std::string> &argv) {
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0)
    throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], 2);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int status =
      ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipeFds[1]);
  if (status != 0) {
    ::close(pipeFds[0]);
    throw Error("cannot run '" + argv[0] + "': " + std::strerror(status));
  }
  CommandResult result;
  char buffer[4096];
  for (;;) {
    ssize_t count = ::read(pipeFds[0], buffer, sizeof(buffer));
    if (count < 0 && errno == EINTR)
      continue;
    if (count <= 0)
      break;
    result.output.append(buffer, static_cast<size_t>(count));
  }
  ::close(pipeFds[0]);
  int waitStatus = 0;
  while (::waitpid(pid, &waitStatus, 0) < 0 && errno == EINTR) {
  }
  result.exitCode = WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus)
                                          : 128 + WTERMSIG(waitStatus);
  return result;
}

std::string firstLines(const std::string &text, int count) {
  std::istringstream in(text);
  std::string line, result;
  int lines = 0;
  while (std::getline(in, line)) {
    if (lines++ == count) {
      result += "...\n";
      break;
    }
    result += line + '\n';
  }
  return result;
}

std::string nvccPath(const CompileOptions &options) {
  if (!options.nvcc.empty())
    return options.nvcc;
  if (const char *cudaHome = std::getenv("CUDA_HOME"))
    return std::string(cudaHome) + "/bin/nvcc";
  return "nvcc";
}

} // namespace

void hashKernelHeaders(Sha256 &hash, const std::string &includeDir) {
  std::filesystem::path kernels = std::filesystem::path(includeDir) / "kernels";
  // Every file below kernels/ counts, the family headers in kernels/cpu and
  // kernels/cuda too: each under its path relative to kernels/, in sorted
  // order, so the key does not depend on the order of directory listings.
  std::error_code error;
  std::vector<std::string> files;
  std::filesystem::recursive_directory_iterator it(kernels, error), end;
  for (; !error && it != end; it.increment(error))
    if (it->is_regular_file())
      files.push_back(it->path().lexically_relative(kernels).generic_string());
  if (error || files.empty())
    throw Error("runtime include directory '" + includeDir +
                "' has no kernels/ headers");
  std::sort(files.begin(), files.end());
  for (const std::string &file : files) {
    hash.updateField(file);
    hash.updateField(readFile((kernels / file).string()));
  }
}

/// The kernel library's header (kernels/CpuKernels.h) precompiled for the
/// compiler and flags of `keyCommand` (a CPU command for "<source>" and
/// "<output>"), built once in `cacheDir` and shared by every step compiled
/// with them: the flags that make a compile read it. Parsing that header is
/// most of a small step's compile (0.4 s instead of 1.9 s for one ONNX
/// node with GCC, whose object is byte for byte the same; 0.6 s instead of
/// 2.1 s with clang and sanitizers). Empty when the compiler cannot build
/// it: steps then compile without.
std::vector<std::string> precompiledHeader(
    const std::string &cacheDir, const std::vector<std::string> &keyCommand,
    const std::string &compilerVersion, const std::string &includeDir) {
  // The step's flags without -shared, the source, the output and the
  // libraries.
  std::vector<std::string> flags;
  for (size_t i = 1; i < keyCommand.size(); ++i) {
    const std::string &arg = keyCommand[i];
    if (arg == "-o") {
      ++i;
      continue;
    }
    if (arg == "-shared" || arg == "<source>" || arg.rfind("-l", 0) == 0)
      continue;
    flags.push_back(arg);
  }
  Sha256 hash;
  hash.updateField("ztc-pch-v1");
  hash.updateField(keyCommand[0]);
  for (const std::string &flag : flags)
    hash.updateField(flag);
  hash.updateField(compilerVersion);
  hashKernelHeaders(hash, includeDir);
  std::string dir = cacheDir + "/pch-" + hash.hexDigest().substr(0, 24);
  // GCC finds kernels/CpuKernels.h.gch in an include directory searched
  // before the runtime's (and ignores one it cannot use); clang reads the
  // one it is given, after which the step's #include is a no-op (the
  // header's guard).
  bool clang = compilerVersion.find("clang") != std::string::npos;
  std::string file =
      clang ? dir + "/CpuKernels.h.pch" : dir + "/kernels/CpuKernels.h.gch";
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    createDirectories(std::filesystem::path(file).parent_path().string());
    // Unique per process and call: two threads may build it at once.
    static std::atomic<unsigned> builds{0};
    std::string temp = file + ".tmp-" + std::to_string(::getpid()) + "-" +
                       std::to_string(builds++);
    std::vector<std::string> command = {keyCommand[0]};
    command.insert(command.end(), flags.begin(), flags.end());
    command.insert(
        command.end(),
        {"-x", "c++-header", includeDir + "/kernels/CpuKernels.h", "-o", temp});
    if (runCommand(command).exitCode != 0) {
      ::unlink(temp.c_str());
      return {};
    }
    commitFile(temp, file);
  }
  if (clang)
    return {"-include-pch", file};
  return {"-I" + dir};
}

std::string defaultRuntimeIncludeDir() {
  if (const char *dir = std::getenv("ZTC_RUNTIME_DIR"); dir && *dir)
    return dir;
  return ZTC_RUNTIME_SOURCE_DIR;
}

std::string defaultStepCompiler() { return ZTC_STEP_CXX; }

namespace {

constexpr const char *kIsaV4 = "-march=x86-64-v4";
constexpr const char *kIsaV3 = "-march=x86-64-v3";

/// This processor's x86-64 level: 4 (AVX-512), 3 (AVX2), else 0.
int hostLevel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4"))
    return 4;
  if (__builtin_cpu_supports("x86-64-v3"))
    return 3;
#endif
  return 0;
}

} // namespace

std::string hostIsaFlag() {
  int level = hostLevel();
  return level == 4 ? kIsaV4 : level == 3 ? kIsaV3 : "";
}

bool hostRunsIsa(const std::string &flag) {
  if (flag == kIsaV4)
    return hostLevel() >= 4;
  if (flag == kIsaV3)
    return hostLevel() >= 3;
  return true;
}

// One architecture compiles in a little more than half the time of two.
std::vector<std::string> cudaArchitectures() {
  const char *env = std::getenv("ZTC_CUDA_ARCHS");
  if (!env || !*env)
    return {"80", "90"};
  std::vector<std::string> archs;
  std::string text = env;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string arch = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t digits = 0;
    while (digits < arch.size() && std::isdigit((unsigned char)arch[digits]))
      ++digits;
    bool valid = (digits == 2 || digits == 3) &&
                 (digits == arch.size() ||
                  (digits + 1 == arch.size() && arch.back() == 'a'));
    if (!valid)
      throw Error("ZTC_CUDA_ARCHS='" + text +
                  "': expected compute capabilities separated by commas, "
                  "such as 90 or 80,90 (sm_80 and sm_90)");
    archs.push_back(arch);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return archs;
}

std::vector<std::string> compileCommand(const std::string &sourcePath,
                                        Target target,
                                        const std::string &outputPath,
                                        const CompileOptions &options) {
  std::string includeDir = options.runtimeIncludeDir.empty()
                               ? defaultRuntimeIncludeDir()
                               : options.runtimeIncludeDir;
  std::vector<std::string> command;
  if (target == Target::Cpu) {
    // -ffp-contract=off: no fused multiply-adds behind the emitter's back,
    // so results do not depend on the host's instruction set.
    command = {options.cxx, "-std=c++17", "-O2",      "-ffp-contract=off",
               "-fPIC",     "-shared",    "-fopenmp", "-I" + includeDir};
    std::istringstream buildFlags(ZTC_STEP_CXX_FLAGS);
    for (std::string flag; buildFlags >> flag;)
      command.push_back(flag);
    // The processor's vector instructions: the generated loops are
    // `omp simd` (and ztc::vecmath's exp and erf are written for it). No
    // result changes: -ffp-contract=off keeps FMA out, and the vector
    // instructions round as the scalar ones. -fno-trapping-math lets the
    // compiler evaluate both sides of a select (it changes no value, only
    // which floating-point exception flags may be raised, which nothing
    // reads), and so vectorize loops with selects. A step built here and
    // loaded on a processor without these instructions is built again
    // there (Artifact::load reads step.build).
    command.push_back("-fno-trapping-math");
    std::string isa = hostIsaFlag();
    if (!isa.empty())
      command.push_back(isa);
#if defined(__x86_64__) || defined(__i386__)
    // f16 conversions by instruction (kernels/Half.h): identical results,
    // several times faster; only where this machine has F16C (x86-64-v3
    // includes it).
    if (isa.empty() && __builtin_cpu_supports("f16c"))
      command.push_back("-mf16c");
#endif
  } else {
    // -cudart shared: one CUDA runtime per process, so the CUDA backend
    // shares its memory and sees the step's failed launches
    // (cudaGetLastError).
    command = {nvccPath(options), "-std=c++17", "-O2",     "-shared",
               "-Xcompiler",      "-fPIC",      "-cudart", "shared"};
    for (const std::string &arch : cudaArchitectures())
      command.insert(command.end(),
                     {"-gencode", "arch=compute_" + arch + ",code=sm_" + arch});
    command.push_back("-I" + includeDir);
  }
  command.insert(command.end(), options.extraFlags.begin(),
                 options.extraFlags.end());
  command.insert(command.end(), {sourcePath, "-o", outputPath});
  if (target == Target::Cpu)
    command.insert(command.end(), {"-ldnnl", "-lopenblas"});
  else
    command.insert(command.end(), {"-lcublasLt", "-lcublas"});
  return command;
}

std::string compileSharedObject(const std::string &sourcePath, Target target,
                                const std::string &cacheDir,
                                const CompileOptions &options, bool *cacheHit) {
  std::string source = readFile(sourcePath);
  std::vector<std::string> keyCommand =
      compileCommand("<source>", target, "<output>", options);
  CommandResult version = runCommand({keyCommand[0], "--version"});
  if (version.exitCode != 0)
    throw Error("'" + keyCommand[0] +
                " --version' failed: " + firstLines(version.output, 1));

  Sha256 hash;
  hash.updateField(kCacheKeyVersion);
  hash.updateField(source);
  for (const std::string &arg : keyCommand)
    hash.updateField(arg);
  hash.updateField(version.output);
  hashKernelHeaders(hash, options.runtimeIncludeDir.empty()
                              ? defaultRuntimeIncludeDir()
                              : options.runtimeIncludeDir);
  std::string digest = hash.hexDigest();
  std::string soPath = cacheDir + "/" + digest + ".so";

  std::error_code error;
  bool cached = std::filesystem::is_regular_file(soPath, error);
  if (cacheHit)
    *cacheHit = cached;
  if (cached)
    return soPath;

  createDirectories(cacheDir);
  std::string tempPath =
      cacheDir + "/" + digest + ".tmp-" + std::to_string(::getpid()) + ".so";
  std::vector<std::string> command =
      compileCommand(sourcePath, target, tempPath, options);
  if (target == Target::Cpu && options.precompiledHeader) {
    // With the precompiled kernel header; a compile that fails with it (a
    // header the compiler will not take) is done again without.
    std::vector<std::string> header;
    try {
      header = precompiledHeader(cacheDir, keyCommand, version.output,
                                 options.runtimeIncludeDir.empty()
                                     ? defaultRuntimeIncludeDir()
                                     : options.runtimeIncludeDir);
    } catch (const Error &) {
      // (An unwritable cache directory fails below, with its own message.)
    }
    if (!header.empty()) {
      std::vector<std::string> faster = command;
      faster.insert(faster.begin() + 1, header.begin(), header.end());
      if (runCommand(faster).exitCode == 0) {
        commitFile(tempPath, soPath);
        return soPath;
      }
      ::unlink(tempPath.c_str());
    }
  }
  CommandResult result = runCommand(command);
  if (result.exitCode != 0) {
    ::unlink(tempPath.c_str());
    throw Error("compiling " + sourcePath + " failed (exit code " +
                std::to_string(result.exitCode) + "): " + joinCommand(command) +
                "\n" + firstLines(result.output, kReportedLines));
  }
  commitFile(tempPath, soPath);
  return soPath;
}

bool tryCompileSharedObject(const std::string &sourcePath, Target target,
                            const std::string &cacheDir,
                            const CompileOptions &options, std::string &soPath,
                            std::string &error) noexcept {
  try {
    soPath = compileSharedObject(sourcePath, target, cacheDir, options);
    return true;
  } catch (const std::exception &failure) {
    error = failure.what();
    return false;
  }
}

std::string defaultCacheDir() {
  if (const char *dir = std::getenv("ZTC_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/ztc";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/ztc";
  return (std::filesystem::temp_directory_path() / "ztc-cache").string();
}

} // namespace ztc::rt
