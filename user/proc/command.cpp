#include "proc/command.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace looptrace {
namespace {

// 0 if `path` can be executed (a regular file with an execute bit), else
// the errno execve would give.
int exec_error(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;
  return access(path.c_str(), X_OK) == 0 ? 0 : errno;
}

}  // namespace

// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_end(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

// As a shell gives it: the exit status, or 128 + the signal.
int shell_status(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

Status command_error(const std::string& name, int err) {
  Status st =
      Status::Errno(fmt::format("cannot run {}", name), err, ErrorKind::kUsage);
  // The file is there: what is missing is its interpreter or loader.
  if (err == ENOENT && access(name.c_str(), F_OK) == 0)
    st.with_hint(
        "its #! interpreter or its ELF loader (PT_INTERP) does not exist");
  return st;
}

// The command's file, found as execvp finds it: checked now, before
// anything is attached, so a typo is one line and exit 2, not an empty
// trace.
Result<std::string> find_command(const std::string& name) {
  if (name.empty())
    return Status::Error("empty command name", ErrorKind::kUsage);
  if (name.find('/') != std::string::npos) {
    if (int err = exec_error(name); err != 0) return command_error(name, err);
    return std::filesystem::absolute(name).string();
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  int denied = 0;  // a match that cannot be executed, as shells report it
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(pos, colon - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    int err = exec_error(cand);
    if (err == 0) return std::filesystem::absolute(cand).string();
    if (err != ENOENT && err != ENOTDIR && !denied) denied = err;
    pos = colon + 1;
  }
  if (denied) return command_error(name, denied);
  return Status::Error(fmt::format("command '{}' not found in PATH", name),
                       ErrorKind::kUsage);
}

}  // namespace looptrace
