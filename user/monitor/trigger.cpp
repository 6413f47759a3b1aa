#include "monitor/trigger.h"

#include <fmt/format.h>

#include "base/duration.h"
#include "monitor/window.h"
#include "profiles/profile.h"

namespace looptrace {
namespace {

constexpr size_t kRanKept = 64;

}  // namespace

const ConditionGrammar& trigger_grammar() {
  static const ConditionGrammar kGrammar{
      "--dump-if",
      {{"dispatch", MetricKind::kDuration, "a dispatch's duration"},
       {"idle", MetricKind::kDuration, "an idle handler's duration"},
       {"delivery", MetricKind::kDuration,
        "a message's delivery lag (due to dispatch)"},
       {"frame", MetricKind::kDuration, "a frame's duration"},
       {"frame.missed_vsyncs", MetricKind::kCount,
        "the vsyncs a frame missed (dropped frames)"}},
      "triggers: dispatch, idle, delivery, frame (durations), "
      "frame.missed_vsyncs (a count), or hang (docs/looptrace.md, MONITOR)",
      "dispatch > 100ms"};
  return kGrammar;
}

Result<DumpTrigger> parse_dump_trigger(const std::string& text) {
  DumpTrigger t;
  std::string_view v = text;
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v == "hang") {
    t.hang = true;
    t.text = "hang";
    return t;
  }
  auto cond = parse_condition(text, trigger_grammar());
  if (!cond.ok()) return cond.status();
  t.cond = *cond;
  t.text = cond->text;
  return t;
}

TriggerCheck::TriggerCheck(std::vector<DumpTrigger> triggers,
                           FrameOptions frames)
    : triggers_(std::move(triggers)),
      frames_(frames),
      refresh_ns_(frames.refresh_ns ? frames.refresh_ns : 16'666'667) {}

std::optional<Firing> TriggerCheck::check(const Event& ev) {
  if (const auto* s = std::get_if<SpanEvent>(&ev)) return check_span(*s);
  const auto* h = std::get_if<HangEvent>(&ev);
  if (!h) return {};
  for (const DumpTrigger& t : triggers_)
    if (t.hang)
      return Firing{&t, h->pid, h->span.tid, event_end_ns(ev),
                    fmt::format("hang: a span running for {}",
                                format_duration(h->span.duration_ns))};
  return {};
}

uint64_t TriggerCheck::frame_missed(Thread& t, const SpanEvent& s) {
  auto busy = [&t](uint64_t from, uint64_t to) {
    for (const auto& [b, e] : t.ran)
      if (b < to && e > from) return true;
    return false;
  };
  uint64_t expected =
      expected_start(t.prev, frames_.tick(s), s.start_ns, refresh_ns_, busy);
  FrameTiming timing =
      time_frame(expected, s.start_ns, s.duration_ns, refresh_ns_);
  t.prev = PreviousFrame{timing.expected_ns, s.start_ns + s.duration_ns};
  t.ran.clear();
  return timing.missed_vsyncs;
}

std::optional<Firing> TriggerCheck::check_span(const SpanEvent& s) {
  if (s.unfinished()) return {};
  const bool frame = frames_.frame_source(s).has_value();
  uint64_t missed = 0;
  if (frame || s.role == LT_ROLE_DISPATCH || s.role == LT_ROLE_IDLE) {
    auto [it, added] = threads_.try_emplace({s.pid, s.tid});
    if (frame) {
      missed = frame_missed(it->second, s);
    } else if (it->second.prev) {
      // Only what a next frame's wait may be explained by.
      auto& ran = it->second.ran;
      ran.emplace_back(s.start_ns, s.start_ns + s.duration_ns);
      if (ran.size() > kRanKept) ran.pop_front();
    }
  }
  const std::string role = role_name(s.role);
  for (const DumpTrigger& t : triggers_) {
    if (t.hang) continue;
    const std::string& m = t.cond.metric;
    uint64_t v = 0;
    if (m == role || (m == "frame" && frame)) {
      v = s.duration_ns;
    } else if (m == "frame.missed_vsyncs" && frame) {
      v = missed;
    } else {
      continue;
    }
    if (!budget_holds(t.cond.op, v, t.cond.limit)) continue;
    std::string value = t.cond.kind == MetricKind::kDuration
                            ? format_duration(v)
                            : std::to_string(v);
    return Firing{&t, s.pid, s.tid, s.start_ns + s.duration_ns,
                  fmt::format("{} {} {} {}", m, value,
                              budget_op_text(t.cond.op), t.cond.limit_text)};
  }
  return {};
}

void TriggerCheck::forget(uint32_t pid) {
  std::erase_if(threads_,
                [pid](const auto& kv) { return kv.first.first == pid; });
}

}  // namespace looptrace
