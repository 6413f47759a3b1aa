// The monitor's parts that need no kernel: the flight recorder's window
// and cap, --dump-if, the dump directory's names, rate and size bound.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "monitor/dumps.h"
#include "monitor/trigger.h"
#include "monitor/window.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

SpanEvent span(uint32_t pid, uint64_t start_ms, uint64_t dur_ms,
               uint32_t role = LT_ROLE_DISPATCH) {
  SpanEvent s;
  s.pid = pid;
  s.tid = pid;
  s.start_ns = start_ms * kMs;
  s.duration_ns = dur_ms * kMs;
  s.role = role;
  return s;
}

std::vector<uint64_t> starts(const FlightRecorder& r, uint32_t pid) {
  std::vector<uint64_t> out;
  for (const Event* e : r.window(pid))
    if (const auto* s = std::get_if<SpanEvent>(e))
      out.push_back(s->start_ns / kMs);
  return out;
}

TEST(FlightRecorder, KeepsTheWindowBeforeTheNewestEvent) {
  WindowOptions o;
  o.window_ns = 1000 * kMs;
  FlightRecorder r(o);
  for (uint64_t t = 0; t < 3000; t += 100) r.add(Event(span(7, t, 10)));
  // The newest ends at 2910 ms: what ended before 1910 ms is gone.
  EXPECT_EQ(starts(r, 7),
            (std::vector<uint64_t>{1900, 2000, 2100, 2200, 2300, 2400, 2500,
                                   2600, 2700, 2800, 2900}));
  EXPECT_EQ(r.evicted_by_cap(), 0u);
}

TEST(FlightRecorder, WindowsArePerProcessAndForgotten) {
  FlightRecorder r(WindowOptions{});
  MappingsEvent m;
  m.pid = 8;
  m.maps.push_back(MapEntry{});
  r.set_mappings(m);
  r.add(Event(span(7, 0, 10)));
  r.add(Event(span(8, 5, 10)));
  r.add(Event(span(8, 50, 10)));
  EXPECT_EQ(starts(r, 7), std::vector<uint64_t>{0});
  ASSERT_EQ(r.window(8).size(), 3u);
  EXPECT_TRUE(std::holds_alternative<MappingsEvent>(*r.window(8)[0]));
  size_t before = r.bytes();
  r.forget(8);
  EXPECT_TRUE(r.window(8).empty());
  EXPECT_LT(r.bytes(), before);
  r.forget(7);
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_EQ(r.processes(), 0u);
}

TEST(FlightRecorder, CapDropsTheOldestEventsOfAnyProcessAndCountsThem) {
  WindowOptions o;
  o.window_ns = 3600'000 * kMs;  // the cap, not time, decides
  o.max_bytes = 100 * event_bytes(Event(span(1, 0, 1)));
  FlightRecorder r(o);
  for (uint64_t t = 0; t < 100; ++t) {
    r.add(Event(span(1, 2 * t, 1)));
    r.add(Event(span(2, 2 * t + 1, 1)));
  }
  EXPECT_LE(r.bytes(), o.max_bytes);
  EXPECT_EQ(r.evicted_by_cap(), 100u);
  // What is left is the newest half of each: the oldest went first.
  EXPECT_EQ(starts(r, 1).front(), 100u);
  EXPECT_EQ(starts(r, 2).front(), 101u);
}

TEST(FlightRecorder, EventTimesAreTheirEnds) {
  EXPECT_EQ(event_end_ns(Event(span(1, 10, 5))), 15 * kMs);
  SampleEvent s;
  s.pid = 1;
  s.ts_ns = 42;
  EXPECT_EQ(event_end_ns(Event(s)), 42u);
  EXPECT_EQ(event_end_ns(Event(SessionEvent{})), 0u);
}

TEST(DumpTrigger, ParsesTheBudgetGrammarOverOneSpan) {
  auto t = parse_dump_trigger("dispatch>100ms");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->text, "dispatch > 100ms");
  EXPECT_FALSE(t->hang);
  auto h = parse_dump_trigger(" hang ");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->hang);
  auto f = parse_dump_trigger("frame.missed_vsyncs >= 6");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->cond.limit, 6u);
}

TEST(DumpTrigger, BadExpressionsAreOneLineUsageErrors) {
  for (const char* bad : {"", "dispach > 1ms", "dispatch >", "dispatch > 5",
                          "frame.missed_vsyncs > 5ms", "hang > 1s",
                          "dispatch > 1ms\nidle > 1ms"}) {
    auto t = parse_dump_trigger(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().kind(), ErrorKind::kUsage) << bad;
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << bad;
    EXPECT_NE(t.status().message().find("--dump-if"), std::string::npos)
        << t.status().message();
  }
  EXPECT_NE(parse_dump_trigger("dispach > 1ms")
                .status()
                .message()
                .find("did you mean 'dispatch'"),
            std::string::npos);
}

TEST(TriggerCheck, FiresOnTheSpanThatCrossesAndSaysWhy) {
  TriggerCheck c({*parse_dump_trigger("dispatch > 100ms"),
                  *parse_dump_trigger("idle >= 50ms")},
                 SessionEvent{}, FrameOptions{});
  EXPECT_FALSE(c.check(Event(span(3, 0, 100))));
  auto f = c.check(Event(span(3, 200, 152)));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pid, 3u);
  EXPECT_EQ(f->ts_ns, 352 * kMs);
  EXPECT_EQ(f->why, "dispatch 152ms > 100ms");
  EXPECT_FALSE(c.check(Event(span(3, 400, 49, LT_ROLE_IDLE))));
  EXPECT_TRUE(c.check(Event(span(3, 500, 50, LT_ROLE_IDLE))));
  // A span still running at the end is not judged as one that ended.
  SpanEvent open = span(3, 600, 500);
  open.in_flight = true;
  EXPECT_FALSE(c.check(Event(open)));
}

TEST(TriggerCheck, HangFiresOnTheAlert) {
  TriggerCheck c({*parse_dump_trigger("hang")}, SessionEvent{}, FrameOptions{});
  EXPECT_FALSE(c.check(Event(span(3, 0, 5000))));
  HangEvent h;
  h.pid = 3;
  h.tid = 4;
  h.span = span(3, 0, 2000);
  h.span.tid = 4;
  auto f = c.check(Event(h));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->tid, 4u);
  EXPECT_NE(f->why.find("hang"), std::string::npos);
}

TEST(TriggerCheck, FramesMissedVsyncsFromThePreviousFrame) {
  FrameOptions fo;
  fo.refresh_ns = 16'666'667;
  fo.probes[0] = FrameProbe{};  // every span of probe 0 is a frame
  TriggerCheck c({*parse_dump_trigger("frame.missed_vsyncs >= 3")},
                 SessionEvent{}, fo);
  SpanEvent f = span(9, 0, 5);
  f.probe_id = 0;
  EXPECT_FALSE(c.check(Event(f)));  // the first: on time
  f.start_ns = 17 * kMs;
  EXPECT_FALSE(c.check(Event(f)));
  // Expected at 22 + 16.7 ms, ended at 100 ms: late by 61 ms, 4 vsyncs.
  f.start_ns = 40 * kMs;
  f.duration_ns = 60 * kMs;
  auto fired = c.check(Event(f));
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->why.rfind("frame.missed_vsyncs ", 0), 0u) << fired->why;
  c.forget(9);
  EXPECT_EQ(c.threads(), 0u);
}

// Frames between frame ends (Qt Quick's swaps on its render thread): a
// late one, held back by another thread of the process, fires; a pause in
// drawing does not.
TEST(TriggerCheck, FrameEndsAcrossThreads) {
  FrameOptions fo;
  FrameProbe p;
  p.end = true;
  fo.probes[0] = p;
  TriggerCheck c({*parse_dump_trigger("frame.missed_vsyncs >= 3")},
                 SessionEvent{}, fo);
  SpanEvent swap = span(9, 0, 0);
  swap.duration_ns = kMs / 10;
  swap.probe_id = 0;
  swap.tid = 11;
  auto swap_at = [&](uint64_t end) {
    swap.start_ns = end - swap.duration_ns;
    return c.check(Event(swap));
  };
  EXPECT_FALSE(swap_at(10 * kMs));
  EXPECT_FALSE(swap_at(15 * kMs));
  // 500 ms later, nothing ran: a new run.
  EXPECT_FALSE(swap_at(515 * kMs));
  // The GUI thread (tid 10) stalls 70 ms: 75 ms between swaps.
  SpanEvent gui = span(9, 517, 70);
  gui.probe_id = 1;
  gui.tid = 10;
  EXPECT_FALSE(c.check(Event(gui)));
  auto fired = swap_at(590 * kMs);
  ASSERT_TRUE(fired);
  EXPECT_EQ(fired->tid, 11u);
}

class DumpDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lt-dumps-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  void write(const std::string& name, size_t bytes) {
    std::ofstream(dir_ + "/" + name) << std::string(bytes, 'x');
  }
  bool exists(const std::string& name) {
    return access((dir_ + "/" + name).c_str(), F_OK) == 0;
  }
  std::string dir_;
};

TEST_F(DumpDirTest, NamesByUtcTimePidAndSafeComm) {
  DumpOptions o;
  o.dir = dir_;
  auto d = DumpDir::Open(o);
  ASSERT_TRUE(d.ok()) << d.status().message();
  // 2026-11-27 10:15:02.123 UTC
  uint64_t rt = 1'795'774'502'123'000'000ull;
  EXPECT_EQ(d->path_for(42, "gedit", rt),
            dir_ + "/looptrace-20261127T101502.123Z-42-gedit.lt");
  // A second dump in the same millisecond (--dump-every 0) has a name of
  // its own, after the first's.
  write("looptrace-20261127T101502.123Z-42-gedit.lt", 10);
  EXPECT_EQ(d->path_for(42, "gedit", rt),
            dir_ + "/looptrace-20261127T101502.123Z-42-gedit_2.lt");
  write("looptrace-20261127T101502.123Z-42-gedit_2.lt", 10);
  EXPECT_EQ(d->path_for(42, "gedit", rt),
            dir_ + "/looptrace-20261127T101502.123Z-42-gedit_3.lt");
  EXPECT_EQ(dump_name_comm("../../etc/x y\n\x01"), "_.._.._etc_x_y__");
  EXPECT_EQ(dump_name_comm(""), "_");
  EXPECT_EQ(dump_name_comm("a-very-long-comm-name-here"), "a-very-long-com");
}

TEST_F(DumpDirTest, OneDumpPerProcessPerInterval) {
  DumpOptions o;
  o.dir = dir_;
  o.every_ns = 60'000 * kMs;
  auto d = DumpDir::Open(o);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->allow(1, 1000 * kMs));
  d->dumped(1, 1000 * kMs);
  EXPECT_FALSE(d->allow(1, 2000 * kMs));
  EXPECT_TRUE(d->allow(2, 2000 * kMs));  // another process
  EXPECT_FALSE(d->allow(1, 60'999 * kMs));
  EXPECT_TRUE(d->allow(1, 61'000 * kMs));
  EXPECT_EQ(d->suppressed(), 2u);
  d->forget(1);  // exited: a new process with its pid starts afresh
  EXPECT_TRUE(d->allow(1, 1001 * kMs));
}

TEST_F(DumpDirTest, TrimRemovesTheOldestDumpsOnly) {
  DumpOptions o;
  o.dir = dir_;
  o.max_bytes = 2500;
  write("looptrace-20261127T100000.000Z-1-a.lt", 1000);
  write("looptrace-20261127T100001.000Z-1-a.lt", 1000);
  write("looptrace-20261127T100002.000Z-1-a.lt", 1000);
  write("notes.txt", 100000);  // not ours: never counted or removed
  auto d = DumpDir::Open(o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->trim(), 1u);
  EXPECT_FALSE(exists("looptrace-20261127T100000.000Z-1-a.lt"));
  EXPECT_TRUE(exists("looptrace-20261127T100001.000Z-1-a.lt"));
  EXPECT_TRUE(exists("notes.txt"));
  // The newest stays even alone over the bound.
  DumpOptions tiny = o;
  tiny.max_bytes = 1;
  EXPECT_EQ(DumpDir::Open(tiny)->trim(), 1u);
  EXPECT_TRUE(exists("looptrace-20261127T100002.000Z-1-a.lt"));
}

TEST_F(DumpDirTest, RefusesWhatIsNotADirectory) {
  DumpOptions o;
  o.dir = dir_ + "/missing";
  EXPECT_FALSE(DumpDir::Open(o).ok());
  write("file", 1);
  o.dir = dir_ + "/file";
  EXPECT_FALSE(DumpDir::Open(o).ok());
  ASSERT_EQ(symlink(dir_.c_str(), (dir_ + "/link").c_str()), 0);
  o.dir = dir_ + "/link";
  auto d = DumpDir::Open(o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("symbolic link"), std::string::npos);
}

}  // namespace
}  // namespace looptrace
