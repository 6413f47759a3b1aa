#include "proc/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace looptrace::proc {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

// Closes the descriptor on every return path.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

ErrorKind kind_for_errno(int err) {
  return err == EACCES || err == EPERM ? ErrorKind::kPermission
                                       : ErrorKind::kUsage;
}

}  // namespace

bool pid_exists(uint32_t pid) {
  // kill(0, ...) and negative pids mean process groups, not one process.
  if (pid == 0 || pid > static_cast<uint32_t>(INT_MAX)) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

namespace {

// A thread that exited keeps a /proc entry (and answers kill(0)) until it
// is reaped, in state Z or X; a thread gone altogether has no stat.
bool thread_running(uint32_t pid, uint32_t tid) {
  auto stat = read_text_file(fmt::format("/proc/{}/task/{}/stat", pid, tid));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
  char state = (*stat)[paren + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace

uint32_t live_thread(uint32_t pid) {
  if (!pid_exists(pid)) return 0;
  if (thread_running(pid, pid)) return pid;  // the main thread, usually
  for (uint32_t tid : thread_ids(pid))
    if (tid != pid && thread_running(pid, tid)) return tid;
  return 0;
}

bool pid_running(uint32_t pid) { return live_thread(pid) != 0; }

std::string live_proc_dir(uint32_t pid) {
  uint32_t tid = live_thread(pid);
  if (tid == 0 || tid == pid) return fmt::format("/proc/{}", pid);
  return fmt::format("/proc/{}/task/{}", pid, tid);
}

Result<std::string> exe_path(uint32_t pid) {
  std::string link = live_proc_dir(pid) + "/exe";
  char buf[PATH_MAX];
  ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n < 0) return Status::Errno("readlink " + link, errno);
  std::string path(buf, static_cast<size_t>(n));
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

std::string comm(uint32_t pid, uint32_t tid) {
  std::string path = tid ? fmt::format("/proc/{}/task/{}/comm", pid, tid)
                         : fmt::format("/proc/{}/comm", pid);
  Result<std::string> text = read_text_file(path);
  if (!text.ok()) return "";
  std::string name = std::move(*text);
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

Result<std::string> read_text_file(const std::string& path) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  // Another user's process (/proc/PID/maps) is a permission matter.
  if (fd.get() < 0) {
    int err = errno;
    return Status::Errno("open " + path, err,
                         err == EACCES || err == EPERM ? ErrorKind::kPermission
                                                       : ErrorKind::kFailure);
  }
  // /proc files report size 0, so read until EOF.
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Errno("read " + path, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::vector<uint32_t> thread_ids(uint32_t pid) {
  std::vector<uint32_t> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(fmt::format("/proc/{}/task", pid), ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    char* end = nullptr;
    unsigned long v = std::strtoul(name.c_str(), &end, 10);
    if (end && *end == '\0' && v > 0) out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

Result<std::string> read_regular_file(const std::string& path,
                                      size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer before fstat could tell what it is.
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    int err = errno;
    return Status::Errno("open " + path, err, kind_for_errno(err));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    int err = errno;
    return Status::Errno("stat " + path, err, kind_for_errno(err));
  }
  if (!S_ISREG(st.st_mode))
    return Status::Error(
        fmt::format("{}: not a regular file ({})", path, file_kind(st.st_mode)),
        ErrorKind::kUsage);
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status::Error(fmt::format("{}: {} bytes, over the limit of {}", path,
                                     st.st_size, max_bytes),
                         ErrorKind::kUsage);
  // The file may grow while it is read: stop one byte past the limit.
  std::string out;
  char buf[16384];
  while (out.size() <= max_bytes) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Errno("read " + path, errno);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
  return Status::Error(
      fmt::format("{}: grew past {} bytes while it was read", path, max_bytes),
      ErrorKind::kUsage);
}

}  // namespace looptrace::proc
