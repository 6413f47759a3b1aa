// Pieces the text and JSON reports share, so both say the same thing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/barrier.h"
#include "analysis/dispatch.h"
#include "model/probe.h"
#include "report/report.h"
#include "report/target.h"
#include "symbolize/symbolizer.h"

namespace looptrace::report {

// The probe with `id`, or null.
const ProbeDef* find_probe(const ReportContext& ctx, uint32_t id);

// The span's target and its rendered keys; a span of an unknown probe is
// named "probe#N".
struct SpanTarget {
  std::string text;
  std::vector<RenderedKey> keys;
};
SpanTarget describe_target(const SpanEvent& span, const ReportContext& ctx);

// One loss or health counter as both reports show it.
struct LostItem {
  const char* json_key;  // "ringbuf_full"
  uint64_t value;
  std::string text;  // "ring buffer full: 12 records lost (raise ...)"
};
// Every counter, zero or not, in a fixed order.
std::vector<LostItem> lost_items(const DispatchAnalysis& analysis);
// What filled a full ring buffer: the rates of the records that come in
// floods over the trace ("1.5M input messages/s, 500 samples/s"); "" when
// nothing was lost to it or the trace's length is unknown.
std::string ring_fill(const DispatchAnalysis& analysis, uint64_t duration_ns);

// Orders slow spans by start time (for stable sorts).
inline bool starts_before(const SlowSpan* x, const SlowSpan* y) {
  return x->span.start_ns < y->span.start_ns;
}

// Writes one line of the text report for a terminal: names in it escaped
// (printable(), base/text.h), cut with "..." to fit 80 columns.
void put(std::ostream& os, std::string_view line);

// Symbolizes frames once per (pid, address): the same frames recur in every
// sample of a stuck span.
class FrameNames {
 public:
  explicit FrameNames(Symbolizer* symbolizer) : symbolizer_(symbolizer) {}
  // As the reports show a frame: "ns::Foo::bar(int)+0x1a", "0x7f.. (lib.so)".
  const std::string& name(uint32_t pid, uint64_t addr);
  // The function without its offset, or "[lib.so]" / "[unknown]" when it
  // has no symbol (stackcollapse-perf's names); a Python frame without its
  // line, "on_timeout (x.py)": a flame graph merges the samples taken
  // anywhere in one function.
  const std::string& function(uint32_t pid, uint64_t addr);
  // The whole resolution: address, module, function, offset.
  const Frame& frame(uint32_t pid, uint64_t addr);

 private:
  struct Names {
    std::string name;
    std::string function;
    Frame frame;
  };
  const Names& names(uint32_t pid, uint64_t addr);

  Symbolizer* symbolizer_;
  std::map<std::pair<uint32_t, uint64_t>, Names> cache_;
};

// Kernel stacks read with the names of `names` (symbolize/kernel_frames.h).
// The kernel function a blocked thread waits in (do_nanosleep, futex_wait,
// ep_poll...); empty when none is known.
std::string kernel_wait(const std::vector<uint64_t>& kframes,
                        FrameNames& names);
// Whether a wakeup came from an interrupt (a timer, a device, a softirq)
// rather than from the thread that was running: its kernel stack passes
// through an interrupt entry.
bool interrupt_wakeup(const Waker& w, FrameNames& names);
// What woke a thread from an interrupt (hrtimer_wakeup...); empty when
// none is known.
std::string kernel_waker(const std::vector<uint64_t>& kframes,
                         FrameNames& names);

}  // namespace looptrace::report
