// DispatchAnalyzer on synthetic event streams: which samples belong to which
// span, what is slow, and what each thread's summary says.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/dispatch.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1000000;

SpanEvent span(uint32_t tid, uint64_t id, uint64_t start, uint64_t dur,
               uint32_t role = LT_ROLE_DISPATCH, uint32_t depth = 0) {
  SpanEvent e;
  e.pid = 100;
  e.tid = tid;
  e.comm = "loop" + std::to_string(tid);
  e.span_id = id;
  e.start_ns = start;
  e.duration_ns = dur;
  e.cpu_ns = dur / 2;
  e.role = role;
  e.depth = depth;
  return e;
}

SampleEvent sample(uint32_t tid, uint64_t id, uint64_t ts,
                   std::vector<uint64_t> frames) {
  SampleEvent s;
  s.pid = 100;
  s.tid = tid;
  s.span_id = id;
  s.ts_ns = ts;
  s.stack.frames = std::move(frames);
  return s;
}

SpanDropEvent drop(uint32_t tid, uint64_t id) {
  SpanDropEvent d;
  d.pid = 100;
  d.tid = tid;
  d.span_id = id;
  return d;
}

ThreadHistogram hist(uint32_t tid, uint32_t probe, uint32_t role,
                     const std::vector<uint64_t>& durations) {
  ThreadHistogram h;
  h.pid = 100;
  h.tid = tid;
  h.comm = "loop" + std::to_string(tid);
  h.probe_id = probe;
  h.role = role;
  for (uint64_t d : durations) histogram_add(h, d);
  return h;
}

DispatchOptions options() {
  DispatchOptions o;
  o.slow_ns = {16 * kMs, 50 * kMs};
  return o;
}

DispatchAnalysis run(const std::vector<Event>& events,
                     const std::vector<ThreadHistogram>& hists = {},
                     const Counters& counters = {},
                     DispatchOptions opts = options()) {
  DispatchAnalyzer a(opts);
  for (const Event& e : events) a.consume(e);
  return a.finish(hists, counters);
}

TEST(DispatchAnalyzer, SamplesAttachToTheirSpan) {
  // Same span id on two threads: the thread tells them apart.
  DispatchAnalysis r = run({
      sample(1, 7, 1010, {0xa}),
      sample(2, 7, 1020, {0xb}),
      sample(1, 7, 1030, {0xa}),
      span(2, 7, 1000, 20 * kMs),
      span(1, 7, 900, 30 * kMs),
  });
  ASSERT_EQ(r.slow.size(), 2u);
  EXPECT_EQ(r.slow[0].span.tid, 1u);  // sorted by start
  EXPECT_EQ(r.slow[0].nsamples, 2u);
  ASSERT_EQ(r.slow[0].stacks.size(), 1u);
  EXPECT_EQ(r.slow[0].stacks[0].frames, std::vector<uint64_t>{0xa});
  EXPECT_EQ(r.slow[1].span.tid, 2u);
  EXPECT_EQ(r.slow[1].nsamples, 1u);
  EXPECT_EQ(r.slow[1].stacks[0].frames, std::vector<uint64_t>{0xb});
  EXPECT_EQ(r.orphan_samples, 0u);
  EXPECT_EQ(r.first_event_ns, 900u);
}

TEST(DispatchAnalyzer, DropDiscardsSamples) {
  DispatchAnalysis r = run({
      sample(1, 1, 10, {0xa}),
      sample(1, 1, 20, {0xa}),
      drop(1, 1),
      sample(1, 2, 30, {0xb}),
      span(1, 2, 25, 17 * kMs),
  });
  ASSERT_EQ(r.slow.size(), 1u);
  EXPECT_EQ(r.slow[0].span.span_id, 2u);
  EXPECT_EQ(r.slow[0].nsamples, 1u);
  EXPECT_EQ(r.orphan_samples, 0u);
}

BlockEvent block(uint32_t tid, uint64_t id, uint64_t ts, uint32_t seq,
                 std::vector<uint64_t> frames) {
  BlockEvent b;
  b.pid = 100;
  b.tid = tid;
  b.span_id = id;
  b.ts_ns = ts;
  b.seq = seq;
  b.stack.frames = std::move(frames);
  b.kframes = {0xffff0001};
  return b;
}

// A waking by thread `waker_tid` (id `id`) and, when `seq` is not 0, the
// wakeup of blocking point `seq` by it 10 us later.
std::vector<Event> wake(uint32_t tid, uint64_t ts, uint32_t seq,
                        uint32_t waker_tid, uint32_t id,
                        std::vector<uint64_t> frames = {0xee}) {
  WakeEvent w;
  w.pid = 100;
  w.tid = tid;
  w.ts_ns = ts - 10'000;
  w.wake_id = id;
  w.waker_pid = 100;
  w.waker_tid = waker_tid;
  w.waker_comm = "w" + std::to_string(waker_tid);
  w.stack.frames = std::move(frames);
  std::vector<Event> out{Event(w)};
  if (seq) out.push_back(Event(WokenEvent{100, tid, ts, seq, id}));
  return out;
}

DispatchAnalysis run_all(const std::vector<std::vector<Event>>& parts) {
  std::vector<Event> events;
  for (const auto& p : parts) events.insert(events.end(), p.begin(), p.end());
  return run(events);
}

TEST(DispatchAnalyzerBlocked, BlocksWeighedByTimeToTheirWakeup) {
  // Span 1 of thread 1 blocks three times: twice at 0xa (woken by 7 and
  // by 8), once at 0xb; most blocked time first.
  DispatchAnalysis r = run_all({
      {block(1, 1, 1 * kMs, 1, {0xa, 0x1})},
      wake(1, 6 * kMs, 1, 7, 1),
      {block(1, 1, 10 * kMs, 2, {0xb, 0x1})},
      wake(1, 13 * kMs, 2, 7, 2),
      {block(1, 1, 20 * kMs, 3, {0xa, 0x1})},
      wake(1, 24 * kMs, 3, 8, 3),
      {span(1, 1, 0, 30 * kMs)},
  });
  ASSERT_EQ(r.slow.size(), 1u);
  const SlowSpan& s = r.slow[0];
  EXPECT_EQ(s.blocked_recorded_ns, 12 * kMs);
  ASSERT_EQ(s.blocked.size(), 2u);
  EXPECT_EQ(s.blocked[0].frames, (std::vector<uint64_t>{0xa, 0x1}));
  EXPECT_EQ(s.blocked[0].count, 2u);
  EXPECT_EQ(s.blocked[0].blocked_ns, 9 * kMs);
  EXPECT_EQ(s.blocked[0].first_ns, 1 * kMs);
  ASSERT_EQ(s.blocked[0].wakers.size(), 2u);
  EXPECT_EQ(s.blocked[0].wakers[0].tid, 7u);  // 5 ms
  EXPECT_EQ(s.blocked[0].wakers[0].blocked_ns, 5 * kMs);
  EXPECT_EQ(s.blocked[0].wakers[1].tid, 8u);  // 4 ms
  EXPECT_EQ(s.blocked[0].wakers[1].comm, "w8");
  EXPECT_EQ(s.blocked[1].frames, (std::vector<uint64_t>{0xb, 0x1}));
  EXPECT_EQ(s.blocked[1].blocked_ns, 3 * kMs);
  ASSERT_EQ(s.blocked[0].intervals.size(), 2u);
  EXPECT_EQ(s.blocked[0].intervals[1].from_ns, 20 * kMs);
  EXPECT_EQ(s.blocked[0].intervals[1].to_ns, 24 * kMs);
  EXPECT_EQ(s.blocked[0].intervals[1].waker_tid, 8u);
}

TEST(DispatchAnalyzerBlocked, AWakingBeforeTheSwitchOutStillNamesTheWaker) {
  // The waker got there while the thread was still on its way out (or
  // woke it before it slept, ending nothing: id 4); the wakeup that ended
  // the blocking point names which waking it was.
  DispatchAnalysis r = run_all({
      wake(1, 2 * kMs, 0, 5, 4),  // ended nothing
      wake(1, 5 * kMs, 0, 9, 5),
      {block(1, 1, 5 * kMs + 1000, 1, {0xa})},
      {Event(WokenEvent{100, 1, 5 * kMs + 3000, 1, 5})},
      {span(1, 1, 0, 31 * kMs)},
  });
  ASSERT_EQ(r.slow.size(), 1u);
  const SlowSpan& s = r.slow[0];
  ASSERT_EQ(s.blocked.size(), 1u);
  EXPECT_EQ(s.blocked[0].blocked_ns, 2000u);
  ASSERT_EQ(s.blocked[0].wakers.size(), 1u);
  EXPECT_EQ(s.blocked[0].wakers[0].tid, 9u);
}

TEST(DispatchAnalyzerBlocked, WithoutAWakeupTheNextBlockOrTheEndBounds) {
  DispatchAnalysis r = run_all({
      {block(1, 1, 2 * kMs, 1, {0xa})},  // its wakeup was lost
      {block(1, 1, 10 * kMs, 2, {0xb})},
      {Event(WokenEvent{100, 1, 7 * kMs, 1, 0})},  // a stale seq: not 2's
      {span(1, 1, 0, 25 * kMs)},
  });
  ASSERT_EQ(r.slow.size(), 1u);
  const SlowSpan& s = r.slow[0];
  ASSERT_EQ(s.blocked.size(), 2u);
  EXPECT_EQ(s.blocked[0].frames, std::vector<uint64_t>{0xb});
  EXPECT_EQ(s.blocked[0].blocked_ns, 15 * kMs);  // to the span's end
  EXPECT_TRUE(s.blocked[0].wakers.empty());
  EXPECT_EQ(s.blocked[1].blocked_ns, 8 * kMs);  // to the next block
  EXPECT_EQ(s.blocked_recorded_ns, 23 * kMs);
}

TEST(DispatchAnalyzerBlocked, AWakeupWhoseWakingWasLostEndsTheBlockUnnamed) {
  DispatchAnalysis r = run_all({
      {block(1, 1, 2 * kMs, 1, {0xa})},
      {Event(WokenEvent{100, 1, 7 * kMs, 1, 3})},  // waking 3 never came
      {span(1, 1, 0, 25 * kMs)},
  });
  ASSERT_EQ(r.slow.size(), 1u);
  ASSERT_EQ(r.slow[0].blocked.size(), 1u);
  EXPECT_EQ(r.slow[0].blocked[0].blocked_ns, 5 * kMs);
  EXPECT_TRUE(r.slow[0].blocked[0].wakers.empty());
  ASSERT_EQ(r.slow[0].blocked[0].intervals.size(), 1u);
  EXPECT_TRUE(r.slow[0].blocked[0].intervals[0].woken);
  EXPECT_FALSE(r.slow[0].blocked[0].intervals[0].waker_known);
}

TEST(DispatchAnalyzerBlocked, FastOrDroppedSpansKeepNoBlocks) {
  DispatchAnalysis r = run_all({
      {block(1, 1, 1 * kMs, 1, {0xa})},
      wake(1, 2 * kMs, 1, 9, 1),
      {drop(1, 1)},
      {block(1, 2, 3 * kMs, 2, {0xc})},
      wake(1, 4 * kMs, 2, 9, 2),
      {block(2, 5, 3 * kMs, 1, {0xd})},  // another thread, same seq
      wake(2, 25 * kMs, 1, 9, 1),
      {span(2, 5, 0, 30 * kMs)},
      {span(1, 2, 2 * kMs, 20 * kMs)},
  });
  ASSERT_EQ(r.slow.size(), 2u);
  EXPECT_EQ(r.slow[0].span.tid, 2u);
  ASSERT_EQ(r.slow[0].blocked.size(), 1u);
  EXPECT_EQ(r.slow[0].blocked[0].frames, std::vector<uint64_t>{0xd});
  EXPECT_EQ(r.slow[0].blocked_recorded_ns, 22 * kMs);
  ASSERT_EQ(r.slow[1].blocked.size(), 1u);
  EXPECT_EQ(r.slow[1].blocked[0].frames, std::vector<uint64_t>{0xc});
  EXPECT_EQ(r.slow[1].blocked_recorded_ns, 1 * kMs);
}

TEST(DispatchAnalyzerBlocked, AHungSpanIsWhereItLastBlockedOrRan) {
  DispatchAnalyzer a(options());
  EXPECT_EQ(a.latest_frames(100, 1, 1), nullptr);
  a.consume(sample(1, 1, 10 * kMs, {0xa}));
  ASSERT_NE(a.latest_frames(100, 1, 1), nullptr);
  EXPECT_EQ(*a.latest_frames(100, 1, 1), std::vector<uint64_t>{0xa});
  a.consume(block(1, 1, 20 * kMs, 1, {0xb}));  // then it went to sleep
  EXPECT_EQ(*a.latest_frames(100, 1, 1), std::vector<uint64_t>{0xb});
  a.consume(sample(1, 1, 30 * kMs, {0xc}));  // and ran again
  EXPECT_EQ(*a.latest_frames(100, 1, 1), std::vector<uint64_t>{0xc});
}

TEST(DispatchAnalyzer, LeftoverSamplesAreOrphans) {
  DispatchAnalysis r = run({
      sample(1, 1, 10, {0xa}), sample(1, 1, 20, {0xa}), sample(3, 9, 20, {0xc}),
      drop(3, 8),  // a different span: nothing to drop
  });
  EXPECT_TRUE(r.slow.empty());
  EXPECT_EQ(r.orphan_samples, 3u);
}

TEST(DispatchAnalyzer, NestedSpansKeepTheirOwnSamples) {
  // Outer span 1 (depth 0) runs inner span 2 (depth 1); the inner one ends
  // first, as it does on the wire.
  DispatchAnalysis r = run({
      sample(1, 1, 110, {0x10, 0x1}),
      sample(1, 2, 210, {0x20, 0x2}),
      sample(1, 2, 220, {0x20, 0x2}),
      span(1, 2, 200, 20 * kMs, LT_ROLE_DISPATCH, 1),
      sample(1, 1, 400, {0x11, 0x1}),
      span(1, 1, 100, 60 * kMs, LT_ROLE_DISPATCH, 0),
  });
  ASSERT_EQ(r.slow.size(), 2u);
  const SlowSpan& outer = r.slow[0];
  const SlowSpan& inner = r.slow[1];
  EXPECT_EQ(outer.span.depth, 0u);
  EXPECT_EQ(outer.nsamples, 2u);
  EXPECT_EQ(outer.stacks.size(), 2u);
  EXPECT_EQ(inner.span.depth, 1u);
  EXPECT_EQ(inner.nsamples, 2u);
  ASSERT_EQ(inner.stacks.size(), 1u);
  EXPECT_EQ(inner.stacks[0].count, 2u);
  EXPECT_EQ(inner.stacks[0].frames, (std::vector<uint64_t>{0x20, 0x2}));
}

TEST(DispatchAnalyzer, GroupsIdenticalSamplesMostFirst) {
  // A A B B B A C (in time order, delivered shuffled): A and B both have 3,
  // B ran 3 in a row so it is where the span was stuck.
  std::vector<Event> ev = {
      sample(1, 1, 60, {0xa}),      sample(1, 1, 10, {0xa}),
      sample(1, 1, 20, {0xa}),      sample(1, 1, 30, {0xb, 0x1}),
      sample(1, 1, 50, {0xb, 0x1}), sample(1, 1, 40, {0xb, 0x1}),
      sample(1, 1, 70, {0xc}),      span(1, 1, 0, 20 * kMs),
  };
  DispatchAnalysis r = run(ev);
  ASSERT_EQ(r.slow.size(), 1u);
  const std::vector<StackGroup>& g = r.slow[0].stacks;
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].frames, (std::vector<uint64_t>{0xb, 0x1}));
  EXPECT_EQ(g[0].count, 3u);
  EXPECT_EQ(g[0].longest_run, 3u);
  EXPECT_EQ(g[0].first_ns, 30u);
  EXPECT_EQ(g[0].last_ns, 50u);
  EXPECT_EQ(g[1].frames, std::vector<uint64_t>{0xa});
  EXPECT_EQ(g[1].count, 3u);
  EXPECT_EQ(g[1].longest_run, 2u);
  EXPECT_EQ(g[2].frames, std::vector<uint64_t>{0xc});
  EXPECT_EQ(r.slow[0].nsamples, 7u);
}

TEST(DispatchAnalyzer, FastSpansCountButAreNotSlow) {
  // --record-all: every span is in the stream; a fast one with samples
  // (sampled, then finished under the threshold) takes and drops them.
  DispatchAnalysis r = run({
      sample(1, 1, 10, {0xa}),
      span(1, 1, 0, 15 * kMs),
      span(1, 2, 20 * kMs, 16 * kMs),  // exactly the threshold: slow
      span(1, 3, 40 * kMs, 1 * kMs, LT_ROLE_IDLE),
  });
  ASSERT_EQ(r.slow.size(), 1u);
  EXPECT_EQ(r.slow[0].span.span_id, 2u);
  EXPECT_EQ(r.orphan_samples, 0u);
  ASSERT_EQ(r.threads.size(), 2u);  // no histograms: from the stream
  EXPECT_EQ(r.threads[0].role, static_cast<uint32_t>(LT_ROLE_DISPATCH));
  EXPECT_EQ(r.threads[0].count, 2u);
  EXPECT_EQ(r.threads[0].slow_count, 1u);
  EXPECT_EQ(r.threads[0].sum_ns, 31 * kMs);
  EXPECT_EQ(r.threads[0].pct.max, 16 * kMs);
  EXPECT_EQ(r.threads[0].pct.p50, 15 * kMs);
  EXPECT_EQ(r.threads[1].role, static_cast<uint32_t>(LT_ROLE_IDLE));
  EXPECT_EQ(r.threads[1].slow_count, 0u);
}

TEST(DispatchAnalyzer, IdleUsesItsOwnThreshold) {
  DispatchAnalysis r = run({
      span(1, 1, 0, 30 * kMs, LT_ROLE_IDLE),  // < 50 ms idle threshold
      span(1, 2, 100 * kMs, 60 * kMs, LT_ROLE_IDLE),
  });
  ASSERT_EQ(r.slow.size(), 1u);
  EXPECT_EQ(r.slow[0].span.role, static_cast<uint32_t>(LT_ROLE_IDLE));
  EXPECT_EQ(r.slow[0].span.span_id, 2u);
}

TEST(DispatchAnalyzer, ThreadsMergeProbesOfOneRole) {
  // Thread 1: 98 fast dispatches at two probes + 2 slow ones; 5 idle runs.
  std::vector<uint64_t> fast_a(50, 2 * kMs), fast_b(48, 3 * kMs);
  const uint64_t slow1 = 20000123, slow2 = 30000456;
  fast_b.push_back(slow1);
  fast_b.push_back(slow2);
  std::vector<ThreadHistogram> hists = {
      hist(1, 0, LT_ROLE_DISPATCH, fast_a),
      hist(1, 1, LT_ROLE_DISPATCH, fast_b),
      hist(1, 2, LT_ROLE_IDLE, std::vector<uint64_t>(5, 1 * kMs)),
  };
  std::vector<Event> ev = {span(1, 10, 500, slow1), span(1, 11, 900, slow2)};
  Counters counters;

  DispatchAnalysis r = run(ev, hists, counters);
  ASSERT_EQ(r.threads.size(), 2u);
  const ThreadSummary& d = r.threads[0];
  EXPECT_EQ(d.role, static_cast<uint32_t>(LT_ROLE_DISPATCH));
  EXPECT_EQ(d.comm, "loop1");
  EXPECT_EQ(d.count, 100u);
  EXPECT_EQ(d.slow_count, 2u);
  EXPECT_EQ(d.sum_ns, 50 * 2 * kMs + 48 * 3 * kMs + slow1 + slow2);
  EXPECT_EQ(d.pct.count, 100u);
  EXPECT_EQ(d.pct.p99, slow1);  // rank 99 is a slow span: exact
  EXPECT_EQ(d.pct.max, slow2);
  EXPECT_EQ(lt_hist_slot(d.pct.p50), lt_hist_slot(2 * kMs));
  EXPECT_EQ(r.threads[1].role, static_cast<uint32_t>(LT_ROLE_IDLE));
  EXPECT_EQ(r.threads[1].count, 5u);

  // A lost record: the stream may be missing slow spans, so p99 is an
  // estimate again (same slot, not the exact value).
  counters.bpf[LT_CNT_RB_FULL] = 1;
  DispatchAnalysis lossy = run(ev, hists, counters);
  EXPECT_NE(lossy.threads[0].pct.p99, slow1);
  EXPECT_EQ(lt_hist_slot(lossy.threads[0].pct.p99), lt_hist_slot(slow1));
  EXPECT_EQ(lossy.counters.bpf[LT_CNT_RB_FULL], 1u);
}

TEST(DispatchAnalyzer, RecordAllMakesPercentilesExact) {
  std::vector<uint64_t> d;
  std::vector<Event> ev;
  for (uint64_t i = 1; i <= 200; ++i) {
    uint64_t dur = 1000003 * i;  // 1..200 ms, odd values
    d.push_back(dur);
    ev.push_back(span(1, i, i * 1000 * kMs, dur));
  }
  DispatchAnalysis r = run(ev, {hist(1, 0, LT_ROLE_DISPATCH, d)});
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].pct.p50, 1000003u * 100);
  EXPECT_EQ(r.threads[0].pct.p90, 1000003u * 180);
  EXPECT_EQ(r.threads[0].pct.p99, 1000003u * 198);
  EXPECT_EQ(r.threads[0].slow_count, 200u - 15u);
}

TEST(DispatchAnalyzer, CapsPendingSamplesPerThread) {
  DispatchOptions o = options();
  o.max_pending_samples_per_thread = 3;
  std::vector<Event> ev;
  for (uint64_t i = 0; i < 5; ++i) ev.push_back(sample(1, 1, i, {0xa}));
  ev.push_back(sample(2, 1, 0, {0xb}));  // another thread has its own cap
  ev.push_back(span(1, 1, 0, 20 * kMs));
  // Once the span took its samples the thread has room again.
  ev.push_back(sample(1, 2, 9, {0xa}));
  DispatchAnalysis r = run(ev, {}, {}, o);
  EXPECT_EQ(r.sample_overflow, 2u);
  ASSERT_EQ(r.slow.size(), 1u);
  EXPECT_EQ(r.slow[0].nsamples, 3u);
  EXPECT_EQ(r.orphan_samples, 2u);
}

TEST(DispatchAnalyzer, HistogramOnlyThreadsAreSummarized) {
  DispatchAnalysis r =
      run({}, {hist(4, 0, LT_ROLE_DISPATCH, {1 * kMs, 2 * kMs})});
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].tid, 4u);
  EXPECT_EQ(r.threads[0].count, 2u);
  EXPECT_EQ(r.threads[0].slow_count, 0u);
  EXPECT_EQ(r.threads[0].pct.max, 2 * kMs);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// With a frame key (function start), samples at different instructions of
// one function are one stack.
TEST(DispatchAnalysisFrameKey, GroupsByFunctionNotInstruction) {
  std::vector<SampleEvent> samples;
  for (uint64_t i = 0; i < 6; ++i) {
    SampleEvent s;
    s.pid = 1;
    s.tid = 1;
    s.ts_ns = 1000 + i;
    s.stack.frames = {0x1000 + i * 4,
                      0x2010};  // a loop inside [0x1000, 0x1100)
    samples.push_back(s);
  }
  SampleEvent other;
  other.pid = 1;
  other.tid = 1;
  other.ts_ns = 2000;
  other.stack.frames = {0x3000, 0x2010};
  samples.push_back(other);
  auto by_addr = group_stacks(samples);
  EXPECT_EQ(by_addr.size(), 7u);
  auto by_fn = group_stacks(samples, [](uint32_t, uint64_t a) {
    return a >= 0x1000 && a < 0x1100 ? 0x1000 : a;
  });
  ASSERT_EQ(by_fn.size(), 2u);
  EXPECT_EQ(by_fn[0].count, 6u);
  EXPECT_EQ(by_fn[0].longest_run, 6u);
  EXPECT_EQ(by_fn[0].frames[0], 0x1000u) << "keeps the first sample's frames";
  EXPECT_EQ(by_fn[1].count, 1u);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// A span still running at stop is reported with its samples but not counted
// in the thread's distribution of completed spans.
TEST(DispatchAnalysisInFlight, ReportedNotCounted) {
  DispatchOptions opts;
  opts.slow_ns = {16'000'000, 16'000'000};
  DispatchAnalyzer an(opts);
  SampleEvent s;
  s.pid = 7;
  s.tid = 8;
  s.ts_ns = 2'000'000'000;
  s.span_id = 5;
  s.stack.frames = {0x1234};
  an.consume(s);
  SpanEvent ev;
  ev.pid = 7;
  ev.tid = 8;
  ev.span_id = 5;
  ev.start_ns = 1'000'000'000;
  ev.duration_ns = 3'000'000'000;
  ev.in_flight = true;
  an.consume(ev);
  SpanEvent young = ev;  // in flight but not slow yet: not reported
  young.span_id = 6;
  young.duration_ns = 1'000'000;
  an.consume(young);
  DispatchAnalysis a = an.finish({}, Counters{});
  ASSERT_EQ(a.slow.size(), 1u);
  EXPECT_TRUE(a.slow[0].span.in_flight);
  EXPECT_EQ(a.slow[0].nsamples, 1u);
  EXPECT_EQ(a.orphan_samples, 0u);
  for (const ThreadSummary& t : a.threads) EXPECT_EQ(t.count, 0u);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

DispatchAnalyzer analyzer_16ms() {
  DispatchOptions opts;
  opts.slow_ns = {16 * kMs, 16 * kMs, 16 * kMs};
  return DispatchAnalyzer(opts);
}

// A thread killed inside a stall: its span arrives cut short (LT_SPAN_EXIT)
// with the samples taken before, reported as slow, not counted as a
// completed span; a cut-short span under the threshold only frees its
// samples.
TEST(DispatchAnalysisCutShort, ExitReportedWithSamplesNotCounted) {
  DispatchAnalyzer an = analyzer_16ms();
  an.consume(sample(1, 5, 10 * kMs, {0xa}));
  an.consume(sample(1, 5, 11 * kMs, {0xa}));
  SpanEvent killed = span(1, 5, 0, 2000 * kMs);
  killed.flags = LT_SPAN_EXIT;
  an.consume(killed);
  an.consume(sample(2, 9, 10 * kMs, {0xb}));
  SpanEvent young = span(2, 9, 0, 12 * kMs);
  young.flags = LT_SPAN_EXEC;
  an.consume(young);
  DispatchAnalysis a =
      an.finish({hist(1, 0, LT_ROLE_DISPATCH, {kMs, kMs})}, Counters{});
  ASSERT_EQ(a.slow.size(), 1u);
  EXPECT_TRUE(a.slow[0].span.cut_short());
  EXPECT_FALSE(a.slow[0].span.in_flight);
  EXPECT_EQ(a.slow[0].nsamples, 2u);
  EXPECT_EQ(a.orphan_samples, 0u);
  EXPECT_EQ(a.cut_short, 2u);
  ASSERT_EQ(a.threads.size(), 1u);
  EXPECT_EQ(a.threads[0].count, 2u) << "only the completed spans";
  EXPECT_EQ(a.threads[0].slow_count, 0u);
}

// --max-threads too small: a thread without a histogram slot is counted
// from the spans that crossed the ring buffer (the kernel counts the others
// as lost.hist_full), and so is a probe of a thread that got a slot for
// another probe only; a counted span is never counted twice.
TEST(DispatchAnalysisHistFull, StreamCountsWhatNoHistogramHolds) {
  DispatchAnalyzer an = analyzer_16ms();
  an.consume(span(1, 1, 0, 20 * kMs));  // thread 1 has a kernel histogram
  SpanEvent other_probe = span(1, 2, 50 * kMs, 30 * kMs);
  other_probe.probe_id = 1;  // ... for probe 0 only
  an.consume(other_probe);
  an.consume(span(2, 1, 0, 40 * kMs));  // thread 2 has none
  an.consume(span(2, 2, 90 * kMs, 17 * kMs));
  DispatchAnalysis a = an.finish(
      {hist(1, 0, LT_ROLE_DISPATCH, {kMs, 2 * kMs, 20 * kMs})}, Counters{});
  ASSERT_EQ(a.threads.size(), 2u);
  EXPECT_EQ(a.threads[0].tid, 1u);
  EXPECT_EQ(a.threads[0].count, 4u) << "3 in its histogram + 1 of probe 1";
  EXPECT_EQ(a.threads[0].sum_ns, 53 * kMs);
  EXPECT_EQ(a.threads[0].pct.max, 30 * kMs);
  EXPECT_EQ(a.threads[1].tid, 2u);
  EXPECT_EQ(a.threads[1].count, 2u);
  EXPECT_EQ(a.threads[1].sum_ns, 57 * kMs);
  EXPECT_EQ(a.threads[1].slow_count, 2u);
  EXPECT_EQ(a.slow.size(), 4u);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// Stops reach the analysis sorted by thread and time, and a delivery due
// while its thread was stopped gets the stopped part of its lag, however
// they arrived; a stopped span's blocked time leaves the stop out.
TEST(DispatchAnalysisStopped, StopsExplainTheLagOfTheirThread) {
  SpanEvent late = span(1, 1, 200 * kMs, 401 * kMs, LT_ROLE_DELIVERY);
  SpanEvent other = span(2, 2, 200 * kMs, 401 * kMs, LT_ROLE_DELIVERY);
  SpanEvent stopped = span(1, 3, 700 * kMs, 100 * kMs);
  stopped.cpu_ns = 10 * kMs;
  stopped.stopped_ns = 80 * kMs;
  DispatchAnalysis a =
      run({Event(StopEvent{100, 1, 790 * kMs, 710 * kMs}), Event(late),
           Event(StopEvent{100, 1, 600 * kMs, 100 * kMs}), Event(other),
           Event(stopped)});
  ASSERT_EQ(a.stops.size(), 2u);
  EXPECT_EQ(a.stops[0].start_ns, 100 * kMs);
  ASSERT_EQ(a.delivery_blame.size(), 2u);
  for (const DeliveryBlame& why : a.delivery_blame) {
    const SpanEvent& d = a.slow[why.delivery].span;
    EXPECT_EQ(why.stopped_ns, d.tid == 1 ? 400 * kMs : 0u) << d.tid;
  }
  const SpanEvent* s = nullptr;
  for (const SlowSpan& x : a.slow)
    if (x.span.span_id == 3) s = &x.span;
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->blocked_ns(), 10 * kMs);
}

}  // namespace
}  // namespace looptrace
