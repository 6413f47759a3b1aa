#include "analysis/dispatch.h"

#include <algorithm>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include "analysis/backlog.h"

namespace looptrace {
namespace {

// Fast durations kept per thread and role for exact percentiles under
// --record-all; 8 MB each at most. Beyond it the histogram estimate is used.
constexpr size_t kMaxFastDurations = 1 << 20;

}  // namespace

DispatchAnalyzer::DispatchAnalyzer(DispatchOptions options)
    : options_(options) {}

void DispatchAnalyzer::consume(const Event& ev) {
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, SpanEvent>) {
          on_span(e);
        } else if constexpr (std::is_same_v<T, SampleEvent>) {
          on_sample(e);
        } else if constexpr (std::is_same_v<T, SpanDropEvent>) {
          on_drop(e);
        } else if constexpr (std::is_same_v<T, BlockEvent>) {
          on_block(e);
        } else if constexpr (std::is_same_v<T, WakeEvent>) {
          on_wake(e);
        } else if constexpr (std::is_same_v<T, WokenEvent>) {
          on_woken(e);
        } else if constexpr (std::is_same_v<T, StopEvent>) {
          if (stops_.size() < DispatchAnalysis::kMaxStops)
            stops_.push_back(e);
          else
            ++stops_dropped_;
        } else if constexpr (std::is_same_v<T, HangEvent>) {
          hangs_.try_emplace({e.pid, e.tid, e.span.span_id},
                             e.span.start_ns + e.span.duration_ns);
        }  // PointEvents are the barrier analyser's
      },
      ev);
}

uint64_t DispatchAnalyzer::slow_threshold(uint32_t role) const {
  // An unknown role from a newer recording is never slow, only counted.
  return role < LT_ROLE_MAX ? options_.slow_ns[role]
                            : std::numeric_limits<uint64_t>::max();
}

void DispatchAnalyzer::note_time(uint64_t ns) {
  if (ns != 0 && (first_event_ns_ == 0 || ns < first_event_ns_))
    first_event_ns_ = ns;
}

// The sampler records a span's stacks while it is still running, so its
// samples arrive before the span itself and wait here, keyed by span.
void DispatchAnalyzer::on_sample(const SampleEvent& ev) {
  note_time(ev.ts_ns);
  size_t& n = pending_per_thread_[{ev.pid, ev.tid}];
  if (n >= options_.max_pending_samples_per_thread) {
    sample_overflow_++;
    return;
  }
  n++;
  pending_[{ev.pid, ev.tid, ev.span_id}].push_back(ev);
}

std::vector<SampleEvent> DispatchAnalyzer::take_samples(const SpanKey& key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return {};
  std::vector<SampleEvent> samples = std::move(it->second);
  pending_.erase(it);
  auto t = pending_per_thread_.find({std::get<0>(key), std::get<1>(key)});
  t->second -= samples.size();
  if (t->second == 0) pending_per_thread_.erase(t);
  return samples;
}

void DispatchAnalyzer::on_drop(const SpanDropEvent& ev) {
  take_samples({ev.pid, ev.tid, ev.span_id});
  uint64_t ignored;
  take_blocks({ev.pid, ev.tid, ev.span_id}, 0, &ignored);
}

// Blocking points arrive while their span runs, as samples do.
void DispatchAnalyzer::on_block(const BlockEvent& ev) {
  note_time(ev.ts_ns);
  size_t& n = pending_per_thread_[{ev.pid, ev.tid}];
  if (n >= options_.max_pending_samples_per_thread) {
    sample_overflow_++;
    return;
  }
  n++;
  SpanKey key{ev.pid, ev.tid, ev.span_id};
  std::vector<Block>& list = blocks_[key];
  awaiting_wake_[{ev.pid, ev.tid}] = {key, list.size()};
  list.push_back({ev, 0, std::nullopt});
}

// Wakeups of a thread kept until one is named: a few suffice (the one
// named is the thread's latest but for wakeups that ended nothing).
constexpr size_t kRecentWakes = 16;

void DispatchAnalyzer::on_wake(const WakeEvent& ev) {
  std::vector<WakeEvent>& recent = recent_wakes_[{ev.pid, ev.tid}];
  if (recent.size() >= kRecentWakes) recent.erase(recent.begin());
  recent.push_back(ev);
}

void DispatchAnalyzer::on_woken(const WokenEvent& ev) {
  ThreadKey thread{ev.pid, ev.tid};
  auto it = awaiting_wake_.find(thread);
  if (it == awaiting_wake_.end()) return;
  auto [key, index] = it->second;
  auto b = blocks_.find(key);
  if (b == blocks_.end() || index >= b->second.size() ||
      b->second[index].block.seq != ev.seq)
    return;
  awaiting_wake_.erase(it);
  Block& block = b->second[index];
  block.woken_ns = ev.ts_ns;
  auto r = recent_wakes_.find(thread);
  if (r == recent_wakes_.end()) return;
  for (auto w = r->second.begin(); w != r->second.end(); ++w) {
    if (ev.wake_id == 0 || w->wake_id != ev.wake_id) continue;
    block.wake = std::move(*w);
    r->second.erase(r->second.begin(), w + 1);
    break;
  }
  if (r->second.empty()) recent_wakes_.erase(r);
}

namespace {

// A new group for the stacks of the blocking point `e`.
BlockGroup block_group(const BlockEvent& e) {
  BlockGroup g;
  g.frames = e.stack.frames;
  g.kframes = e.kframes;
  g.unwind = e.stack.unwind;
  g.truncated = e.stack.truncated;
  g.python_cut = e.stack.python_cut;
  g.first_ns = e.ts_ns;
  return g;
}

// One time the thread blocked at `e`, for `ns`, and who woke it.
BlockGroup::Interval block_interval(const BlockEvent& e, uint64_t ns,
                                    uint64_t woken_ns,
                                    const std::optional<WakeEvent>& wake) {
  BlockGroup::Interval iv;
  iv.from_ns = e.ts_ns;
  iv.to_ns = e.ts_ns + ns;
  iv.woken = woken_ns != 0;
  if (wake) {
    iv.waker_known = true;
    iv.from_irq = wake->from_irq;
    if (!iv.from_irq) {
      iv.waker_pid = wake->waker_pid;
      iv.waker_tid = wake->waker_tid;
      iv.waker_comm = wake->waker_comm;
    }
  }
  return iv;
}

// Counts the wakeup `wk`, which ended `ns` of blocking, for its waker in
// `g`.
void count_waker(BlockGroup& g, const WakeEvent& wk, uint64_t ns) {
  // An interrupt is the same waker whatever thread it happened to hit:
  // its kernel path says which.
  auto same = [&wk](const Waker& x) {
    if (wk.from_irq) return x.from_irq && x.kframes == wk.kframes;
    return !x.from_irq && x.pid == wk.waker_pid && x.tid == wk.waker_tid &&
           x.frames == wk.stack.frames && x.kframes == wk.kframes;
  };
  auto found = std::find_if(g.wakers.begin(), g.wakers.end(), same);
  if (found == g.wakers.end()) {
    Waker k;
    k.from_irq = wk.from_irq;
    if (!wk.from_irq) {
      k.pid = wk.waker_pid;
      k.tid = wk.waker_tid;
      k.comm = wk.waker_comm;
      k.frames = wk.stack.frames;
    }
    k.kframes = wk.kframes;
    k.unwind = wk.stack.unwind;
    k.truncated = wk.stack.truncated;
    g.wakers.push_back(std::move(k));
    found = std::prev(g.wakers.end());
  }
  found->count++;
  found->blocked_ns += ns;
}

// Most blocked time first: the groups, and the wakers of each.
void sort_by_blocked_time(std::vector<BlockGroup>& groups) {
  for (BlockGroup& g : groups)
    std::stable_sort(g.wakers.begin(), g.wakers.end(),
                     [](const Waker& a, const Waker& b) {
                       return a.blocked_ns > b.blocked_ns;
                     });
  std::stable_sort(groups.begin(), groups.end(),
                   [](const BlockGroup& a, const BlockGroup& b) {
                     return a.blocked_ns > b.blocked_ns;
                   });
}

}  // namespace

std::vector<DispatchAnalyzer::Block> DispatchAnalyzer::detach_blocks(
    const SpanKey& key) {
  auto it = blocks_.find(key);
  if (it == blocks_.end()) return {};
  std::vector<Block> blocks = std::move(it->second);
  blocks_.erase(it);
  ThreadKey thread{std::get<0>(key), std::get<1>(key)};
  auto t = pending_per_thread_.find(thread);
  t->second -= blocks.size();
  if (t->second == 0) pending_per_thread_.erase(t);
  auto w = awaiting_wake_.find(thread);
  if (w != awaiting_wake_.end() && w->second.first == key)
    awaiting_wake_.erase(w);
  return blocks;
}

std::vector<BlockGroup> DispatchAnalyzer::take_blocks(const SpanKey& key,
                                                      uint64_t end_ns,
                                                      uint64_t* recorded_ns) {
  *recorded_ns = 0;
  std::vector<Block> blocks = detach_blocks(key);
  std::vector<BlockGroup> groups;
  std::map<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>, size_t>
      index;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    const BlockEvent& e = b.block;
    // Blocked until it was back on a run queue. With no wakeup seen, the
    // next blocking point or the span's end bounds it.
    uint64_t until = b.woken_ns              ? b.woken_ns
                     : i + 1 < blocks.size() ? blocks[i + 1].block.ts_ns
                                             : end_ns;
    uint64_t ns = until > e.ts_ns ? until - e.ts_ns : 0;
    *recorded_ns += ns;
    std::vector<uint64_t> ukey = e.stack.frames;
    if (options_.frame_key)
      for (uint64_t& k : ukey) k = options_.frame_key(e.pid, k);
    auto [at, added] =
        index.try_emplace({std::move(ukey), e.kframes}, groups.size());
    if (added) groups.push_back(block_group(e));
    BlockGroup& g = groups[at->second];
    g.count++;
    g.blocked_ns += ns;
    g.intervals.push_back(block_interval(e, ns, b.woken_ns, b.wake));
    if (b.wake) count_waker(g, *b.wake, ns);
  }
  sort_by_blocked_time(groups);
  return groups;
}

void DispatchAnalyzer::on_span(const SpanEvent& ev) {
  note_time(ev.start_ns);
  std::vector<SampleEvent> samples = take_samples({ev.pid, ev.tid, ev.span_id});

  // A span still running when tracing stopped (a hang), or cut short by its
  // thread's exit (an app killed for hanging) or exec: reported if it is
  // already slow, but not counted in the distribution, which holds only
  // completed spans.
  if (ev.unfinished()) {
    if (ev.cut_short()) cut_short_++;
    if (ev.duration_ns < slow_threshold(ev.role)) return;
  } else {
    span_records_++;
    ThreadHistogram& h = stream_hists_[{ev.pid, ev.tid, ev.role, ev.probe_id}];
    if (h.count == 0) {
      h.pid = ev.pid;
      h.tid = ev.tid;
      h.comm = ev.comm;
      h.probe_id = ev.probe_id;
      h.role = ev.role;
    }
    histogram_add(h, ev.duration_ns);

    Seen& seen = seen_[{ev.pid, ev.tid, ev.role}];
    if (seen.comm.empty()) seen.comm = ev.comm;
    seen.spans++;
    seen.sum_ns += ev.duration_ns;
    // With --record-all fast spans are in the stream too: they only count.
    if (ev.duration_ns < slow_threshold(ev.role)) {
      uint64_t ignored;
      take_blocks({ev.pid, ev.tid, ev.span_id}, 0, &ignored);
      timeline_.add(ev);
      if (seen.fast_complete && seen.fast_durations.size() < kMaxFastDurations)
        seen.fast_durations.push_back(ev.duration_ns);
      else
        seen.fast_complete = false;
      return;
    }
    seen.slow++;
    seen.slow_durations.push_back(ev.duration_ns);
  }

  SlowSpan slow;
  slow.span = ev;
  slow.nsamples = static_cast<uint32_t>(samples.size());
  slow.stacks = group_stacks(std::move(samples), options_.frame_key);
  slow.blocked =
      take_blocks({ev.pid, ev.tid, ev.span_id}, ev.start_ns + ev.duration_ns,
                  &slow.blocked_recorded_ns);
  slow.hang_announced_ns = take_hang({ev.pid, ev.tid, ev.span_id});
  slow_.push_back(std::move(slow));
}

uint64_t DispatchAnalyzer::take_hang(const SpanKey& key) {
  auto it = hangs_.find(key);
  if (it == hangs_.end()) return 0;
  uint64_t ns = it->second;
  hangs_.erase(it);
  return ns;
}

const std::vector<uint64_t>* DispatchAnalyzer::latest_frames(
    uint32_t pid, uint32_t tid, uint64_t span_id) const {
  // The newest of its samples and its blocking points: a span hung in a
  // sleep or on a lock has no samples, only where it blocked.
  const SampleEvent* sample = nullptr;
  const BlockEvent* block = nullptr;
  if (auto it = pending_.find({pid, tid, span_id});
      it != pending_.end() && !it->second.empty())
    sample = &it->second.back();
  if (auto it = blocks_.find({pid, tid, span_id});
      it != blocks_.end() && !it->second.empty())
    block = &it->second.back().block;
  if (block && (!sample || block->ts_ns > sample->ts_ns))
    return &block->stack.frames;
  return sample ? &sample->stack.frames : nullptr;
}

std::vector<StackGroup> group_stacks(std::vector<SampleEvent> samples,
                                     const FrameKeyFn& frame_key) {
  // Time order makes "consecutive" mean consecutive in time.
  std::stable_sort(samples.begin(), samples.end(),
                   [](const SampleEvent& a, const SampleEvent& b) {
                     return a.ts_ns < b.ts_ns;
                   });
  std::vector<StackGroup> groups;
  std::map<std::vector<uint64_t>, size_t> index;
  size_t prev = SIZE_MAX;
  uint32_t run = 0;
  for (SampleEvent& s : samples) {
    std::vector<uint64_t> key = s.stack.frames;
    if (frame_key) {
      for (uint64_t& k : key) k = frame_key(s.pid, k);
    }
    auto [it, added] = index.try_emplace(std::move(key), groups.size());
    if (added) {
      StackGroup g;
      g.frames = std::move(s.stack.frames);
      g.first_ns = s.ts_ns;
      g.unwind = s.stack.unwind;
      g.truncated = s.stack.truncated;
      g.python_cut = s.stack.python_cut;
      groups.push_back(std::move(g));
    }
    StackGroup& g = groups[it->second];
    g.count++;
    g.last_ns = s.ts_ns;
    run = it->second == prev ? run + 1 : 1;
    prev = it->second;
    g.longest_run = std::max(g.longest_run, run);
  }
  // Most samples first: that is where the time went. A tie goes to the
  // stack seen in the longest unbroken stretch, the likelier hang site.
  std::sort(groups.begin(), groups.end(),
            [](const StackGroup& a, const StackGroup& b) {
              if (a.count != b.count) return a.count > b.count;
              if (a.longest_run != b.longest_run)
                return a.longest_run > b.longest_run;
              return a.first_ns < b.first_ns;
            });
  return groups;
}

ThreadSummary DispatchAnalyzer::summarize(const RoleKey& key,
                                          const ThreadHistogram& h,
                                          const Seen* seen,
                                          bool tail_trusted) const {
  ThreadSummary t;
  std::tie(t.pid, t.tid, t.role) = key;
  t.comm = h.comm;
  if (t.comm.empty() && seen != nullptr) t.comm = seen->comm;
  if (seen != nullptr) t.slow_count = seen->slow;
  t.count = h.count;
  t.sum_ns = h.sum_ns;
  if (seen == nullptr || !tail_trusted) {
    t.pct = compute_percentiles(h);
    return t;
  }
  // Every span in the stream (--record-all): all ranks exact.
  if (seen->fast_complete && seen->spans == h.count) {
    ExactTail all{0, seen->slow_durations};
    all.durations.insert(all.durations.end(), seen->fast_durations.begin(),
                         seen->fast_durations.end());
    PercentileEstimator est(h, &all);
    if (est.exact_tail_used()) {
      t.pct = est.percentiles();
      return t;
    }
  }
  ExactTail slow{slow_threshold(t.role), seen->slow_durations};
  t.pct = compute_percentiles(h, &slow);
  return t;
}

std::vector<ThreadHistogram> DispatchAnalyzer::with_stream_histograms(
    const std::vector<ThreadHistogram>& hists) const {
  std::vector<ThreadHistogram> all = hists;
  std::set<HistKey> in_kernel;
  // A delivery's histogram is the enqueue probe's, its span record names
  // the dispatch probe: for that role a thread's histogram is any probe's.
  std::set<RoleKey> deliveries;
  for (const ThreadHistogram& h : hists) {
    in_kernel.insert({h.pid, h.tid, h.role, h.probe_id});
    if (h.role == LT_ROLE_DELIVERY) deliveries.insert({h.pid, h.tid, h.role});
  }
  for (const auto& [key, h] : stream_hists_) {
    const auto& [pid, tid, role, probe] = key;
    bool counted = role == LT_ROLE_DELIVERY
                       ? deliveries.count({pid, tid, role}) != 0
                       : in_kernel.count(key) != 0;
    if (!counted) all.push_back(h);
  }
  return all;
}

DispatchAnalysis DispatchAnalyzer::finish(
    const std::vector<ThreadHistogram>& kernel_hists,
    const Counters& counters) {
  const std::vector<ThreadHistogram> hists =
      with_stream_histograms(kernel_hists);
  stream_hists_.clear();
  DispatchAnalysis out;
  out.counters = counters;
  out.cut_short = cut_short_;
  out.span_records = span_records_;
  out.sample_overflow = sample_overflow_;
  out.first_event_ns = first_event_ns_;
  for (const auto& [key, samples] : pending_)
    out.orphan_samples += samples.size();
  pending_.clear();
  pending_per_thread_.clear();

  // One summary per (pid, tid, role), all probes of the role merged.
  std::map<RoleKey, ThreadHistogram> merged;
  for (const ThreadHistogram& h : hists) {
    auto [it, added] = merged.try_emplace({h.pid, h.tid, h.role}, h);
    if (!added) {
      merge_histogram(it->second, h);
      if (it->second.comm.empty()) it->second.comm = h.comm;
    }
  }
  // A lost slow span would shift every exact rank; with any loss in the
  // stream the histogram alone is the safer estimate.
  bool tail_trusted =
      counters.bpf[LT_CNT_RB_FULL] == 0 && counters.decode_errors == 0;
  for (const auto& [key, h] : merged) {
    auto s = seen_.find(key);
    out.threads.push_back(summarize(
        key, h, s == seen_.end() ? nullptr : &s->second, tail_trusted));
  }
  std::sort(out.threads.begin(), out.threads.end(),
            [](const ThreadSummary& a, const ThreadSummary& b) {
              return std::tie(a.pid, a.tid, a.role) <
                     std::tie(b.pid, b.tid, b.role);
            });

  out.slow = std::move(slow_);
  slow_.clear();
  std::stable_sort(
      out.slow.begin(), out.slow.end(),
      [](const SlowSpan& a, const SlowSpan& b) {
        return std::tie(a.span.start_ns, a.span.pid, a.span.tid, a.span.depth) <
               std::tie(b.span.start_ns, b.span.pid, b.span.tid, b.span.depth);
      });
  seen_.clear();
  out.stops = std::move(stops_);
  stops_.clear();
  out.stops_dropped = stops_dropped_;
  std::sort(out.stops.begin(), out.stops.end(),
            [](const StopEvent& a, const StopEvent& b) {
              return std::tie(a.pid, a.tid, a.start_ns) <
                     std::tie(b.pid, b.tid, b.start_ns);
            });
  explain_slow_spans(out);
  out.timeline = timeline_.finish(out);
  return out;
}

}  // namespace looptrace
