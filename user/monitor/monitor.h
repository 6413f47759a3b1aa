// `looptrace monitor`'s own sink: follows the processes the stream shows
// (a line on attach and detach), keeps each one's flight-recorder window,
// and when a --dump-if trigger fires writes that window, up to the end of
// what fired, as one ordinary recording (docs/looptrace.md, MONITOR).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "monitor/dumps.h"
#include "monitor/trigger.h"
#include "monitor/window.h"
#include "pipeline/symbols.h"
#include "trace/stream.h"

namespace looptrace {

struct MonitorOptions {
  WindowOptions window;
  std::vector<DumpTrigger> triggers;
  std::optional<DumpDir> dumps;  // none: triggers only announced
  bool dump_pprof = false;       // each dump's stacks also as pprof
  uint64_t refresh_ns = 0;       // frames' interval (0: 60 Hz)
  // The profile a process's mappings show ("" if none): for its line.
  std::function<std::string(const std::vector<MapEntry>&)> profile_of;
};

class Monitor : public EventSink {
 public:
  // `symbols`: the live run's, which name what a dump holds; `log`: where
  // the one-line notes go (stderr).
  Monitor(MonitorOptions o, Symbolizer* symbols, ProcSymbolizer* proc,
          std::ostream& log);

  void consume(const Event& ev) override;
  // A traced process exited: its line, and nothing of it kept.
  void process_gone(uint32_t pid);
  // The live clock (CLOCK_MONOTONIC), a few times a second: input
  // triggers judge events that became final with no record since.
  void advance(uint64_t now_ns);

  size_t traced() const { return procs_.size(); }
  uint64_t dumps() const { return dumps_; }
  // Held back by --dump-every, or input firings more than 64 at once.
  uint64_t dumps_suppressed() const {
    return (o_.dumps ? o_.dumps->suppressed() : 0) +
           (check_ ? check_->dropped() : 0);
  }
  uint64_t dump_failures() const { return dump_failures_; }
  const FlightRecorder& window() const { return window_; }
  // Called after each dump written (the metrics count it).
  std::function<void()> on_dump;

 private:
  struct Proc {
    std::string comm;
    uint64_t dispatches = 0;  // finished
  };
  std::map<uint32_t, Proc>::iterator attach(uint32_t pid, const Event& ev);
  void fire(const Firing& f, const Event& ev);
  struct DumpStats {
    uint64_t events = 0;
    uint64_t bytes = 0;
  };
  Status write_dump(const std::string& path, const Firing& f, const Event& ev,
                    DumpStats* stats);
  Status write_dump_pprof(const std::string& path, const Firing& f,
                          const Event& ev, const SessionEvent& s);

  MonitorOptions o_;
  Symbolizer* symbols_;
  ProcSymbolizer* proc_;
  std::ostream& log_;
  SessionEvent session_;
  FlightRecorder window_;
  std::unique_ptr<TriggerCheck> check_;
  std::map<uint32_t, Proc> procs_;
  // Mappings of processes not followed yet (bounded: most never are).
  static constexpr size_t kPendingMaps = 1024;
  std::map<uint32_t, MappingsEvent> pending_maps_;
  uint64_t dumps_ = 0, dump_failures_ = 0;
};

}  // namespace looptrace
