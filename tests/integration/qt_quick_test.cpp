// Qt Quick frames under Xvfb (Debian's PyQt5 and PyQt6 with QtQuick,
// tests/programs/qt_quick_frames.py): a QML window animating, its GUI
// thread busy 60 ms every tenth tick of a 50 ms QTimer, traced with
// `looptrace record -p PID` and no option, in Qt's threaded render loop
// (what Qt picks under Xvfb with Mesa's llvmpipe: frames on the render
// thread) and in the basic one (QSG_RENDER_LOOP=basic: on the GUI thread).
// The window draws nothing from its first frame until the app gets SIGUSR1,
// sent once looptrace says it is tracing: every frame it swaps while
// traced is one looptrace should count.
// The qtquick5 or qtquick6 profile, chosen from the process's
// libQt5Quick.so.5 or libQt6Quick.so.6, ends a frame at each return of
// QQuickWindow::frameSwapped(); the frames it finds are checked against
// the app's own CLOCK_MONOTONIC log of each frameSwapped (a slot connected
// directly, on the emitting thread), and the app's log against Qt's own
// count (QSG_RENDER_TIMING=1).
#include <fmt/format.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "harness.h"
#include "xvfb.h"

namespace lt_test {
namespace {

// 60 Hz: the profile's refresh rate (Xvfb reports none).
constexpr int64_t kIntervalNs = 16'666'667;
// A frame's start and end against the app's two frameSwapped slots: the
// slot runs inside frameSwapped, microseconds before it returns, so 2 ms
// leaves room for a loaded machine (plus what the host stole).
constexpr int64_t kToleranceNs = 2'000'000;
// The app's gaps between two swaps by the rule (janky past 1.5 intervals,
// 25 ms): one over 30 ms must be a janky frame, one under 20 ms must not.
constexpr int64_t kJankyGapNs = 30'000'000;
constexpr int64_t kFineGapNs = 20'000'000;
// Missed vsyncs are checked where the gap is not this near a boundary.
constexpr int64_t kEdgeNs = 1'000'000;
// The run: 3 s, a 50 ms tick, every 10th busy 60 ms (5 or 6 stalls).
constexpr int kDurationMs = 3000;
constexpr int kStallEvery = 10;
constexpr int64_t kStallMs = 60;

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool have_pyqt_quick(int qt) {
  return have_system_python() && access("/usr/bin/Xvfb", X_OK) == 0 &&
         std::system(fmt::format("/usr/bin/python3 -c 'import PyQt{}.QtQuick' "
                                 ">/dev/null 2>&1",
                                 qt)
                         .c_str()) == 0;
}

#define LT_REQUIRE_PYQT_QUICK(qt)           \
  LT_REQUIRE_INSTALLED(have_pyqt_quick(qt), \
                       "Xvfb or PyQt" << (qt) << ".QtQuick")

// The app's run, traced.
struct QuickRun {
  std::vector<int64_t> swaps;          // frameSwapped times after tracing began
  std::vector<nlohmann::json> stalls;  // likewise
  nlohmann::json run;                  // the app's "run" line
  nlohmann::json report;
  std::string err, app_err;  // looptrace's and the app's stderr
  int pid = 0;
  int64_t tid = 0;    // the thread that emitted frameSwapped
  int64_t steal = 0;  // ns the host stole meanwhile
};

// qt_quick_frames.py --qt `qt` (QSG_RENDER_LOOP=basic when `basic`),
// traced by `looptrace record -p PID --json` from before its animation
// starts until it exits.
void animate(const TempDir& dir, const Display& display, int qt, bool basic,
             QuickRun* out) {
  const std::string log = dir.file("quick.jsonl");
  const std::string json = dir.file("report.json");
  std::vector<std::string> argv = {"QSG_RENDER_TIMING=1"};
  if (basic) argv.push_back("QSG_RENDER_LOOP=basic");
  argv.insert(
      argv.end(),
      {"/usr/bin/python3", tests_dir() + "/programs/qt_quick_frames.py", "--qt",
       std::to_string(qt), "--duration", std::to_string(kDurationMs),
       "--stall-every", std::to_string(kStallEvery), "--stall-ms",
       std::to_string(kStallMs), "--log", log});
  Process app(display.env(argv), dir.file("app.out"), dir.file("app.err"));
  out->pid = app.pid();
  ASSERT_TRUE(
      wait_for_text(dir.file("app.err"), "qt_quick_frames: ready", 20000))
      << read_file(dir.file("app.err"));
  const int64_t steal_before = steal_ns();
  Process lt({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
              "--json", json},
             dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 30000))
      << read_file(dir.file("lt.err"));
  const int64_t traced_ns = mono_ns();
  app.signal(SIGUSR1);  // the animation and the stalls start
  ASSERT_EQ(app.wait(kDurationMs + 20000), 0) << read_file(dir.file("app.err"));
  ASSERT_EQ(lt.wait(15000), 0) << read_file(dir.file("lt.err"));
  out->steal = steal_ns() - steal_before;
  out->err = read_file(dir.file("lt.err"));
  out->app_err = read_file(dir.file("app.err"));
  const auto lines = read_jsonl(log);
  const auto runs = events(lines, "run");
  ASSERT_EQ(runs.size(), 1u) << read_file(log);
  out->run = runs[0];
  ASSERT_EQ(out->run["swaps_dropped"], 0) << out->run.dump();
  for (const auto& s : events(lines, "swap")) {
    if (s["t_ns"].get<int64_t>() <= traced_ns) continue;
    if (out->swaps.empty()) out->tid = s["tid"].get<int64_t>();
    EXPECT_EQ(s["tid"].get<int64_t>(), out->tid) << s.dump();
    out->swaps.push_back(s["t_ns"].get<int64_t>());
  }
  for (const auto& s : events(lines, "stall"))
    if (s["start_ns"].get<int64_t>() > traced_ns) out->stalls.push_back(s);
  ASSERT_FALSE(out->swaps.empty()) << read_file(log);
  out->report = read_json(json);
}

// The janky frame between the app's swaps at `from` and `to`, give or take
// tol at each end (nullptr: none).
const nlohmann::json* janky_between(const nlohmann::json& janky, int64_t from,
                                    int64_t to, int64_t tol) {
  for (const auto& j : janky) {
    const int64_t s = j["start_ns"], e = s + j["duration_ns"].get<int64_t>();
    if (std::llabs(s - from) <= tol && std::llabs(e - to) <= tol) return &j;
  }
  return nullptr;
}

// A janky frame in a line: its length, missed vsyncs, phases and the
// longest span inside it.
std::string describe(const nlohmann::json& j) {
  std::string s = fmt::format("janky {:.1f} ms, missed {}, phases",
                              j["duration_ns"].get<int64_t>() / 1e6,
                              j["missed_vsyncs"].get<int64_t>());
  for (const auto& p : j["phases"])
    s += fmt::format(" {} {:.0f}us", p["target"].get<std::string>(),
                     p["duration_ns"].get<int64_t>() / 1e3);
  const auto& inside = j["cause"]["longest_inside"];
  if (inside.is_object())
    s += fmt::format("; longest inside {:.1f} ms {} (tid {})",
                     inside["duration_ns"].get<int64_t>() / 1e6,
                     inside["target"].get<std::string>(),
                     inside.value("tid", int64_t{0}));
  return s;
}

// Qt's own line for each frame it rendered (QSG_RENDER_TIMING=1):
// "Frame rendered with 'threaded' renderloop in ..." (Qt 5), "[render
// thread 0x...] syncAndRender: frame rendered in ..." (Qt 6); those the
// render thread wrote say "render thread".
struct RenderTiming {
  size_t frames = 0, on_render_thread = 0;
};
RenderTiming render_timing(const std::string& err) {
  RenderTiming t;
  size_t at = 0;
  while (at < err.size()) {
    size_t nl = err.find('\n', at);
    if (nl == std::string::npos) nl = err.size();
    const std::string line = err.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("qt.scenegraph.time.renderloop:", 0) != 0) continue;
    if (line.find("rame rendered") == std::string::npos) continue;
    ++t.frames;
    t.on_render_thread += line.find("render thread") != std::string::npos;
  }
  return t;
}

// The Qt major version and the render loop.
class QtQuickFrames
    : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

// -p PID and no option: each return of frameSwapped ends a frame on the
// thread that emitted it, begun at the previous return. Against the app's
// log: as many frames as it swapped while traced; each gap over 30 ms a
// janky frame from one swap to the next (2 ms; but a gap over two
// intervals in which nothing recorded ran, no stall, may start a new run
// instead, by the rule), its missed vsyncs those past 1.5 intervals,
// rounded up, its phases Qt Quick's polish, sync and render; the frame
// each stall ran in naming that GUI-thread dispatch as the longest span
// inside it; no janky frame where the app swapped within 20 ms. And the
// app's count against Qt's own.
TEST_P(QtQuickFrames, FrameSwappedEndsFramesAndTheStallIsTheCause) {
  const int qt = std::get<0>(GetParam());
  const bool basic = std::get<1>(GetParam()) == "basic";
  LT_REQUIRE_BPF();
  LT_REQUIRE_PYQT_QUICK(qt);
  TempDir dir;
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  QuickRun r;
  ASSERT_NO_FATAL_FAILURE(animate(dir, display, qt, basic, &r));
  const int64_t tol = kToleranceNs + r.steal;
  const std::string label =
      fmt::format("Qt {} {}", qt, std::get<1>(GetParam()));

  // The render loop the parameter asks for: the threaded one swaps on a
  // thread of its own.
  ASSERT_EQ(r.run["render_loop"], std::get<1>(GetParam())) << r.run.dump();
  const int64_t gui_tid = r.run["gui_tid"];
  EXPECT_EQ(r.tid == gui_tid, basic) << r.run.dump();

  EXPECT_NE(r.err.find(fmt::format("looptrace: profile qtquick{}: pid {} ", qt,
                                   r.pid)),
            std::string::npos)
      << r.err;

  // Qt's own count of the frames it rendered is the app's count of its
  // swaps (the whole run), on the same thread. (The threaded loops of Qt 5
  // and 6 write one line more: a sync before the window was exposed that
  // rendered nothing, "in 0ms, sync=0, render=0, swap=0".)
  const RenderTiming qsg = render_timing(r.app_err);
  const int64_t all_swaps = r.run["swaps"];
  EXPECT_LE(std::llabs(static_cast<int64_t>(qsg.frames) - all_swaps),
            3 + all_swaps / 50)
      << "QSG_RENDER_TIMING frames " << qsg.frames << ", app swaps "
      << all_swaps;
  EXPECT_EQ(qsg.on_render_thread, basic ? 0 : qsg.frames);

  // The app's gaps, swap to swap, while traced.
  const auto& swaps = r.swaps;
  ASSERT_GE(swaps.size(), 100u);
  ASSERT_GE(r.stalls.size(), 4u) << r.run.dump();

  // One thread's frames: the one that swapped.
  ASSERT_TRUE(r.report.contains("frames")) << r.err;
  const auto& frames = r.report["frames"];
  ASSERT_EQ(frames.size(), 1u) << frames.dump();
  const auto& t = frames[0];
  EXPECT_EQ(t["pid"], r.pid) << t.dump();
  EXPECT_EQ(t["tid"], r.tid) << t.dump();
  EXPECT_EQ(t["refresh_ns"], kIntervalNs) << t.dump();
  EXPECT_EQ(t["frozen"], 0) << t.dump();
  const int64_t count = t["count"];
  const int64_t app_count = static_cast<int64_t>(swaps.size());
  EXPECT_LE(std::llabs(count - app_count), 3 + app_count / 50)
      << "app swapped " << app_count << " while traced\n"
      << t.dump();
  const auto& janky = r.report["janky_frames"];
  EXPECT_EQ(r.report["janky_frames_omitted"], 0);
  EXPECT_EQ(t["janky"].get<size_t>(), janky.size()) << t.dump();

  std::cout << fmt::format(
      "{}: app swaps {} while traced ({} in all, Qt rendered {}), "
      "looptrace {} frames on tid {} ({}), {} janky; {} stalls; steal "
      "{:.1f} ms\n",
      label, app_count, all_swaps, qsg.frames, count, t["tid"].dump(),
      t["source"].dump(), janky.size(), r.stalls.size(), r.steal / 1e6);

  // Every gap over 30 ms is a janky frame from swap to swap.
  size_t long_gaps = 0;
  for (size_t i = 1; i < swaps.size(); ++i) {
    const int64_t from = swaps[i - 1], to = swaps[i], gap = to - from;
    if (gap <= kJankyGapNs) continue;
    ++long_gaps;
    const nlohmann::json* stall = nullptr;  // one that ran in the gap
    for (const auto& s : r.stalls)
      if (s["start_ns"].get<int64_t>() < to &&
          s["end_ns"].get<int64_t>() > from)
        stall = &s;
    const nlohmann::json* j = janky_between(janky, from, to, tol);
    std::cout << fmt::format("  gap {:.1f} ms at +{:.3f}s{}: {}\n", gap / 1e6,
                             (from - swaps[0]) / 1e9,
                             stall ? " (a stall ran in it)" : "",
                             j ? describe(*j) : "no janky frame");
    if (j == nullptr && stall == nullptr && gap > 2 * kIntervalNs) {
      // Nothing recorded ran in it: the rule makes it a new run.
      continue;
    }
    ASSERT_NE(j, nullptr) << "gap " << gap << " ns from " << from
                          << " not a janky frame:\n"
                          << janky.dump();
    const int64_t late = gap - 3 * kIntervalNs / 2;
    const int64_t rem = late % kIntervalNs;
    if (rem > kEdgeNs && rem < kIntervalNs - kEdgeNs) {
      EXPECT_EQ((*j)["missed_vsyncs"].get<int64_t>(),
                (late + kIntervalNs - 1) / kIntervalNs)
          << "gap " << gap << "\n"
          << j->dump();
    }
    EXPECT_EQ((*j)["tid"], r.tid) << j->dump();
    // Qt Quick's frame phases: polish on the GUI thread, sync and render
    // (the render thread's in the threaded loop).
    bool quick_phase = false;
    for (const auto& p : (*j)["phases"]) {
      const std::string target = p["target"];
      quick_phase = quick_phase || target == "polish" || target == "sync" ||
                    target == "render";
    }
    EXPECT_TRUE(quick_phase) << j->dump();
  }
  EXPECT_GE(long_gaps, r.stalls.size());

  // Each stall held up the frame it ran in (in the threaded loop it may
  // start while the render thread is still drawing the frame before: then
  // most of it runs in the next frame): that frame names the GUI thread's
  // dispatch of the timer event as the longest span inside it, covering
  // the stall's part in the frame (all of the stall when it ran wholly
  // inside).
  size_t whole = 0, across = 0;
  for (const auto& stall : r.stalls) {
    const int64_t ss = stall["start_ns"], se = stall["end_ns"];
    size_t k = 0;
    int64_t most = 0;
    for (size_t i = 1; i < swaps.size(); ++i) {
      const int64_t o = std::min(se, swaps[i]) - std::max(ss, swaps[i - 1]);
      if (o > most) most = o, k = i;
    }
    ASSERT_GT(k, 0u) << "no frame around the stall " << stall.dump();
    const int64_t from = swaps[k - 1], to = swaps[k];
    const nlohmann::json* j = janky_between(janky, from, to, tol);
    ASSERT_NE(j, nullptr) << "the frame the stall ran in is not janky: "
                          << stall.dump() << "\n"
                          << janky.dump();
    const bool wholly = ss >= from - tol && se <= to + tol;
    ++(wholly ? whole : across);
    const auto& inside = (*j)["cause"]["longest_inside"];
    ASSERT_TRUE(inside.is_object()) << j->dump();
    const int64_t is = inside["start_ns"],
                  ie = is + inside["duration_ns"].get<int64_t>();
    const int64_t lo = std::max(ss, from), hi = std::min(se, to);
    EXPECT_LE(is, lo + tol) << j->dump() << "\n" << stall.dump();
    EXPECT_GE(ie, hi - tol) << j->dump() << "\n" << stall.dump();
    if (wholly) {
      EXPECT_GE(ie - is, se - ss - kToleranceNs) << j->dump() << "\n"
                                                 << stall.dump();
    }
    EXPECT_EQ(inside["tid"], gui_tid) << j->dump();  // the GUI thread's
  }
  std::cout << fmt::format(
      "  stalls: {} wholly inside a janky frame, {} across two frames\n", whole,
      across);

  // No janky frame where the app swapped within 20 ms of the swap before:
  // each ends at the app's swap nearest to its end, begun at the one
  // before.
  for (const auto& j : janky) {
    const int64_t s = j["start_ns"], e = s + j["duration_ns"].get<int64_t>();
    size_t k = 1;
    for (size_t i = 2; i < swaps.size(); ++i)
      if (std::llabs(swaps[i] - e) < std::llabs(swaps[k] - e)) k = i;
    ASSERT_LE(std::llabs(swaps[k] - e), tol)
        << "no swap of the app's ends it: " << j.dump();
    EXPECT_LE(std::llabs(swaps[k - 1] - s), tol) << j.dump();
    const int64_t gap = swaps[k] - swaps[k - 1];
    if (gap <= kJankyGapNs) {  // not listed above
      std::cout << fmt::format("  gap {:.1f} ms at +{:.3f}s: {}\n", gap / 1e6,
                               (swaps[k - 1] - swaps[0]) / 1e9, describe(j));
    }
    EXPECT_GE(gap, kFineGapNs) << "janky, yet the app swapped " << gap / 1e6
                               << " ms after the swap before: " << j.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(
    QtQuick, QtQuickFrames,
    ::testing::Combine(::testing::Values(5, 6),
                       ::testing::Values(std::string("threaded"),
                                         std::string("basic"))),
    [](const ::testing::TestParamInfo<std::tuple<int, std::string>>& i) {
      return fmt::format("Qt{}_{}", std::get<0>(i.param), std::get<1>(i.param));
    });

}  // namespace
}  // namespace lt_test
