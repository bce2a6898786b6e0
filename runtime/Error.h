//===- Error.h - the runtime's error type -----------------------*- C++ -*-===//
//
// Everything in ztc::rt reports failure by throwing ztc::rt::Error with a
// one-line message that names the file or artifact involved. The runtime is
// plain C++ built with exceptions; callers compiled without them (tools/ztc
// is built like LLVM, -fno-exceptions) use the noexcept entry points in
// Runner.h and Compile.h, which return the message instead.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_ERROR_H
#define ZTC_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace ztc::rt {

/// A runtime failure with a one-line, user-facing message.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// `text` as it may appear inside a one-line message: control characters
/// and bytes outside ASCII as \xNN, and at most `limit` characters of it
/// followed by "..." (a name or header read from a file can be anything).
inline std::string printable(const std::string &text, size_t limit = 80) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == limit)
      return out + "...";
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

} // namespace ztc::rt

#endif // ZTC_RUNTIME_ERROR_H
