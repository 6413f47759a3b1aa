#include "base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

namespace looptrace {

FdStreamBuf::FdStreamBuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof buf_); }

bool FdStreamBuf::write_all(const char* p, size_t n) {
  while (n > 0 && error_ == 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      error_ = errno;
      break;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return error_ == 0;
}

bool FdStreamBuf::drain() {
  size_t n = static_cast<size_t>(pptr() - pbase());
  setp(buf_, buf_ + sizeof buf_);
  // After a failure the rest is dropped: the first error is what counts.
  return write_all(buf_, n);
}

FdStreamBuf::int_type FdStreamBuf::overflow(int_type ch) {
  if (!drain()) return traits_type::eof();
  if (traits_type::eq_int_type(ch, traits_type::eof()))
    return traits_type::not_eof(ch);
  *pptr() = traits_type::to_char_type(ch);
  pbump(1);
  return ch;
}

std::streamsize FdStreamBuf::xsputn(const char* s, std::streamsize n) {
  if (error_ != 0) return 0;
  size_t len = static_cast<size_t>(n);
  if (len <= static_cast<size_t>(epptr() - pptr())) {
    std::memcpy(pptr(), s, len);
    pbump(static_cast<int>(len));
    return n;
  }
  if (!drain()) return 0;
  if (len < sizeof buf_) {
    std::memcpy(pptr(), s, len);
    pbump(static_cast<int>(len));
    return n;
  }
  return write_all(s, len) ? n : 0;
}

int FdStreamBuf::sync() { return drain() ? 0 : -1; }

namespace {

Status usage(const std::string& what, const std::string& path,
             const std::string& why) {
  return Status::Error(fmt::format("{} {}: {}", what, path, why),
                       ErrorKind::kUsage);
}

// Only what the caller owns is moved aside: a report never replaces
// another user's file, even as root in a sticky /tmp.
Status check_ours(const std::string& what, const std::string& path,
                  const struct stat& st) {
  if (!S_ISREG(st.st_mode))
    return usage(what, path, "exists and is not a regular file");
  if (st.st_uid != geteuid())
    return usage(what, path,
                 fmt::format("belongs to uid {}; not replacing it", st.st_uid));
  return Status::Ok();
}

// A character device (/dev/null) or a FIFO (a lab script reading live
// events) is written as it is. A FIFO without a reader would block the
// open: that is an error instead.
Result<int> open_existing(const std::string& what, const std::string& path,
                          int dir, const std::string& base,
                          const struct stat& st) {
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
    return usage(what, path, "is not a regular file, a FIFO or a device");
  int fd = openat(dir, base.c_str(),
                  O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENXIO)
    return usage(what, path, "is a FIFO that nobody reads");
  if (fd < 0)
    return Status::Errno(fmt::format("{} {}", what, path), errno,
                         ErrorKind::kUsage);
  struct stat now {};
  // Swapped for something else between lstat and open: refuse it.
  if (fstat(fd, &now) != 0 || now.st_ino != st.st_ino ||
      now.st_dev != st.st_dev) {
    ::close(fd);
    return usage(what, path, "changed while it was being opened");
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// The components of a path, in reverse order (the next one last).
void push_components(const std::string& path, std::vector<std::string>* out) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    if (slash > pos) parts.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  out->insert(out->end(), parts.rbegin(), parts.rend());
}

// A symbolic link on the way to a report is followed only when root or
// the caller owns it: one that another user owns could be pointed
// anywhere (the kernel's protected_symlinks rule, for every directory).
bool trusted_link(const struct stat& st) {
  return st.st_uid == 0 || st.st_uid == geteuid();
}

// Opens the directory `dir` (O_PATH) one component at a time, each
// without following a link (O_NOFOLLOW|O_DIRECTORY); a link is resolved
// here, by the same walk, only when trusted_link allows it.
Result<int> open_dir_safely(const std::string& what, const std::string& path,
                            const std::string& dir) {
  constexpr int kFlags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  std::vector<std::string> todo;
  push_components(dir, &todo);
  std::string walked = dir[0] == '/' ? "/" : "";
  int fd = open(dir[0] == '/' ? "/" : ".", kFlags);
  int links = 0;
  while (fd >= 0 && !todo.empty()) {
    const std::string comp = std::move(todo.back());
    todo.pop_back();
    // (fmt, not operator+: GCC 12's -O3 reports a bogus -Wrestrict.)
    const std::string here = fmt::format("{}{}", walked, comp);
    struct stat st {};
    if (fstatat(fd, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = -1;
      if (!trusted_link(st)) {
        ::close(fd);
        return usage(what, path,
                     fmt::format("{} is a symbolic link owned by uid {}; not "
                                 "following it",
                                 here, st.st_uid))
            .with_hint("give the directory's real path");
      }
      if (++links > 40 ||
          (n = readlinkat(fd, comp.c_str(), target, sizeof target - 1)) <= 0) {
        int err = links > 40 ? ELOOP : n == 0 ? ENOENT : errno;
        ::close(fd);
        return Status::Errno(fmt::format("{}: cannot create {}", what, path),
                             err, ErrorKind::kUsage);
      }
      target[n] = '\0';
      push_components(target, &todo);
      if (target[0] == '/') {
        ::close(fd);
        fd = open("/", kFlags);
        walked.assign(1, '/');
      }
      continue;
    }
    int next = openat(fd, comp.c_str(), kFlags);
    int err = errno;
    ::close(fd);
    if (next < 0)
      return Status::Errno(fmt::format("{}: cannot create {}", what, path), err,
                           ErrorKind::kUsage);
    fd = next;
    walked = fmt::format("{}/", here);
  }
  if (fd < 0)
    return Status::Errno(fmt::format("{}: cannot create {}", what, path), errno,
                         ErrorKind::kUsage);
  return fd;
}

}  // namespace

OutputFile::OutputFile(std::string what, std::string path, int dir,
                       std::string base, int fd, OutputKind kind)
    : what_(std::move(what)),
      path_(std::move(path)),
      dir_(dir),
      base_(std::move(base)),
      fd_(fd),
      kind_(kind),
      buf_(fd),
      os_(&buf_) {}

Result<std::unique_ptr<OutputFile>> OutputFile::Create(
    const std::string& what, const std::string& path) {
  if (path.empty())
    return Status::Error(fmt::format("{}: empty file name", what),
                         ErrorKind::kUsage);
  if (path == "-") {
    // Whatever iostreams or stdio hold for fd 1 goes out first.
    std::cout.flush();
    std::fflush(stdout);
    return std::unique_ptr<OutputFile>(
        new OutputFile(what, path, -1, "", STDOUT_FILENO, OutputKind::kStdout));
  }
  const size_t slash = path.rfind('/');
  const std::string base =
      slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    return usage(what, path, "is a directory");
  auto dir = open_dir_safely(what, path,
                             slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                          : path.substr(0, slash));
  if (!dir.ok()) return dir.status();
  auto file = CreateIn(what, path, *dir, base);
  if (!file.ok()) ::close(*dir);
  return file;
}

// Create's work once the directory is open: every name is looked up in
// `dir`, never through the path again.
Result<std::unique_ptr<OutputFile>> OutputFile::CreateIn(
    const std::string& what, const std::string& path, int dir,
    const std::string& base) {
  auto make = [&](int fd, OutputKind kind) {
    return std::unique_ptr<OutputFile>(
        new OutputFile(what, path, dir, base, fd, kind));
  };
  OutputKind kind = OutputKind::kCreated;
  const std::string old = base + ".old";
  struct stat st {};
  if (fstatat(dir, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode))
      return usage(what, path, "is a symbolic link; not following it")
          .with_hint("give the file's real path; '-' writes to stdout");
    if (S_ISDIR(st.st_mode)) return usage(what, path, "is a directory");
    if (!S_ISREG(st.st_mode)) {
      auto fd = open_existing(what, path, dir, base, st);
      if (!fd.ok()) return fd.status();
      return make(*fd, OutputKind::kExisting);
    }
    LT_RETURN_IF_ERROR(check_ours(what, path, st));
    struct stat old_st {};
    if (fstatat(dir, old.c_str(), &old_st, AT_SYMLINK_NOFOLLOW) == 0)
      LT_RETURN_IF_ERROR(check_ours(what, path + ".old", old_st));
    if (renameat(dir, base.c_str(), dir, old.c_str()) != 0)
      return Status::Errno(fmt::format("{}: moving {} aside", what, path),
                           errno, ErrorKind::kUsage);
    kind = OutputKind::kReplaced;
  } else if (errno != ENOENT) {
    return Status::Errno(fmt::format("{} {}", what, path), errno,
                         ErrorKind::kUsage);
  }
  // O_EXCL: a link or file planted since the lstat is refused, not used.
  int fd = openat(
      dir, base.c_str(),
      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    if (kind == OutputKind::kReplaced)
      renameat(dir, old.c_str(), dir, base.c_str());
    return Status::Errno(fmt::format("{}: cannot create {}", what, path), err,
                         ErrorKind::kUsage);
  }
  return make(fd, kind);
}

OutputFile::~OutputFile() {
  if (closed_) return;
  if (kind_ == OutputKind::kStdout) {
    buf_.pubsync();
    return;
  }
  ::close(fd_);
  if (kind_ == OutputKind::kCreated || kind_ == OutputKind::kReplaced)
    unlinkat(dir_, base_.c_str(), 0);
  if (kind_ == OutputKind::kReplaced)
    renameat(dir_, (base_ + ".old").c_str(), dir_, base_.c_str());
  ::close(dir_);
}

bool OutputFile::flush() {
  os_.flush();
  return buf_.error() == 0;
}

Status OutputFile::write_error(int err) const {
  std::string where = kind_ == OutputKind::kStdout ? "stdout" : path_;
  return Status::Errno(fmt::format("{}: writing {}", what_, where), err);
}

Status OutputFile::close() {
  if (closed_) return Status::Ok();
  closed_ = true;
  os_.flush();
  int err = buf_.error();
  // A network filesystem may report a failed write only at close.
  if (kind_ != OutputKind::kStdout && ::close(fd_) != 0 && err == 0)
    err = errno;
  if (dir_ >= 0) ::close(dir_);
  dir_ = -1;
  return err == 0 ? Status::Ok() : write_error(err);
}

}  // namespace looptrace
