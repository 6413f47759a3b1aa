// Frames of GTK 3 and GTK 4 under Xvfb (Debian's python3-gi,
// tests/programs/gtk_frames.py): a window animating with a tick callback,
// every 40th draw stalled 50 ms, traced with `looptrace record -p PID` and
// no option. The frames looptrace finds (the frame clock's paint cycle)
// are checked against the app's own CLOCK_MONOTONIC log of each frame,
// taken from the frame clock's before-paint and after-paint signals. And
// an ad-hoc frame probe (--frame) on the reference app's frames.
#include <fmt/format.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "harness.h"
#include "xvfb.h"

namespace lt_test {
namespace {

// The issue's 2 ms for a janky frame's start and duration. The paint
// idle's dispatch wraps the app's before-paint..after-paint by what GTK
// does around them and the Python signal marshalling: measured on this
// machine 0.02-0.5 ms before before-paint and 0.01-0.25 ms after
// after-paint (GTK 3 and 4), so 2 ms leaves room for a loaded machine.
constexpr int64_t kToleranceNs = 2'000'000;
// The app's frames by the issue's rule: one over 20 ms is janky at 60 Hz
// (over the 16.7 ms deadline even if it started on its tick and
// looptrace's span is 2 ms shorter); one under 12 ms is not (a frame
// starts at most about 5 ms after its tick when nothing held it back).
// What may hold it back on a loaded machine is the scheduler: the time
// the app's thread waited for a CPU since the previous frame's end (its
// schedstat, logged by the app) counts as part of the frame, as the frame
// was late by that much.
constexpr int64_t kJankyNs = 20'000'000;
constexpr int64_t kFineNs = 12'000'000;
// The count: looptrace's frames are the paint idles it traced, the app's
// the paint cycles logged after looptrace said "tracing". A frame at
// either edge of tracing may fall to one side only.
constexpr int64_t kCountSlack = 3;

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool have_gtk(int version) {
  return access("/usr/bin/python3", X_OK) == 0 &&
         access("/usr/bin/Xvfb", X_OK) == 0 &&
         std::system(fmt::format("/usr/bin/python3 -c \"import gi; "
                                 "gi.require_version('Gtk', '{}.0')\" "
                                 ">/dev/null 2>&1",
                                 version)
                         .c_str()) == 0;
}

// Skips (fails when BPF tests are required) without GTK `v` under Xvfb.
#define LT_REQUIRE_GTK_VERSION(v)                                   \
  do {                                                              \
    if (!have_gtk(v)) {                                             \
      if (bpf_required())                                           \
        FAIL() << "Xvfb or GTK " << (v)                             \
               << " typelibs missing (scripts/setup.sh)";           \
      GTEST_SKIP() << "Xvfb or GTK " << (v) << " typelibs missing"; \
    }                                                               \
  } while (0)

struct FramesRun {
  std::vector<nlohmann::json> frames;  // the app's, painted while traced
  std::vector<nlohmann::json> draws;   // the app's draw handler's, likewise
  nlohmann::json report;
  std::string log, err;  // the app's log, looptrace's stderr
  int pid = 0;
  int64_t tid = 0;    // the app's GUI thread
  int64_t steal = 0;  // ns the host stole meanwhile
};

// gtk_frames.py --gtk `version` animating `duration_ms`, traced by
// `looptrace record -p PID --json` from before the animation starts until
// the app exits.
void animate(const TempDir& dir, const Display& display, int version,
             int duration_ms, FramesRun* out,
             const std::vector<std::string>& lt_args = {}) {
  out->log = dir.file("frames.jsonl");
  const std::string json = dir.file("report.json");
  Process app(
      display.env({"/usr/bin/python3", tests_dir() + "/programs/gtk_frames.py",
                   "--gtk", std::to_string(version), "--duration",
                   std::to_string(duration_ms), "--stall-ms", "50",
                   "--stall-every", "40", "--log", out->log}),
      dir.file("app.out"), dir.file("app.err"));
  out->pid = app.pid();
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "gtk_frames: ready", 20000))
      << read_file(dir.file("app.err"));
  const int64_t steal_before = steal_ns();
  std::vector<std::string> lt_argv = {
      looptrace_bin(),           "record", "-p",
      std::to_string(app.pid()), "--json", json};
  lt_argv.insert(lt_argv.end(), lt_args.begin(), lt_args.end());
  Process lt(lt_argv, dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 15000))
      << read_file(dir.file("lt.err"));
  const int64_t traced_ns = mono_ns();
  app.signal(SIGUSR1);  // the tick callback starts
  ASSERT_EQ(app.wait(duration_ms + 15000), 0) << read_file(dir.file("app.err"));
  ASSERT_EQ(lt.wait(15000), 0) << read_file(dir.file("lt.err"));
  out->steal = steal_ns() - steal_before;
  out->err = read_file(dir.file("lt.err"));
  const auto log = read_jsonl(out->log);
  for (const auto& f : events(log, "frame"))
    if (f["start_ns"].get<int64_t>() > traced_ns) out->frames.push_back(f);
  for (const auto& d : events(log, "draw"))
    if (d["start_ns"].get<int64_t>() > traced_ns) out->draws.push_back(d);
  ASSERT_FALSE(out->frames.empty()) << read_file(out->log);
  out->tid = out->frames[0]["tid"].get<int64_t>();
  out->report = read_json(json);
}

int64_t app_duration(const nlohmann::json& f) {
  return f["end_ns"].get<int64_t>() - f["start_ns"].get<int64_t>();
}

// How long the app's thread waited for a CPU between the end of the frame
// before `f` and the start of `f` (0 for the first).
int64_t runq_before(const std::vector<nlohmann::json>& frames,
                    const nlohmann::json& f) {
  const nlohmann::json* prev = nullptr;
  for (const auto& p : frames)
    if (p["end_ns"].get<int64_t>() <= f["start_ns"].get<int64_t>()) prev = &p;
  if (prev == nullptr) return 0;
  return f["runq_start_ns"].get<int64_t>() -
         (*prev)["runq_end_ns"].get<int64_t>();
}

// The app's frame a reported one is, by its start (nullptr: none).
const nlohmann::json* app_frame_at(const std::vector<nlohmann::json>& frames,
                                   int64_t start_ns, int64_t tol) {
  const nlohmann::json* best = nullptr;
  int64_t best_d = tol + 1;
  for (const auto& f : frames) {
    const int64_t d = std::llabs(f["start_ns"].get<int64_t>() - start_ns);
    if (d < best_d) best = &f, best_d = d;
  }
  return best;
}

class GtkFrames : public ::testing::TestWithParam<int> {};

// -p PID and no option: the frame clock's paint cycle is the frame. Per
// the issue: the frame count within a few frames of the app's; every
// frame the app saw take over 20 ms reported janky with its start and
// duration within 2 ms; none reported janky where the app's frame took
// under 12 ms; the refresh interval the one GDK's frame clock reports.
TEST_P(GtkFrames, FramesAndJankMatchTheFrameClock) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GTK_VERSION(GetParam());
  TempDir dir;
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  FramesRun r;
  ASSERT_NO_FATAL_FAILURE(animate(dir, display, GetParam(), 3000, &r));
  const int64_t tol = kToleranceNs + r.steal;
  const auto& app = r.frames;
  size_t slow = 0;
  int64_t app_max = 0;
  for (const auto& f : app) {
    slow += app_duration(f) > kJankyNs;
    app_max = std::max(app_max, app_duration(f));
  }
  // 3 s at 60 Hz, every 40th draw stalled: the app's own frames.
  ASSERT_GE(app.size(), 120u) << read_file(r.log);
  ASSERT_GE(slow, 3u) << read_file(r.log);

  // One thread's frames: the app's GUI thread.
  ASSERT_TRUE(r.report.contains("frames")) << r.err;
  const nlohmann::json* t = nullptr;
  for (const auto& f : r.report["frames"]) {
    EXPECT_EQ(f["pid"], r.pid) << f.dump();
    EXPECT_EQ(f["tid"], r.tid) << f.dump();
    if (f["tid"] == r.tid) t = &f;
  }
  ASSERT_NE(t, nullptr) << r.report["frames"].dump();
  EXPECT_EQ(r.report["frames"].size(), 1u) << r.report["frames"].dump();
  const int64_t count = (*t)["count"].get<int64_t>();
  EXPECT_LE(std::llabs(count - static_cast<int64_t>(app.size())), kCountSlack)
      << "app painted " << app.size() << "\n"
      << t->dump();
  // GDK's frame clock reports 16667 us under Xvfb (no frame timings from
  // the X server): looptrace's deadline interval is that, to the us.
  const int64_t refresh = app[0]["refresh_us"].get<int64_t>() * 1000;
  EXPECT_LE(std::llabs((*t)["refresh_ns"].get<int64_t>() - refresh), 1000)
      << t->dump();
  EXPECT_LE(std::llabs((*t)["max_ns"].get<int64_t>() - app_max), tol)
      << t->dump();
  EXPECT_EQ((*t)["frozen"], 0) << t->dump();

  // Every janky frame reported is one the app saw take 12 ms or more,
  // counting what its thread waited for a CPU since the previous frame.
  const auto& janky = r.report["janky_frames"];
  EXPECT_EQ(r.report["janky_frames_omitted"], 0);
  for (const auto& j : janky) {
    EXPECT_EQ(j["tid"], r.tid) << j.dump();
    const nlohmann::json* f =
        app_frame_at(app, j["start_ns"].get<int64_t>(), tol);
    ASSERT_NE(f, nullptr) << "no frame of the app's there: " << j.dump();
    EXPECT_GE(app_duration(*f) + runq_before(app, *f), kFineNs)
        << j.dump() << "\n"
        << f->dump()
        << "\nwaited for a CPU before it: " << runq_before(app, *f);
  }
  EXPECT_EQ((*t)["janky"].get<size_t>(), janky.size()) << t->dump();
  // Every frame the app saw take over 20 ms is there, as long as the app
  // saw it, at least one vsync missed.
  for (const auto& f : app) {
    if (app_duration(f) <= kJankyNs) continue;
    const nlohmann::json* m = nullptr;
    for (const auto& j : janky)
      if (std::llabs(j["start_ns"].get<int64_t>() -
                     f["start_ns"].get<int64_t>()) <= tol)
        m = &j;
    ASSERT_NE(m, nullptr) << "not reported janky: " << f.dump() << "\n"
                          << janky.dump();
    EXPECT_LE(std::llabs((*m)["duration_ns"].get<int64_t>() - app_duration(f)),
              tol)
        << m->dump() << "\n"
        << f.dump();
    EXPECT_GE((*m)["missed_vsyncs"].get<int64_t>(), 1) << m->dump();
  }
  // A janky frame that ran a stalled draw lists the phase that ran it,
  // around the app's draw handler, at least as long: GTK 3 paints a frame
  // as GDK_EXPOSE events (the gtk3 profile's GTK event probe is a phase),
  // GTK 4 draws in the widget tree's snapshot (the gtk4 profile's).
  const std::string phase =
      GetParam() == 3 ? "GTK event GDK_EXPOSE" : "snapshot";
  size_t stalled = 0;
  for (const auto& d : r.draws) {
    if (d["stall_ms"].get<int64_t>() == 0) continue;
    const int64_t ds = d["start_ns"], de = d["end_ns"];
    const nlohmann::json* m = nullptr;
    for (const auto& j : janky) {
      const int64_t js = j["start_ns"];
      if (js <= ds && de <= js + j["duration_ns"].get<int64_t>()) m = &j;
    }
    if (m == nullptr) continue;  // a draw before tracing, or on time
    ++stalled;
    bool around = false;
    for (const auto& p : (*m)["phases"]) {
      const int64_t ps = p["start_ns"];
      around = around || (p["target"] == phase && ps <= ds + tol &&
                          ps + p["duration_ns"].get<int64_t>() + tol >= de);
    }
    EXPECT_TRUE(around) << "no " << phase << " phase around the stalled draw "
                        << d.dump() << "\n"
                        << m->dump();
  }
  EXPECT_GE(stalled, 2u) << janky.dump();
}

// --live: each janky frame printed as it ends, as the report has it (the
// same frames, in order: start, thread, vsyncs missed), and no other.
TEST(GtkFramesLive, EachJankyFrameIsPrintedAsItEnds) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GTK_VERSION(3);
  TempDir dir;
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  FramesRun r;
  ASSERT_NO_FATAL_FAILURE(animate(dir, display, 3, 3000, &r, {"--live"}));
  const auto& janky = r.report["janky_frames"];
  ASSERT_GE(janky.size(), 3u) << r.report.dump();
  // "looptrace: janky frame +1.842s pid P tid T (python3): took 51.7ms,
  // missed 3 vsyncs (middle), [gtk+] gdk_frame_clock_paint_idle"
  std::regex line(
      R"(looptrace: janky frame \+([0-9.]+)s pid (\d+) tid (\d+) \([^)]*\): took [0-9.]+(?:us|ms|s), missed (\d+) vsyncs? \((normal|middle|high|frozen)\), \[gtk\+\] gdk_frame_clock_paint_idle)");
  std::vector<std::smatch> found;
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), line), end;
       it != end; ++it)
    found.push_back(*it);
  ASSERT_EQ(found.size(), janky.size()) << r.err << "\n" << janky.dump();
  // The time printed (from the start of tracing, to the ms) is the
  // frame's start: the same gaps between them as the report's.
  const int64_t first_ns = janky[0]["start_ns"].get<int64_t>();
  const double first_at = std::stod(found[0][1]);
  for (size_t i = 0; i < found.size(); ++i) {
    const std::smatch& m = found[i];
    const auto& j = janky[i];
    EXPECT_EQ(std::stoll(m[2]), r.pid) << m.str();
    EXPECT_EQ(std::stoll(m[3]), j["tid"].get<int64_t>()) << m.str();
    EXPECT_EQ(std::stoll(m[4]), j["missed_vsyncs"].get<int64_t>())
        << m.str() << "\n"
        << j.dump();
    EXPECT_EQ(m[5], j["bucket"].get<std::string>()) << m.str();
    const double gap = (j["start_ns"].get<int64_t>() - first_ns) / 1e9;
    EXPECT_NEAR(std::stod(m[1]) - first_at, gap, 0.0021) << m.str() << "\n"
                                                         << j.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Gtk, GtkFrames, ::testing::Values(3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return fmt::format("gtk{}", i.param);
                         });

// Any program by hand: `--frame BINARY:SYMBOL` makes each call of a
// function a frame. The reference app at 60 frames/s, every 20th frame's
// FrameHandler::doFrame working 30 ms, from its first frame (-- COMMAND):
// the frame count exact against the app's log of doFrame; every frame it
// saw take over 20 ms janky with start and duration within 0.2 ms (the
// issue's for the reference app); any other janky frame one the app's log
// shows late: begun more than an interval after the frame before it ended.
// The reference app drawing 60 frames a second for 2 s, every 20th frame
// stalled 30 ms, its log in `log`, traced by looptrace with `option`
// (--frame, --frame-end) on its doFrame and the JSON report in `json`.
RunResult run_refapp_frames(const std::string& option, const std::string& log,
                            const std::string& json) {
  return run({looptrace_bin(), "record", option,
              "refapp:refapp::FrameHandler::doFrame(long, long, long)",
              "--json", json, "--", refapp_bin(), "--barrier-rate", "60",
              "--frame-stall-every", "20", "--frame-stall-ms", "30",
              "--duration", "2000", "--log", log});
}

// --frame-end: each return of the function ends a frame that began at the
// previous return on its thread. Against the reference app's own log of
// each doFrame: one frame per call; a frame whose end came one and a half
// intervals or more after the previous frame's end is janky, from that end
// to its own, a vsync missed per interval past the 1.5, rounded up; the
// first frame (no end before it) is the call itself. A frame end within
// 0.3 ms of a boundary could fall either way and is not checked.
TEST(AdHocFrames, EachReturnOfAFrameEndFunctionEndsAFrame) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl"), json = dir.file("r.json");
  RunResult r = run_refapp_frames("--frame-end", log, json);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto frames = events(read_jsonl(log), "frame");
  ASSERT_GE(frames.size(), 100u) << read_file(log);
  const nlohmann::json report = read_json(json);
  ASSERT_EQ(report["frames"].size(), 1u) << report["frames"].dump();
  EXPECT_EQ(report["frames"][0]["count"].get<size_t>(), frames.size());
  constexpr int64_t kI = 16'666'667, kTol = 200'000, kEdge = 300'000;
  const auto& janky = report["janky_frames"];
  EXPECT_EQ(report["janky_frames_omitted"], 0);
  auto reported = [&](int64_t start) -> const nlohmann::json* {
    for (const auto& j : janky)
      if (std::llabs(j["start_ns"].get<int64_t>() - start) <= kTol) return &j;
    return nullptr;
  };
  size_t expected_janky = 0, edges = 0, between = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const int64_t end = frames[i]["end_ns"], own = app_duration(frames[i]);
    // The first frame, or one after a pause (more than two intervals, the
    // call itself short): the call alone, janky if longer than one.
    const int64_t prev = i ? frames[i - 1]["end_ns"].get<int64_t>() : 0;
    const bool continued = i > 0 && (end - prev <= 2 * kI || own >= kI);
    const int64_t start =
        continued ? prev : frames[i]["start_ns"].get<int64_t>();
    const int64_t len = end - start,
                  late = continued ? len - 3 * kI / 2 : len - kI;
    if (std::llabs(late) <= kEdge) {
      ++edges;
      continue;
    }
    const nlohmann::json* j = reported(start);
    if (late < 0) {
      EXPECT_EQ(j, nullptr)
          << "janky, yet on time by the app's log: " << j->dump() << "\n"
          << frames[i].dump();
      continue;
    }
    ++expected_janky;
    ASSERT_NE(j, nullptr) << "not janky: frame " << i << " " << frames[i].dump()
                          << "\n"
                          << janky.dump();
    EXPECT_LE(std::llabs((*j)["duration_ns"].get<int64_t>() - len), kTol)
        << j->dump();
    if (std::llabs(late % kI) > kEdge && std::llabs(late % kI - kI) > kEdge) {
      EXPECT_EQ((*j)["missed_vsyncs"].get<int64_t>(), (late + kI - 1) / kI)
          << j->dump();
    }
    // A frame between two ends ran no one span: no CPU split is claimed.
    if (continued) {
      ++between;
      EXPECT_FALSE((*j)["cause"].contains("cpu_ns")) << j->dump();
    }
  }
  // Every 20th frame stalls 30 ms: each such frame ends late.
  EXPECT_GE(expected_janky, frames.size() / 20) << read_file(log);
  EXPECT_GE(between, frames.size() / 20 - 1);
  EXPECT_LE(janky.size(), expected_janky + edges) << janky.dump();
}

TEST(AdHocFrames, EachCallOfTheFunctionIsAFrameTimedAgainstTheRate) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl"), json = dir.file("r.json");
  RunResult r = run_refapp_frames("--frame", log, json);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto frames = events(read_jsonl(log), "frame");
  ASSERT_GE(frames.size(), 100u) << read_file(log);
  const nlohmann::json report = read_json(json);
  ASSERT_EQ(report["frames"].size(), 1u) << report["frames"].dump();
  const auto& t = report["frames"][0];
  EXPECT_EQ(t["count"].get<size_t>(), frames.size()) << t.dump();
  EXPECT_EQ(t["tid"], frames[0]["tid"]) << t.dump();
  EXPECT_EQ(t["source"],
            "refapp:refapp::FrameHandler::doFrame(long, long, long)");
  EXPECT_EQ(t["refresh_ns"], 16'666'667) << t.dump();
  constexpr int64_t kTol = 200'000;
  const auto& janky = report["janky_frames"];
  size_t stalled = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto& f = frames[i];
    const int64_t dur = app_duration(f);
    if (dur > 20'000'000) {
      ++stalled;
      const nlohmann::json* m = nullptr;
      for (const auto& j : janky)
        if (std::llabs(j["start_ns"].get<int64_t>() -
                       f["start_ns"].get<int64_t>()) <= kTol)
          m = &j;
      ASSERT_NE(m, nullptr) << "not janky: " << f.dump();
      EXPECT_LE(std::llabs((*m)["duration_ns"].get<int64_t>() - dur), kTol)
          << m->dump() << " vs " << f.dump();
      EXPECT_GE((*m)["missed_vsyncs"].get<int64_t>(), 1) << m->dump();
    }
  }
  EXPECT_EQ(stalled, (frames.size() + 19) / 20) << read_file(log);
  for (const auto& j : janky) {
    const nlohmann::json* f = app_frame_at(frames, j["start_ns"], kTol);
    ASSERT_NE(f, nullptr) << "no such frame in the app's log: " << j.dump();
    if (app_duration(*f) > 12'000'000) continue;
    const nlohmann::json* prev = nullptr;
    for (const auto& p : frames)
      if (p["end_ns"].get<int64_t>() <= (*f)["start_ns"].get<int64_t>())
        prev = &p;
    ASSERT_NE(prev, nullptr) << j.dump();
    EXPECT_GT(
        (*f)["start_ns"].get<int64_t>() - (*prev)["end_ns"].get<int64_t>(),
        16'666'667 - 1'000'000)
        << "janky, yet short and on time by the app's log: " << j.dump();
  }
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// The reference app's Choreographer stand-in with the refapp profile and
// no frame option: each FrameHandler::doFrame(k, frameTimeNanos) is a
// frame timed from the vsync it was scheduled for, as the app logs it.
// Against the app's own log (vsync, start, end of every frame) and the
// rules of docs/looptrace.md, FRAMES: expected start = the vsync, or the
// previous frame's end if later; deadline one interval after; missed
// vsyncs the intervals from the deadline to the end, rounded up. Each
// janky frame lists its phases (doCallbacks input, animation, traversal)
// as the app timed them; the frames held back by a stall name the
// stalling dispatch. The interval is the app's vsync period, which doFrame
// is given (60 and 30 Hz; no --refresh-rate).
class RefappFrames : public ::testing::TestWithParam<int> {};

TEST_P(RefappFrames, EveryFrameTimedFromItsVsyncAndTheStallThatHeldItNamed) {
  LT_REQUIRE_BPF();
  const int rate = GetParam();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl"), json = dir.file("r.json");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "--json",
                     json,
                     "-q",
                     "--",
                     refapp_bin(),
                     "--rate",
                     "200",
                     "--barrier-rate",
                     std::to_string(rate),
                     "--stall",
                     "busy:60@410",
                     "--stall",
                     "sleep:45@1005",
                     "--frame-stall-every",
                     "40",
                     "--frame-stall-ms",
                     "25",
                     "--frame-stall-phase",
                     "animation",
                     "--duration",
                     "2000",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto truth = read_jsonl(log);
  const auto frames = events(truth, "frame");
  const auto stalls = events(truth, "stall");
  ASSERT_GE(frames.size(), static_cast<size_t>(rate) * 3 / 2) << read_file(log);
  ASSERT_EQ(stalls.size(), 2u) << read_file(log);
  const nlohmann::json report = read_json(json);
  ASSERT_EQ(report["frames"].size(), 1u) << report["frames"].dump();
  const auto& t = report["frames"][0];
  EXPECT_EQ(t["count"].get<size_t>(), frames.size()) << t.dump();
  EXPECT_EQ(t["tid"], frames[0]["tid"]);
  EXPECT_EQ(t["source"], "doFrame");
  const int64_t kInterval = std::llround(1e9 / rate);
  constexpr int64_t kTol = 200'000, kEdge = 300'000;
  EXPECT_EQ(t["refresh_ns"].get<int64_t>(), kInterval) << t.dump();
  const auto& janky = report["janky_frames"];
  // Frames run back to back after a stall, 0.1 ms apart: a janky frame is
  // the app's frame whose start is nearest to its own.
  auto nearest_start = [&](int64_t t) {
    int64_t best = 0;
    for (const auto& f : frames)
      if (best == 0 ||
          std::llabs(f["start_ns"].get<int64_t>() - t) < std::llabs(best - t))
        best = f["start_ns"];
    return best;
  };
  auto janky_at = [&](int64_t start) -> const nlohmann::json* {
    for (const auto& j : janky) {
      const int64_t js = j["start_ns"];
      if (std::llabs(js - start) <= kTol && nearest_start(js) == start)
        return &j;
    }
    return nullptr;
  };
  int64_t prev_end = 0;
  size_t late = 0, held = 0, ran_long = 0;
  for (const auto& f : frames) {
    const int64_t vsync = f["vsync_ns"], start = f["start_ns"],
                  end = f["end_ns"];
    const int64_t expected = std::min(start, std::max(vsync, prev_end));
    prev_end = end;
    const int64_t over = end - (expected + kInterval);
    const nlohmann::json* j = janky_at(start);
    if (over < -kEdge) {
      EXPECT_EQ(j, nullptr)
          << "janky, yet on time by the app's log: " << f.dump() << "\n"
          << (j ? j->dump() : "");
      continue;
    }
    if (over < kEdge) continue;  // too near the deadline to call
    ++late;
    ASSERT_NE(j, nullptr) << "not janky: " << f.dump();
    EXPECT_LE(std::llabs((*j)["duration_ns"].get<int64_t>() - (end - start)),
              kTol)
        << j->dump() << "\n"
        << f.dump();
    const int64_t rem = over % kInterval;
    if (rem > kEdge && rem < kInterval - kEdge) {
      EXPECT_EQ((*j)["missed_vsyncs"].get<int64_t>(),
                (over + kInterval - 1) / kInterval)
          << j->dump() << "\n"
          << f.dump();
    }
    // Its phases (doCallbacks) as the app timed them, in order.
    const auto& phases = (*j)["phases"];
    ASSERT_EQ(phases.size(), f["phases"].size()) << j->dump();
    for (size_t i = 0; i < phases.size(); ++i) {
      const auto& lp = f["phases"][i];
      EXPECT_EQ(phases[i]["target"],
                "doCallbacks " + lp["type"].get<std::string>());
      EXPECT_LE(std::llabs(phases[i]["start_ns"].get<int64_t>() -
                           lp["start_ns"].get<int64_t>()),
                kTol)
          << phases.dump();
      EXPECT_LE(std::llabs(phases[i]["duration_ns"].get<int64_t>() -
                           (lp["end_ns"].get<int64_t>() -
                            lp["start_ns"].get<int64_t>())),
                kTol)
          << phases.dump();
    }
    // A frame that ran long in its animation phase (the app's
    // --frame-stall-phase): that is the longest span inside it.
    const auto& anim = f["phases"][1];
    if (anim["end_ns"].get<int64_t>() - anim["start_ns"].get<int64_t>() >
        20'000'000) {
      ++ran_long;
      EXPECT_EQ((*j)["cause"]["longest_inside"]["target"],
                "doCallbacks animation")
          << j->dump();
    }
    // Held back over 20 ms by a stall: named as the app names it.
    if (start - vsync < 20'000'000) continue;
    const nlohmann::json* stall = nullptr;
    for (const auto& s : stalls)
      if (s["start_ns"].get<int64_t>() < start &&
          s["end_ns"].get<int64_t>() > vsync)
        stall = &s;
    if (stall == nullptr) continue;  // held by the machine, not the app
    ++held;
    const auto& by = (*j)["cause"]["held_by"];
    ASSERT_FALSE(by.empty()) << j->dump();
    EXPECT_EQ(by[0]["target"],
              fmt::format("{} what={}", (*stall)["target"].get<std::string>(),
                          (*stall)["what"].get<int>()))
        << j->dump();
    EXPECT_LE(std::llabs(by[0]["start_ns"].get<int64_t>() -
                         (*stall)["start_ns"].get<int64_t>()),
              kTol)
        << j->dump();
  }
  // Every 40th frame runs 25 ms (late at 60 Hz, on time at 30 Hz); the
  // two stalls hold a frame each over 20 ms at 60 Hz (at 30 Hz the second,
  // 45 ms from 5 ms past a vsync, holds the next one 17 ms).
  if (rate == 60) {
    EXPECT_GE(late, frames.size() / 40) << read_file(log);
  }
  EXPECT_EQ(ran_long, rate == 60 ? (frames.size() + 39) / 40 : 0)
      << janky.dump();
  EXPECT_EQ(held, rate == 60 ? 2u : 1u) << janky.dump();
}

INSTANTIATE_TEST_SUITE_P(Rate, RefappFrames, ::testing::Values(60, 30),
                         [](const auto& info) {
                           return std::to_string(info.param) + "Hz";
                         });

// Android 12+'s TIMELINE: the reference app sends the dispatcher, for each
// input event it finished, the present time of the frame that showed it
// (seq 0, as AOSP's InputConsumer::sendTimeline). Each event gets that
// present time and GPU time exactly as the app logged what it sent, and
// its stages to the present from the dispatcher's own event time and the
// app's FINISHED.
TEST(InputTimeline, EachEventGetsThePresentTimeTheAppSentBack) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl"), json = dir.file("r.json");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "--input",
                     "--json",
                     json,
                     "-q",
                     "--",
                     refapp_bin(),
                     "--rate",
                     "100",
                     "--barrier-rate",
                     "60",
                     "--input-rate",
                     "20",
                     "--input-timeline",
                     "--input-stall",
                     "120@5",
                     "--duration",
                     "2000",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto truth = read_jsonl(log);
  const auto timelines = events(truth, "input_timeline");
  ASSERT_GE(timelines.size(), 20u) << read_file(log);
  std::map<int64_t, nlohmann::json> sent_at, finished_at;
  for (const auto& s : events(truth, "input_send")) sent_at[s["seq"]] = s;
  for (const auto& f : events(truth, "input_finish")) finished_at[f["seq"]] = f;
  const nlohmann::json report = read_json(json);
  std::map<int64_t, const nlohmann::json*> by_seq;
  for (const auto& e : report["input_events"]) by_seq[e["seq"]] = &e;
  for (const auto& t : timelines) {
    const int64_t seq = t["seq"];
    ASSERT_TRUE(by_seq.count(seq)) << t.dump();
    const nlohmann::json& e = *by_seq[seq];
    ASSERT_TRUE(e.contains("present_ns")) << e.dump();
    EXPECT_EQ(e["present_ns"], t["present_ns"]) << e.dump();
    EXPECT_EQ(e["gpu_completed_ns"], t["gpu_completed_ns"]) << e.dump();
    const int64_t present = t["present_ns"];
    EXPECT_EQ(e["total_to_present_dur"].get<int64_t>(),
              present - sent_at.at(seq)["event_time_ns"].get<int64_t>())
        << e.dump();
    // Consumed when the app sent FINISHED: within 0.2 ms of its log.
    EXPECT_LE(std::llabs(e["consume_to_present_dur"].get<int64_t>() -
                         (present -
                          finished_at.at(seq)["finished_ns"].get<int64_t>())),
              200'000)
        << e.dump();
  }
  // An event with no TIMELINE (its present came after the run) has none.
  for (const auto& e : report["input_events"]) {
    const bool sent = std::any_of(
        timelines.begin(), timelines.end(),
        [&](const nlohmann::json& t) { return t["seq"] == e["seq"]; });
    EXPECT_EQ(e.contains("present_ns"), sent) << e.dump();
  }
  EXPECT_EQ(report["input_summary"]["kernel_rejected"], 0);
}

}  // namespace
}  // namespace lt_test
