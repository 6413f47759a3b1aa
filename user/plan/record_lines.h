// What `record` says on stderr around a run: the banner and how it ended.
#pragma once

#include <sys/types.h>

#include <string>

#include "plan/plan.h"
#include "proc/command.h"
#include "trace/events.h"

namespace looptrace {

// The probes found (when the profile was found, not asked for), the input
// channels and GLib notes, and "tracing N probes in ...; Ctrl-C to stop".
// `what`: "pid N (cmd)", "pid N", "all processes"; `recording`: its path.
void print_banner(const Plan& plan, const SessionEvent& session,
                  const std::string& what, const std::string& recording);

// "looptrace: stopped: command exited with status 3". `command_status` is
// the wait status of a command that ended on its own, else -1. How a
// command ended is said even with -q when it failed: it is the exit code.
void report_stop(bool quiet, const std::string& reason, int command_status);

// At the end of a run: the command (if any) stopped — SIGTERM, then SIGKILL
// after a grace period, said in a warning — and how the run ended said
// (report_stop). True when the command ended on its own: its status is
// then looptrace's.
bool stop_command(Child* child, bool quiet, const std::string& reason);

}  // namespace looptrace
