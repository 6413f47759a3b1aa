// Everything after the event source: the analysers, configured from the
// stream's SessionEvent, fed every event, and the Findings every output
// formats. The same for a live run and a replayed recording.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/barrier.h"
#include "analysis/dispatch.h"
#include "analysis/findings.h"
#include "analysis/input.h"
#include "base/status.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"

namespace looptrace {

// Thresholds a replay judges by instead of the recorded ones. Raised only:
// what the kernel filtered out never reached the recording, and what waited
// behind a barrier was read at the recorded stall threshold.
struct ThresholdOverrides {
  std::array<std::optional<uint64_t>, LT_ROLE_MAX> slow_ns;
  std::optional<uint64_t> slow_input_ns;
  std::optional<uint64_t> barrier_stall_ns;
};

// The thresholds of `recorded` with `o` applied; a usage error naming the
// option when one is below what the kernel filtered with.
Result<Thresholds> apply_overrides(const Thresholds& recorded,
                                   const ThresholdOverrides& o);

class Analysis {
 public:
  // `symbolizer` names addresses for the analysers and the outputs: the
  // live processes' or the recording's symbols.
  Analysis(Symbolizer* symbolizer, ThresholdOverrides overrides = {});
  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;

  // Events before the SessionEvent are counted and ignored.
  void consume(const Event& ev);

  // Whether a SessionEvent / EndEvent has been seen.
  bool configured() const { return configured_; }
  bool ended() const { return ended_; }
  // Not configured, or thresholds below the recorded ones.
  const Status& status() const { return status_; }
  const SessionEvent& session() const { return session_; }

  // Barriers that became stalls at the last TickEvents (each once), for
  // live announcements.
  std::vector<Barrier> take_new_stalls();
  // Hangs announced, and announced hangs that ended, since the last call.
  std::vector<HangAlert> take_hang_alerts();
  // The queues (pid, queue) whose waiting messages a TickEvent at now_ns
  // will judge (open barriers past the stall threshold, not yet stalled)
  // or, with `all`, of every open barrier (at the end).
  std::vector<std::pair<uint32_t, uint64_t>> queues_to_check(uint64_t now_ns,
                                                             bool all) const;
  bool has_barriers() const { return has_barriers_; }
  // Input events seen so far, as the report will count them (0 without
  // input tracing).
  uint64_t input_events() const { return input_ ? input_->events_seen() : 0; }

  // Call once, after the last event. A stream without an EndEvent (a
  // recording cut short) ends at its last timestamp, with no histograms.
  const Findings& finish();
  // Valid after finish(): what outputs read the findings with.
  const ReportContext& context() const { return ctx_; }
  // The last event's timestamp (CLOCK_MONOTONIC), 0 if none.
  uint64_t last_ns() const { return last_ns_; }

 private:
  void configure(const SessionEvent& s);
  void note_time(uint64_t ns) {
    if (ns > last_ns_) last_ns_ = ns;
  }

  Symbolizer* symbolizer_;
  ThresholdOverrides overrides_;
  Status status_ = Status::Error("the stream has no session header");
  bool configured_ = false;
  bool ended_ = false;
  bool has_barriers_ = false;
  SessionEvent session_;
  Thresholds thresholds_;  // in effect: recorded, overridden
  EndEvent end_;
  std::unique_ptr<DispatchAnalyzer> dispatch_;
  std::unique_ptr<BarrierAnalyzer> barriers_;
  std::unique_ptr<InputAnalyzer> input_;
  // The last QueueEvent of each (pid, queue).
  std::map<std::pair<uint32_t, uint64_t>, QueueEvent> queues_;
  std::vector<Barrier> new_stalls_;
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> hangs_;  // announced
  std::vector<HangAlert> hang_alerts_;
  uint64_t last_ns_ = 0;
  Findings findings_;
  ReportContext ctx_;
};

}  // namespace looptrace
