//===- UpToDate.cpp - skip a compile whose inputs have not changed --------===//
//
// Compiled with exceptions (the runtime's SHA-256 throws when OpenSSL
// fails): every function here catches them and answers "not up to date",
// so the compile simply runs.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/UpToDate.h"

#include "dialects/Onnx/Import/Importer.h"
#include "runtime/backend/Compile.h"
#include "runtime/io/Sha256.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>

using namespace mlir;
using namespace mlir::ztc;

namespace {

constexpr llvm::StringLiteral kKeyFile = "compile.key";
constexpr llvm::StringLiteral kKeyVersion = "ztc-compile-key-v1";

/// Adds the content of the file at `path` (mapped, not copied); false if it
/// cannot be read.
bool hashFile(::ztc::rt::Sha256 &hash, llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return false;
  hash.updateField(path.str());
  hash.updateField((*buffer)->getBufferStart(), (*buffer)->getBufferSize());
  return true;
}

/// "NAME SIZE MTIME_NS" of every regular file in `dir` but the key file, in
/// name order.
std::vector<std::string> fileStamps(llvm::StringRef dir) {
  std::vector<std::string> stamps;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(dir, error), end;
       it != end && !error; it.increment(error)) {
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(it->path(), status) ||
        status.type() != llvm::sys::fs::file_type::regular_file)
      continue;
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name == kKeyFile)
      continue;
    auto nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(
        status.getLastModificationTime().time_since_epoch());
    stamps.push_back((name + " " + std::to_string(status.getSize()) + " " +
                      std::to_string(nanoseconds.count()))
                         .str());
  }
  std::sort(stamps.begin(), stamps.end());
  return stamps;
}

std::string keyPath(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, kKeyFile);
  return path.str().str();
}

} // namespace

std::optional<std::string>
mlir::ztc::compileKey(MLIRContext &context, llvm::ArrayRef<std::string> args,
                      llvm::StringRef modelPath,
                      llvm::ArrayRef<std::string> inputs) {
  try {
    ::ztc::rt::Sha256 hash;
    hash.updateField(kKeyVersion.str());
    // This ztc, and the kernel headers the step is built from.
    std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
    if (self.empty() || !hashFile(hash, self))
      return std::nullopt;
    ::ztc::rt::hashKernelHeaders(hash,
                                 ::ztc::rt::defaultRuntimeIncludeDir());
    for (const std::string &arg : args)
      hash.updateField(arg);
    FailureOr<std::vector<std::string>> external =
        onnx::externalDataFiles(context, modelPath);
    if (failed(external) || !hashFile(hash, modelPath))
      return std::nullopt;
    for (const std::string &file : *external)
      if (!hashFile(hash, file))
        return std::nullopt;
    for (const std::string &file : inputs)
      if (!hashFile(hash, file))
        return std::nullopt;
    return hash.hexDigest();
  } catch (const std::exception &) {
    return std::nullopt;
  }
}

std::optional<int64_t> mlir::ztc::upToDateArena(llvm::StringRef dir,
                                                llvm::StringRef key) {
  auto buffer = llvm::MemoryBuffer::getFile(keyPath(dir), /*IsText=*/true);
  if (!buffer)
    return std::nullopt;
  // "key HEX", "arena BYTES", then the stamps of fileStamps, one a line.
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  int64_t arena = 0;
  if (lines.size() < 2 || lines[0] != ("key " + key).str() ||
      !lines[1].consume_front("arena ") || lines[1].getAsInteger(10, arena))
    return std::nullopt;
  std::vector<std::string> recorded(lines.begin() + 2, lines.end());
  std::vector<std::string> present = fileStamps(dir);
  bool complete = llvm::any_of(present, [](const std::string &stamp) {
    return llvm::StringRef(stamp).starts_with("manifest.json ");
  });
  if (!complete || recorded != present)
    return std::nullopt;
  return arena;
}

std::string mlir::ztc::recordCompileKey(llvm::StringRef dir,
                                        llvm::StringRef key,
                                        int64_t arenaBytes) {
  std::string text = ("key " + key + "\narena " + llvm::Twine(arenaBytes) +
                      "\n")
                         .str();
  for (const std::string &stamp : fileStamps(dir))
    text += stamp + "\n";
  std::error_code error;
  llvm::raw_fd_ostream out(keyPath(dir), error);
  if (error)
    return keyPath(dir) + ": " + error.message();
  out << text;
  out.close();
  if (out.has_error())
    return keyPath(dir) + ": " + out.error().message();
  return "";
}
