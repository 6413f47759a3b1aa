// The live event source (docs/recording.md): runs the tracer until a stop
// condition and hands the stream to a sink.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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
namespace v8 {
class JsFrames;
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
  // With LiveOptions::follow_exits: a process seen in the stream exited,
  // and every record of it was handed on; nothing of it is kept since.
  virtual void process_gone(uint32_t /*pid*/) {}
  // SIGHUP, when it does not stop the run (install_stop_handlers(false)).
  virtual void hangup() {}
};

struct LiveEnd {
  std::string reason;  // "duration elapsed", "interrupted", kCommandExited
  Status run_status;   // the first polling error
  Status stop_status;  // draining
  uint64_t end_ns = 0;
};

// Installs the SIGINT/SIGTERM handlers that stop a live run, and SIGHUP's:
// a stop too (a closed terminal), or with hangup_stops false a call of
// LiveClient::hangup() (a service's "say how you are").
void install_stop_handlers(bool hangup_stops = true);

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
  // Names the JavaScript frames of samples and blocking points of V8
  // (Node) processes; nullptr: none are read.
  v8::JsFrames* js_frames = nullptr;
  // How user stacks are unwound (the tracer copies stacks unless fp).
  CallGraph call_graph = CallGraph::kFramePointer;
  // The run's slow thresholds by role: a span shorter than its role's
  // keeps its stacks' frame pointers' frames, not unwound by CFI nor
  // named as Python (pipeline/stack_gate.h); nullopt: every stack is (a
  // recording of every span that a report may judge by lower thresholds).
  std::optional<std::array<uint64_t, LT_ROLE_MAX>> unwind_slow_ns;
  // A process that exits is forgotten a second later (a run that lasts:
  // `monitor`), and LiveClient::process_gone says so.
  bool follow_exits = false;
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
  void check_exits(uint64_t now, MappingsTracker& tracker);

  Tracer& tracer_;
  LiveOptions opts_;
  LiveClient* client_;
  LiveEnd end_;
  uint64_t last_alive_check_ = 0, last_stall_check_ = 0, last_progress_ = 0;
  uint64_t last_hang_check_ = 0, last_exit_check_ = 0;
  // Processes seen dead (pid -> when): forgotten a second later, once the
  // records they left in the ring buffer are read.
  std::map<uint32_t, uint64_t> dying_;
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> hung_;  // announced
};

}  // namespace looptrace
