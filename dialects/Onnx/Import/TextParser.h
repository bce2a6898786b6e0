//===- TextParser.h - the ONNX text format, errors as values ----*- C++ -*-===//
//
// Parses a model in the ONNX text format with libonnx's parser, which
// reports syntax errors as a status but throws C++ exceptions for numbers it
// cannot convert. ztc is built without exceptions; this boundary (the one
// translation unit of the importer built with them) catches them, so any
// input text gives a model or a short error, never an abort.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_ONNX_IMPORT_TEXTPARSER_H
#define ZTC_DIALECTS_ONNX_IMPORT_TEXTPARSER_H

#include <onnx/onnx_pb.h>

#include <string>

namespace mlir::ztc::onnx {

/// Where and why a text model failed to parse: a one-line message, the
/// 1-based line and column (0 when unknown), and a short excerpt of the
/// offending line (at most 80 characters; empty when unknown).
struct TextParseError {
  std::string message;
  unsigned line = 0, column = 0;
  std::string excerpt;
};

/// Parses `text` into `model`; false and `error` on failure.
bool parseOnnxText(const std::string &text, ::onnx::ModelProto &model,
                   TextParseError &error) noexcept;

} // namespace mlir::ztc::onnx

#endif // ZTC_DIALECTS_ONNX_IMPORT_TEXTPARSER_H
