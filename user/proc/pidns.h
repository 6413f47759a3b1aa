// PID namespaces: the one looptrace runs in, and a process's pids in the
// namespaces it belongs to.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace looptrace::proc {

// The initial PID namespace's inode number (PROC_PID_INIT_INO): fixed.
inline constexpr uint64_t kInitialPidNsIno = 0xEFFFFFFCu;

// A PID namespace as /proc/PID/ns/pid names it.
struct PidNamespace {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool initial() const { return ino == kInitialPidNsIno; }
};

// The namespace looptrace runs in (/proc/self/ns/pid). An error when /proc
// is another namespace's (`unshare -pf` without --mount-proc): its pids
// are not the ones looptrace's own calls see.
Result<PidNamespace> own_pid_namespace();

// NSpid of /proc/PID/status: the process's pid in /proc's namespace first,
// then in each namespace nested in it down to its own. One element when it
// lives in /proc's namespace; empty when unreadable.
std::vector<pid_t> ns_pids(pid_t pid);

}  // namespace looptrace::proc
