//===- FuzzSupport.h - shared by the libFuzzer targets ----------*- C++ -*-===//
//
// The runtime's readers take paths, so the targets write each input to a
// file in a private scratch directory first. Every target states its
// oracle: an input either reads correctly (checked) or fails with a
// one-line message; anything else (a crash, an uncaught exception, a
// sanitizer report, an empty or multi-line message) stops the fuzzer.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TEST_FUZZ_FUZZSUPPORT_H
#define ZTC_TEST_FUZZ_FUZZSUPPORT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ztc::fuzz {

/// A directory of this process's own, removed at exit.
class ScratchDir {
public:
  explicit ScratchDir(const char *tag);
  ~ScratchDir();
  const std::string &path() const { return path_; }
  /// Writes `size` bytes to `path()/name`, replacing it; returns the path.
  std::string write(const std::string &name, const uint8_t *data,
                    size_t size) const;

private:
  std::string path_;
};

/// Stops the fuzzer with `what` unless `message` is an error a user can
/// read: non-empty, one line, at most 4,096 characters (a few long node
/// names, never a dump of the input).
void requireOneLine(const std::string &message, const char *what);

/// Stops the fuzzer: the target's oracle does not hold.
[[noreturn]] inline void fail(const char *what, const std::string &detail) {
  std::fprintf(stderr, "fuzz oracle failed: %s: %s\n", what, detail.c_str());
  std::abort();
}

} // namespace ztc::fuzz

#endif // ZTC_TEST_FUZZ_FUZZSUPPORT_H
