#include "proc/target.h"

#include <fmt/format.h>
#include <unistd.h>

#include "proc/pid.h"
#include "proc/pidns.h"

namespace looptrace {

Status Target::check(pid_t pid, const std::vector<std::string>& command,
                     bool system_wide) {
  if ((pid > 0) + !command.empty() + system_wide > 1)
    return Status::Error(
        "give only one of -p PID, -- COMMAND and --system-wide",
        ErrorKind::kUsage);
  if (pid == getpid())
    return Status::Error(fmt::format("pid {} is looptrace itself", pid),
                         ErrorKind::kUsage);
  if (pid > 0) LT_RETURN_IF_ERROR(proc::check_pid_target(pid));
  pid_ = pid > 0 ? pid : -1;
  command_ = command;
  if (command.empty()) return Status::Ok();
  auto path = find_command(command[0]);
  if (!path.ok()) return path.status();
  command_path_ = *path;
  return Status::Ok();
}

Status Target::start(bool stdout_taken) {
  if (command_.empty()) return Status::Ok();
  child_ = std::make_unique<Child>();
  return child_->start(command_path_, command_, stdout_taken);
}

Status Target::release() {
  if (!child_) return Status::Ok();
  child_->release();
  if (int err = child_->wait_exec(); err != 0)
    return command_error(command_[0], err);
  return Status::Ok();
}

pid_t Target::pid() const { return child_ ? child_->pid() : pid_; }

std::string Target::describe() const {
  if (child_) return fmt::format("pid {} ({})", child_->pid(), command_[0]);
  if (pid_ > 0) return describe_pid(pid_);
  return "all processes";
}

std::string describe_pid(pid_t pid) {
  // A process in a container has another pid there (its NSpid's last).
  std::vector<pid_t> ids = proc::ns_pids(pid);
  if (ids.size() < 2 || ids.back() == pid) return fmt::format("pid {}", pid);
  return fmt::format("pid {} (pid {} in its PID namespace)", pid, ids.back());
}

}  // namespace looptrace
