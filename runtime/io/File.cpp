//===- File.cpp - file helpers shared by the runtime's formats ------------===//
//
// POSIX implementation of atomic writes and whole-file reads.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/File.h"

#include "runtime/Error.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace ztc::rt {

namespace {
std::string systemError() { return std::strerror(errno); }

std::string parentDirectory(const std::string &path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}
} // namespace

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)),
      tempPath_(path_ + ".tmp-" + std::to_string(::getpid())) {
  fd_ =
      ::open(tempPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("cannot create " + tempPath_ + ": " + systemError());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_)
    ::unlink(tempPath_.c_str());
}

void AtomicFileWriter::write(const void *data, size_t size) {
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      throw Error("cannot write " + tempPath_ + ": " + systemError());
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void AtomicFileWriter::commit() {
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    throw Error("cannot close " + tempPath_ + ": " + systemError());
  commitFile(tempPath_, path_);
  committed_ = true;
}

void commitFile(const std::string &tempPath, const std::string &path) {
  int fd = ::open(tempPath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open " + tempPath + ": " + systemError());
  int status = ::fsync(fd);
  ::close(fd);
  if (status != 0)
    throw Error("cannot fsync " + tempPath + ": " + systemError());
  if (::rename(tempPath.c_str(), path.c_str()) != 0)
    throw Error("cannot rename " + tempPath + " to " + path + ": " +
                systemError());
  // Make the rename itself durable.
  std::string directory = parentDirectory(path);
  int dirFd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    throw Error("cannot open directory " + directory + ": " + systemError());
  status = ::fsync(dirFd);
  ::close(dirFd);
  if (status != 0)
    throw Error("cannot fsync directory " + directory + ": " + systemError());
}

const std::string &requireRegularFile(const std::string &path) {
  std::error_code error;
  std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || status.type() == std::filesystem::file_type::not_found ||
      status.type() == std::filesystem::file_type::regular)
    return path;
  const char *what =
      status.type() == std::filesystem::file_type::directory ? "a directory"
      : status.type() == std::filesystem::file_type::fifo    ? "a FIFO"
      : status.type() == std::filesystem::file_type::character ||
              status.type() == std::filesystem::file_type::block
          ? "a device"
          : "not a regular file";
  throw Error(path + " is " + what + ", not a file ztc reads");
}

std::string readFile(const std::string &path) {
  std::ifstream in(requireRegularFile(path), std::ios::binary);
  if (!in)
    throw Error("cannot open " + path + ": " + systemError());
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad())
    throw Error("cannot read " + path);
  return contents.str();
}

void createDirectories(const std::string &path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error)
    throw Error("cannot create directory " + path + ": " + error.message());
}

std::string joinPath(const std::string &directory, const std::string &file) {
  return (std::filesystem::path(directory) / file).string();
}

void removeDeadTemporaries(const std::string &dir,
                           std::initializer_list<const char *> names) {
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || std::find(names.begin(), names.end(),
                                             name.substr(0, at)) == names.end())
      continue;
    std::string digits = name.substr(at + 5);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    long pid = std::stol(digits);
    if (pid == static_cast<long>(::getpid()) || pid <= 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove(entry.path(), error);
  }
}

} // namespace ztc::rt
