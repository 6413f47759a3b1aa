// An output file that is safe to create in a shared directory and whose
// write errors are never lost: one helper for every report looptrace
// writes (--json, --events, the demo's report).
#pragma once

#include <sys/types.h>

#include <memory>
#include <ostream>
#include <streambuf>
#include <string>

#include "base/status.h"

namespace looptrace {

// A std::streambuf over a file descriptor that remembers the first write
// error (errno), which std::ofstream does not keep.
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd);
  FdStreamBuf(const FdStreamBuf&) = delete;
  FdStreamBuf& operator=(const FdStreamBuf&) = delete;

  // 0 while every write succeeded, else the errno of the first failure.
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  bool write_all(const char* p, size_t n);
  bool drain();

  int fd_;
  int error_ = 0;
  char buf_[65536];
};

// How Create found the path; tests and messages use it.
enum class OutputKind {
  kStdout,    // "-"
  kCreated,   // a new regular file, mode 0600
  kReplaced,  // a new file; the caller's old file was renamed to PATH.old
  kExisting,  // an existing device or FIFO, written as it is (/dev/null)
};

// Creates PATH for writing without ever following a symbolic link or
// writing into a file that already exists:
//   "-"                     stdout;
//   absent                  created O_EXCL|O_NOFOLLOW, mode 0600;
//   a regular file of ours  renamed to PATH.old (replacing an old PATH.old
//                           of ours), then PATH is created as above;
//   a device or FIFO        opened as it is, never created or truncated
//                           (a FIFO without a reader is an error, not a
//                           hang);
//   anything else           an error: a symbolic link, a directory, or a
//                           file owned by another user (or whose .old is).
// The directory is reached one component at a time, never through a
// symbolic link that neither root nor the caller owns (the kernel's
// protected_symlinks rule, in every directory): another user's link to a
// directory cannot send the report, or the move aside, elsewhere.
// Errors are usage errors that name `what` (the option) and the path.
//
// close() flushes and reports the first write error; an OutputFile
// destroyed without close() was abandoned (the run failed before writing
// it): a file it created is removed and a file it moved aside is put back.
class OutputFile {
 public:
  static Result<std::unique_ptr<OutputFile>> Create(const std::string& what,
                                                    const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return os_; }
  // Flushes; false once any write has failed.
  bool flush();
  // Flushes, closes, and returns the first error ("writing PATH: No space
  // left on device"). Call once.
  Status close();

  const std::string& path() const { return path_; }
  OutputKind kind() const { return kind_; }
  // The descriptor, for a writer that must not block (EventsWriter): it
  // writes through stream() or fd(), never both.
  int fd() const { return fd_; }

 private:
  OutputFile(std::string what, std::string path, int dir, std::string base,
             int fd, OutputKind kind);
  static Result<std::unique_ptr<OutputFile>> CreateIn(const std::string& what,
                                                      const std::string& path,
                                                      int dir,
                                                      const std::string& base);
  Status write_error(int err) const;

  std::string what_;
  std::string path_;
  int dir_;           // the directory holding it (O_PATH), -1 for stdout
  std::string base_;  // its name there
  int fd_;
  OutputKind kind_;
  bool closed_ = false;
  FdStreamBuf buf_;
  std::ostream os_;
};

}  // namespace looptrace
