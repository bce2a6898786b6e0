//===- FuzzSupport.cpp - shared by the libFuzzer targets ------------------===//

#include "test/fuzz/FuzzSupport.h"

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace ztc::fuzz {

ScratchDir::ScratchDir(const char *tag) {
  // In ZTC_FUZZ_SCRATCH when given (scripts/fuzz.sh removes it after the
  // run: libFuzzer ends without running static destructors), else
  // memory-backed when the machine has it: a file per input costs less.
  const char *given = std::getenv("ZTC_FUZZ_SCRATCH");
  std::filesystem::path base = given && *given ? std::filesystem::path(given)
                               : std::filesystem::is_directory("/dev/shm")
                                   ? std::filesystem::path("/dev/shm")
                                   : std::filesystem::temp_directory_path();
  std::string pattern =
      (base / (std::string("ztc-fuzz-") + tag + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data()))
    fail("scratch directory", pattern);
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code error;
  std::filesystem::remove_all(path_, error);
}

std::string ScratchDir::write(const std::string &name, const uint8_t *data,
                              size_t size) const {
  std::string file = path_ + "/" + name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data),
            static_cast<std::streamsize>(size));
  out.close();
  if (!out)
    fail("cannot write the input", file);
  return file;
}

void requireOneLine(const std::string &message, const char *what) {
  if (message.empty())
    fail(what, "empty error message");
  if (message.find('\n') != std::string::npos)
    fail(what, "error message of several lines: " + message);
  if (message.size() > 4096)
    fail(what, "error message of " + std::to_string(message.size()) +
                   " characters: " + message.substr(0, 200) + "...");
}

} // namespace ztc::fuzz
