// `monitor --dump-if EXPR`: when a traced process's window is written out.
// The budget grammar (METRIC OP VALUE) over one span as it ends, or the
// word `hang` (a span still running past --hang). docs/looptrace.md,
// MONITOR.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/frames.h"
#include "analysis/input.h"
#include "base/status.h"
#include "budget/budget.h"
#include "trace/events.h"

namespace looptrace {

struct DumpTrigger {
  bool hang = false;
  Budget cond;       // unless hang: dispatch, idle, delivery, frame, ...
  std::string text;  // normalized, as messages quote it
};

// The metrics a trigger may name, for the manual and messages.
const ConditionGrammar& trigger_grammar();

Result<DumpTrigger> parse_dump_trigger(const std::string& text);

// A trigger that fired: which, on what, and why in words.
struct Firing {
  const DumpTrigger* trigger = nullptr;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;  // the span's end, or the hang's alert
  std::string why;     // "dispatch 152ms > 100ms"
};

// Judges each event against the triggers. Frames are timed as the frame
// analysis does (deadline from the previous frame), with what a thread
// ran since its last frame kept only as far as needed. Input events
// (input.STAGE triggers, with input traced) go through an input analysis
// that keeps only what is not final yet: a trigger fires on the event that
// made a stage known.
class TriggerCheck {
 public:
  TriggerCheck(std::vector<DumpTrigger> triggers, const SessionEvent& session,
               FrameOptions frames);
  // Its input analysis calls back into it.
  TriggerCheck(const TriggerCheck&) = delete;
  TriggerCheck& operator=(const TriggerCheck&) = delete;
  // The first trigger `ev` fires, if any.
  std::optional<Firing> check(const Event& ev);
  // The live clock moved on to now_ns (no record may have come): an input
  // event complete since may be final and fire.
  std::optional<Firing> advance(uint64_t now_ns);
  // Process pid exited: its input events complete so far are judged now,
  // and what they fire is returned (the others' firings stay queued).
  std::vector<Firing> process_gone(uint32_t pid);
  void forget(uint32_t pid);
  size_t threads() const { return threads_.size(); }
  // Input firings let go unjudged: more than 64 waited at once.
  uint64_t dropped() const { return dropped_; }

 private:
  struct Thread {
    std::optional<PreviousFrame> prev;
    std::optional<uint64_t> last_end;  // its last frame end (frame ends)
    // Spans that ended (start, end), the newest few.
    std::deque<std::pair<uint64_t, uint64_t>> ran;
  };
  std::optional<Firing> check_span(const SpanEvent& s);
  void check_input(const InputEventInfo& e);
  // The next input firing of a followed process, if any, as of now_ns.
  std::optional<Firing> next_input_firing(uint64_t now_ns);
  // The missed vsyncs of a frame (and the thread's books for the next);
  // *frame_ns its length (a frame between ends: from the previous end).
  uint64_t frame_missed(Thread& t, const SpanEvent& s, uint64_t* frame_ns);

  std::vector<DumpTrigger> triggers_;
  FrameAnalyzer frames_;  // only says which spans are frames, and ticks
  uint64_t refresh_ns_;
  std::map<std::pair<uint32_t, uint32_t>, Thread> threads_;
  InputOptions input_options_;
  std::unique_ptr<InputAnalyzer> input_;
  std::deque<Firing> input_fired_;
  uint64_t dropped_ = 0;
};

}  // namespace looptrace
