// What a tracing session traces: a running process (-p PID), a command it
// starts (-- COMMAND), or every process (--system-wide).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "proc/command.h"

namespace looptrace {

class Target {
 public:
  // Checks the choice before anything is traced: one of the three, not
  // looptrace itself, a live process, a command found on PATH.
  Status check(pid_t pid, const std::vector<std::string>& command,
               bool system_wide);
  // The command's executable (empty without one).
  const std::string& command_path() const { return command_path_; }
  // Starts the command, held before its exec (a no-op without one).
  // `stdout_taken`: a report goes to stdout, the command's goes to stderr.
  Status start(bool stdout_taken);
  // Lets the command exec once the probes are attached: an exec that
  // failed is its error.
  Status release();
  // The pid traced: -p's, the command's once started; -1 for all.
  pid_t pid() const;
  // "pid N (cmd)", "pid N" (with its pid in its namespace), "all processes".
  std::string describe() const;
  Child* child() const { return child_.get(); }

 private:
  pid_t pid_ = -1;
  std::vector<std::string> command_;
  std::string command_path_;
  std::unique_ptr<Child> child_;
};

// "pid N", or "pid N (pid M in its PID namespace)" for a process in a
// container seen from outside it.
std::string describe_pid(pid_t pid);

}  // namespace looptrace
