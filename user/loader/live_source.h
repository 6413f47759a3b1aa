// The live event source (docs/recording.md): runs the tracer until a stop
// condition and hands the stream to a sink.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status.h"
#include "loader/tracer.h"
#include "proc/command.h"
#include "trace/stream.h"

namespace looptrace {
namespace python {
class PyFrames;
}

// What a live run asks of its consumers while it runs.
class LiveClient {
 public:
  virtual ~LiveClient() = default;
  // The queues (pid, queue) whose waiting messages the next stall check
  // judges; `all`: every queue with an open barrier (at the stop).
  virtual std::vector<std::pair<uint32_t, uint64_t>> queues_to_check(
      uint64_t now_ns, bool all) = 0;
  // About four times a second while tracing (the status line, flushing a
  // recording).
  virtual void progress(uint64_t now_ns, const Tracer& tracer) = 0;
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

struct LiveOptions {
  Child* child = nullptr;  // the command traced, if any
  pid_t pid = -1;          // -p: ends when its processes have
  uint64_t t0 = 0;  // CLOCK_MONOTONIC: the SessionEvent's start (emitted by
                    // the caller, before the command is let go)
  uint64_t duration_ns = 0;  // 0: until a signal or the target's end
  bool barriers = false;     // check for stalls every 20 ms
  bool input = false;        // input records do not wake the reader: poll
  uint64_t hang_ns = 0;      // announce spans running this long; 0: never
  // Names the Python frames of samples of CPython processes; nullptr: none
  // are read.
  python::PyFrames* py_frames = nullptr;
  // How user stacks are unwound (the tracer copies stacks unless fp).
  CallGraph call_graph = CallGraph::kFramePointer;
};

class MappingsTracker;

// The live event source: the tracer's events, with the mappings of each
// process when first seen, user stacks unwound by CFI, queue snapshots and
// ticks for barrier stalls, hang announcements, the spans in flight at the
// stop and the EndEvent.
class LiveSource : public EventSource {
 public:
  LiveSource(Tracer& tracer, LiveOptions opts, LiveClient* client)
      : tracer_(tracer), opts_(opts), client_(client) {}
  // Until the duration, a signal or the end of the target; what ended it
  // is end().
  Status run(EventSink& sink) override;
  const LiveEnd& end() const { return end_; }

 private:
  std::string stop_reason(uint64_t now);
  int poll_timeout_ms(uint64_t now) const;
  void check(uint64_t now, MappingsTracker& tracker, const Tracer::Sink& sink);
  void emit_queues(uint64_t now, bool all, const Tracer::Sink& sink);
  void finish(MappingsTracker& tracker, const Tracer::Sink& sink,
              EventSink& out);

  Tracer& tracer_;
  LiveOptions opts_;
  LiveClient* client_;
  LiveEnd end_;
  uint64_t last_alive_check_ = 0, last_stall_check_ = 0, last_progress_ = 0;
  uint64_t last_hang_check_ = 0;
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> hung_;  // announced
};

}  // namespace looptrace
