// Frames: spans that draw a frame (a probe's frame role: GTK's frame clock
// paint, a --frame function), each timed against its deadline, and per
// thread how many were drawn, janky, dropped, frozen. Why a janky frame was
// late: the spans of its thread that held it back and the longest inside it.
// The rules are in docs/looptrace.md, FRAMES.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/histogram.h"
#include "analysis/input.h"
#include "trace/events.h"

namespace looptrace {

// Phases listed per janky frame.
inline constexpr size_t kMaxPhases = 16;

// A frame's duration past 700 ms is frozen (Android vitals).
inline constexpr uint64_t kFrozenFrameNs = 700'000'000;

// Matrix's FrameTracer buckets, by the time a frame dropped: missed vsyncs
// of 3, 9 and 42 frames at 60 Hz (50 ms, 150 ms, 700 ms at any rate).
enum class FrameBucket : uint8_t { kNormal, kMiddle, kHigh, kFrozen };
const char* bucket_name(FrameBucket b);

// One frame's arithmetic: its deadline and what it missed.
struct FrameTiming {
  uint64_t expected_ns = 0;  // when it should have started
  uint64_t deadline_ns = 0;  // expected_ns + one refresh interval
  uint64_t delay_ns = 0;     // start - expected_ns: held back before it ran
  uint64_t missed_vsyncs = 0;
  bool janky = false;   // ended past its deadline
  bool frozen = false;  // ran kFrozenFrameNs or longer
  FrameBucket bucket = FrameBucket::kNormal;
};

// The timing of a frame that should have started at expected_ns (clamped
// to start_ns: a frame that came early is not late) and ran from start_ns
// for duration_ns, at a refresh interval of interval_ns (> 0). Missed
// vsyncs: the vsyncs from the deadline to its end, rounded up (a frame
// ending 1.5 intervals after its expected start showed one vsync late).
FrameTiming time_frame(uint64_t expected_ns, uint64_t start_ns,
                       uint64_t duration_ns, uint64_t interval_ns);

// The previous frame of a thread, what the next one is expected after.
struct PreviousFrame {
  uint64_t expected_ns = 0;
  uint64_t end_ns = 0;
};

// A tick older than this before its frame's start is not believed (a
// traced program's key may hold anything): the frame is timed without it.
inline constexpr uint64_t kMaxTickLeadNs = 60'000'000'000;

// When a frame starting at start_ns should have started:
// - with a tick (the source's own vsync or frame-clock time, e.g. a GLib
//   timeout's due time), that tick, but not before the previous frame's
//   end (a frame held up by the previous one is that one's jank);
// - without, the previous frame's end plus one interval (the toolkit keeps
//   requesting frames), unless the frame starts more than one interval
//   after that and `busy(from, to)` says no span of the thread ran in
//   between: then the toolkit had stopped asking, and the frame is on time;
// - the first frame of a thread without a tick: its start.
// Never after start_ns.
template <typename Busy>
uint64_t expected_start(const std::optional<PreviousFrame>& prev,
                        std::optional<uint64_t> tick_ns, uint64_t start_ns,
                        uint64_t interval_ns, Busy busy) {
  uint64_t e = start_ns;
  if (tick_ns && *tick_ns <= start_ns &&
      start_ns - *tick_ns <= kMaxTickLeadNs) {
    e = *tick_ns;
    if (prev && prev->end_ns > e) e = prev->end_ns;
  } else if (prev) {
    e = prev->end_ns + interval_ns;
    if (e < start_ns && start_ns - e > interval_ns && !busy(e, start_ns))
      e = start_ns;
  }
  return e < start_ns ? e : start_ns;
}

// How much of [from, to) the spans [start, end) cover together.
uint64_t covered_ns(std::vector<std::pair<uint64_t, uint64_t>> spans,
                    uint64_t from, uint64_t to);

// A frame between two frame ends (--frame-end, a profile's "end": true):
// the call that returned at end_ns, started at call_start_ns, after the
// thread's previous frame end last_ns. The frame began as the previous
// one ended, and frame ends come a whole number of intervals apart, give
// or take some jitter: it is late from one and a half intervals
// (Chromium's rule for a late frame), a vsync missed for each interval
// after that, rounded up; frozen by its whole length. A gap of more than
// two intervals is one late frame only if the process was busy in it:
// `covered(last_ns, call_start_ns)`, the time recorded spans of its
// threads ran there, leaves at most two intervals of it, or the call
// itself took an interval or more. Else the program had stopped drawing
// (an animation that ended, a window waiting for input) and the call
// starts a new run: nullopt.
template <typename Covered>
std::optional<FrameTiming> time_between_ends(uint64_t last_ns,
                                             uint64_t call_start_ns,
                                             uint64_t end_ns,
                                             uint64_t interval_ns,
                                             Covered covered) {
  if (last_ns > call_start_ns || interval_ns <= 1) return {};
  const uint64_t gap = end_ns - last_ns;
  if (gap > 2 * interval_ns && end_ns - call_start_ns < interval_ns) {
    const uint64_t idle =
        call_start_ns - last_ns - covered(last_ns, call_start_ns);
    if (idle > 2 * interval_ns) return {};
  }
  const uint64_t half = interval_ns / 2;
  FrameTiming t = time_frame(last_ns + half, last_ns + half,
                             gap - std::min(gap, half), interval_ns);
  t.frozen = gap >= kFrozenFrameNs;
  return t;
}

// Which probes make frames and how.
struct FrameProbe {
  // Spans whose string key (SpanEvent::key_str) is one of these are
  // frames; empty: every span of the probe.
  std::vector<std::string> names;
  std::string label;  // the source when no name matched: "--frame app:draw"
  // Each span's return ends a frame that began at the previous one's
  // (--frame-end), instead of the span being the frame.
  bool end = false;
  int tick_key = -1;        // index of the key holding the frame's tick, or -1
  uint32_t tick_scale = 0;  // its unit in ns
  // Index of the key holding the refresh interval the toolkit draws at
  // (ns: "refresh_ns"), or -1: FrameOptions::refresh_ns.
  int refresh_key = -1;
};

// A refresh interval a traced program's key says is believed from 1 ms
// (1000 Hz) to 1 s (1 Hz), --refresh-rate's range.
inline constexpr uint64_t kMinRefreshNs = 1'000'000;
inline constexpr uint64_t kMaxRefreshNs = 1'000'000'000;

struct JankyFrame;

struct FrameOptions {
  uint64_t refresh_ns = 16'666'667;
  std::map<uint32_t, FrameProbe> probes;  // by probe id
  // Probes whose spans are phases of the frame they run in.
  std::set<uint32_t> phase_probes;
  // Janky frames kept (the worst; the rest counted).
  size_t max_janky = 10000;
  // What a janky frame's cause lists of the spans that held it back.
  size_t max_cause_spans = 5;
  // Spans of a thread kept in memory to explain its next frame.
  size_t max_recent_spans = 4096;
  // Frames kept for the timelines (FrameAnalysis::timeline).
  size_t max_timeline = 100000;
  // Told of each janky frame as it is found (live alerts); may be empty.
  std::function<void(const JankyFrame&)> on_janky;
};

// One frame as a timeline draws it (Perfetto, HTML).
struct FrameSlice {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;  // its age if in flight
  bool in_flight = false;
  FrameTiming timing;
};

// A span that held a frame back: how much of the wait it covered.
struct HeldBy {
  SpanEvent span;
  uint64_t overlap_ns = 0;  // of [expected start, start)
};

// Why a janky frame was late.
struct FrameCause {
  // The spans of its thread that ran between its expected start and its
  // start, most of that time first (at most max_cause_spans).
  std::vector<HeldBy> held_by;
  size_t held_by_omitted = 0;
  // The longest span that ran inside it, if any crossed the ring buffer.
  std::optional<SpanEvent> longest_inside;
};

struct JankyFrame {
  SpanEvent span;      // the frame (duration: its age if in flight)
  std::string source;  // what made it a frame: the GSource name, the label
  FrameTiming timing;
  FrameCause cause;
  // The phase spans (FrameOptions::phase_probes) that ran inside it, by
  // start (at most kMaxPhases; phases_omitted counts the rest).
  std::vector<SpanEvent> phases;
  size_t phases_omitted = 0;
  // A frame between two frame ends (--frame-end): its CPU split is not
  // known (the span's times are zero).
  bool between_ends = false;
  // Chromium's rule: an input event of its process, sent before the frame
  // ended, was still not being handled at its deadline (set by
  // mark_input_waiting; false without input tracing).
  bool input_waiting = false;
};

struct FrameThread {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  std::string source;  // of its first frame
  uint64_t refresh_ns = 0;
  uint64_t count = 0;  // frames started, in flight at the end included
  uint64_t janky = 0;  // past their deadline (in flight included)
  uint64_t frozen = 0;
  uint64_t missed_vsyncs = 0;  // dropped frames
  uint64_t in_flight = 0;      // still drawing when tracing stopped
  double fps = 0;              // completed frames per second of the run
  Percentiles pct;             // durations of the completed frames
};

struct FrameAnalysis {
  // By pid, tid; over limits::kJsonMaxThreads, those with most frames
  // (threads_omitted counts the rest).
  std::vector<FrameThread> threads;
  size_t threads_omitted = 0;
  // The worst janky frames (most missed vsyncs, longest), by start.
  std::vector<JankyFrame> janky;
  size_t janky_omitted = 0;
  // Every frame, by pid, tid, start: the first max_timeline of the run
  // (timeline_omitted counts the rest).
  std::vector<FrameSlice> timeline;
  size_t timeline_omitted = 0;
};

// Sets JankyFrame::input_waiting from the input events the input analysis
// lists (handled ones: one the toolkit coalesced never waited for a
// frame).
void mark_input_waiting(FrameAnalysis& frames, const InputAnalysis& input);

class FrameAnalyzer {
 public:
  explicit FrameAnalyzer(FrameOptions options);

  bool enabled() const { return !options_.probes.empty(); }
  // Whether `s` is a frame (the input analysis's next frame).
  bool is_frame(const SpanEvent& s) const {
    return frame_source(s).has_value();
  }
  void consume(const Event& ev);
  // The run lasted run_ns (for FPS).
  FrameAnalysis finish(uint64_t run_ns);

  // The source that makes `s` a frame, or nullopt.
  std::optional<std::string> frame_source(const SpanEvent& s) const;
  // Whether frame `s` ends a frame that began at the previous one's end
  // (its probe's FrameProbe::end).
  bool ends_frame(const SpanEvent& s) const {
    auto it = options_.probes.find(s.probe_id);
    return it != options_.probes.end() && it->second.end;
  }
  // The refresh interval the frame's toolkit says it draws at, if its
  // probe reads one.
  std::optional<uint64_t> refresh(const SpanEvent& s) const;
  // The frame's own tick (its vsync or due time), if its probe has one.
  std::optional<uint64_t> tick(const SpanEvent& s) const;

 private:
  using ThreadKey = std::pair<uint32_t, uint32_t>;
  struct Thread {
    FrameThread summary;
    std::optional<PreviousFrame> prev;
    std::vector<uint64_t> durations;
    std::vector<SpanEvent> recent;     // other spans, by arrival
    std::vector<SpanEvent> phases;     // phase spans since the last frame
    std::optional<uint64_t> last_end;  // its last frame end (--frame-end)
  };

  // The threads whose spans explain a frame of t: t's own, or with
  // `process` (a frame between two frame ends: a swap that other threads'
  // work fed, as Qt Quick's render thread) every thread of its process.
  std::vector<Thread*> scope(Thread& t, uint32_t pid, bool process);

  // A frame-end span s: the frame from the thread's previous frame end to
  // s's return, or s alone when it starts a new run.
  void on_frame_end(Thread& t, const SpanEvent& s, std::string source);
  // `between_ends`: s is a frame between two frame ends, timed already.
  void on_frame(Thread& t, const SpanEvent& s, std::string source,
                const FrameTiming* between_ends = nullptr);
  // `overlapping`: a span that ran in part inside the frame counts as
  // inside it (a frame between ends has no time before its start).
  FrameCause explain(const std::vector<Thread*>& threads, const SpanEvent& s,
                     uint64_t expected_ns, bool overlapping) const;

  FrameOptions options_;
  std::map<ThreadKey, Thread> threads_;
  std::vector<JankyFrame> janky_;
  size_t janky_trimmed_ = 0;  // left out of janky_ to bound it
  std::vector<FrameSlice> timeline_;
  size_t timeline_omitted_ = 0;
};

}  // namespace looptrace
