// The live event source: runs the tracer until a stop condition and emits
// the stream every consumer reads (docs/recording.md): mappings of each
// process when first seen, the tracer's events, queue snapshots and clock
// ticks for barrier stalls, spans still in flight at the stop, and the
// EndEvent with the kernel's histograms and counters.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cli/command.h"
#include "loader/tracer.h"

namespace looptrace {

struct LiveHooks {
  // The queues (pid, queue) whose waiting messages the next stall check
  // judges; `all`: every queue with an open barrier (at the stop).
  std::function<std::vector<std::pair<uint32_t, uint64_t>>(uint64_t now,
                                                           bool all)>
      queues_to_check;
  // About four times a second while tracing (the status line, flushing a
  // recording).
  std::function<void(uint64_t now)> on_progress;
  // Spans running this long are announced (HangEvent); 0: never.
  uint64_t hang_ns = 0;
};

struct LiveEnd {
  std::string reason;  // "duration elapsed", "interrupted", kCommandExited
  Status run_status;   // the first polling error
  Status stop_status;  // draining
  uint64_t end_ns = 0;
};

inline constexpr const char* kCommandExited = "command exited";

// Installs the SIGINT/SIGTERM/SIGHUP handlers that stop a live run.
void install_stop_handlers();

uint64_t monotonic_ns();

// Traces from t0 (CLOCK_MONOTONIC, the SessionEvent's start) until the
// duration, a signal, or the end of the target (the command `child`, or
// -p `pid`'s processes). `barriers`: check for stalls every 20 ms.
LiveEnd run_live(Tracer& tracer, Child* child, pid_t pid, uint64_t t0,
                 uint64_t duration_ns, bool barriers, bool input,
                 const Tracer::Sink& emit, const LiveHooks& hooks);

}  // namespace looptrace
