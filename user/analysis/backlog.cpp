#include "analysis/backlog.h"

#include <algorithm>
#include <tuple>

#include "analysis/list_limits.h"

namespace looptrace {
namespace {

bool starts_before(const SlowSpan* x, const SlowSpan* y) {
  return x->span.start_ns < y->span.start_ns;
}

}  // namespace

RunningInstead::RunningInstead(const DispatchAnalysis& a) {
  for (const SlowSpan& s : a.slow)
    if (s.span.role != LT_ROLE_DELIVERY)
      threads_[{s.span.pid, s.span.tid}].spans.push_back(&s);
  for (auto& [key, t] : threads_) {
    std::stable_sort(t.spans.begin(), t.spans.end(), starts_before);
    uint64_t m = 0;
    for (const SlowSpan* s : t.spans) {
      m = std::max(m, s->span.start_ns + s->span.duration_ns);
      t.max_end.push_back(m);
    }
  }
}

std::vector<const SlowSpan*> RunningInstead::operator()(
    const SpanEvent& d) const {
  std::vector<const SlowSpan*> out;
  auto it = threads_.find({d.pid, d.tid});
  if (it == threads_.end()) return out;
  const Thread& t = it->second;
  const uint64_t due = d.start_ns, start = d.start_ns + d.duration_ns;
  // Spans that started before the dispatch, walked back while any of them
  // (nested ones included) may still end after the due time.
  auto first_after = std::lower_bound(
      t.spans.begin(), t.spans.end(), start,
      [](const SlowSpan* s, uint64_t v) { return s->span.start_ns < v; });
  for (size_t i = static_cast<size_t>(first_after - t.spans.begin()); i > 0;
       --i) {
    if (t.max_end[i - 1] <= due) break;
    const SpanEvent& e = t.spans[i - 1]->span;
    if (e.start_ns + e.duration_ns > due) out.push_back(t.spans[i - 1]);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {

// DeliveryBacklog (dispatch.h), from the analysis's slow spans.
std::vector<DeliveryBacklog> delivery_backlogs(const DispatchAnalysis& a,
                                               const RunningInstead& running) {
  std::vector<const SlowSpan*> late;
  for (const SlowSpan& s : a.slow)
    if (s.span.role == LT_ROLE_DELIVERY) late.push_back(&s);
  std::stable_sort(late.begin(), late.end(), starts_before);
  auto index = [&a](const SlowSpan* s) {
    return static_cast<size_t>(s - a.slow.data());
  };
  std::vector<DeliveryBacklog> out;
  std::map<std::pair<uint32_t, uint32_t>, size_t> current;  // by thread
  for (const SlowSpan* s : late) {
    const SpanEvent& e = s->span;
    const uint64_t dispatch_ns = e.start_ns + e.duration_ns;
    auto it = current.find({e.pid, e.tid});
    DeliveryBacklog* b = nullptr;
    if (it != current.end() && e.start_ns <= out[it->second].last_dispatch_ns) {
      b = &out[it->second];
    } else {
      current[{e.pid, e.tid}] = out.size();
      b = &out.emplace_back();
      b->worst = index(s);
    }
    b->late.push_back(index(s));
    b->last_dispatch_ns = std::max(b->last_dispatch_ns, dispatch_ns);
    if (e.duration_ns > a.slow[b->worst].span.duration_ns) b->worst = index(s);
    for (const SlowSpan* x : running(e))
      if (std::find(b->behind.begin(), b->behind.end(), index(x)) ==
          b->behind.end())
        b->behind.push_back(index(x));
  }
  for (DeliveryBacklog& b : out) {
    const SpanEvent& first = a.slow[b.late.front()].span;
    b.stopped_ns = stopped_within(a, first.pid, first.tid, first.start_ns,
                                  b.last_dispatch_ns);
  }
  for (DeliveryBacklog& b : out)
    std::stable_sort(b.behind.begin(), b.behind.end(),
                     [&a](size_t x, size_t y) {
                       return a.slow[x].span.start_ns < a.slow[y].span.start_ns;
                     });
  return out;
}

}  // namespace

void explain_slow_spans(DispatchAnalysis& a) {
  const RunningInstead running(a);
  a.backlogs = delivery_backlogs(a, running);

  std::array<std::vector<size_t>, LT_ROLE_MAX> by_role;
  for (size_t i = 0; i < a.slow.size(); ++i)
    if (a.slow[i].span.role < LT_ROLE_MAX)
      by_role[a.slow[i].span.role].push_back(i);
  auto worst = [&a](size_t x, size_t y) {
    const SpanEvent& sx = a.slow[x].span;
    const SpanEvent& sy = a.slow[y].span;
    return std::tie(sx.in_flight, sx.duration_ns) >
           std::tie(sy.in_flight, sy.duration_ns);
  };
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r)
    a.listed[r] = limits::keep_best(by_role[r], limits::kJsonMaxSpans, worst,
                                    &a.listed_omitted[r]);

  // The longest spans that ran instead, when there are too many to name.
  auto index = [&a](const SlowSpan* s) {
    return static_cast<size_t>(s - a.slow.data());
  };
  a.delivery_blame.clear();
  for (size_t d : a.listed[LT_ROLE_DELIVERY]) {
    DeliveryBlame& why = a.delivery_blame.emplace_back();
    why.delivery = d;
    const SpanEvent& e = a.slow[d].span;
    why.stopped_ns =
        stopped_within(a, e.pid, e.tid, e.start_ns, e.start_ns + e.duration_ns);
    std::vector<size_t> instead;
    for (const SlowSpan* s : running(a.slow[d].span))
      instead.push_back(index(s));
    why.running_instead = limits::keep_best(
        instead, limits::kJsonMaxRelated,
        [&a](size_t x, size_t y) {
          return a.slow[x].span.duration_ns > a.slow[y].span.duration_ns;
        },
        &why.running_instead_omitted);
  }
}

uint64_t stopped_within(const DispatchAnalysis& a, uint32_t pid, uint32_t tid,
                        uint64_t from, uint64_t to) {
  StopEvent key;
  key.pid = pid;
  key.tid = tid;
  auto by_thread = [](const StopEvent& x, const StopEvent& y) {
    return std::tie(x.pid, x.tid) < std::tie(y.pid, y.tid);
  };
  auto [lo, hi] =
      std::equal_range(a.stops.begin(), a.stops.end(), key, by_thread);
  uint64_t sum = 0;
  for (auto it = lo; it != hi && it->start_ns < to; ++it) {
    uint64_t b = std::max(it->start_ns, from), e = std::min(it->ts_ns, to);
    if (e > b) sum += e - b;
  }
  return std::min(sum, to > from ? to - from : 0);
}

std::vector<size_t> barriers_up(const BarrierAnalysis& b, uint32_t pid,
                                uint32_t tid, uint64_t from, uint64_t to) {
  std::vector<size_t> out;
  for (size_t i = 0; i < b.barriers.size(); ++i) {
    const Barrier& x = b.barriers[i];
    if (x.pid == pid && x.tid == tid && x.posted_ns < to &&
        (!x.removed() || x.removed_ns > from))
      out.push_back(i);
  }
  return out;
}

void note_barriers_up(DispatchAnalysis& a, const BarrierAnalysis& b) {
  for (DeliveryBacklog& g : a.backlogs) {
    const SpanEvent& first = a.slow[g.late.front()].span;
    g.barriers_up = barriers_up(b, first.pid, first.tid, first.start_ns,
                                g.last_dispatch_ns);
  }
  for (DeliveryBlame& why : a.delivery_blame) {
    const SpanEvent& d = a.slow[why.delivery].span;
    const uint64_t end = d.start_ns + d.duration_ns;
    // The barriers held longest while the message waited, when there are
    // too many to name.
    auto held = [&](size_t i) {
      const Barrier& x = b.barriers[i];
      uint64_t to = x.removed() ? std::min(x.removed_ns, end) : end;
      return to - std::max(x.posted_ns, d.start_ns);
    };
    why.barriers_up = limits::keep_best(
        barriers_up(b, d.pid, d.tid, d.start_ns, end), limits::kJsonMaxRelated,
        [&](size_t x, size_t y) { return held(x) > held(y); },
        &why.barriers_up_omitted);
  }
}

}  // namespace looptrace
