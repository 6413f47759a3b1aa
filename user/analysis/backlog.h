// Why messages were late: the slow spans that ran on a delivery's thread
// while it waited, the sync barriers up meanwhile, and the backlogs slow
// deliveries come in; and which slow spans the outputs list. Computed once
// by the analysis; every output shows these, none recomputes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "analysis/barrier.h"
#include "analysis/dispatch.h"

namespace looptrace {

// The slow dispatches and idle handlers of a delivery's thread that ran
// between the message's due time and its dispatch: why it was late. Built
// once per analysis: a long trace has as many slow deliveries as messages.
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

// Fills what `a` derives from its slow spans (sorted by start): backlogs,
// listed, listed_omitted, and delivery_blame without barriers.
void explain_slow_spans(DispatchAnalysis& a);

// How long thread (pid, tid) was stopped or frozen in [from, to), from
// a.stops.
uint64_t stopped_within(const DispatchAnalysis& a, uint32_t pid, uint32_t tid,
                        uint64_t from, uint64_t to);

// The sync barriers of thread (pid, tid) up at some point in [from, to): a
// synchronous message due meanwhile could not pass them. Indices into
// b.barriers, in post order.
std::vector<size_t> barriers_up(const BarrierAnalysis& b, uint32_t pid,
                                uint32_t tid, uint64_t from, uint64_t to);

// Fills the barriers_up of a's backlogs and delivery_blame, after
// explain_slow_spans(), when the run had barrier probes.
void note_barriers_up(DispatchAnalysis& a, const BarrierAnalysis& b);

}  // namespace looptrace
