#include "analysis/timeline.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "analysis/dispatch.h"

namespace looptrace {

uint32_t TimelineBuilder::target(const SpanEvent& e) {
  TargetKey key{e.probe_id, e.key_fault_mask, e.keys, e.key_str};
  if (auto it = target_index_.find(key); it != target_index_.end())
    return it->second;
  if (t_.targets.size() >= kMaxTimelineTargets) {
    t_.unnamed++;
    return TimelineSpan::kNoTarget;
  }
  SpanEvent named;
  named.probe_id = e.probe_id;
  named.role = e.role;
  named.keys = e.keys;
  named.key_fault_mask = e.key_fault_mask;
  named.key_str = e.key_str;
  const auto index = static_cast<uint32_t>(t_.targets.size());
  t_.targets.push_back(std::move(named));
  target_index_.emplace(std::move(key), index);
  return index;
}

void TimelineBuilder::add(const SpanEvent& e, uint8_t flags) {
  if (e.role >= LT_ROLE_MAX) return;
  if (t_.spans.size() >= kMaxTimelineSpans) {
    t_.dropped++;
    return;
  }
  TimelineSpan s;
  s.start_ns = e.start_ns;
  s.duration_ns = e.duration_ns;
  s.pid = e.pid;
  s.tid = e.tid;
  s.target = target(e);
  s.probe_id = e.probe_id;
  s.role = static_cast<uint8_t>(e.role);
  s.depth = static_cast<uint8_t>(std::min<uint32_t>(e.depth, 255));
  s.flags = flags;
  if (e.in_flight) s.flags |= TimelineSpan::kInFlight;
  if (e.cut_short()) s.flags |= TimelineSpan::kCutShort;
  t_.spans.push_back(s);
}

Timeline TimelineBuilder::finish(const DispatchAnalysis& a) {
  std::vector<bool> listed(a.slow.size(), false);
  for (const std::vector<size_t>& role : a.listed)
    for (size_t i : role) listed[i] = true;
  for (size_t i = 0; i < a.slow.size(); ++i)
    if (!listed[i]) add(a.slow[i].span, TimelineSpan::kSlow);
  std::stable_sort(t_.spans.begin(), t_.spans.end(),
                   [](const TimelineSpan& x, const TimelineSpan& y) {
                     return std::make_tuple(x.start_ns, y.duration_ns,
                                            x.depth) <
                            std::make_tuple(y.start_ns, x.duration_ns, y.depth);
                   });
  target_index_.clear();
  Timeline out = std::move(t_);
  t_ = Timeline{};
  return out;
}

}  // namespace looptrace
