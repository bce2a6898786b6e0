//===- File.h - file helpers shared by the runtime's formats ----*- C++ -*-===//
//
// Crash-safe writing: every file the runtime produces (outputs, safetensors,
// cached shared objects) is written to `PATH.tmp-<pid>` in the same
// directory, fsynced, renamed over PATH, and the directory is fsynced, so a
// reader sees either the old file or the complete new one, never a prefix.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_FILE_H
#define ZTC_RUNTIME_FILE_H

#include <cstddef>
#include <initializer_list>
#include <string>

namespace ztc::rt {

/// Removes the files `NAME.tmp-<pid>` in `dir` (AtomicFileWriter's
/// temporaries), for each NAME of `names`, whose writer is no longer
/// running: what a killed write leaves behind. Other files are the user's
/// and stay. Best effort: errors are ignored.
void removeDeadTemporaries(const std::string &dir,
                           std::initializer_list<const char *> names);

/// Writes a file atomically (see the file comment). Not thread-safe for two
/// writers of one path in one process: they would share the temporary name.
class AtomicFileWriter {
public:
  /// Opens `path.tmp-<pid>` for writing; throws Error on failure.
  explicit AtomicFileWriter(std::string path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;

  void write(const void *data, size_t size);
  /// fsync, rename over the final path, fsync the directory.
  void commit();

  const std::string &path() const { return path_; }

private:
  std::string path_;
  std::string tempPath_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Makes the finished file `tempPath` durable and moves it over `path`:
/// fsync it, rename it, fsync the directory. Throws Error on failure.
void commitFile(const std::string &tempPath, const std::string &path);

/// The whole file as bytes; throws Error naming the file on failure.
std::string readFile(const std::string &path);

/// `path`, when it is a regular file or does not exist (opening it then
/// reports that). Throws Error naming it when it is anything else: a FIFO
/// or a device would make a reader wait or read forever, a directory read
/// nothing. Every reader of the runtime checks before it opens.
const std::string &requireRegularFile(const std::string &path);

/// `directory/file`.
std::string joinPath(const std::string &directory, const std::string &file);

/// Creates `path` and its parents if missing; throws Error on failure.
void createDirectories(const std::string &path);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_FILE_H
