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

} // namespace ztc::rt

#endif // ZTC_RUNTIME_ERROR_H
