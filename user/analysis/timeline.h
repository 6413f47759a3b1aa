// Every span the stream held, for the outputs that draw time (the Perfetto
// trace, the HTML timeline): with --record-all, every span of the run. The
// listed slow spans (DispatchAnalysis::listed) are drawn in full from
// DispatchAnalysis::slow; the rest, fast spans and slow ones not listed,
// compactly from here, within a stated memory bound.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "trace/events.h"

namespace looptrace {

struct DispatchAnalysis;

// Spans kept for the timelines: 40 bytes each, 40 MB at most. Beyond it
// spans are counted (Timeline::dropped), not kept: the first ones are.
constexpr size_t kMaxTimelineSpans = 1'000'000;
// Distinct targets (probe and key values) they are named by. Beyond it a
// span is named by its probe alone (Timeline::unnamed).
constexpr size_t kMaxTimelineTargets = 16384;

struct TimelineSpan {
  static constexpr uint32_t kNoTarget = UINT32_MAX;
  enum Flags : uint8_t {
    kSlow = 1,      // at or over its role's slow threshold
    kInFlight = 2,  // still running when tracing stopped
    kCutShort = 4,  // its thread exited or exec'd inside it
  };
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t target = kNoTarget;  // index into Timeline::targets
  uint32_t probe_id = 0;
  uint8_t role = 0;   // below LT_ROLE_MAX
  uint8_t depth = 0;  // nesting, at most 255
  uint8_t flags = 0;
};

struct Timeline {
  // Fast spans and the slow spans not listed, by start (a longer one first
  // at the same nanosecond: a caller before what it nests).
  std::vector<TimelineSpan> spans;
  // What names them: SpanEvents with only probe_id, role, keys,
  // key_fault_mask and key_str set, for report::describe_target().
  std::vector<SpanEvent> targets;
  uint64_t dropped = 0;  // spans not kept, past kMaxTimelineSpans
  uint64_t unnamed = 0;  // kept without a target, past kMaxTimelineTargets
};

// Keeps the spans while the analysis consumes the stream.
class TimelineBuilder {
 public:
  // A span of a known role the analysis does not keep as a SlowSpan.
  void add(const SpanEvent& e, uint8_t flags = 0);
  // The timeline of `a`, whose slow spans and listed are final: its slow
  // spans not listed are added (while the cap allows), and all sorted.
  Timeline finish(const DispatchAnalysis& a);

 private:
  uint32_t target(const SpanEvent& e);

  using TargetKey = std::tuple<uint32_t, uint32_t,
                               std::array<uint64_t, LT_MAX_KEYS>, std::string>;
  std::map<TargetKey, uint32_t> target_index_;
  Timeline t_;
};

}  // namespace looptrace
