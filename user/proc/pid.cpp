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

Status check_pid_target(pid_t pid) {
  if (pid <= 0 || !pid_exists(static_cast<uint32_t>(pid)))
    return Status::Error(fmt::format("pid {} not found", pid),
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
