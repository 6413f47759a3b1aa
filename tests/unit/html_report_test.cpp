// The HTML report as a file: it fetches nothing, and the JSON it embeds
// parses and carries the spans, stacks, barriers and input events it was
// given, whatever their names contain. What the page draws is checked in a
// real browser (tests/integration/html_test.cpp).
#include "report/html_report.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "html_fixture.h"

namespace looptrace {
namespace {

using nlohmann::json;
namespace fx = html_fixture;

constexpr const char* kDataOpen =
    R"(<script type="application/json" id="looptrace-data">)";

std::string page(const fx::Fixture& f) {
  std::ostringstream os;
  Status st = write_html(os, f.found, f.ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return os.str();
}

// The text of the data element, exactly as the browser's parser would cut
// it: up to the first "</script>" after its start tag.
std::string data_text(const std::string& html) {
  size_t open = html.find(kDataOpen);
  if (open == std::string::npos) return "";
  size_t from = open + std::string(kDataOpen).size();
  size_t close = html.find("</script>", from);
  if (close == std::string::npos) return "";
  return html.substr(from, close - from);
}

json page_json(const std::string& html) {
  return json::parse(data_text(html));  // throws (fails the test) if cut
}

TEST(HtmlReport, FetchesNothing) {
  fx::Fixture f;
  std::string html = page(f);
  ASSERT_GT(html.size(), 1000u);
  for (const char* ref : {"http://", "https://", "src=", "<link", "url(",
                          "@import", "//cdn", "fonts."})
    EXPECT_EQ(html.find(ref), std::string::npos) << ref;
  // And the browser is told not to fetch anything either.
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

TEST(HtmlReport, EmbeddedJsonCarriesTheSpans) {
  fx::Fixture f;
  json d = page_json(page(f));
  const json& r = d["report"];
  // Every slow dispatch given, with its times and split.
  std::vector<const fx::SpanSpec*> want;
  for (const fx::SpanSpec& s : fx::span_specs())
    if (s.role == LT_ROLE_DISPATCH) want.push_back(&s);
  ASSERT_EQ(r["slow_dispatches"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const json& s = r["slow_dispatches"][i];
    EXPECT_EQ(s["tid"], want[i]->tid);
    EXPECT_EQ(s["start_ns"], fx::kT0 + want[i]->start_ms * fx::kMs);
    EXPECT_EQ(s["duration_ns"], want[i]->duration_ms * fx::kMs);
    EXPECT_EQ(s["cpu_ns"], want[i]->duration_ms * fx::kMs / 2);
    EXPECT_EQ(s["in_flight"], want[i]->in_flight);
  }
  EXPECT_EQ(r["slow_dispatches"][0]["target"], "refapp::busyLoop(int)");
  EXPECT_EQ(r["slow_dispatches"][1]["cut_short"], "exit");
  // The stuck stack, symbolized, innermost first.
  EXPECT_EQ(r["slow_dispatches"][0]["stack"],
            json({"refapp::busyLoop(int)+0x10",
                  "refapp::StallHandler::handleMessage(refapp::Message "
                  "const&)+0x8",
                  "refapp::Handler::dispatchMessage(refapp::Message&)+0x30",
                  "refapp::Looper::loop()+0x40", "main+0x10"}));
  ASSERT_EQ(r["slow_idle_handlers"].size(), 1u);
  EXPECT_EQ(r["slow_idle_handlers"][0]["target"],
            "refapp::IdleHandler::queueIdle()");
  ASSERT_EQ(r["slow_deliveries"].size(), 1u);
  EXPECT_EQ(r["slow_deliveries"][0]["lag_ns"], 20 * fx::kMs);
  EXPECT_EQ(r["threads"].size(), 4u);
  EXPECT_EQ(d["window"]["start_ns"], fx::kT0);
  EXPECT_EQ(d["window"]["end_ns"], fx::kT0 + fx::kTraced);
  // The full ring buffer, and what filled it.
  ASSERT_EQ(d["lost"].size(), 2u);
  EXPECT_EQ(d["lost"][1].get<std::string>().rfind("ring buffer filled by ", 0),
            0u)
      << d["lost"].dump();
}

// The spans kept only for the timeline are in the page as columns: each
// one's thread, start (a delta from the previous one's), duration and name.
TEST(HtmlReport, EverySpanOfTheTimelineIsInThePage) {
  fx::Fixture f;
  fx::add_fast_spans(f.found, 1000);
  json tl = page_json(page(f))["timeline"];
  ASSERT_EQ(tl["dur"].size(), 1000u);
  ASSERT_EQ(tl["start"].size(), 1000u);
  uint64_t t = fx::kT0;  // the window starts at the start of tracing
  const auto& threads = tl["threads"];
  for (size_t i = 0; i < 1000; ++i) {
    t += tl["start"][i].get<uint64_t>();
    const uint64_t step = (fx::kTraced - 100 * fx::kMs) / 1000;
    uint64_t want = i * step;
    if (want >= fx::kFastGapFrom * fx::kMs) want += 100 * fx::kMs;
    ASSERT_EQ(t, fx::kT0 + want) << i;
    ASSERT_EQ(tl["dur"][i], step / 2);
    ASSERT_EQ(threads[tl["thread"][i].get<size_t>()][1], fx::kFastTid);
    ASSERT_EQ(tl["roles"][tl["kind"][i].get<size_t>() & 3], "dispatch");
    ASSERT_EQ(tl["kind"][i].get<size_t>() >> 2, 0u) << "fast, ended";
    const std::string name = tl["targets"][tl["target"][i].get<size_t>()];
    ASSERT_NE(name.find(i % 2 ? "onTick" : "handleMessage"), std::string::npos)
        << i << " " << name;
  }
  EXPECT_EQ(tl["not_kept"], 0);
}

TEST(HtmlReport, FlameHasEverySampleFolded) {
  fx::Fixture f;
  json flame = page_json(page(f))["flame"];
  std::map<std::string, uint64_t> folded;
  for (const json& s : flame["stacks"]) {
    std::string line;
    for (const json& i : s["frames"])
      line += (line.empty() ? "" : ";") +
              flame["names"][i.get<size_t>()].get<std::string>();
    folded[line] += s["count"].get<uint64_t>();
  }
  const std::string base =
      "main+0x10;refapp::Looper::loop()+0x40;"
      "refapp::Handler::dispatchMessage(refapp::Message&)+0x30;";
  const std::string handle =
      "refapp::StallHandler::handleMessage(refapp::Message const&)+0x8;";
  std::map<std::string, uint64_t> want = {
      {base + handle + "refapp::busyLoop(int)+0x10", 20},
      {base + handle + "refapp::busyLoop(int)+0x24", 10},
      {base + "refapp::onTick(refapp::Message*)+0x12;nanosleep+0x4", 6},
      {base + fx::kEvilName + "+0x2", 4},
  };
  EXPECT_EQ(folded, want);
}

TEST(HtmlReport, BarriersAndInputEventsAreThere) {
  fx::Fixture f;
  json d = page_json(page(f));
  const json& r = d["report"];
  ASSERT_EQ(r["barriers"].size(), 2u);
  EXPECT_EQ(r["barriers"][0]["lifetime_ns"], 200 * fx::kMs);
  EXPECT_TRUE(r["barriers"][1]["removed_ns"].is_null());
  EXPECT_EQ(r["barriers"][1]["stalled_ns"], fx::kT0 + 900 * fx::kMs);
  EXPECT_EQ(r["barrier_summary"]["leaked"], 1);
  ASSERT_EQ(d["input_events"].size(), 2u);
  std::map<uint32_t, json> by_seq;
  for (const json& e : d["input_events"]) by_seq[e["seq"]] = e;
  EXPECT_EQ(by_seq[1]["arrival_ns"], fx::kT0 + 120 * fx::kMs);
  EXPECT_EQ(by_seq[1]["consumed_ns"], fx::kT0 + 160 * fx::kMs);
  EXPECT_TRUE(by_seq[2]["consumed_ns"].is_null());
  ASSERT_EQ(r["input_channels"].size(), 1u);
  size_t stages = 0;
  for (const auto& [name, p] : r["input_channels"][0]["stages"].items())
    stages += p.is_null() ? 0 : 1;
  EXPECT_EQ(stages, fx::kStageRows);
}

// Frames: per thread the columns the frame-duration chart draws (start
// from the window's start, duration, deadline after the start, missed
// vsyncs, janky) and the refresh interval its line is at; none without a
// frame probe.
TEST(HtmlReport, FramesAreThereForTheChart) {
  fx::Fixture f;
  EXPECT_TRUE(page_json(page(f))["frames"].is_null());
  const uint64_t refresh = 16'666'667;
  f.found.has_frames = true;
  FrameThread t;
  t.pid = t.tid = 7;
  t.refresh_ns = refresh;
  f.found.frames.threads.push_back(t);
  auto add = [&](uint64_t start_ms, uint64_t dur_ms) {
    FrameSlice s;
    s.pid = s.tid = 7;
    s.start_ns = fx::kT0 + start_ms * fx::kMs;
    s.duration_ns = dur_ms * fx::kMs;
    s.timing = time_frame(s.start_ns, s.start_ns, s.duration_ns, refresh);
    f.found.frames.timeline.push_back(s);
  };
  add(100, 5);
  add(120, 40);
  f.found.frames.timeline_omitted = 4;
  std::string html = page(f);
  EXPECT_NE(html.find("<section id=\"frames\">"), std::string::npos);
  json d = page_json(html);
  ASSERT_EQ(d["frames"].size(), 1u);
  const json& c = d["frames"][0];
  EXPECT_EQ(c["tid"], 7);
  EXPECT_EQ(c["refresh_ns"], refresh);
  const uint64_t t0 = d["window"]["start_ns"];
  EXPECT_EQ(c["start"],
            json({fx::kT0 + 100 * fx::kMs - t0, fx::kT0 + 120 * fx::kMs - t0}));
  EXPECT_EQ(c["dur"], json({5 * fx::kMs, 40 * fx::kMs}));
  EXPECT_EQ(c["deadline"], json({refresh, refresh}));
  EXPECT_EQ(c["janky"], json({0, 1}));
  EXPECT_EQ(c["missed"], json({0, 2}));
  EXPECT_EQ(d["frames_not_kept"], 4);
}

TEST(HtmlReport, ScriptEndInASymbolStaysData) {
  fx::Fixture f;
  std::string html = page(f);
  // Two elements end: the data and the page's script; the name in the data
  // does not end either.
  EXPECT_EQ(fx::occurrences(html, "</script>"), 2u);
  EXPECT_EQ(html.find("pwned'</script>"), std::string::npos);
  json d = page_json(html);
  bool found = false;
  for (const json& n : d["flame"]["names"])
    found = found || n == fx::kEvilName + "+0x2";
  EXPECT_TRUE(found) << "the name is intact once parsed";
}

TEST(HtmlReport, NamesThatAreNotUtf8DoNotStopTheReport) {
  fx::Fixture f;
  f.found.analysis.slow[0].span.comm = "bad\xff\xfe";
  json d = page_json(page(f));
  EXPECT_EQ(d["report"]["slow_dispatches"][0]["comm"],
            "bad\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(HtmlReport, EmptyRunStillMakesAPage) {
  Findings found;
  ReportContext ctx;
  std::ostringstream os;
  ASSERT_TRUE(write_html(os, found, ctx).ok());
  json d = page_json(os.str());
  EXPECT_TRUE(d["report"]["slow_dispatches"].empty());
  EXPECT_TRUE(d["flame"]["stacks"].empty());
  EXPECT_LT(d["window"]["start_ns"].get<uint64_t>(),
            d["window"]["end_ns"].get<uint64_t>());
}

TEST(HtmlReport, WindowWidensToItemsPastTheTracedTime) {
  fx::Fixture f;
  f.ctx.duration_ns = 500 * fx::kMs;  // shorter than the spans reach
  json d = page_json(page(f));
  EXPECT_EQ(d["window"]["end_ns"], fx::kT0 + 1000 * fx::kMs);
}

TEST(HtmlReport, AFailedStreamIsAnError) {
  fx::Fixture f;
  std::ostream broken(nullptr);
  EXPECT_FALSE(write_html(broken, f.found, f.ctx).ok());
}

}  // namespace
}  // namespace looptrace
