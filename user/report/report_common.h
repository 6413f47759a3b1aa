// Pieces the text and JSON reports share, so both say the same thing.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "analysis/barrier.h"
#include "analysis/dispatch.h"
#include "profiles/probe.h"
#include "report/report.h"
#include "report/target.h"
#include "symbolize/symbolizer.h"

namespace looptrace::report {

// "dispatch", "idle"; "role<N>" for a role this build does not know.

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

// Orders slow spans by start time (for stable sorts).
inline bool starts_before(const SlowSpan* x, const SlowSpan* y) {
  return x->span.start_ns < y->span.start_ns;
}

// The slow dispatches and idle handlers of a delivery's thread that ran
// between the message's due time and its dispatch: why it was late. Built
// once per report: a long trace has as many slow deliveries as messages.
class RunningInstead {
 public:
  explicit RunningInstead(const DispatchAnalysis& a);
  // In start order.
  std::vector<const SlowSpan*> operator()(const SpanEvent& delivery) const;

 private:
  struct Thread {
    std::vector<const SlowSpan*> spans;  // by start
    std::vector<uint64_t> max_end;       // of spans[0..i]
  };
  std::map<std::pair<uint32_t, uint32_t>, Thread> threads_;
};

// The sync barriers posted by thread (pid, tid) that were up at some point
// in [from, to): a synchronous message due meanwhile could not pass them.
std::vector<const Barrier*> barriers_up(const ReportContext& ctx, uint32_t pid,
                                        uint32_t tid, uint64_t from,
                                        uint64_t to);

// Writes one line of the text report, cut with "..." to fit 80 columns.
void put(std::ostream& os, std::string line);

// Symbolizes frames once per (pid, address): the same frames recur in every
// sample of a stuck span.
class FrameNames {
 public:
  explicit FrameNames(Symbolizer* symbolizer) : symbolizer_(symbolizer) {}
  const std::string& name(uint32_t pid, uint64_t addr);

 private:
  Symbolizer* symbolizer_;
  std::map<std::pair<uint32_t, uint64_t>, std::string> cache_;
};

}  // namespace looptrace::report
