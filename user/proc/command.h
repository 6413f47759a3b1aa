// The traced command (`looptrace record -- COMMAND`): found, started
// stopped, released once the probes are attached, reaped.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/status.h"

namespace looptrace {

// The reason a live run gives when the traced command ended on its own.
inline constexpr const char* kCommandExited = "command exited";

// A command started stopped: it execs only when released, after the probes
// are attached, so its first dispatch is already traced. An exec failure
// comes back through a close-on-exec pipe: EOF means the exec happened.
class Child {
 public:
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (go_fd_ >= 0) close(go_fd_);
    if (exec_fd_ >= 0) close(exec_fd_);
  }

  // `path` is the resolved executable, `argv` what the command sees.
  // `stdout_to_stderr`: the command's stdout goes to our stderr (a report
  // is being written to stdout).
  Status start(const std::string& path, const std::vector<std::string>& argv,
               bool stdout_to_stderr = false) {
    int go[2], ex[2];
    if (pipe2(go, O_CLOEXEC) != 0) return Status::Errno("pipe", errno);
    if (pipe2(ex, O_CLOEXEC) != 0) {
      int err = errno;
      close(go[0]);
      close(go[1]);
      return Status::Errno("pipe", err);
    }
    pid_ = fork();
    if (pid_ < 0) return Status::Errno("fork", errno);
    if (pid_ == 0) {
      if (stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        _exit(127);
      run_child(path, argv, go[0], ex[1]);
    }
    close(go[0]);
    close(ex[1]);
    go_fd_ = go[1];
    exec_fd_ = ex[0];
    return Status::Ok();
  }
  void release() {
    if (go_fd_ < 0) return;
    if (write(go_fd_, "g", 1) != 1) log::warn("could not release the command");
    close(go_fd_);
    go_fd_ = -1;
  }
  // After release(): waits until the command has exec'd; 0, or the errno
  // of the failed exec.
  int wait_exec() {
    int err = 0;
    ssize_t n;
    do {
      n = read(exec_fd_, &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(exec_fd_);
    exec_fd_ = -1;
    return n == static_cast<ssize_t>(sizeof err) ? err : 0;
  }
  // True once the child has exited (reaps it).
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      status_ = status;
    }
    return reaped_;
  }
  // How terminate() found or left the command.
  enum class End {
    kOnItsOwn,    // it had exited already
    kTerminated,  // SIGTERM ended it within the grace period
    kKilled,      // it outlived SIGTERM by the grace period: SIGKILL
  };
  // How long a command may take to end on SIGTERM before SIGKILL.
  static constexpr int kGraceMs = 3000;
  // Ends the command if it still runs: SIGTERM, then SIGKILL if it is still
  // there after `grace_ms` (it ignores or handles SIGTERM and goes on).
  End terminate(int grace_ms = kGraceMs) {
    if (exited()) return End::kOnItsOwn;
    kill(pid_, SIGTERM);
    for (int waited = 0; waited < grace_ms && !exited(); waited += 10)
      usleep(10'000);
    if (exited()) return End::kTerminated;
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    reaped_ = true;
    return End::kKilled;
  }
  pid_t pid() const { return pid_; }
  int status() const { return status_; }

 private:
  [[noreturn]] static void run_child(const std::string& path,
                                     const std::vector<std::string>& argv,
                                     int go_fd, int exec_fd) {
    char c;
    // EOF without a byte: the tracer gave up; do not run the command.
    if (read(go_fd, &c, 1) != 1) _exit(127);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // An ignored signal stays ignored across exec: the tracer's choices
    // are not the command's.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execv(path.c_str(), args.data());
    int err = errno;
    if (write(exec_fd, &err, sizeof err) < 0) _exit(126);
    _exit(127);
  }

  pid_t pid_ = -1;
  int go_fd_ = -1;
  int exec_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_end(int status);

// As a shell gives it: the exit status, or 128 + the signal.
int shell_status(int status);

// "cannot run NAME: ..." (exit 2), with a hint when the file exists but its
// interpreter does not.
Status command_error(const std::string& name, int err);

// The command's file, found as execvp finds it: checked before anything is
// attached, so a typo is one line and exit 2, not an empty trace.
Result<std::string> find_command(const std::string& name);

}  // namespace looptrace
