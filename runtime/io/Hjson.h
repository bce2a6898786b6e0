//===- Hjson.h - reading Hjson as DeepSpeed does ----------------*- C++ -*-===//
//
// DeepSpeed reads its config with the Python `hjson` package (3.1.0), so the
// configs people write have comments, trailing commas, members on separate
// lines without commas, quoteless keys and values, and no root braces. This
// reader accepts what that package accepts and returns what it returns, as
// an nlohmann::json value, and refuses what it refuses, plus a key given
// twice in one object (DeepSpeed's object_pairs_hook refuses those). On
// strict JSON it gives what nlohmann::json::parse gives.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_IO_HJSON_H
#define ZTC_RUNTIME_IO_HJSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace ztc::rt {

/// Parses `text`, the contents of the file `path`, as DeepSpeed's
/// `hjson.load(open(path), object_pairs_hook=...)` would. Throws Error with
/// the message `PATH:LINE:COLUMN: what is wrong` (1-based, columns counted
/// in characters) when hjson would refuse the text, when the text is not
/// UTF-8, when an object names a key twice, when a number is beyond the
/// range of a double, or when arrays and objects nest deeper than 512
/// levels. Safe on arbitrary bytes.
nlohmann::json parseHjson(const std::string &path, const std::string &text);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_IO_HJSON_H
