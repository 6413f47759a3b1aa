// The HTML report in a real browser: headless Chromium (Debian's
// `chromium`) opens the page, takes a screenshot and dumps the DOM its
// script built, and the test checks what a person would see: the timeline
// bars in their colors where the spans' times put them on the time axis,
// the flame graph's widest frame at its share of the samples, and the
// tables' rows. The findings are synthetic (tests/unit/html_fixture.h):
// every expected time and count comes from there, not from looptrace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../unit/html_fixture.h"
#include "harness.h"
#include "png.h"
#include "report/html_report.h"

namespace {

using namespace lt_test;
namespace fx = looptrace::html_fixture;

// The page's colors (user/report/html/page.html, COLOR; the legend shows
// them).
constexpr uint32_t kDispatch = 0x4e79a7;
constexpr uint32_t kIdle = 0x59a14f;
constexpr uint32_t kDelivery = 0xedc948;
constexpr uint32_t kInput = 0xb07aa1;
constexpr uint32_t kBarrier = 0xf28e2b;
constexpr uint32_t kStall = 0xe15759;
constexpr uint32_t kInFlight = 0x222222;
constexpr uint32_t kCut = 0xc00000;
constexpr uint32_t kTrack = 0xeef0f3;
constexpr uint32_t kFlameBg = 0xf5f3ea;
// Fast spans, drawn when the run kept them (--record-all).
constexpr uint32_t kFastDispatch = 0xa0cbe8;
// The marker at the end of a bar that did not end normally, in px.
constexpr int kMarkW = 4;

constexpr int kWidth = 1280, kHeight = 1400;
// Each bar end is rounded to a whole pixel by the page and drawn with crisp
// edges: an edge may sit one pixel either way of the exact position.
constexpr int kEdgeTolerancePx = 1;

std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string p = dir + "/chromium";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Skips when Chromium is missing; with LOOPTRACE_REQUIRE_BPF=1 (CI, where
// scripts/setup.sh installed it) that is a failure.
#define LT_REQUIRE_CHROMIUM(path) \
  LT_REQUIRE_INSTALLED(!(path).empty(), "chromium")

struct Box {
  int x0 = 0, y0 = 0, x1 = -1, y1 = -1;  // inclusive
  bool empty() const { return x1 < x0; }
  int width() const { return x1 - x0 + 1; }
};

// The smallest box holding every pixel of `color` inside `within` (the
// whole image by default).
Box bbox(const Image& img, uint32_t color, Box within = {}) {
  if (within.empty()) within = {0, 0, img.width - 1, img.height - 1};
  Box b{img.width, img.height, -1, -1};
  for (int y = within.y0; y <= within.y1; ++y)
    for (int x = within.x0; x <= within.x1; ++x)
      if (img.at(x, y) == color) {
        b.x0 = std::min(b.x0, x);
        b.y0 = std::min(b.y0, y);
        b.x1 = std::max(b.x1, x);
        b.y1 = std::max(b.y1, y);
      }
  return b;
}

using Runs = std::vector<std::pair<int, int>>;  // [from, to) in x

// Columns of `box` holding `color` anywhere, as runs: where a bar of that
// color is on the time axis, whichever lane it is in.
Runs column_runs(const Image& img, const Box& box, uint32_t color) {
  Runs runs;
  for (int x = box.x0; x <= box.x1; ++x) {
    bool has = false;
    for (int y = box.y0; y <= box.y1 && !has; ++y) has = img.at(x, y) == color;
    if (!has) continue;
    if (!runs.empty() && runs.back().second == x)
      runs.back().second = x + 1;
    else
      runs.push_back({x, x + 1});
  }
  return runs;
}

std::string show(const Runs& runs) {
  std::string s;
  for (auto [a, b] : runs)
    s += "[" + std::to_string(a) + "," + std::to_string(b) + ") ";
  return s;
}

void expect_runs(const Runs& got, const Runs& want, const char* what) {
  ASSERT_EQ(got.size(), want.size())
      << what << ": got " << show(got) << " want " << show(want);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].first, want[i].first, kEdgeTolerancePx)
        << what << " #" << i << ": got " << show(got) << " want " << show(want);
    EXPECT_NEAR(got[i].second, want[i].second, kEdgeTolerancePx)
        << what << " #" << i << ": got " << show(got) << " want " << show(want);
  }
}

// The two widest runs, in x order: a real run's two stalls. On a loaded
// machine other dispatches can be slow too (busy work preempted for tens
// of ms), never by the stalls' hundreds.
Runs two_widest(Runs runs) {
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return a.second - a.first > b.second - b.first;
  });
  if (runs.size() > 2) runs.resize(2);
  std::sort(runs.begin(), runs.end());
  return runs;
}

class HtmlInBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) return;
    html_ = dir_.file("report.html");
    std::ofstream out(html_);
    looptrace::Status st = looptrace::write_html(out, f_.found, f_.ctx);
    out.close();
    ASSERT_TRUE(st.ok() && out) << st.message();
  }

  // Chromium as root needs --no-sandbox; a private HOME and profile keep it
  // off the user's, and it is told not to reach the network on its own.
  RunResult chromium(const std::vector<std::string>& what) {
    std::vector<std::string> argv = {"env",
                                     "HOME=" + dir_.path(),
                                     chromium_,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-dev-shm-usage",
                                     "--no-first-run",
                                     "--disable-extensions",
                                     "--disable-background-networking",
                                     "--disable-sync",
                                     "--hide-scrollbars",
                                     "--force-device-scale-factor=1",
                                     "--force-color-profile=srgb",
                                     "--user-data-dir=" + dir_.file("profile"),
                                     "--window-size=" + std::to_string(kWidth) +
                                         "," + std::to_string(kHeight)};
    argv.insert(argv.end(), what.begin(), what.end());
    argv.push_back("file://" + html_);
    auto t0 = std::chrono::steady_clock::now();
    RunResult r = run(argv, 20000);
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    std::cerr << "chromium " << what[0] << ": " << s << " s\n";
    return r;
  }

  TempDir dir_;
  fx::Fixture f_;
  std::string chromium_;
  std::string html_;
};

// x of a time `ms` after the trace began, on a time axis from x0, `width`
// pixels for the whole traced second.
int x_at(const Box& axis, uint64_t ms) {
  return axis.x0 + static_cast<int>(
                       std::lround(static_cast<double>(ms) * axis.width() /
                                   static_cast<double>(fx::kTraced / fx::kMs)));
}

TEST_F(HtmlInBrowser, ScreenshotShowsTheTimelineAndTheFlameGraph) {
  LT_REQUIRE_CHROMIUM(chromium_);
  const std::string shot = dir_.file("shot.png");
  RunResult r = chromium({"--screenshot=" + shot});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string error;
  Image img = read_png(shot, &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(img.width, kWidth);
  ASSERT_EQ(img.height, kHeight);

  // The lanes' background spans the time axis: the whole traced second.
  const Box track = bbox(img, kTrack);
  ASSERT_FALSE(track.empty()) << "no timeline lane on the screenshot";
  ASSERT_GT(track.width(), kWidth / 2);
  auto X = [&](uint64_t ms) { return x_at(track, ms); };

  expect_runs(column_runs(img, track, kDispatch),
              {{X(100), X(150)},
               {X(250), X(300) - kMarkW},  // worker's, cut short
               {X(400), X(500)},
               {X(700), X(1000) - kMarkW}},  // still running at the end
              "dispatch bars");
  expect_runs(column_runs(img, track, kIdle), {{X(550), X(610)}}, "idle bar");
  expect_runs(column_runs(img, track, kDelivery), {{X(380), X(400)}},
              "delivery lag");
  expect_runs(column_runs(img, track, kInput),
              {{X(120), X(160)}, {X(420), X(1000) - kMarkW}}, "input events");
  expect_runs(column_runs(img, track, kBarrier),
              {{X(150), X(350)}, {X(800), X(900)}}, "barriers");
  expect_runs(column_runs(img, track, kStall), {{X(900), X(1000) - kMarkW}},
              "stalled barrier");
  expect_runs(column_runs(img, track, kCut), {{X(300) - kMarkW, X(300)}},
              "cut-short marker");
  expect_runs(column_runs(img, track, kInFlight), {{X(1000) - kMarkW, X(1000)}},
              "still-running markers");

  // Each thread has its own row: the worker's dispatch is below refapp's.
  const Box refapp_bar = bbox(img, kIdle, track);  // only refapp idles
  const Box worker_bar = bbox(img, kCut, track);
  EXPECT_GT(worker_bar.y0, refapp_bar.y1);

  // Flame graph: one band of frames per stack depth; a frame's width is
  // its share of the 40 samples.
  const Box flame = bbox(img, kFlameBg);
  ASSERT_FALSE(flame.empty()) << "no flame graph on the screenshot";
  std::vector<std::pair<int, int>> bands;  // [y0, y1)
  for (int y = flame.y0; y <= flame.y1; ++y) {
    bool any = false;
    for (int x = flame.x0; x <= flame.x1 && !any; ++x)
      any = img.at(x, y) != kFlameBg;
    if (!any) continue;
    if (!bands.empty() && bands.back().second == y)
      bands.back().second = y + 1;
    else
      bands.push_back({y, y + 1});
  }
  // all, main, loop, dispatchMessage, handleMessage | onTick | evil,
  // busyLoop | nanosleep.
  ASSERT_EQ(bands.size(), 6u);
  auto frames_in = [&](std::pair<int, int> band) {
    Runs runs;
    const int y = (band.first + band.second) / 2;
    for (int x = flame.x0; x <= flame.x1; ++x) {
      if (img.at(x, y) == kFlameBg) continue;
      if (!runs.empty() && runs.back().second == x)
        runs.back().second = x + 1;
      else
        runs.push_back({x, x + 1});
    }
    return runs;
  };
  const Runs root = frames_in(bands[0]);
  ASSERT_EQ(root.size(), 1u) << show(root);
  const double full = root[0].second - root[0].first;
  EXPECT_GT(full, flame.width() - 3);
  const Runs top = frames_in(bands[4]);
  ASSERT_EQ(top.size(), 3u) << show(top);
  const Runs leaf = frames_in(bands[5]);
  ASSERT_EQ(leaf.size(), 2u) << show(leaf);
  // busyLoop's samples at two offsets are one frame: 30 of 40 samples.
  // One pixel of rounding and the 1-pixel gap between frames, in 1200 px.
  constexpr double kShareTolerance = 0.005;
  EXPECT_NEAR((top[0].second - top[0].first) / full, 30.0 / 40,
              kShareTolerance);
  EXPECT_NEAR((top[1].second - top[1].first) / full, 6.0 / 40, kShareTolerance);
  EXPECT_NEAR((top[2].second - top[2].first) / full, 4.0 / 40, kShareTolerance);
  EXPECT_NEAR((leaf[0].second - leaf[0].first) / full, 30.0 / 40,
              kShareTolerance);
  EXPECT_EQ(leaf[0].first, root[0].first) << "the heaviest frame is leftmost";

  if (HasFailure())
    std::cerr << "screenshot: " << shot
              << " (LOOPTRACE_KEEP_TEST_FILES=1 keeps it)\n";
}

TEST_F(HtmlInBrowser, DomHasTheTablesRows) {
  LT_REQUIRE_CHROMIUM(chromium_);
  RunResult r = chromium({"--dump-dom"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // What the page shows, without its script (whose source holds the same
  // markup as strings).
  std::string dom = r.out;
  for (size_t at; (at = dom.find("<script")) != std::string::npos;) {
    size_t end = dom.find("</script>", at);
    ASSERT_NE(end, std::string::npos);
    dom.erase(at, end + 9 - at);
  }
  ASSERT_NE(dom.find("id=\"timeline-view\""), std::string::npos) << dom;
  EXPECT_EQ(dom.find("class=\"error\""), std::string::npos)
      << "the page's script failed: " << dom.substr(0, 2000);
  EXPECT_EQ(fx::occurrences(dom, "<tr class=\"thread-row\""),
            f_.found.analysis.threads.size());
  auto specs = [](uint32_t role) {
    size_t n = 0;
    for (const fx::SpanSpec& s : fx::span_specs()) n += s.role == role;
    return n;
  };
  EXPECT_EQ(
      fx::occurrences(dom, "<tr class=\"slow-row\" data-role=\"dispatch\""),
      specs(LT_ROLE_DISPATCH));
  EXPECT_EQ(fx::occurrences(dom, "<tr class=\"slow-row\" data-role=\"idle\""),
            specs(LT_ROLE_IDLE));
  EXPECT_EQ(fx::occurrences(dom, "<tr class=\"delivery-row\""),
            specs(LT_ROLE_DELIVERY));
  EXPECT_EQ(fx::occurrences(dom, "<tr class=\"stage-row\""), fx::kStageRows);
  EXPECT_EQ(fx::occurrences(dom, "<tr class=\"barrier-row\""),
            f_.found.barriers.barriers.size());
  EXPECT_NE(dom.find("refapp::IdleHandler::queueIdle()"), std::string::npos);
  // The busy stall's key line, the program's own innermost frame, marked.
  EXPECT_NE(dom.find("&gt; refapp::busyLoop(int)+0x"), std::string::npos);
  EXPECT_NE(dom.find("dispatch_latency_dur"), std::string::npos);
  EXPECT_NE(dom.find("ring buffer full: 3 records lost"), std::string::npos);
  // The symbol that holds "</script>" is shown as text and ran nothing.
  EXPECT_NE(dom.find("evil&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(dom.find("<title>looptrace report</title>"), std::string::npos);
  EXPECT_EQ(dom.find("pwned</title>"), std::string::npos);
}

// The page with 100 000 spans kept for the timeline (as --record-all
// keeps them): it draws within a second, spans narrower than a pixel drawn
// together, and they cover the time axis where the spans are.
constexpr size_t kManySpans = 100'000;
// The timeline's first drawing, as the page measures it.
constexpr double kMaxRenderMs = 1000;
// SVG elements the timeline may hold: about one per pixel column per lane,
// not one per span.
constexpr size_t kMaxRects = 10'000;

class HtmlManySpans : public HtmlInBrowser {
 protected:
  void SetUp() override {
    fx::add_fast_spans(f_.found, kManySpans);
    HtmlInBrowser::SetUp();
  }
};

TEST_F(HtmlManySpans, DrawsThemAllQuickly) {
  LT_REQUIRE_CHROMIUM(chromium_);
  const std::string shot = dir_.file("many.png");
  RunResult r = chromium({"--screenshot=" + shot});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string error;
  Image img = read_png(shot, &error);
  ASSERT_TRUE(error.empty()) << error;
  const Box track = bbox(img, kTrack);
  ASSERT_FALSE(track.empty()) << "no timeline lane on the screenshot";
  auto X = [&](uint64_t ms) { return x_at(track, ms); };
  // The fast thread's lane is full but for the gap: 100 000 bars of 4.5 us
  // every 9 us, a hundred to a pixel.
  expect_runs(column_runs(img, track, kFastDispatch),
              {{X(0), X(fx::kFastGapFrom)}, {X(fx::kFastGapTo), X(1000)}},
              "fast dispatches");
  // The slow bars are still there, on top.
  EXPECT_EQ(column_runs(img, track, kDispatch).size(), 4u);
  if (HasFailure())
    std::cerr << "screenshot: " << shot
              << " (LOOPTRACE_KEEP_TEST_FILES=1 keeps it)\n";

  RunResult dom = chromium({"--dump-dom"});
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_EQ(dom.out.find("class=\"error\""), std::string::npos)
      << "the page's script failed";
  const std::string attr = "data-render-ms=\"";
  const size_t at = dom.out.find(attr);
  ASSERT_NE(at, std::string::npos) << "the timeline was not drawn";
  const double ms = std::stod(dom.out.substr(at + attr.size()));
  std::cerr << "timeline of " << kManySpans << " spans drawn in " << ms
            << " ms\n";
  EXPECT_LT(ms, kMaxRenderMs);
  const size_t view = dom.out.find("id=\"timeline-view\"");
  const size_t end = dom.out.find("</svg>", view);
  ASSERT_NE(end, std::string::npos);
  EXPECT_LT(fx::occurrences(dom.out.substr(view, end - view), "<rect"),
            kMaxRects);
}

}  // namespace

namespace lt_test {
namespace {

// A real run: the reference app's two stalls, drawn where its own log says
// they were. The page's time scale is its own; what must hold is the
// geometry between the bars: their widths in the ratio of the logged
// durations, and their distance that of the logged start times.
TEST_F(HtmlInBrowser, RealRunBarsAreWhereTheAppSaysItStalled) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_CHROMIUM(chromium_);
  const std::string log = dir_.file("app.jsonl");
  html_ = dir_.file("real.html");
  RunResult rec = run({looptrace_bin(), "record", "--profile", "refapp", "-q",
                       "--html", html_, "--", refapp_bin(), "--rate", "100",
                       "--duration", "2500", "--stall", "busy:300@400",
                       "--stall", "sleep:600@1400", "--log", log});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  std::vector<nlohmann::json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  const std::string shot = dir_.file("real.png");
  RunResult r = chromium({"--screenshot=" + shot});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string error;
  Image img = read_png(shot, &error);
  ASSERT_TRUE(error.empty()) << error;
  const Box track = bbox(img, kTrack);
  ASSERT_FALSE(track.empty()) << "no timeline lane on the screenshot";
  Runs bars = two_widest(column_runs(img, track, kDispatch));
  ASSERT_EQ(bars.size(), 2u) << show(bars);
  auto ns = [&](size_t i, const char* k) {
    return static_cast<double>(stalls[i][k].get<uint64_t>());
  };
  const double px_per_ns =
      (bars[0].second - bars[0].first) / ns(0, "duration_ns");
  // Edges are whole pixels: 2 px on a width, 2 more on a distance.
  EXPECT_NEAR(bars[1].second - bars[1].first, ns(1, "duration_ns") * px_per_ns,
              3.0)
      << show(bars);
  EXPECT_NEAR(bars[1].first - bars[0].first,
              (ns(1, "start_ns") - ns(0, "start_ns")) * px_per_ns, 3.0)
      << show(bars);
  // And the scale is the traced time across the lane (2.5 s of app run,
  // a little more traced), not something else.
  EXPECT_NEAR(px_per_ns * 2.5e9, track.width(), track.width() * 0.2);
}

// A recording made with --record-all holds every span: its Perfetto trace
// has a slice for each dispatch the reference app counted on each of its
// threads, at the start the app logged for it, and its HTML page draws
// them, each where the app's clock puts it.
TEST_F(HtmlInBrowser, RecordAllRecordingShowsEveryDispatch) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_CHROMIUM(chromium_);
  const std::string log = dir_.file("app.jsonl"), rec = dir_.file("all.lt"),
                    trace = dir_.file("trace.json");
  html_ = dir_.file("all.html");
  // --log-slow 1 ns: the app logs every dispatch but its two stalls, which
  // have their own lines.
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "-q",
                     "--record-all",
                     "-o",
                     rec,
                     "--",
                     refapp_bin(),
                     "--rate",
                     "150",
                     "--duration",
                     "2500",
                     "--stall",
                     "busy:150@400",
                     "--stall",
                     "sleep:150@1900",
                     "--log-slow",
                     "0.000001",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunResult rep = run(
      {looptrace_bin(), "report", rec, "--perfetto", trace, "--html", html_});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;

  const std::vector<nlohmann::json> truth = read_jsonl(log);
  const std::vector<nlohmann::json> summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  std::map<int64_t, uint64_t> app_count;  // tid -> dispatches
  for (const auto& t : summary[0]["threads"])
    app_count[t["tid"].get<int64_t>()] = t["dispatches"].get<uint64_t>();
  std::vector<uint64_t> app_starts;  // of the main thread's dispatches
  const int64_t main_tid = summary[0]["threads"][0]["tid"];
  for (const char* what : {"slow", "stall"})
    for (const auto& e : events(truth, what))
      if (e["tid"] == main_tid)
        app_starts.push_back(e["start_ns"].get<uint64_t>());
  std::sort(app_starts.begin(), app_starts.end());
  ASSERT_GT(app_starts.size(), 300u);

  // The trace, read with nlohmann::json: dispatch slices by thread.
  const nlohmann::json t = read_json(trace);
  const double base = t["metadata"]["ts_base_ns"].get<double>();
  std::map<int64_t, uint64_t> slices;
  std::vector<uint64_t> starts;
  for (const auto& ev : t["traceEvents"]) {
    if (ev["ph"] != "X" || ev.value("cat", "") != "dispatch") continue;
    slices[ev["tid"].get<int64_t>()]++;
    if (ev["tid"] == main_tid)
      starts.push_back(static_cast<uint64_t>(
          std::llround(base + ev["ts"].get<double>() * 1000)));
  }
  for (const auto& [tid, n] : app_count)
    EXPECT_EQ(slices[tid], n) << "dispatch slices of tid " << tid;
  // Every logged dispatch has its slice where the app's clock puts it: the
  // app reads its clock inside the dispatch, after the probe at its entry
  // fired, so the slice starts at most 100 us after that reading and before
  // it by the probe's cost, or by a preemption or the host's steal in
  // between on a loaded machine (up to 4 ms: CI saw more than 2; dispatches
  // are 6.7 ms apart).
  std::sort(starts.begin(), starts.end());
  size_t matched = 0;
  for (uint64_t a : app_starts) {
    auto it = std::lower_bound(starts.begin(), starts.end(), a - 4'000'000);
    matched += it != starts.end() && *it < a + 100'000;
  }
  EXPECT_EQ(matched, app_starts.size());

  // The page: the two stalls are slow bars, every other dispatch a fast
  // one where the app's clock puts it on the scale the stalls give.
  const std::string shot = dir_.file("all.png");
  RunResult c = chromium({"--screenshot=" + shot});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  std::string error;
  Image img = read_png(shot, &error);
  ASSERT_TRUE(error.empty()) << error;
  const Box track = bbox(img, kTrack);
  ASSERT_FALSE(track.empty());
  const Runs slow = two_widest(column_runs(img, track, kDispatch));
  ASSERT_EQ(slow.size(), 2u) << show(slow);
  const std::vector<nlohmann::json> stalls = events(truth, "stall");
  ASSERT_EQ(stalls.size(), 2u);
  const double s0 = stalls[0]["start_ns"].get<double>();
  const double px_per_ns = (slow[1].first - slow[0].first) /
                           (stalls[1]["start_ns"].get<double>() - s0);
  // The fast bars: one column run per dispatch, or fewer where several
  // share a pixel (a backlog after a stall).
  const Runs fast = column_runs(img, track, kFastDispatch);
  EXPECT_GT(fast.size(), app_starts.size() / 3) << show(fast);
  auto drawn = [&](int x) {
    for (int dx = -2; dx <= 2; ++dx)
      for (int y = track.y0; y <= track.y1; ++y) {
        uint32_t px = img.at(std::clamp(x + dx, track.x0, track.x1), y);
        if (px == kFastDispatch || px == kDispatch) return true;
      }
    return false;
  };
  size_t missing = 0;
  for (uint64_t a : app_starts)
    if (!drawn(slow[0].first +
               static_cast<int>(std::lround((a - s0) * px_per_ns))))
      ++missing;
  EXPECT_EQ(missing, 0u) << "of " << app_starts.size() << " dispatches";
  if (HasFailure())
    std::cerr << "screenshot: " << shot
              << " (LOOPTRACE_KEEP_TEST_FILES=1 keeps it)\n";
}

}  // namespace
}  // namespace lt_test
