#include "monitor/trigger.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "base/duration.h"
#include "monitor/window.h"
#include "profiles/profile.h"

namespace looptrace {
namespace {

constexpr size_t kRanKept = 64;
// Input events held until final (consumed, acknowledged): past this many
// (an app that stopped reading, acknowledgements lost) they start over.
constexpr size_t kMaxInputPending = 100'000;
constexpr std::string_view kInputPrefix = "input.";

std::vector<BudgetMetric> trigger_metrics() {
  std::vector<BudgetMetric> m = {
      {"dispatch", MetricKind::kDuration, "a dispatch's duration"},
      {"idle", MetricKind::kDuration, "an idle handler's duration"},
      {"delivery", MetricKind::kDuration,
       "a message's delivery lag (due to dispatch)"},
      {"frame", MetricKind::kDuration, "a frame's duration"},
      {"frame.missed_vsyncs", MetricKind::kCount,
       "the vsyncs a frame missed (dropped frames)"}};
  for (int s = 0; s < kInputStages; ++s)
    m.push_back({std::string(kInputPrefix) +
                     std::string(input_stage_name(static_cast<InputStage>(s))),
                 MetricKind::kDuration, "an input event's stage (INPUT)"});
  return m;
}

}  // namespace

const ConditionGrammar& trigger_grammar() {
  static const ConditionGrammar kGrammar{
      "--dump-if", trigger_metrics(),
      "triggers: dispatch, idle, delivery, frame (durations), "
      "frame.missed_vsyncs (a count), input.STAGE (an input event's stage, "
      "e.g. input.total_latency_dur), or hang (docs/looptrace.md, MONITOR)",
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
                           const SessionEvent& session, FrameOptions frames)
    : triggers_(std::move(triggers)),
      frames_(frames),
      refresh_ns_(frames.refresh_ns ? frames.refresh_ns : 16'666'667) {
  const bool input =
      std::any_of(triggers_.begin(), triggers_.end(), [](const DumpTrigger& t) {
        return !t.hang && t.cond.metric.starts_with(kInputPrefix);
      });
  if (!input || !session.has_input) return;
  input_options_ = input_options(session.probes, session.thresholds);
  input_options_.stream_only = true;
  input_options_.frames = frames_.enabled();
  input_options_.on_final = [this](const InputEventInfo& e) { check_input(e); };
  input_ = std::make_unique<InputAnalyzer>(input_options_);
}

void TriggerCheck::check_input(const InputEventInfo& e) {
  for (const DumpTrigger& t : triggers_) {
    if (t.hang || !t.cond.metric.starts_with(kInputPrefix)) continue;
    const std::string_view stage =
        std::string_view(t.cond.metric).substr(kInputPrefix.size());
    for (int s = 0; s < kInputStages; ++s) {
      const auto st = static_cast<InputStage>(s);
      if (input_stage_name(st) != stage) continue;
      const std::optional<uint64_t> v = e.stage(st);
      if (!v || !budget_holds(t.cond.op, *v, t.cond.limit)) break;
      const uint64_t at = std::max(
          {e.finished_ns, e.finish_received_ns, e.frame_end_ns, e.received_ns});
      input_fired_.push_back(Firing{
          &t, e.pid, e.tid, at,
          fmt::format(
              "{} {} {} {}{}", t.cond.metric, format_duration(*v),
              budget_op_text(t.cond.op), t.cond.limit_text,
              e.type == InputType::kBytes
                  ? std::string()
                  : fmt::format(" ({} event)", input_type_name(e.type)))});
      return;
    }
  }
}

std::optional<Firing> TriggerCheck::check(const Event& ev) {
  std::optional<Firing> out;
  const auto* span = std::get_if<SpanEvent>(&ev);
  if (span) {
    out = check_span(*span);
  } else if (const auto* h = std::get_if<HangEvent>(&ev)) {
    for (const DumpTrigger& t : triggers_)
      if (t.hang) {
        out = Firing{&t, h->pid, h->span.tid, event_end_ns(ev),
                     fmt::format("hang: a span running for {}",
                                 format_duration(h->span.duration_ns))};
        break;
      }
  }
  if (!input_) return out;
  // As the analysis does: a frame is told before the span is consumed.
  if (span && !span->unfinished() && input_options_.frames &&
      frames_.frame_source(*span))
    input_->frame(*span);
  input_->consume(ev);
  if (input_->pending() > kMaxInputPending)
    input_ = std::make_unique<InputAnalyzer>(input_options_);
  if (!out) out = next_input_firing(event_end_ns(ev));
  return out;
}

std::optional<Firing> TriggerCheck::advance(uint64_t now_ns) {
  if (!input_) return {};
  input_->advance(now_ns);
  return next_input_firing(now_ns);
}

std::vector<Firing> TriggerCheck::process_gone(uint32_t pid) {
  std::vector<Firing> out;
  if (!input_) return out;
  input_->process_gone(pid);
  std::erase_if(input_fired_, [&](const Firing& f) {
    if (f.pid != pid) return false;
    out.push_back(f);
    return true;
  });
  return out;
}

std::optional<Firing> TriggerCheck::next_input_firing(uint64_t now_ns) {
  std::optional<Firing> out;
  // Events of a process not seen (pid 0) cannot be dumped.
  while (!out && !input_fired_.empty()) {
    if (input_fired_.front().pid != 0) out = input_fired_.front();
    input_fired_.pop_front();
  }
  // More waiting than dumps could be taken for (one per process per
  // --dump-every): the oldest go, counted.
  while (input_fired_.size() > kRanKept) {
    input_fired_.pop_front();
    ++dropped_;
  }
  // A dump ends when the event was judged: its window holds what came
  // until then.
  if (out) out->ts_ns = std::max(out->ts_ns, now_ns);
  return out;
}

uint64_t TriggerCheck::frame_missed(Thread& t, const SpanEvent& s,
                                    uint64_t* frame_ns) {
  *frame_ns = s.duration_ns;
  const uint64_t interval = frames_.refresh(s).value_or(refresh_ns_);
  if (frames_.ends_frame(s)) {
    // As FrameAnalyzer times it: from the thread's previous frame end,
    // busy when the process's threads ran in between.
    const uint64_t end = s.start_ns + s.duration_ns;
    const std::optional<uint64_t> last = t.last_end;
    t.last_end = end;
    auto covered = [&](uint64_t from, uint64_t to) {
      std::vector<std::pair<uint64_t, uint64_t>> ran;
      for (auto it = threads_.lower_bound({s.pid, 0});
           it != threads_.end() && it->first.first == s.pid; ++it)
        ran.insert(ran.end(), it->second.ran.begin(), it->second.ran.end());
      return covered_ns(std::move(ran), from, to);
    };
    if (last) {
      if (auto timing =
              time_between_ends(*last, s.start_ns, end, interval, covered)) {
        *frame_ns = end - *last;
        t.prev = PreviousFrame{timing->expected_ns, end};
        return timing->missed_vsyncs;
      }
    }
  }
  auto busy = [&t](uint64_t from, uint64_t to) {
    for (const auto& [b, e] : t.ran)
      if (b < to && e > from) return true;
    return false;
  };
  uint64_t expected =
      expected_start(t.prev, frames_.tick(s), s.start_ns, interval, busy);
  FrameTiming timing =
      time_frame(expected, s.start_ns, s.duration_ns, interval);
  t.prev = PreviousFrame{timing.expected_ns, s.start_ns + s.duration_ns};
  return timing.missed_vsyncs;
}

std::optional<Firing> TriggerCheck::check_span(const SpanEvent& s) {
  if (s.unfinished()) return {};
  const bool frame = frames_.frame_source(s).has_value();
  uint64_t missed = 0;
  uint64_t frame_ns = s.duration_ns;
  if (frame || s.role == LT_ROLE_DISPATCH || s.role == LT_ROLE_IDLE) {
    auto [it, added] = threads_.try_emplace({s.pid, s.tid});
    if (frame) {
      missed = frame_missed(it->second, s, &frame_ns);
    } else {
      // What a next frame's wait may be explained by (of this thread's, or
      // of another's frames between ends).
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
    if (m == role) {
      v = s.duration_ns;
    } else if (m == "frame" && frame) {
      v = frame_ns;
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
