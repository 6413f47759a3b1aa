#include "analysis/frames.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>

#include "analysis/list_limits.h"

namespace looptrace {

namespace {

// 1e9 / 60, rounded: the unit of Matrix's buckets.
constexpr uint64_t k60HzNs = 16'666'667;

uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a
             ? std::numeric_limits<uint64_t>::max()
             : a + b;
}

// Whether `missed` vsyncs of interval_ns dropped at least `frames` frames'
// worth of 60 Hz time. Intervals are rounded to the ns: one ns per vsync
// is allowed for it (6 vsyncs at 120 Hz are 3 at 60).
bool dropped_at_least(uint64_t missed, uint64_t interval_ns, uint64_t frames) {
  if (missed == 0) return false;
  if (interval_ns > std::numeric_limits<uint64_t>::max() / missed) return true;
  return missed * interval_ns + missed >= frames * k60HzNs;
}

// Which janky frame is more worth listing: most vsyncs missed, then the
// longest.
bool worse(const JankyFrame& x, const JankyFrame& y) {
  if (x.timing.missed_vsyncs != y.timing.missed_vsyncs)
    return x.timing.missed_vsyncs > y.timing.missed_vsyncs;
  return x.span.duration_ns > y.span.duration_ns;
}

}  // namespace

const char* bucket_name(FrameBucket b) {
  switch (b) {
    case FrameBucket::kNormal:
      return "normal";
    case FrameBucket::kMiddle:
      return "middle";
    case FrameBucket::kHigh:
      return "high";
    case FrameBucket::kFrozen:
      return "frozen";
  }
  return "normal";
}

FrameTiming time_frame(uint64_t expected_ns, uint64_t start_ns,
                       uint64_t duration_ns, uint64_t interval_ns) {
  FrameTiming t;
  if (interval_ns == 0) interval_ns = 1;
  t.expected_ns = std::min(expected_ns, start_ns);
  t.delay_ns = start_ns - t.expected_ns;
  t.deadline_ns = sat_add(t.expected_ns, interval_ns);
  uint64_t end = sat_add(start_ns, duration_ns);
  if (end > t.deadline_ns) {
    uint64_t past = end - t.deadline_ns;
    t.missed_vsyncs = past / interval_ns + (past % interval_ns != 0);
    t.janky = true;
  }
  t.frozen = duration_ns >= kFrozenFrameNs;
  if (dropped_at_least(t.missed_vsyncs, interval_ns, 42))
    t.bucket = FrameBucket::kFrozen;
  else if (dropped_at_least(t.missed_vsyncs, interval_ns, 9))
    t.bucket = FrameBucket::kHigh;
  else if (dropped_at_least(t.missed_vsyncs, interval_ns, 3))
    t.bucket = FrameBucket::kMiddle;
  return t;
}

uint64_t covered_ns(std::vector<std::pair<uint64_t, uint64_t>> spans,
                    uint64_t from, uint64_t to) {
  std::sort(spans.begin(), spans.end());
  uint64_t sum = 0;
  uint64_t reached = from;  // covered up to here
  for (const auto& [b, e] : spans) {
    const uint64_t lo = std::max(b, reached);
    const uint64_t hi = std::min(e, to);
    if (lo < hi) {
      sum += hi - lo;
      reached = hi;
    }
  }
  return sum;
}

FrameAnalyzer::FrameAnalyzer(FrameOptions options)
    : options_(std::move(options)) {
  if (options_.refresh_ns == 0) options_.refresh_ns = k60HzNs;
}

std::optional<std::string> FrameAnalyzer::frame_source(
    const SpanEvent& s) const {
  if (s.role != LT_ROLE_DISPATCH && s.role != LT_ROLE_IDLE) return {};
  auto it = options_.probes.find(s.probe_id);
  if (it == options_.probes.end()) return {};
  const FrameProbe& p = it->second;
  if (p.names.empty()) return p.label;
  // A name cut short is not the name.
  if (s.flags & LT_SPAN_KEY_STR_CUT) return {};
  for (const std::string& n : p.names)
    if (s.key_str == n) return n;
  return {};
}

std::optional<uint64_t> FrameAnalyzer::tick(const SpanEvent& s) const {
  const FrameProbe& p = options_.probes.at(s.probe_id);
  if (p.tick_key < 0 || p.tick_key >= LT_MAX_KEYS || p.tick_scale == 0)
    return {};
  if (s.key_fault_mask & (1u << p.tick_key)) return {};
  uint64_t v = s.keys[static_cast<size_t>(p.tick_key)];
  if (v == 0 || v > std::numeric_limits<uint64_t>::max() / p.tick_scale)
    return {};
  return v * p.tick_scale;
}

std::optional<uint64_t> FrameAnalyzer::refresh(const SpanEvent& s) const {
  const FrameProbe& p = options_.probes.at(s.probe_id);
  if (p.refresh_key < 0 || p.refresh_key >= LT_MAX_KEYS) return {};
  if (s.key_fault_mask & (1u << p.refresh_key)) return {};
  uint64_t v = s.keys[static_cast<size_t>(p.refresh_key)];
  if (v < kMinRefreshNs || v > kMaxRefreshNs) return {};
  return v;
}

void FrameAnalyzer::consume(const Event& ev) {
  const auto* s = std::get_if<SpanEvent>(&ev);
  if (!s || !enabled()) return;
  // A delivery span is a message's wait, not code that ran.
  if (s->role != LT_ROLE_DISPATCH && s->role != LT_ROLE_IDLE) return;
  Thread& t = threads_[{s->pid, s->tid}];
  if (auto source = frame_source(*s)) {
    if (ends_frame(*s))
      on_frame_end(t, *s, std::move(*source));
    else
      on_frame(t, *s, std::move(*source));
    return;
  }
  if (t.recent.size() >= options_.max_recent_spans)
    t.recent.erase(t.recent.begin(),
                   t.recent.begin() + static_cast<long>(t.recent.size() / 2));
  t.recent.push_back(*s);
  if (options_.phase_probes.count(s->probe_id)) {
    // Phases run inside a frame and end before it: kept until it comes.
    if (t.phases.size() >= options_.max_recent_spans)
      t.phases.erase(t.phases.begin(),
                     t.phases.begin() + static_cast<long>(t.phases.size() / 2));
    t.phases.push_back(*s);
  }
}

void FrameAnalyzer::on_frame_end(Thread& t, const SpanEvent& s,
                                 std::string source) {
  // Still running when tracing stopped: the frame's end is not known.
  if (s.unfinished()) return;
  const uint64_t interval = refresh(s).value_or(
      t.summary.count ? t.summary.refresh_ns : options_.refresh_ns);
  const uint64_t end = sat_add(s.start_ns, s.duration_ns);
  const std::optional<uint64_t> last = t.last_end;
  t.last_end = end;
  if (last) {
    auto covered = [&](uint64_t from, uint64_t to) {
      std::vector<std::pair<uint64_t, uint64_t>> ran;
      for (const Thread* o : scope(t, s.pid, true))
        for (const SpanEvent& r : o->recent)
          ran.emplace_back(r.start_ns, sat_add(r.start_ns, r.duration_ns));
      return covered_ns(std::move(ran), from, to);
    };
    if (auto timing =
            time_between_ends(*last, s.start_ns, end, interval, covered)) {
      SpanEvent f = s;
      f.start_ns = *last;
      f.duration_ns = end - *last;
      f.cpu_ns = f.runq_ns = f.steal_ns = f.stopped_ns = 0;
      on_frame(t, f, std::move(source), &*timing);
      return;
    }
  }
  on_frame(t, s, std::move(source));
}

void FrameAnalyzer::on_frame(Thread& t, const SpanEvent& s, std::string source,
                             const FrameTiming* between_ends) {
  FrameThread& sum = t.summary;
  if (sum.count == 0) {
    sum.pid = s.pid;
    sum.tid = s.tid;
    sum.source = source;
    sum.refresh_ns = options_.refresh_ns;
  }
  if (!s.comm.empty()) sum.comm = s.comm;
  // The toolkit's own interval where its frames say it (the latest).
  if (auto r = refresh(s)) sum.refresh_ns = *r;
  uint64_t interval = sum.refresh_ns;
  auto busy = [&t](uint64_t from, uint64_t to) {
    return std::any_of(
        t.recent.begin(), t.recent.end(), [&](const SpanEvent& r) {
          return r.start_ns < to && sat_add(r.start_ns, r.duration_ns) > from;
        });
  };
  FrameTiming timing;
  if (between_ends) {
    timing = *between_ends;
  } else {
    uint64_t expected =
        expected_start(t.prev, tick(s), s.start_ns, interval, busy);
    timing = time_frame(expected, s.start_ns, s.duration_ns, interval);
  }
  ++sum.count;
  if (timeline_.size() < options_.max_timeline)
    timeline_.push_back(
        {s.pid, s.tid, s.start_ns, s.duration_ns, s.unfinished(), timing});
  else
    ++timeline_omitted_;
  if (s.unfinished()) {
    ++sum.in_flight;
  } else {
    t.durations.push_back(s.duration_ns);
    sum.missed_vsyncs += timing.missed_vsyncs;
    if (timing.frozen) ++sum.frozen;
  }
  if (timing.janky) {
    ++sum.janky;
    JankyFrame j;
    j.span = s;
    j.source = std::move(source);
    j.timing = timing;
    j.between_ends = between_ends != nullptr;
    const std::vector<Thread*> threads = scope(t, s.pid, j.between_ends);
    j.cause = explain(threads, s, timing.expected_ns, j.between_ends);
    const uint64_t end = sat_add(s.start_ns, s.duration_ns);
    for (const Thread* o : threads)
      for (const SpanEvent& p : o->phases) {
        if (p.start_ns < s.start_ns || sat_add(p.start_ns, p.duration_ns) > end)
          continue;
        if (j.phases.size() < kMaxPhases)
          j.phases.push_back(p);
        else
          ++j.phases_omitted;
      }
    std::sort(j.phases.begin(), j.phases.end(),
              [](const SpanEvent& a, const SpanEvent& b) {
                return a.start_ns < b.start_ns;
              });
    if (options_.on_janky) options_.on_janky(j);
    janky_.push_back(std::move(j));
    // Memory stays bounded in a long run: the worst are kept.
    if (janky_.size() >= 2 * options_.max_janky) {
      size_t omitted = 0;
      janky_ = limits::keep_best(janky_, options_.max_janky, worse, &omitted);
      janky_trimmed_ += omitted;
    }
  }
  t.prev =
      PreviousFrame{timing.expected_ns, sat_add(s.start_ns, s.duration_ns)};
  // What ended by this frame's end cannot hold back or run inside a later
  // one.
  // Other threads of the process forget it only when they draw no frames
  // of their own (which it may still explain).
  uint64_t end = t.prev->end_ns;
  for (Thread* o : scope(t, s.pid, between_ends != nullptr)) {
    if (o != &t && o->summary.count != 0) continue;
    std::erase_if(o->recent, [end](const SpanEvent& r) {
      return sat_add(r.start_ns, r.duration_ns) <= end;
    });
    std::erase_if(o->phases, [end](const SpanEvent& r) {
      return sat_add(r.start_ns, r.duration_ns) <= end;
    });
  }
}

std::vector<FrameAnalyzer::Thread*> FrameAnalyzer::scope(Thread& t,
                                                         uint32_t pid,
                                                         bool process) {
  if (!process) return {&t};
  std::vector<Thread*> all;
  for (auto it = threads_.lower_bound({pid, 0});
       it != threads_.end() && it->first.first == pid; ++it)
    all.push_back(&it->second);
  return all;
}

FrameCause FrameAnalyzer::explain(const std::vector<Thread*>& threads,
                                  const SpanEvent& s, uint64_t expected_ns,
                                  bool overlapping) const {
  FrameCause c;
  uint64_t end = sat_add(s.start_ns, s.duration_ns);
  std::vector<HeldBy> held;
  for (const Thread* t : threads)
    for (const SpanEvent& r : t->recent) {
      uint64_t r_end = sat_add(r.start_ns, r.duration_ns);
      // Around the frame (a batch that dispatched it): neither.
      if (r.start_ns <= s.start_ns && r_end >= end) continue;
      const bool inside = overlapping
                              ? r.start_ns < end && r_end > s.start_ns
                              : r.start_ns >= s.start_ns && r_end <= end;
      if (inside) {
        if (!c.longest_inside || r.duration_ns > c.longest_inside->duration_ns)
          c.longest_inside = r;
        continue;
      }
      uint64_t from = std::max(r.start_ns, expected_ns);
      uint64_t to = std::min(r_end, s.start_ns);
      if (from < to) held.push_back({r, to - from});
    }
  // Nested spans each cover the time of the one around them: the outermost
  // of the thread's spans (least depth) says what ran.
  if (!held.empty()) {
    uint32_t top = std::min_element(held.begin(), held.end(),
                                    [](const HeldBy& a, const HeldBy& b) {
                                      return a.span.depth < b.span.depth;
                                    })
                       ->span.depth;
    std::erase_if(held, [top](const HeldBy& h) { return h.span.depth != top; });
  }
  std::stable_sort(held.begin(), held.end(),
                   [](const HeldBy& a, const HeldBy& b) {
                     return a.overlap_ns > b.overlap_ns;
                   });
  if (held.size() > options_.max_cause_spans) {
    c.held_by_omitted = held.size() - options_.max_cause_spans;
    held.resize(options_.max_cause_spans);
  }
  c.held_by = std::move(held);
  return c;
}

FrameAnalysis FrameAnalyzer::finish(uint64_t run_ns) {
  FrameAnalysis a;
  for (auto& [key, t] : threads_) {
    if (t.summary.count == 0) continue;
    FrameThread sum = t.summary;
    sum.pct = exact_percentiles(std::move(t.durations));
    if (run_ns > 0)
      sum.fps = static_cast<double>(sum.pct.count) * 1e9 /
                static_cast<double>(run_ns);
    a.threads.push_back(std::move(sum));
  }
  a.threads = limits::keep_best(
      a.threads, limits::kJsonMaxThreads,
      [](const FrameThread& x, const FrameThread& y) {
        return x.count > y.count;
      },
      &a.threads_omitted);
  a.janky =
      limits::keep_best(janky_, options_.max_janky, worse, &a.janky_omitted);
  a.janky_omitted += janky_trimmed_;
  std::stable_sort(a.janky.begin(), a.janky.end(),
                   [](const JankyFrame& x, const JankyFrame& y) {
                     return x.span.start_ns < y.span.start_ns;
                   });
  a.timeline = std::move(timeline_);
  a.timeline_omitted = timeline_omitted_;
  std::stable_sort(a.timeline.begin(), a.timeline.end(),
                   [](const FrameSlice& x, const FrameSlice& y) {
                     return std::tie(x.pid, x.tid, x.start_ns) <
                            std::tie(y.pid, y.tid, y.start_ns);
                   });
  return a;
}

void mark_input_waiting(FrameAnalysis& frames, const InputAnalysis& input) {
  // Per process, by when they arrived: the latest handling start of the
  // events that arrived up to each one.
  struct Arrived {
    uint64_t at = 0;
    uint64_t handled_max = 0;
  };
  std::map<uint32_t, std::vector<Arrived>> by_pid;
  for (const InputEventInfo& e : input.events) {
    uint64_t at = e.sent_ns != 0 ? e.sent_ns : e.received_ns;
    if (!e.handled || e.coalesced || at == 0 || e.handling_start_ns == 0)
      continue;
    by_pid[e.pid].push_back({at, e.handling_start_ns});
  }
  for (auto& [pid, v] : by_pid) {
    std::sort(v.begin(), v.end(),
              [](const Arrived& a, const Arrived& b) { return a.at < b.at; });
    for (size_t i = 1; i < v.size(); ++i)
      v[i].handled_max = std::max(v[i].handled_max, v[i - 1].handled_max);
  }
  for (JankyFrame& j : frames.janky) {
    auto it = by_pid.find(j.span.pid);
    if (it == by_pid.end()) continue;
    const std::vector<Arrived>& v = it->second;
    uint64_t end = sat_add(j.span.start_ns, j.span.duration_ns);
    auto past =
        std::lower_bound(v.begin(), v.end(), end,
                         [](const Arrived& a, uint64_t t) { return a.at < t; });
    if (past == v.begin()) continue;
    j.input_waiting = std::prev(past)->handled_max > j.timing.deadline_ns;
  }
}

}  // namespace looptrace
