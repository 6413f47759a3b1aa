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
#include "analysis/frames.h"
#include "analysis/input.h"
#include "base/status.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"
#include "trace/stream.h"

namespace looptrace {

// What a live run announces while it runs, told the moment the analysis
// decides it (record's live alerts and --events).
class AlertListener {
 public:
  virtual ~AlertListener() = default;
  // A barrier held past the stall threshold, judged at the TickEvent of
  // now_ns.
  virtual void barrier_stall(const Barrier& b, uint64_t now_ns) = 0;
  // A hang announced (HangEvent), or an announced hang that ended.
  virtual void hang(const HangAlert& h) = 0;
  // A frame that missed its deadline, as it ends (or as tracing stops).
  virtual void janky_frame(const JankyFrame&) {}
};

// The probes whose spans are frames (ProbeDef::frame), as the frame
// analysis reads them, at a refresh interval of refresh_ns.
FrameOptions frame_options(const std::vector<ProbeDef>& probes,
                           uint64_t refresh_ns);

class Analysis : public EventSink {
 public:
  // `symbolizer` names addresses for the analysers and the outputs: the
  // live processes' or the recording's symbols.
  Analysis(Symbolizer* symbolizer, ThresholdOverrides overrides = {});
  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;

  // Events before the SessionEvent are counted and ignored.
  void consume(const Event& ev) override;
  // Told of stalls and hangs as they are found; null: nobody.
  void set_alerts(AlertListener* alerts) { alerts_ = alerts; }

  // Whether a SessionEvent / EndEvent has been seen.
  bool configured() const { return configured_; }
  bool ended() const { return ended_; }
  // Not configured, or thresholds below the recorded ones.
  const Status& status() const { return status_; }
  const SessionEvent& session() const { return session_; }

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
  std::unique_ptr<FrameAnalyzer> frames_;
  // The last QueueEvent of each (pid, queue).
  std::map<std::pair<uint32_t, uint64_t>, QueueEvent> queues_;
  AlertListener* alerts_ = nullptr;
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> hangs_;  // announced
  uint64_t last_ns_ = 0;
  Findings findings_;
  ReportContext ctx_;
};

}  // namespace looptrace
