// Frames: the deadline and missed-vsync arithmetic, Matrix's buckets, frozen
// frames, when a frame was expected, and FrameAnalyzer on synthetic streams
// (which spans are frames, what held a janky one back, frames in flight).
#include "analysis/frames.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/list_limits.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t k60 = 16'666'667;  // 60 Hz
constexpr uint64_t k120 = 8'333'333;  // 120 Hz
constexpr uint64_t kT0 = 1'000'000 * kMs;

auto never_busy = [](uint64_t, uint64_t) { return false; };
auto always_busy = [](uint64_t, uint64_t) { return true; };

TEST(FrameTiming, OnTimeEndsByItsDeadline) {
  FrameTiming t = time_frame(kT0, kT0 + 1 * kMs, 10 * kMs, k60);
  EXPECT_EQ(t.expected_ns, kT0);
  EXPECT_EQ(t.deadline_ns, kT0 + k60);
  EXPECT_EQ(t.delay_ns, 1 * kMs);
  EXPECT_FALSE(t.janky);
  EXPECT_EQ(t.missed_vsyncs, 0u);
  EXPECT_EQ(t.bucket, FrameBucket::kNormal);
  // Ending exactly at the deadline is in time.
  t = time_frame(kT0, kT0, k60, k60);
  EXPECT_FALSE(t.janky);
  t = time_frame(kT0, kT0, k60 + 1, k60);
  EXPECT_TRUE(t.janky);
  EXPECT_EQ(t.missed_vsyncs, 1u);
}

// A frame that ends 1.5 intervals after its expected start shows one vsync
// late; 2.2 intervals, two; 3 exactly, two.
TEST(FrameTiming, MissedVsyncsCountFromTheExpectedStart) {
  EXPECT_EQ(time_frame(kT0, kT0, k60 * 3 / 2, k60).missed_vsyncs, 1u);
  EXPECT_EQ(time_frame(kT0, kT0, k60 * 22 / 10, k60).missed_vsyncs, 2u);
  EXPECT_EQ(time_frame(kT0, kT0, 3 * k60, k60).missed_vsyncs, 2u);
  // Held back 30 ms before it ran 5 ms: late by as much as a long one.
  FrameTiming held = time_frame(kT0, kT0 + 30 * kMs, 5 * kMs, k60);
  EXPECT_TRUE(held.janky);
  EXPECT_EQ(held.delay_ns, 30 * kMs);
  EXPECT_EQ(held.missed_vsyncs, 2u);  // ends at 35 ms: past 16.7 + 16.7
  // Expected after its start (an early frame): timed from its start.
  FrameTiming early = time_frame(kT0 + 5 * kMs, kT0, 10 * kMs, k60);
  EXPECT_EQ(early.expected_ns, kT0);
  EXPECT_EQ(early.delay_ns, 0u);
  EXPECT_FALSE(early.janky);
}

// Matrix: normal < 3, middle >= 3, high >= 9, frozen >= 42 dropped frames
// at 60 Hz.
TEST(FrameTiming, MatrixBucketsAt60Hz) {
  auto bucket_for_missed = [](uint64_t missed, uint64_t interval) {
    // Ends `missed` whole intervals past its deadline, plus a little.
    FrameTiming t =
        time_frame(kT0, kT0, (missed + 1) * interval - interval / 2, interval);
    EXPECT_EQ(t.missed_vsyncs, missed);
    return t.bucket;
  };
  EXPECT_EQ(bucket_for_missed(2, k60), FrameBucket::kNormal);
  EXPECT_EQ(bucket_for_missed(3, k60), FrameBucket::kMiddle);
  EXPECT_EQ(bucket_for_missed(8, k60), FrameBucket::kMiddle);
  EXPECT_EQ(bucket_for_missed(9, k60), FrameBucket::kHigh);
  EXPECT_EQ(bucket_for_missed(41, k60), FrameBucket::kHigh);
  EXPECT_EQ(bucket_for_missed(42, k60), FrameBucket::kFrozen);
  // At 120 Hz the same time dropped: 6 vsyncs are 3 frames of 60 Hz.
  EXPECT_EQ(bucket_for_missed(5, k120), FrameBucket::kNormal);
  EXPECT_EQ(bucket_for_missed(6, k120), FrameBucket::kMiddle);
  EXPECT_EQ(bucket_for_missed(18, k120), FrameBucket::kHigh);
  EXPECT_EQ(bucket_for_missed(84, k120), FrameBucket::kFrozen);
  EXPECT_STREQ(bucket_name(FrameBucket::kMiddle), "middle");
}

TEST(FrameTiming, FrozenFromSevenHundredMilliseconds) {
  EXPECT_FALSE(time_frame(kT0, kT0, 699 * kMs, k60).frozen);
  EXPECT_TRUE(time_frame(kT0, kT0, 700 * kMs, k60).frozen);
  // Huge values saturate rather than wrap.
  FrameTiming t = time_frame(kT0, UINT64_MAX - 5, 100, k60);
  EXPECT_TRUE(t.janky);
  EXPECT_GT(t.missed_vsyncs, 0u);
}

TEST(ExpectedStart, TheSourcesTickFirst) {
  // The frame clock asked for the frame at its tick; it began 30 ms later.
  EXPECT_EQ(expected_start(std::nullopt, kT0, kT0 + 30 * kMs, k60, never_busy),
            kT0);
  // A tick before the previous frame's end: held up by that frame, which is
  // that frame's jank, not this one's.
  PreviousFrame prev{kT0 - 40 * kMs, kT0 + 10 * kMs};
  EXPECT_EQ(expected_start(prev, kT0, kT0 + 12 * kMs, k60, never_busy),
            kT0 + 10 * kMs);
  // A tick after the start, or older than a minute: not believed.
  EXPECT_EQ(expected_start(std::nullopt, kT0 + 5 * kMs, kT0, k60, never_busy),
            kT0);
  EXPECT_EQ(expected_start(std::nullopt, uint64_t{1}, kT0 + 61'000 * kMs, k60,
                           never_busy),
            kT0 + 61'000 * kMs);
}

TEST(ExpectedStart, WithoutATickThePreviousEndPlusOneInterval) {
  PreviousFrame prev{kT0, kT0 + 4 * kMs};
  // On time: expected no later than its start.
  EXPECT_EQ(expected_start(prev, std::nullopt, kT0 + k60, k60, never_busy),
            kT0 + k60);
  // 10 ms later than that, within one more interval: late.
  uint64_t due = kT0 + 4 * kMs + k60;
  EXPECT_EQ(expected_start(prev, std::nullopt, due + 10 * kMs, k60, never_busy),
            due);
  // 100 ms later with the thread idle meanwhile: the toolkit stopped asking
  // for frames; this one starts a new run, on time.
  EXPECT_EQ(
      expected_start(prev, std::nullopt, due + 100 * kMs, k60, never_busy),
      due + 100 * kMs);
  // The same with a span of the thread running meanwhile: held back.
  EXPECT_EQ(
      expected_start(prev, std::nullopt, due + 100 * kMs, k60, always_busy),
      due);
  // The first frame of a thread, without a tick: on time.
  EXPECT_EQ(expected_start(std::nullopt, std::nullopt, kT0, k60, never_busy),
            kT0);
}

constexpr uint32_t kFrameProbe = 0;
constexpr uint32_t kOtherProbe = 1;
constexpr const char* kGtk3 = "[gtk+] gdk_frame_clock_paint_idle";

SpanEvent span(uint64_t id, uint64_t start, uint64_t dur,
               const std::string& name, uint32_t probe = kFrameProbe,
               uint32_t depth = 0) {
  SpanEvent e;
  e.pid = 100;
  e.tid = 101;
  e.comm = "gtk-app";
  e.span_id = id;
  e.start_ns = start;
  e.duration_ns = dur;
  e.cpu_ns = dur;
  e.probe_id = probe;
  e.depth = depth;
  e.key_str = name;
  return e;
}

// The glib profile's timeout probe: frames are the GSources named for GTK's
// frame clock, their tick the timeout's due time (key 1, in us).
FrameOptions gtk_options() {
  FrameOptions o;
  FrameProbe p;
  p.names = {kGtk3, "[gtk] gdk_frame_clock_paint_idle"};
  p.tick_key = 1;
  p.tick_scale = 1000;
  o.probes[kFrameProbe] = p;
  return o;
}

SpanEvent gtk_frame(uint64_t id, uint64_t due, uint64_t start, uint64_t dur) {
  SpanEvent e = span(id, start, dur, kGtk3);
  e.keys[1] = due / 1000;
  return e;
}

TEST(FrameAnalyzer, OnlyTheNamedSourcesAreFrames) {
  FrameAnalyzer a(gtk_options());
  a.consume(gtk_frame(1, kT0, kT0, 2 * kMs));
  a.consume(
      span(2, kT0 + 3 * kMs, 1 * kMs, "[gtk+] gdk_frame_clock_flush_idle"));
  a.consume(span(3, kT0 + 5 * kMs, 1 * kMs, kGtk3, kOtherProbe));
  SpanEvent cut = gtk_frame(4, kT0 + k60, kT0 + k60, 2 * kMs);
  cut.flags = LT_SPAN_KEY_STR_CUT;
  a.consume(cut);
  SpanEvent delivery = gtk_frame(5, kT0 + k60, kT0 + k60, 2 * kMs);
  delivery.role = LT_ROLE_DELIVERY;
  a.consume(delivery);
  FrameAnalysis r = a.finish(1000 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].count, 1u);
  EXPECT_EQ(r.threads[0].source, kGtk3);
  EXPECT_EQ(r.threads[0].comm, "gtk-app");
  EXPECT_EQ(r.threads[0].refresh_ns, k60);
}

// 60 frames at 60 Hz, one held back 40 ms by a stalled dispatch and one
// whose draw stalled inside: two janky frames, each explained.
TEST(FrameAnalyzer, CountsJankAndNamesWhatHeldAFrameBack) {
  FrameAnalyzer a(gtk_options());
  uint64_t t = kT0;
  uint64_t id = 1;
  uint64_t stall_frame = 20, long_frame = 40;
  for (uint64_t i = 0; i < 60; ++i) {
    uint64_t due = t / 1000 * 1000;  // GLib's due times are in us
    uint64_t start = due + 100'000;
    uint64_t dur = 3 * kMs;
    if (i == stall_frame) {
      // A key handler ran 40 ms from just before the frame was due.
      a.consume(
          span(id++, due - 1 * kMs, 40 * kMs, "key handler", kOtherProbe));
      start = due + 39 * kMs;
    }
    if (i == long_frame) {
      dur = 50 * kMs;
      a.consume(span(id++, start + 2 * kMs, 45 * kMs, "draw", kOtherProbe, 1));
      a.consume(span(id++, start + 1 * kMs, 1 * kMs, "layout", kOtherProbe, 1));
    }
    a.consume(gtk_frame(id++, due, start, dur));
    t = std::max(due + k60, start + dur);
  }
  FrameAnalysis r = a.finish(1000 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  const FrameThread& th = r.threads[0];
  EXPECT_EQ(th.count, 60u);
  EXPECT_EQ(th.janky, 2u);
  EXPECT_EQ(th.frozen, 0u);
  // Held back: due at 0, ends at 42 ms: past 16.7 by 25.3 -> 2 vsyncs.
  // Long: ends 50.1 ms after its tick: past 16.7 by 33.4 -> 3 vsyncs.
  EXPECT_EQ(th.missed_vsyncs, 5u);
  EXPECT_EQ(th.pct.count, 60u);
  EXPECT_EQ(th.pct.max, 50 * kMs);
  EXPECT_EQ(th.pct.p50, 3 * kMs);
  EXPECT_DOUBLE_EQ(th.fps, 60.0);
  ASSERT_EQ(r.janky.size(), 2u);
  const JankyFrame& held = r.janky[0];
  EXPECT_EQ(held.timing.missed_vsyncs, 2u);
  EXPECT_EQ(held.timing.delay_ns, 39 * kMs);
  ASSERT_EQ(held.cause.held_by.size(), 1u);
  EXPECT_EQ(held.cause.held_by[0].span.key_str, "key handler");
  EXPECT_EQ(held.cause.held_by[0].overlap_ns, 39 * kMs);
  EXPECT_FALSE(held.cause.longest_inside);
  const JankyFrame& slow = r.janky[1];
  EXPECT_EQ(slow.timing.missed_vsyncs, 3u);
  EXPECT_EQ(slow.timing.bucket, FrameBucket::kMiddle);
  EXPECT_TRUE(slow.cause.held_by.empty());
  ASSERT_TRUE(slow.cause.longest_inside);
  EXPECT_EQ(slow.cause.longest_inside->key_str, "draw");
}

// A frame still drawing when tracing stopped: counted, janky once past its
// deadline, but no duration in the percentiles.
TEST(FrameAnalyzer, FramesInFlightAtTheEnd) {
  FrameAnalyzer a(gtk_options());
  a.consume(gtk_frame(1, kT0, kT0, 2 * kMs));
  SpanEvent hung = gtk_frame(2, kT0 + k60, kT0 + k60, 900 * kMs);
  hung.in_flight = true;
  a.consume(hung);
  FrameAnalysis r = a.finish(2000 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].count, 2u);
  EXPECT_EQ(r.threads[0].in_flight, 1u);
  EXPECT_EQ(r.threads[0].janky, 1u);
  EXPECT_EQ(r.threads[0].frozen, 0u);  // not known to have ended
  EXPECT_EQ(r.threads[0].pct.count, 1u);
  EXPECT_DOUBLE_EQ(r.threads[0].fps, 0.5);
  ASSERT_EQ(r.janky.size(), 1u);
  EXPECT_TRUE(r.janky[0].span.in_flight);
  EXPECT_EQ(r.janky[0].timing.bucket, FrameBucket::kFrozen);
}

// Every span of a --frame probe is a frame; without a tick a frame is
// expected one interval after the previous one's end.
TEST(FrameAnalyzer, EverySpanOfAFrameProbeWithoutTicks) {
  FrameOptions o;
  o.refresh_ns = k120;
  FrameProbe p;
  p.label = "app:draw";
  o.probes[kFrameProbe] = p;
  FrameAnalyzer a(o);
  a.consume(span(1, kT0, 2 * kMs, ""));
  a.consume(span(2, kT0 + k120, 2 * kMs, ""));
  // Held back 20 ms by a dispatch: expected at 2 + 8.3 ms after the last.
  a.consume(span(3, kT0 + k120 + 3 * kMs, 25 * kMs, "", kOtherProbe));
  a.consume(span(4, kT0 + k120 + 30 * kMs, 2 * kMs, ""));
  FrameAnalysis r = a.finish(1000 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].source, "app:draw");
  EXPECT_EQ(r.threads[0].refresh_ns, k120);
  EXPECT_EQ(r.threads[0].janky, 1u);
  ASSERT_EQ(r.janky.size(), 1u);
  EXPECT_EQ(r.janky[0].timing.expected_ns, kT0 + k120 + 2 * kMs + k120);
  ASSERT_EQ(r.janky[0].cause.held_by.size(), 1u);
  EXPECT_EQ(r.janky[0].cause.held_by[0].span.span_id, 3u);
}

// --frame-end: each span's return ends a frame from the previous return.
// Late from 1.5 intervals after the previous end, a vsync missed per
// interval past that (rounded up); a pause of more than two intervals in
// which nothing ran starts a new run (the call alone), unless a recorded
// span ran in it or the call took an interval: then it is one late frame.
TEST(FrameAnalyzer, FrameEndsMakeFramesBetweenThem) {
  FrameOptions o;  // 60 Hz
  FrameProbe p;
  p.label = "app:swap";
  p.end = true;
  o.probes[kFrameProbe] = p;
  FrameAnalyzer a(o);
  const uint64_t i60 = 16'666'667, call = 1 * kMs;
  uint64_t end = kT0 + call;
  uint64_t id = 0;
  auto swap_at = [&](uint64_t e, uint64_t dur = 1 * kMs) {
    a.consume(span(++id, e - dur, dur, ""));
  };
  swap_at(end);               // the first: the call alone, on time
  swap_at(end += i60);        // on time
  swap_at(end += 24 * kMs);   // 24 ms: under 1.5 intervals, on time
  swap_at(end += 26 * kMs);   // 26 ms: late, 1 vsync missed
  swap_at(end += 30 * kMs);   // 30 ms: still one
  swap_at(end += 32 * kMs);   // 32 ms: one too
  swap_at(end += 45 * kMs);   // 45 ms, nothing ran: a new run, on time
  swap_at(end += 500 * kMs);  // a pause, nothing ran: a new run, on time
  // 100 ms with a slow dispatch in it: one late frame, 5 vsyncs missed.
  a.consume(span(++id, end + 10 * kMs, 80 * kMs, "", kOtherProbe));
  swap_at(end += 100 * kMs);
  // 200 ms, the swap itself 40 ms long: the thread was busy, late.
  swap_at(end += 200 * kMs, 40 * kMs);
  // 750 ms, likewise: frozen (700 ms or more), 44 vsyncs missed.
  swap_at(end += 750 * kMs, 40 * kMs);
  FrameAnalysis r = a.finish(end + 1000 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].count, 11u);
  EXPECT_EQ(r.threads[0].frozen, 1u);
  std::vector<std::pair<uint64_t, uint64_t>> got;  // duration, missed
  for (const JankyFrame& j : r.janky) {
    got.emplace_back(j.span.duration_ns, j.timing.missed_vsyncs);
    EXPECT_TRUE(j.between_ends);
    EXPECT_EQ(j.span.cpu_ns, 0u);
  }
  std::sort(got.begin(), got.end());
  const std::vector<std::pair<uint64_t, uint64_t>> want = {
      {26 * kMs, 1},  {30 * kMs, 1},   {32 * kMs, 1},
      {100 * kMs, 5}, {200 * kMs, 11}, {750 * kMs, 44}};
  EXPECT_EQ(got, want);
}

// Qt Quick's threaded render loop: the render thread's swaps end the
// frames, and a GUI thread that stalls holds back the next one. Its stall
// (which began before the previous swap: the render thread was still
// drawing the last frame it synced) is what ran inside the late frame,
// and the phases of both threads are listed. A pause in drawing with only
// a short span of the process in it starts a new run: no late frame.
TEST(FrameAnalyzer, FrameEndsOfARenderThreadAreHeldBackByItsGuiThread) {
  constexpr uint32_t kPhaseProbe = 2;
  constexpr uint32_t kGui = 101, kRender = 102;
  FrameOptions o;  // 60 Hz
  FrameProbe p;
  p.label = "Qt Quick frameSwapped";
  p.end = true;
  o.probes[kFrameProbe] = p;
  o.phase_probes = {kPhaseProbe};
  FrameAnalyzer a(o);
  uint64_t id = 0;
  auto on = [&](uint32_t tid, uint64_t start, uint64_t dur, uint32_t probe) {
    SpanEvent e = span(++id, start, dur, "", probe);
    e.tid = tid;
    a.consume(e);
  };
  auto swap = [&](uint64_t end) { on(kRender, end - 100'000, 100'000, 0); };
  swap(kT0);
  swap(kT0 + 5 * kMs);
  // The GUI thread stalls 80 ms from 3 ms before that swap; then it
  // polishes, the render thread syncs and renders, and swaps at +83.5 ms.
  const uint64_t s0 = kT0 + 2 * kMs;
  on(kGui, s0, 80 * kMs, kOtherProbe);
  on(kGui, s0 + 80 * kMs, kMs / 4, kPhaseProbe);
  on(kRender, s0 + 80 * kMs + kMs / 4, kMs / 4, kPhaseProbe);
  on(kRender, s0 + 80 * kMs + kMs / 2, kMs, kPhaseProbe);
  const uint64_t late_end = s0 + 81 * kMs + kMs / 2;
  swap(late_end);
  swap(late_end + 5 * kMs);
  // Drawing stops for 500 ms; a key press of 2 ms, then a frame.
  const uint64_t pause_end = late_end + 505 * kMs;
  on(kGui, pause_end - 4 * kMs, 2 * kMs, kOtherProbe);
  swap(pause_end);
  FrameAnalysis r = a.finish(pause_end + 10 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].tid, kRender);
  EXPECT_EQ(r.threads[0].count, 5u);
  ASSERT_EQ(r.janky.size(), 1u);
  const JankyFrame& j = r.janky[0];
  EXPECT_EQ(j.span.start_ns, kT0 + 5 * kMs);
  EXPECT_EQ(j.span.duration_ns, late_end - (kT0 + 5 * kMs));
  // 76.5 ms: 1.5 intervals late at 25 ms, then 51.5 ms: 4 vsyncs.
  EXPECT_EQ(j.timing.missed_vsyncs, 4u);
  ASSERT_TRUE(j.cause.longest_inside);
  EXPECT_EQ(j.cause.longest_inside->tid, kGui);
  EXPECT_EQ(j.cause.longest_inside->duration_ns, 80 * kMs);
  ASSERT_EQ(j.phases.size(), 3u);
  EXPECT_EQ(j.phases[0].tid, kGui);
  EXPECT_EQ(j.phases[1].tid, kRender);
}

// A frame probe's refresh_ns key is the interval its toolkit draws at:
// at 30 Hz a 30 ms frame is on time; a value out of range (a key that
// read garbage) is not believed, and the rate given is used.
TEST(FrameAnalyzer, TheToolkitsRefreshIntervalOverTheRate) {
  FrameOptions o;  // 60 Hz
  FrameProbe p;
  p.label = "doFrame";
  p.refresh_key = 2;
  o.probes[kFrameProbe] = p;
  FrameAnalyzer a(o);
  const uint64_t i30 = 33'333'333;
  SpanEvent f = span(1, kT0, 30 * kMs, "");
  f.keys[2] = i30;
  a.consume(f);
  f.span_id = 2;
  f.start_ns = kT0 + i30;
  a.consume(f);
  FrameAnalysis r = a.finish(kT0 + 100 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].refresh_ns, i30);
  EXPECT_EQ(r.threads[0].janky, 0u);
  FrameAnalyzer b(o);
  f.keys[2] = 10;  // 10 ns: not believed
  b.consume(f);
  r = b.finish(kT0 + 100 * kMs);
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].refresh_ns, 16'666'667u);
  EXPECT_EQ(r.threads[0].janky, 1u);
}

TEST(CoveredNs, TheUnionOfSpansInsideTheRange) {
  using V = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(covered_ns(V{}, 0, 100), 0u);
  // Overlapping, nested, outside, across both ends.
  EXPECT_EQ(covered_ns(V{{10, 30}, {20, 40}, {25, 26}, {200, 300}}, 0, 100),
            30u);
  EXPECT_EQ(covered_ns(V{{-1ull - 5, -1ull}, {0, 1000}}, 50, 100), 50u);
  EXPECT_EQ(covered_ns(V{{60, 70}, {5, 20}}, 10, 65), 15u);
}

// A phase probe's spans inside a janky frame are its phases, by start;
// those of an earlier frame, or of no phase probe, are not.
TEST(FrameAnalyzer, AJankyFrameListsThePhasesThatRanInsideIt) {
  constexpr uint32_t kPhaseProbe = 2;
  FrameOptions o;
  FrameProbe p;
  p.label = "doFrame";
  o.probes[kFrameProbe] = p;
  o.phase_probes = {kPhaseProbe};
  FrameAnalyzer a(o);
  // Frame 1, on time: its phase is not frame 2's.
  a.consume(span(1, kT0 + 1 * kMs, 1 * kMs, "", kPhaseProbe, 1));
  a.consume(span(2, kT0, 3 * kMs, ""));
  // Frame 2 ran 30 ms: three phases (they end, and arrive, before it),
  // and a dispatch inside it that is no phase.
  const uint64_t f2 = kT0 + k60;
  a.consume(span(5, f2 + 2 * kMs, 27 * kMs, "", kPhaseProbe, 1));
  a.consume(span(4, f2 + 1 * kMs, 1 * kMs, "", kPhaseProbe, 1));
  a.consume(span(6, f2 + 29 * kMs, kMs / 2, "", kOtherProbe, 1));
  a.consume(span(3, f2, 30 * kMs, ""));
  FrameAnalysis r = a.finish(1000 * kMs);
  ASSERT_EQ(r.janky.size(), 1u);
  const auto& ph = r.janky[0].phases;
  ASSERT_EQ(ph.size(), 2u);
  EXPECT_EQ(ph[0].span_id, 4u);
  EXPECT_EQ(ph[1].span_id, 5u);
  EXPECT_EQ(r.janky[0].phases_omitted, 0u);
}

// Janky frames listed are bounded: the worst kept, the rest counted.
TEST(FrameAnalyzer, JankyFramesAreBounded) {
  FrameOptions o = gtk_options();
  o.max_janky = 3;
  FrameAnalyzer a(o);
  uint64_t t = kT0;
  for (uint64_t i = 0; i < 20; ++i) {
    uint64_t dur = (20 + i % 7) * kMs;
    a.consume(gtk_frame(i + 1, t, t, dur));
    t += 100 * kMs;
  }
  FrameAnalysis r = a.finish(3000 * kMs);
  EXPECT_EQ(r.threads[0].janky, 20u);
  EXPECT_EQ(r.janky.size(), 3u);
  EXPECT_EQ(r.janky_omitted, 17u);
  for (const JankyFrame& j : r.janky) EXPECT_GE(j.span.duration_ns, 25 * kMs);
  EXPECT_LT(r.janky[0].span.start_ns, r.janky[1].span.start_ns);
}

// Every frame is in the timeline (Perfetto's and the HTML's frame tracks),
// in flight too, by thread and start, with its timing; past max_timeline
// the later ones are counted.
TEST(FrameAnalyzer, TimelineHasEveryFrameUpToItsBound) {
  FrameOptions o = gtk_options();
  o.max_timeline = 3;
  FrameAnalyzer a(o);
  a.consume(gtk_frame(1, kT0, kT0, 2 * kMs));
  a.consume(gtk_frame(2, kT0 + k60, kT0 + k60, 30 * kMs));
  SpanEvent other = gtk_frame(3, kT0, kT0 + 1 * kMs, 2 * kMs);
  other.tid = 99;
  a.consume(other);
  a.consume(gtk_frame(4, kT0 + 4 * k60, kT0 + 4 * k60, 2 * kMs));
  FrameAnalysis r = a.finish(1000 * kMs);
  ASSERT_EQ(r.timeline.size(), 3u);
  EXPECT_EQ(r.timeline_omitted, 1u);
  EXPECT_EQ(r.timeline[0].tid, 99u);
  EXPECT_EQ(r.timeline[1].start_ns, kT0);
  EXPECT_FALSE(r.timeline[1].timing.janky);
  const FrameSlice& late = r.timeline[2];
  EXPECT_EQ(late.start_ns, kT0 + k60);
  EXPECT_EQ(late.duration_ns, 30 * kMs);
  // Its tick, the due time to the us (the GLib key's unit).
  EXPECT_EQ(late.timing.expected_ns, kT0 + k60 / 1000 * 1000);
  EXPECT_EQ(late.timing.deadline_ns, late.timing.expected_ns + k60);
  EXPECT_TRUE(late.timing.janky);
  EXPECT_EQ(late.timing.missed_vsyncs, 1u);
}

// Live alerts: each janky frame is told as the analysis finds it (in
// flight too), not the ones in time.
TEST(FrameAnalyzer, EachJankyFrameIsToldAsItIsFound) {
  FrameOptions o = gtk_options();
  std::vector<uint64_t> told;
  o.on_janky = [&told](const JankyFrame& j) { told.push_back(j.span.span_id); };
  FrameAnalyzer a(o);
  a.consume(gtk_frame(1, kT0, kT0, 2 * kMs));
  a.consume(gtk_frame(2, kT0 + k60, kT0 + k60, 30 * kMs));
  EXPECT_EQ(told, std::vector<uint64_t>{2});
  a.consume(gtk_frame(3, kT0 + 4 * k60, kT0 + 4 * k60, 2 * kMs));
  SpanEvent hung = gtk_frame(4, kT0 + 5 * k60, kT0 + 5 * k60, 900 * kMs);
  hung.in_flight = true;
  a.consume(hung);
  EXPECT_EQ(told, (std::vector<uint64_t>{2, 4}));
}

// A recording may name any number of threads: the summaries listed are
// bounded, those with most frames kept, the rest counted.
TEST(FrameAnalyzer, ThreadSummariesAreBounded) {
  FrameAnalyzer a(gtk_options());
  const uint32_t n = static_cast<uint32_t>(limits::kJsonMaxThreads) + 2;
  for (uint32_t tid = 1; tid <= n; ++tid) {
    SpanEvent f = gtk_frame(tid, kT0, kT0, 1 * kMs);
    f.tid = tid;
    a.consume(f);
  }
  SpanEvent again = gtk_frame(n + 1, kT0 + k60, kT0 + k60, 1 * kMs);
  again.tid = n;  // the last thread drew two
  a.consume(again);
  FrameAnalysis r = a.finish(1000 * kMs);
  EXPECT_EQ(r.threads.size(), limits::kJsonMaxThreads);
  EXPECT_EQ(r.threads_omitted, 2u);
  EXPECT_EQ(r.threads.back().tid, n);
  EXPECT_EQ(r.threads.back().count, 2u);
}

// Chromium's rule: input was waiting while the frame was late.
TEST(FrameAnalyzer, InputWaitingWhileAFrameWasLate) {
  FrameAnalyzer a(gtk_options());
  // Due at 0, took 50 ms: deadline 16.7 ms, ended at 50 ms.
  a.consume(gtk_frame(1, kT0, kT0, 50 * kMs));
  a.consume(gtk_frame(2, kT0 + 100 * kMs, kT0 + 100 * kMs, 40 * kMs));
  FrameAnalysis r = a.finish(1000 * kMs);
  ASSERT_EQ(r.janky.size(), 2u);
  auto event = [](uint32_t pid, uint64_t sent, uint64_t handled) {
    InputEventInfo e;
    e.pid = pid;
    e.sent_ns = sent;
    e.handled = true;
    e.handling_start_ns = handled;
    return e;
  };
  InputAnalysis in;
  // Sent 5 ms into the first frame, handled after it: waiting past its
  // deadline.
  in.events.push_back(event(100, kT0 + 5 * kMs, kT0 + 51 * kMs));
  // Handled before the second frame's deadline: not waiting.
  in.events.push_back(event(100, kT0 + 101 * kMs, kT0 + 102 * kMs));
  // Another process's, and one coalesced: neither counts.
  in.events.push_back(event(200, kT0 + 101 * kMs, kT0 + 150 * kMs));
  InputEventInfo coalesced = event(100, kT0 + 101 * kMs, kT0 + 150 * kMs);
  coalesced.coalesced = true;
  in.events.push_back(coalesced);
  mark_input_waiting(r, in);
  EXPECT_TRUE(r.janky[0].input_waiting);
  EXPECT_FALSE(r.janky[1].input_waiting);
  // Sent after the frame ended: not waiting for it.
  InputAnalysis later;
  later.events.push_back(event(100, kT0 + 60 * kMs, kT0 + 99 * kMs));
  r.janky[0].input_waiting = false;
  mark_input_waiting(r, later);
  EXPECT_FALSE(r.janky[0].input_waiting);
}

}  // namespace
}  // namespace looptrace
