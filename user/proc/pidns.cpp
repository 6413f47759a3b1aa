#include "proc/pidns.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <sstream>
#include <string>

namespace looptrace::proc {

Result<PidNamespace> own_pid_namespace() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0)
    return Status::Errno("reading /proc/self/ns/pid", errno);
  PidNamespace ns{static_cast<uint64_t>(st.st_dev),
                  static_cast<uint64_t>(st.st_ino)};
  char link[32] = {};
  ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);
  pid_t self = getpid();
  if (n <= 0 || std::to_string(self) != std::string(link, n))
    return Status::Error(
               fmt::format("/proc belongs to another PID namespace than "
                           "looptrace's (looptrace is pid {} here, {} there)",
                           self, n > 0 ? std::string(link, n) : "unseen"))
        .with_hint(
            "mount a /proc of this namespace (unshare --pid --fork "
            "--mount-proc, or mount -t proc proc /proc in a new mount "
            "namespace)");
  return ns;
}

std::vector<pid_t> ns_pids(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  std::vector<pid_t> out;
  while (std::getline(in, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    long long v = 0;
    while (fields >> v && v > 0 && v <= INT_MAX && out.size() < 32)
      out.push_back(static_cast<pid_t>(v));
    break;
  }
  return out;
}

}  // namespace looptrace::proc
