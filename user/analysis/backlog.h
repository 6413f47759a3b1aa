// Why messages were late: the slow spans that ran on a delivery's thread
// while it waited, and the backlogs slow deliveries come in. Computed once
// from a DispatchAnalysis; every output shows these, none recomputes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

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

// DeliveryBacklog (dispatch.h), from the analysis's slow spans.
std::vector<DeliveryBacklog> delivery_backlogs(const DispatchAnalysis& a);

}  // namespace looptrace
