// The frames part of the reports: the text FRAMES section (80 columns, the
// worst janky frames with their cause) and the JSON names scripts rely on.
#include "report/frames_report.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t k60 = 16'666'667;
constexpr uint64_t kT0 = 1'000'000 * kMs;

SpanEvent span(uint32_t probe, uint64_t start, uint64_t dur) {
  SpanEvent e;
  e.pid = 100;
  e.tid = 101;
  e.comm = "gtk-app";
  e.probe_id = probe;
  e.start_ns = start;
  e.duration_ns = dur;
  e.cpu_ns = dur / 2;
  return e;
}

// One GTK thread: 120 frames, one held back by a 40 ms key handler (38 ms
// past when it was expected: the previous frame's end plus one interval).
FrameAnalysis analysis() {
  FrameOptions o;
  FrameProbe p;
  p.names = {"[gtk+] gdk_frame_clock_paint_idle"};
  o.probes[0] = p;
  FrameAnalyzer a(o);
  uint64_t t = kT0;
  for (int i = 0; i < 120; ++i) {
    uint64_t start = t;
    if (i == 60) {
      a.consume(Event{span(1, t, 40 * kMs)});
      start = t + 40 * kMs;
    }
    SpanEvent f = span(0, start, 2 * kMs);
    f.key_str = "[gtk+] gdk_frame_clock_paint_idle";
    a.consume(Event{f});
    t = start + k60;
  }
  return a.finish(2000 * kMs);
}

ReportContext context(std::vector<ProbeDef>* probes) {
  ProbeDef frame;
  frame.id = 0;
  frame.label = "GLib timeout";
  ProbeDef key;
  key.id = 1;
  key.label = "GTK event";
  key.resolved_symbol = "gtk_main_do_event";
  *probes = {frame, key};
  ReportContext ctx;
  ctx.probes = probes;
  ctx.start_ns = kT0 - 500 * kMs;
  return ctx;
}

TEST(FramesReport, TextSaysHowManyAndWhyTheJankyOneWasLate) {
  std::vector<ProbeDef> probes;
  std::ostringstream os;
  write_frames_report(os, analysis(), context(&probes));
  const std::string text = os.str();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(line.size(), 80u) << line;
  EXPECT_NE(text.find("PID/TID  COMM             FRAMES  JANKY DROPPED   FPS"
                      "     P50     P99     MAX\n100/101  gtk-app           "
                      "  120      1       2  60.0  2.00ms  2.00ms  2.00ms\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[gtk+] gdk_frame_clock_paint_idle at 60.0 Hz: 0 frozen"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("JANKY FRAMES: 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("held back 38.0ms"), std::string::npos) << text;
  EXPECT_NE(text.find("38.0ms of it in 40.0ms GTK event"), std::string::npos)
      << text;
}

TEST(FramesReport, NoFramesSaysSo) {
  std::vector<ProbeDef> probes;
  std::ostringstream os;
  write_frames_report(os, FrameAnalysis{}, context(&probes));
  EXPECT_EQ(os.str(), "\nFRAMES: none drawn while tracing\n");
}

// The names issue 25 fixes for scripts.
TEST(FramesReport, JsonHasTheNamesScriptsUse) {
  std::vector<ProbeDef> probes;
  nlohmann::json j = frames_to_json(analysis(), context(&probes));
  ASSERT_EQ(j["frames"].size(), 1u);
  for (const char* k :
       {"pid", "tid", "comm", "source", "count", "janky", "frozen",
        "missed_vsyncs", "refresh_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"})
    EXPECT_TRUE(j["frames"][0].contains(k)) << k;
  EXPECT_EQ(j["frames"][0]["count"], 120);
  EXPECT_EQ(j["frames"][0]["missed_vsyncs"], 2);
  ASSERT_EQ(j["janky_frames"].size(), 1u);
  EXPECT_EQ(j["janky_frames_omitted"], 0);
  const nlohmann::json& f = j["janky_frames"][0];
  for (const char* k :
       {"pid", "tid", "start_ns", "duration_ns", "deadline_ns", "missed_vsyncs",
        "bucket", "phases", "cause", "input_waiting"})
    EXPECT_TRUE(f.contains(k)) << k;
  EXPECT_EQ(f["bucket"], "normal");
  EXPECT_EQ(f["cause"]["held_back_ns"], 38 * kMs);
  ASSERT_EQ(f["cause"]["held_by"].size(), 1u);
  EXPECT_EQ(f["cause"]["held_by"][0]["target"], "GTK event");
  EXPECT_EQ(f["cause"]["held_by"][0]["overlap_ns"], 38 * kMs);
  EXPECT_EQ(f["deadline_ns"], f["expected_ns"].get<uint64_t>() + k60);
}

}  // namespace
}  // namespace looptrace
