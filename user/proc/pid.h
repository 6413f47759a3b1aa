// The -p PID argument: parsed strictly, then checked to name a process
// that can be traced.
#pragma once

#include <sys/types.h>

#include <string_view>

#include "base/status.h"

namespace looptrace::proc {

// Decimal digits only, 1 to INT_MAX: "", "0", "-5", "+7", "0x10", " 12"
// and "12abc" are usage errors. (strtol would read "0x10" as 16, and an
// empty, zero or negative pid would mean "every process" further on.)
Result<pid_t> parse_pid(std::string_view text);

// The state letter of a /proc/PID/stat or /proc/PID/task/TID/stat line
// ('R', 'S', 'Z', ...), or '\0' when the line is malformed. The letter
// follows the last ')': the comm before it may hold spaces and parens.
char stat_state(std::string_view stat);

// Whether a /proc/PID/stat line is a kernel thread's (PF_KTHREAD in its
// flags): no user code, no mappings.
bool stat_kernel_thread(std::string_view stat);

// Usage errors for a pid that does not exist, for a kernel thread and for a
// process that has exited entirely (a zombie: every thread is dead, its parent
// has not reaped it). A process whose leader thread has exited while others run
// is alive: it can still be traced.
Status check_pid_target(pid_t pid);

}  // namespace looptrace::proc
