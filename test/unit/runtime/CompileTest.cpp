//===- CompileTest.cpp - compiling generated code, the object cache -------===//
//
// Runs the real host compiler: a shared object is built once and then served
// from the cache; anything in the key (source, kernel headers) misses it;
// failures name the command and show the compiler's first lines.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Compile.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/File.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <dlfcn.h>

using namespace ztc::rt;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

constexpr char kSource[] = R"(#include "kernels/CpuKernels.h"
extern "C" int ztc_answer() {
  float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, c[2];
  ztc::cpu::matmul<float>(a, {2, 2}, b, {2, 1}, c, {2, 1},
                          ztc::MatmulParams{});
  return static_cast<int>(c[0] + c[1]); // 17 + 39
}
)";

int callAnswer(const std::string &soPath) {
  void *handle = ::dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << ::dlerror();
  if (!handle)
    return -1;
  auto answer = reinterpret_cast<int (*)()>(::dlsym(handle, "ztc_answer"));
  int result = answer ? answer() : -1;
  ::dlclose(handle);
  return result;
}

} // namespace

TEST(CompileTest, CompilesOnceThenHitsTheCache) {
  TempDir dir;
  writeText(dir / "step.cpp", kSource);
  bool hit = true;
  std::string first = compileSharedObject(dir / "step.cpp", Target::Cpu,
                                          dir / "cache", {}, &hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(std::filesystem::path(first).parent_path(),
            std::filesystem::path(dir / "cache"));
  EXPECT_EQ(std::filesystem::path(first).extension(), ".so");
  EXPECT_EQ(callAnswer(first), 56);
  auto modified = std::filesystem::last_write_time(first);

  std::string second = compileSharedObject(dir / "step.cpp", Target::Cpu,
                                           dir / "cache", {}, &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(second, first);
  EXPECT_EQ(std::filesystem::last_write_time(second), modified);

  // The same text at another path is the same object.
  writeText(dir / "copy.cpp", kSource);
  EXPECT_EQ(compileSharedObject(dir / "copy.cpp", Target::Cpu, dir / "cache",
                                {}, &hit),
            first);
  EXPECT_TRUE(hit);
  // Only the object and the precompiled kernel header are left in the
  // cache, no temporary files.
  int objects = 0, headers = 0;
  for (const auto &entry :
       std::filesystem::recursive_directory_iterator(dir / "cache")) {
    std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
    objects += entry.path().extension() == ".so";
    headers += name == "CpuKernels.h.gch" || name == "CpuKernels.h.pch";
  }
  EXPECT_EQ(objects, 1);
  EXPECT_EQ(headers, 1);
}

// The precompiled kernel header changes the time of a compile, not what
// the object does; with GCC, not one byte of it (clang lays out a few
// bytes of its sections otherwise).
TEST(CompileTest, PrecompiledHeaderGivesTheSameObject) {
  TempDir dir;
  writeText(dir / "step.cpp", kSource);
  std::string with =
      compileSharedObject(dir / "step.cpp", Target::Cpu, dir / "with");
  CompileOptions plain;
  plain.precompiledHeader = false;
  std::string without = compileSharedObject(dir / "step.cpp", Target::Cpu,
                                            dir / "without", plain);
  if (defaultStepCompiler().find("clang") == std::string::npos)
    EXPECT_EQ(readFile(with), readFile(without));
  EXPECT_EQ(callAnswer(with), 56);
  EXPECT_EQ(callAnswer(without), 56);
  bool header = false;
  for (const auto &entry :
       std::filesystem::recursive_directory_iterator(dir / "without"))
    header |= entry.path().filename().string().rfind("CpuKernels.h", 0) == 0;
  EXPECT_FALSE(header);
}

TEST(CompileTest, KeyCoversSourceFlagsAndKernelHeaders) {
  TempDir dir;
  writeText(dir / "a.cpp", kSource);
  writeText(dir / "b.cpp", std::string(kSource) + "// changed\n");
  std::string a =
      compileSharedObject(dir / "a.cpp", Target::Cpu, dir / "cache");
  std::string b =
      compileSharedObject(dir / "b.cpp", Target::Cpu, dir / "cache");
  EXPECT_NE(a, b);

  CompileOptions flags;
  flags.extraFlags = {"-DZTC_TEST_FLAG=1"};
  bool hit = true;
  EXPECT_NE(compileSharedObject(dir / "a.cpp", Target::Cpu, dir / "cache",
                                flags, &hit),
            a);
  EXPECT_FALSE(hit);

  // A private copy of the runtime headers; editing a kernel header must
  // rebuild code that includes it.
  std::filesystem::create_directories(dir / "runtime");
  std::filesystem::copy(defaultRuntimeIncludeDir() + "/kernels",
                        dir / "runtime/kernels",
                        std::filesystem::copy_options::recursive);
  CompileOptions options;
  options.runtimeIncludeDir = dir / "runtime";
  std::string before = compileSharedObject(dir / "a.cpp", Target::Cpu,
                                           dir / "cache", options, &hit);
  EXPECT_FALSE(hit); // the include path is part of the command
  std::ofstream(dir / "runtime/kernels/CpuKernels.h", std::ios::app)
      << "// edited\n";
  std::string after = compileSharedObject(dir / "a.cpp", Target::Cpu,
                                          dir / "cache", options, &hit);
  EXPECT_FALSE(hit);
  EXPECT_NE(before, after);
  EXPECT_EQ(callAnswer(after), 56);
  // So must editing a family header the umbrella includes.
  std::ofstream(dir / "runtime/kernels/cpu/Linalg.h", std::ios::app)
      << "// edited\n";
  std::string family = compileSharedObject(dir / "a.cpp", Target::Cpu,
                                           dir / "cache", options, &hit);
  EXPECT_FALSE(hit);
  EXPECT_NE(family, after);
  EXPECT_EQ(callAnswer(family), 56);
}

TEST(CompileTest, CompilerErrorsShowCommandAndFirstLines) {
  TempDir dir;
  std::string source;
  for (int i = 0; i < 30; ++i)
    source += "int broken" + std::to_string(i) + " = undefined_name;\n";
  writeText(dir / "bad.cpp", source);
  std::string message = ZTC_ERROR_MESSAGE(
      compileSharedObject(dir / "bad.cpp", Target::Cpu, dir / "cache"));
  EXPECT_EQ(
      message.rfind("compiling " + (dir / "bad.cpp") +
                        " failed (exit code 1): " + defaultStepCompiler() +
                        " -std=c++17 -O2 -ffp-contract=off -fPIC "
                        "-shared -fopenmp -I",
                    0),
      0u)
      << message;
  EXPECT_NE(message.find("undefined_name"), std::string::npos);
  size_t lines = std::count(message.begin(), message.end(), '\n');
  EXPECT_LE(lines, 22u); // command line, 20 compiler lines, "..."
  EXPECT_NE(message.find("\n...\n"), std::string::npos);
  // No object is cached for a failed compile (the precompiled kernel
  // header may be).
  for (const auto &entry :
       std::filesystem::recursive_directory_iterator(dir / "cache"))
    EXPECT_NE(entry.path().extension(), ".so") << entry.path();
}

TEST(CompileTest, MissingCompilerIsReported) {
  TempDir dir;
  writeText(dir / "step.cpp", kSource);
  CompileOptions options;
  options.cxx = "ztc-no-such-compiler";
  EXPECT_EQ(ZTC_ERROR_MESSAGE(compileSharedObject(dir / "step.cpp", Target::Cpu,
                                                  dir / "cache", options)),
            "cannot run 'ztc-no-such-compiler': No such file or directory");

  std::string soPath, error;
  EXPECT_FALSE(tryCompileSharedObject(dir / "step.cpp", Target::Cpu,
                                      dir / "cache", options, soPath, error));
  EXPECT_EQ(error,
            "cannot run 'ztc-no-such-compiler': No such file or directory");
  EXPECT_NE(ZTC_ERROR_MESSAGE(compileSharedObject(dir / "absent.cpp",
                                                  Target::Cpu, dir / "cache"))
                .find("cannot open"),
            std::string::npos);
}

TEST(CompileTest, CpuCommandLineTargetsThisProcessor) {
  CompileOptions options;
  options.cxx = "c++";
  options.runtimeIncludeDir = "rt";
  std::vector<std::string> command =
      compileCommand("step.cpp", Target::Cpu, "step.so", options);
  auto has = [&](const std::string &arg) {
    return std::find(command.begin(), command.end(), arg) != command.end();
  };
  EXPECT_TRUE(has("-ffp-contract=off") && has("-fno-trapping-math"));
  EXPECT_TRUE(has("-ldnnl") && has("-lopenblas"));
  // The vector level of this processor, which it runs; a level names no
  // other -march.
  std::string isa = hostIsaFlag();
  if (!isa.empty())
    EXPECT_TRUE(has(isa));
  EXPECT_TRUE(isa.empty() || isa == "-march=x86-64-v4" ||
              isa == "-march=x86-64-v3")
      << isa;
  EXPECT_TRUE(hostRunsIsa(isa));
  if (isa == "-march=x86-64-v4")
    EXPECT_TRUE(hostRunsIsa("-march=x86-64-v3"));
  // Arguments that name no level say nothing about the processor.
  EXPECT_TRUE(hostRunsIsa("-O2") && hostRunsIsa("step.cpp"));
}

TEST(CompileTest, CudaCommandLine) {
  CompileOptions options;
  options.nvcc = "nvcc";
  options.runtimeIncludeDir = "rt";
  std::vector<std::string> command =
      compileCommand("step.cu", Target::Cuda, "step.so", options);
  std::vector<std::string> expected = {
      "nvcc",       "-std=c++17",
      "-O2",        "-shared",
      "-Xcompiler", "-fPIC",
      "-cudart",    "shared",
      "-gencode",   "arch=compute_80,code=sm_80",
      "-gencode",   "arch=compute_90,code=sm_90",
      "-Irt",       "step.cu",
      "-o",         "step.so",
      "-lcublasLt", "-lcublas"};
  EXPECT_EQ(command, expected);
  // ZTC_CUDA_ARCHS chooses the architectures; anything else than compute
  // capabilities is an error that names it.
  ASSERT_EQ(setenv("ZTC_CUDA_ARCHS", "90a", 1), 0);
  command = compileCommand("step.cu", Target::Cuda, "step.so", options);
  EXPECT_EQ(std::count(command.begin(), command.end(), "-gencode"), 1);
  EXPECT_NE(
      std::find(command.begin(), command.end(), "arch=compute_90a,code=sm_90a"),
      command.end());
  for (const char *bad : {"sm_90", "9", "80,", "80;90", "1000"}) {
    ASSERT_EQ(setenv("ZTC_CUDA_ARCHS", bad, 1), 0);
    try {
      compileCommand("step.cu", Target::Cuda, "step.so", options);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error &error) {
      EXPECT_NE(std::string(error.what()).find("ZTC_CUDA_ARCHS='"),
                std::string::npos)
          << error.what();
    }
  }
  ASSERT_EQ(unsetenv("ZTC_CUDA_ARCHS"), 0);
  EXPECT_EQ(compileCommand("step.cu", Target::Cuda, "step.so", options),
            expected);
  EXPECT_EQ(parseTarget("cuda"), Target::Cuda);
  EXPECT_EQ(parseTarget("tpu"), std::nullopt);
}
