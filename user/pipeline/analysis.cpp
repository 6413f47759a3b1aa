#include "pipeline/analysis.h"

#include <algorithm>

#include "analysis/backlog.h"
#include "base/duration.h"
#include "base/log.h"

namespace looptrace {

// The probes whose spans are frames, as the frame analysis reads them: the
// names to match, and the key holding their tick (a due time).
FrameOptions frame_options(const std::vector<ProbeDef>& probes,
                           uint64_t refresh_ns) {
  FrameOptions o;
  o.refresh_ns = refresh_ns;
  for (const ProbeDef& p : probes) {
    if (p.phase) o.phase_probes.insert(p.id);
    if (!p.frame) continue;
    FrameProbe f;
    f.names = p.frame->names;
    f.end = p.frame->end;
    f.label = !p.label.empty() ? p.label : p.binary + ":" + p.symbol;
    for (size_t k = 0; k < p.keys.size() && k < LT_MAX_KEYS; ++k)
      if (uint32_t scale = due_scale(p.keys[k].role)) {
        f.tick_key = static_cast<int>(k);
        f.tick_scale = scale;
      } else if (p.keys[k].role == KeyRole::kRefreshNs) {
        f.refresh_key = static_cast<int>(k);
      }
    o.probes[p.id] = std::move(f);
  }
  return o;
}

Analysis::Analysis(Symbolizer* symbolizer, ThresholdOverrides overrides)
    : symbolizer_(symbolizer), overrides_(overrides) {}

void Analysis::configure(const SessionEvent& s) {
  session_ = s;
  configured_ = true;
  auto t = apply_overrides(s.thresholds, overrides_);
  if (!t.ok()) {
    status_ = t.status();
    thresholds_ = s.thresholds;
  } else {
    status_ = Status::Ok();
    thresholds_ = *t;
  }
  DispatchOptions d;
  d.slow_ns = thresholds_.slow_ns;
  // Samples group by function, not by instruction: a busy loop sampled at
  // different instructions is one place.
  Symbolizer* sym = symbolizer_;
  d.frame_key = [sym](uint32_t pid, uint64_t addr) {
    if (sym == nullptr) return addr;
    Frame f = sym->symbolize(pid, addr);
    return f.known() ? addr - f.offset : addr;
  };
  dispatch_ = std::make_unique<DispatchAnalyzer>(std::move(d));
  BarrierOptions b;
  b.stall_ns = thresholds_.barrier_stall_ns;
  barriers_ = std::make_unique<BarrierAnalyzer>(b, &session_.probes);
  has_barriers_ = std::any_of(
      session_.probes.begin(), session_.probes.end(),
      [](const ProbeDef& p) { return p.role == LT_ROLE_BARRIER_POST; });
  FrameOptions fo = frame_options(session_.probes, thresholds_.refresh_ns);
  fo.on_janky = [this](const JankyFrame& j) {
    if (alerts_) alerts_->janky_frame(j);
  };
  frames_ = std::make_unique<FrameAnalyzer>(std::move(fo));
  if (session_.has_input) {
    InputOptions i = input_options(session_.probes, thresholds_);
    i.frames = frames_->enabled();
    input_ = std::make_unique<InputAnalyzer>(i);
  }
}

void Analysis::consume(const Event& ev) {
  if (const auto* s = std::get_if<SessionEvent>(&ev)) {
    if (!configured_) configure(*s);
    return;
  }
  if (!configured_ || ended_) {
    // An EndEvent is the last word on counters; what follows it (late
    // symbols) is for the symbolizer, not the analysers.
    return;
  }
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, SpanEvent>) {
          note_time(e.start_ns + e.duration_ns);
        } else if constexpr (std::is_same_v<T, SampleEvent> ||
                             std::is_same_v<T, PointEvent> ||
                             std::is_same_v<T, IoEvent> ||
                             std::is_same_v<T, ExecEvent> ||
                             std::is_same_v<T, QueueEvent> ||
                             std::is_same_v<T, TickEvent>) {
          note_time(e.ts_ns);
        }
      },
      ev);
  if (const auto* q = std::get_if<QueueEvent>(&ev)) {
    queues_[{q->pid, q->queue}] = *q;
    return;
  }
  if (const auto* t = std::get_if<TickEvent>(&ev)) {
    auto waiting = [this](const Barrier& b) -> std::pair<int64_t, uint64_t> {
      auto it = queues_.find({b.pid, b.queue});
      if (it == queues_.end()) return {-1, 0};
      return {it->second.waiting, it->second.oldest_due_ns};
    };
    for (const Barrier& b : barriers_->check_stalls(t->ts_ns, waiting))
      if (alerts_) alerts_->barrier_stall(b, t->ts_ns);
    return;
  }
  if (const auto* e = std::get_if<EndEvent>(&ev)) {
    end_ = *e;
    ended_ = true;
    // A leaked barrier: what was waiting behind it at the end.
    for (const Barrier& b : barriers_->open_barriers()) {
      auto it = queues_.find({b.pid, b.queue});
      if (it != queues_.end())
        barriers_->note_waiting(b, it->second.waiting,
                                it->second.oldest_due_ns);
    }
    return;
  }
  if (const auto* h = std::get_if<HangEvent>(&ev)) {
    HangAlert a;
    a.span = h->span;
    if (const auto* f =
            dispatch_->latest_frames(h->pid, h->tid, h->span.span_id))
      a.frames = *f;
    hangs_.insert({h->pid, h->tid, h->span.span_id});
    if (alerts_) alerts_->hang(a);
  } else if (const auto* sp = std::get_if<SpanEvent>(&ev)) {
    if (!sp->in_flight && hangs_.erase({sp->pid, sp->tid, sp->span_id})) {
      HangAlert a;
      a.span = *sp;
      a.ended = true;
      if (alerts_) alerts_->hang(a);
    }
  }
  dispatch_->consume(ev);
  barriers_->consume(ev);
  if (input_) {
    // Its frames first: the next frame of the input consumed before it.
    const auto* sp = std::get_if<SpanEvent>(&ev);
    if (sp && frames_->enabled() && frames_->is_frame(*sp)) input_->frame(*sp);
    input_->consume(ev);
  }
  if (frames_->enabled()) frames_->consume(ev);
}

std::vector<std::pair<uint32_t, uint64_t>> Analysis::queues_to_check(
    uint64_t now_ns, bool all) const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  if (!barriers_) return out;
  for (const Barrier& b : barriers_->open_barriers()) {
    bool due =
        !b.stalled && now_ns >= b.posted_ns + thresholds_.barrier_stall_ns;
    if (all || due) out.emplace_back(b.pid, b.queue);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const Findings& Analysis::finish() {
  if (!configured_) {
    // Nothing to analyse; empty findings with an empty context.
    ctx_.symbolizer = symbolizer_;
    return findings_;
  }
  uint64_t end_ns =
      ended_ ? end_.end_ns : std::max(last_ns_, session_.start_ns);
  findings_.analysis = dispatch_->finish(end_.hists, end_.counters);
  findings_.analysis.ringbuf_bytes = session_.ringbuf_bytes;
  findings_.barriers = barriers_->finish(end_ns);
  findings_.has_barriers = has_barriers_;
  if (has_barriers_) note_barriers_up(findings_.analysis, findings_.barriers);
  findings_.has_frames = frames_->enabled();
  if (findings_.has_frames)
    findings_.frames = frames_->finish(end_ns - session_.start_ns);
  findings_.has_input = input_ != nullptr;
  if (input_) {
    findings_.input = input_->finish();
    if (!findings_.input.spill_error.empty())
      log::warn("input stage durations kept in memory: {}",
                findings_.input.spill_error);
    if (findings_.has_frames)
      mark_input_waiting(findings_.frames, findings_.input);
  }
  ctx_.probes = &session_.probes;
  ctx_.symbolizer = symbolizer_;
  ctx_.slow_ns = thresholds_.slow_ns;
  ctx_.duration_ns = end_ns - session_.start_ns;
  ctx_.command_line = session_.command_line;
  if (ended_ && end_.stop_reason.rfind("monitor dump: ", 0) == 0)
    ctx_.dump_reason = end_.stop_reason;
  ctx_.start_ns = session_.start_ns;
  ctx_.barrier_stall_ns = thresholds_.barrier_stall_ns;
  ctx_.sample_hz = thresholds_.sample_hz;
  if (has_barriers_) ctx_.barriers = &findings_.barriers;
  return findings_;
}

}  // namespace looptrace
