//===- TextParser.cpp - the ONNX text format, errors as values ------------===//
//
// Built with -fexceptions (dialects/Onnx/Import/CMakeLists.txt): libonnx's
// OnnxParser converts numbers with std::stoll / std::stof, which throw on a
// 20-digit dimension or a float literal out of range. Its own errors come as
// a multi-line status ("[ParseError at position (line: 3 column: 14)]",
// "Error context: ...", the reason); both become a TextParseError.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/TextParser.h"

#include <onnx/defs/parser.h>

#include <exception>
#include <regex>
#include <sstream>

using namespace mlir::ztc::onnx;

namespace {

/// At most 80 characters of `line`, trimmed.
std::string excerptOf(std::string line) {
  size_t first = line.find_first_not_of(" \t");
  line = first == std::string::npos ? "" : line.substr(first);
  if (line.size() > 80)
    line = line.substr(0, 77) + "...";
  return line;
}

/// Splits libonnx's status text into the reason, position and excerpt.
TextParseError fromStatus(const std::string &status) {
  TextParseError error;
  std::smatch match;
  static const std::regex position(R"(\(line: (\d+) column: (\d+)\))");
  if (std::regex_search(status, match, position)) {
    error.line = static_cast<unsigned>(std::stoul(match[1]));
    error.column = static_cast<unsigned>(std::stoul(match[2]));
  }
  std::istringstream lines(status);
  std::string line, reason;
  while (std::getline(lines, line)) {
    if (line.rfind("[ParseError", 0) == 0)
      continue;
    if (line.rfind("Error context:", 0) == 0) {
      error.excerpt = excerptOf(line.substr(14));
      continue;
    }
    if (!line.empty())
      reason = line;
  }
  error.message = reason.empty() ? "syntax error" : excerptOf(reason);
  return error;
}

} // namespace

bool mlir::ztc::onnx::parseOnnxText(const std::string &text,
                                    ::onnx::ModelProto &model,
                                    TextParseError &error) noexcept {
  try {
    auto status = ::onnx::OnnxParser::Parse(model, text.c_str());
    if (status.IsOK())
      return true;
    error = fromStatus(status.ErrorMessage());
  } catch (const std::out_of_range &) {
    error = TextParseError{"a number is out of range (a dimension, integer "
                           "or float literal too large for its type)"};
  } catch (const std::invalid_argument &) {
    error = TextParseError{"a number is malformed"};
  } catch (const std::exception &failure) {
    error = TextParseError{std::string("the parser failed: ") + failure.what()};
  } catch (...) {
    error = TextParseError{"the parser failed"};
  }
  return false;
}
