#include "proc/pid.h"

#include <fmt/format.h>

#include <climits>
#include <string>

#include "proc/process.h"

namespace looptrace::proc {

Result<pid_t> parse_pid(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::Error(fmt::format("-p '{}': {}", text, why),
                         ErrorKind::kUsage);
  };
  if (text.empty()) return bad("empty; give a process id");
  long long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad("not a process id (decimal digits)");
    v = v * 10 + (c - '0');
    if (v > INT_MAX) return bad("out of range");
  }
  if (v == 0) return bad("not a process id (0 is not a process)");
  return static_cast<pid_t>(v);
}

char stat_state(std::string_view stat) {
  size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= stat.size() ||
      stat[paren + 1] != ' ')
    return '\0';
  return stat[paren + 2];
}

bool stat_kernel_thread(std::string_view stat) {
  size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return false;
  // After ") ": state ppid pgrp session tty_nr tpgid flags.
  std::string_view rest = stat.substr(paren + 1);
  for (int field = 0; field < 6; ++field) {
    size_t sp = rest.find(' ', 1);
    if (sp == std::string_view::npos) return false;
    rest = rest.substr(sp);
  }
  unsigned long long flags = 0;
  size_t i = 1;
  for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i)
    flags = flags * 10 + static_cast<unsigned>(rest[i] - '0');
  constexpr unsigned long long kPfKthread = 0x00200000;  // PF_KTHREAD
  return i > 1 && (flags & kPfKthread) != 0;
}

Status check_pid_target(pid_t pid) {
  if (pid <= 0 || !pid_exists(static_cast<uint32_t>(pid)))
    return Status::Error(fmt::format("pid {} not found", pid),
                         ErrorKind::kUsage);
  if (auto stat = read_text_file(fmt::format("/proc/{}/stat", pid));
      stat.ok() && stat_kernel_thread(*stat))
    return Status::Error(fmt::format("pid {} is a kernel thread: it runs no "
                                     "program to trace",
                                     pid),
                         ErrorKind::kUsage);
  // The leader's own state says Z as soon as the leader thread exits, even
  // while other threads run; only a process with no live thread is dead.
  for (uint32_t tid : thread_ids(static_cast<uint32_t>(pid))) {
    auto stat = read_text_file(fmt::format("/proc/{}/task/{}/stat", pid, tid));
    if (!stat.ok()) continue;  // the thread exited meanwhile
    char state = stat_state(*stat);
    if (state != 'Z' && state != 'X' && state != '\0') return Status::Ok();
  }
  // Gone between the two checks, or a zombie: either way nothing runs.
  if (!pid_exists(static_cast<uint32_t>(pid)))
    return Status::Error(fmt::format("pid {} not found", pid),
                         ErrorKind::kUsage);
  return Status::Error(
      fmt::format("process {} has exited (a zombie its parent has not "
                  "reaped): nothing left to trace",
                  pid),
      ErrorKind::kUsage);
}

}  // namespace looptrace::proc
