#include "report/report_common.h"

#include <fmt/format.h>

namespace looptrace::report {

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

std::vector<const Barrier*> barriers_up(const ReportContext& ctx, uint32_t pid,
                                        uint32_t tid, uint64_t from,
                                        uint64_t to) {
  std::vector<const Barrier*> out;
  if (!ctx.barriers) return out;
  for (const Barrier& b : ctx.barriers->barriers)
    if (b.pid == pid && b.tid == tid && b.posted_ns < to &&
        (!b.removed() || b.removed_ns > from))
      out.push_back(&b);
  return out;
}

void put(std::ostream& os, std::string line) {
  constexpr size_t kColumns = 80;
  if (line.size() > kColumns) {
    line.resize(kColumns - 3);
    line += "...";
  }
  os << line << '\n';
}

const ProbeDef* find_probe(const ReportContext& ctx, uint32_t id) {
  if (ctx.probes == nullptr) return nullptr;
  for (const ProbeDef& p : *ctx.probes)
    if (p.id == id) return &p;
  return nullptr;
}

SpanTarget describe_target(const SpanEvent& span, const ReportContext& ctx) {
  SpanTarget t;
  const ProbeDef* probe = find_probe(ctx, span.probe_id);
  if (probe == nullptr) {
    t.text = fmt::format("probe#{}", span.probe_id);
    return t;
  }
  t.keys = render_keys(span, *probe, ctx.symbolizer);
  t.text = format_target(t.keys, *probe);
  return t;
}

std::vector<LostItem> lost_items(const DispatchAnalysis& a) {
  const auto& c = a.counters.bpf;
  // Each line says what was lost and, where a knob exists, which one to
  // turn. Kept under 80 columns with a 2-space indent and large counts.
  return {
      {"ringbuf_full", c[LT_CNT_RB_FULL],
       fmt::format("ring buffer full: {} records lost (raise --ringbuf-size)",
                   c[LT_CNT_RB_FULL])},
      {"hist_full", c[LT_CNT_HIST_FULL],
       fmt::format("histogram table full: {} spans uncounted "
                   "(raise --max-threads)",
                   c[LT_CNT_HIST_FULL])},
      {"depth_overflow", c[LT_CNT_DEPTH_OVERFLOW],
       fmt::format("nested deeper than {}: {} spans not timed", LT_MAX_DEPTH,
                   c[LT_CNT_DEPTH_OVERFLOW])},
      {"unmatched_returns", c[LT_CNT_RET_UNMATCHED],
       fmt::format("returns without an entry: {} (spans open at attach)",
                   c[LT_CNT_RET_UNMATCHED])},
      {"storage_fail", c[LT_CNT_STORAGE_FAIL],
       fmt::format("task storage unavailable: {} spans not timed",
                   c[LT_CNT_STORAGE_FAIL])},
      {"key_faults", c[LT_CNT_KEY_FAULT],
       fmt::format("key reads faulted: {} (shown as '?'; check the profile)",
                   c[LT_CNT_KEY_FAULT])},
      {"stack_failures", c[LT_CNT_STACK_FAIL],
       fmt::format("stack samples failed: {}", c[LT_CNT_STACK_FAIL])},
      {"watch_full", c[LT_CNT_WATCH_FULL],
       fmt::format("process/channel table full: {} children or channel "
                   "peers not followed",
                   c[LT_CNT_WATCH_FULL])},
      {"decode_errors", a.counters.decode_errors,
       fmt::format("malformed records: {} (damaged file or ABI mismatch)",
                   a.counters.decode_errors)},
      {"orphan_samples", a.orphan_samples,
       fmt::format("samples of unfinished spans: {} (running at exit?)",
                   a.orphan_samples)},
      {"sample_overflow", a.sample_overflow,
       fmt::format("samples dropped, too many pending: {}", a.sample_overflow)},
  };
}

const std::string& FrameNames::name(uint32_t pid, uint64_t addr) {
  auto [it, added] = cache_.try_emplace({pid, addr});
  if (added) {
    Frame f;
    f.addr = addr;
    if (symbolizer_ != nullptr) f = symbolizer_->symbolize(pid, addr);
    if (f.addr == 0) f.addr = addr;
    it->second = f.to_string();
  }
  return it->second;
}

}  // namespace looptrace::report
