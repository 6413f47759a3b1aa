// Reports: targets rendered like Android's Looper printer, JSON fields and
// values, and a text report that fits 80 columns (checked against a golden
// file; LT_UPDATE_GOLDEN=1 rewrites it).
#include "report/report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/backlog.h"
#include "analysis/barrier.h"
#include "base/json_text.h"
#include "fake_symbolizer.h"
#include "profiles/key_expr.h"
#include "report/report_common.h"
#include "report/target.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1000000;

using fixture::FakeSymbolizer;

constexpr uint64_t kStallVtable = 0x5000;
constexpr uint64_t kWorkVtable = 0x5100;
constexpr uint64_t kOnTick = 0x1000;
constexpr uint64_t kBusyLoop = 0x2000;
constexpr uint64_t kHandleMessage = 0x2100;
constexpr uint64_t kDispatch = 0x2200;
constexpr uint64_t kLoop = 0x2300;
constexpr uint64_t kMain = 0x2400;
constexpr uint64_t kSleep = 0x2500;

FakeSymbolizer make_symbolizer() {
  return FakeSymbolizer({
      {kStallVtable, "vtable for refapp::StallHandler"},
      {kWorkVtable, "vtable for refapp::WorkHandler"},
      {kOnTick, "refapp::onTick(refapp::Message*)"},
      {kBusyLoop, "refapp::busyLoop(int)"},
      {kHandleMessage,
       "refapp::StallHandler::handleMessage(refapp::Message const&)"},
      {kDispatch, "refapp::Handler::dispatchMessage(refapp::Message&)"},
      {kLoop, "refapp::Looper::loop()"},
      {kMain, "main"},
      {kSleep,
       "std::this_thread::sleep_for<long, std::ratio<1l, 1000l> >("
       "std::chrono::duration<long, std::ratio<1l, 1000l> > const&)"},
  });
}

std::vector<ProbeDef> make_probes() {
  ProbeDef dispatch;
  dispatch.id = 0;
  dispatch.role = LT_ROLE_DISPATCH;
  dispatch.symbol = "*dispatchMessage*";
  dispatch.resolved_symbol =
      "refapp::Handler::dispatchMessage(refapp::Message&)";
  KeyDef target{"target", "*(*(arg1+16))", {}, KeyFormat::kVtable, {}};
  KeyDef callback{"callback", "*(arg1+24)", {}, KeyFormat::kSymbol, {}};
  KeyDef what{"what", "*(arg1+0)", {}, KeyFormat::kInt, {}};
  what.spec.nderef = 1;
  what.spec.size = 4;
  dispatch.keys = {target, callback, what};

  ProbeDef idle;
  idle.id = 1;
  idle.role = LT_ROLE_IDLE;
  idle.symbol = "*queueIdle*";
  idle.resolved_symbol = "refapp::IdleHandler::queueIdle()";
  return {dispatch, idle};
}

SpanEvent dispatch_span(uint64_t vtable, uint64_t callback, uint64_t what) {
  SpanEvent e;
  e.pid = 4242;
  e.tid = 4242;
  e.comm = "refapp";
  e.probe_id = 0;
  e.keys = {vtable + 0x10, callback, what, 0};
  return e;
}

TEST(FormatTarget, VtableAndWhat) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  EXPECT_EQ(format_target(dispatch_span(kStallVtable, 0, 7), probes[0], sym),
            "refapp::StallHandler what=7");
}

TEST(FormatTarget, CallbackIsSymbolized) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  EXPECT_EQ(
      format_target(dispatch_span(kWorkVtable, kOnTick, 3), probes[0], sym),
      "refapp::WorkHandler callback=refapp::onTick(refapp::Message*) what=3");
}

TEST(FormatTarget, FaultedKeysShowQuestionMark) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  SpanEvent e = dispatch_span(kStallVtable, kOnTick, 7);
  e.key_fault_mask = 1u << 0;
  EXPECT_EQ(format_target(e, probes[0], sym),
            "? callback=refapp::onTick(refapp::Message*) what=7");
  e.key_fault_mask = (1u << 1) | (1u << 2);
  EXPECT_EQ(format_target(e, probes[0], sym),
            "refapp::StallHandler callback=? what=?");
}

TEST(FormatTarget, IntKeysAreSignedAtTheirSize) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  // A 4-byte -1 read from memory; the upper half is not part of it.
  SpanEvent e = dispatch_span(kStallVtable, 0, 0xdeadbeefffffffffull);
  EXPECT_EQ(format_target(e, probes[0], sym), "refapp::StallHandler what=-1");
}

// An enum key shows the name of its value, or the number when its table
// has none; read at its width (u16) and sign.
TEST(FormatTarget, EnumKeysAreNamed) {
  FakeSymbolizer sym = make_symbolizer();
  ProbeDef qt;
  qt.label = "Qt event";
  KeyDef type{"type", "u16 *(arg1+16)", {}, KeyFormat::kEnum, {}};
  type.spec.nderef = 1;
  type.spec.size = 2;
  type.names = {{1, "Timer"}, {1000, "User"}};
  qt.keys = {type};
  SpanEvent e;
  e.keys = {0xabcd0000'0001ull, 0, 0, 0};
  EXPECT_EQ(format_target(e, qt, sym), "Qt event Timer");
  e.keys[0] = 1000;
  EXPECT_EQ(format_target(e, qt, sym), "Qt event User");
  e.keys[0] = 1001;
  EXPECT_EQ(format_target(e, qt, sym), "Qt event 1001");
  qt.keys[0].names[65535] = "MaxUser";
  e.keys[0] = 0xffff;
  EXPECT_EQ(format_target(e, qt, sym), "Qt event MaxUser");
}

// A str key shows the string read with the span, escaped; none: omitted.
TEST(FormatTarget, StringKeysShowTheirString) {
  FakeSymbolizer sym = make_symbolizer();
  ProbeDef glib;
  glib.label = "GLib timeout";
  KeyDef cb{"callback", "arg1", {}, KeyFormat::kSymbol, {}};
  KeyDef name{"name", "*(arg0+80)", {}, KeyFormat::kString, {}};
  // A due time is the kernel's input for delivery lag, not part of a name.
  KeyDef due{"due_us", "*(*(arg0+88)+16)", {}, KeyFormat::kInt,
             {},       KeyRole::kDueUs};
  glib.keys = {cb, name, due};
  SpanEvent e;
  e.keys = {kOnTick, 0x5000, 12345678, 0};
  e.key_str = "stall-0";
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout refapp::onTick(refapp::Message*) name=stall-0");
  e.key_str.clear();
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout refapp::onTick(refapp::Message*)");
  e.key_str = "a\nb";
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout refapp::onTick(refapp::Message*) name=a\\nb");
  // Longer than the record holds: the kernel flags it, the name says so.
  e.key_str = "[gtk+] gdk_frame_clock_paint_idle";
  e.flags = LT_SPAN_KEY_STR_CUT;
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout refapp::onTick(refapp::Message*) "
            "name=[gtk+] gdk_frame_clock_paint_idle…");
}

// A Python callable the kernel found (a pyfunc key) names the span in the
// callback's place; where there is none the callback names it.
TEST(FormatTarget, APythonCallableTakesTheCallbacksPlace) {
  constexpr uint64_t kPyStall = 0xfe00'0000'0000'0007ull;
  FakeSymbolizer sym({{kOnTick, "refapp::onTick(refapp::Message*)"},
                      {kPyStall, "App.stall (glib_loop.py:161)"}});
  ProbeDef glib;
  glib.label = "GLib timeout";
  KeyDef cb{"callback", "arg1", {}, KeyFormat::kSymbol, {}};
  KeyDef name{"name", "*(arg0+80)", {}, KeyFormat::kString, {}};
  KeyDef py{"python", "*(arg2+8)", {}, KeyFormat::kPyFunc, {}};
  glib.keys = {cb, name, py};
  SpanEvent e;
  e.keys = {kOnTick, 0x5000, kPyStall, 0};
  e.key_str = "stall-0";
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout App.stall (glib_loop.py:161) name=stall-0");
  e.keys[2] = 0;  // no Python function there
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout refapp::onTick(refapp::Message*) name=stall-0");
  e.key_fault_mask = 4;
  EXPECT_EQ(format_target(e, glib, sym),
            "GLib timeout refapp::onTick(refapp::Message*) name=stall-0");
}

TEST(FormatTarget, UnknownPointersInHex) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  SpanEvent e = dispatch_span(0x9000, 0x9900, 1);
  EXPECT_EQ(format_target(e, probes[0], sym), "0x9010 callback=0x9900 what=1");
}

TEST(FormatTarget, OffsetsInNamesAreStripped) {
  // A symbolizer that bakes the offset into the name.
  class Baked : public Symbolizer {
   public:
    Frame symbolize(uint32_t, uint64_t addr) override {
      Frame f;
      f.addr = addr;
      f.function = "vtable for ns::Foo+0x10";
      return f;
    }
  } sym;
  std::vector<ProbeDef> probes = make_probes();
  EXPECT_EQ(format_target(dispatch_span(0x1, 0, 2), probes[0], sym),
            "ns::Foo what=2");
}

TEST(FormatTarget, HexKeysAndNoKeys) {
  FakeSymbolizer sym = make_symbolizer();
  ProbeDef p;
  p.resolved_symbol = "g_main_dispatch";
  SpanEvent e;
  EXPECT_EQ(format_target(e, p, sym), "g_main_dispatch");
  p.keys = {{"source", "arg0", {}, KeyFormat::kHex, {}},
            {"prio", "arg1", {}, KeyFormat::kInt, {}}};
  e.keys = {0x55aa00, 200, 0, 0};
  EXPECT_EQ(format_target(e, p, sym), "0x55aa00 prio=200");
}

// A run with one slow dispatch (stuck in busyLoop), one nested slow
// dispatch without samples, one slow idle handler, and a lost record.
struct Fixture {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  DispatchAnalysis analysis;
  ReportContext ctx;

  Fixture() {
    const uint64_t t0 = 1000 * 1000 * kMs;  // 1000 s after boot
    DispatchOptions opts;
    opts.slow_ns = {16 * kMs, 50 * kMs};
    DispatchAnalyzer a(opts);

    std::vector<uint64_t> stuck = {kBusyLoop + 0x1a, kHandleMessage + 0x44,
                                   kDispatch + 0x30, kLoop + 0x80,
                                   kMain + 0x12};
    std::vector<uint64_t> other = {kSleep + 0x8, kHandleMessage + 0x50,
                                   kDispatch + 0x30, kLoop + 0x80,
                                   kMain + 0x12};
    for (int i = 0; i < 10; ++i) {
      SampleEvent s;
      s.pid = s.tid = 4242;
      s.span_id = 5;
      s.ts_ns = t0 + 1234 * kMs + (i + 1) * 10 * kMs;
      s.stack.frames = i < 7 ? stuck : other;
      a.consume(s);
    }
    SpanEvent slow = dispatch_span(kStallVtable, 0, 7);
    slow.span_id = 5;
    slow.start_ns = t0 + 1234 * kMs;
    slow.duration_ns = 120 * kMs + 345678;
    slow.cpu_ns = 84 * kMs;
    a.consume(slow);

    SpanEvent nested = dispatch_span(kWorkVtable, kOnTick, 3);
    nested.span_id = 9;
    nested.depth = 1;
    nested.start_ns = t0 + 2500 * kMs;
    nested.duration_ns = 17 * kMs;
    nested.cpu_ns = 1 * kMs;
    a.consume(nested);

    SpanEvent idle;
    idle.pid = idle.tid = 4242;
    idle.comm = "refapp";
    idle.probe_id = 1;
    idle.role = LT_ROLE_IDLE;
    idle.span_id = 12;
    idle.start_ns = t0 + 3000 * kMs;
    idle.duration_ns = 75 * kMs;
    idle.cpu_ns = 75 * kMs;
    a.consume(idle);

    SampleEvent orphan;
    orphan.pid = orphan.tid = 4242;
    orphan.span_id = 99;
    orphan.ts_ns = t0 + 4000 * kMs;
    a.consume(orphan);

    ThreadHistogram h;
    h.pid = h.tid = 4242;
    h.comm = "refapp";
    for (int i = 0; i < 998; ++i) histogram_add(h, 2 * kMs);
    histogram_add(h, slow.duration_ns);
    histogram_add(h, nested.duration_ns);
    ThreadHistogram hi;
    hi.pid = hi.tid = 4242;
    hi.comm = "refapp";
    hi.probe_id = 1;
    hi.role = LT_ROLE_IDLE;
    for (int i = 0; i < 40; ++i) histogram_add(hi, 300000);
    histogram_add(hi, idle.duration_ns);

    Counters c;
    c.bpf[LT_CNT_RB_FULL] = 12;
    c.bpf[LT_CNT_SAMPLES] = 11;
    analysis = a.finish({h, hi}, c);

    ctx.probes = &probes;
    ctx.symbolizer = &sym;
    ctx.slow_ns = opts.slow_ns;
    ctx.duration_ns = 10 * 1000 * kMs;
    ctx.command_line = "looptrace trace -p 4242 --slow 16ms";
    ctx.start_ns = t0;
  }
};

TEST(JsonReport, FieldsAndValues) {
  Fixture f;
  nlohmann::json j = to_json(f.analysis, f.ctx);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["duration_ns"], 10 * 1000 * kMs);
  EXPECT_EQ(j["command"], "looptrace trace -p 4242 --slow 16ms");
  EXPECT_EQ(j["slow_threshold_ns"]["dispatch"], 16 * kMs);
  EXPECT_EQ(j["slow_threshold_ns"]["idle"], 50 * kMs);

  ASSERT_EQ(j["threads"].size(), 2u);
  const nlohmann::json& t = j["threads"][0];
  EXPECT_EQ(t["pid"], 4242);
  EXPECT_EQ(t["tid"], 4242);
  EXPECT_EQ(t["comm"], "refapp");
  EXPECT_EQ(t["role"], "dispatch");
  EXPECT_EQ(t["count"], 1000);
  EXPECT_EQ(t["slow_count"], 2);
  EXPECT_EQ(t["max_ns"], 120 * kMs + 345678);
  for (const char* k : {"p50_ns", "p90_ns", "p99_ns", "sum_ns"})
    EXPECT_TRUE(t.contains(k)) << k;
  EXPECT_EQ(j["threads"][1]["role"], "idle");

  ASSERT_EQ(j["slow_dispatches"].size(), 2u);
  const nlohmann::json& s = j["slow_dispatches"][0];
  EXPECT_EQ(s["pid"], 4242);
  EXPECT_EQ(s["start_ns"], 1000 * 1000 * kMs + 1234 * kMs);
  EXPECT_EQ(s["duration_ns"], 120 * kMs + 345678);
  EXPECT_EQ(s["cpu_ns"], 84 * kMs);
  EXPECT_EQ(s["target"], "refapp::StallHandler what=7");
  EXPECT_EQ(s["keys"]["target"], "refapp::StallHandler");
  EXPECT_TRUE(s["keys"]["callback"].is_null());
  EXPECT_EQ(s["keys"]["what"], 7);
  EXPECT_EQ(s["depth"], 0);
  EXPECT_EQ(s["samples"], 10);
  ASSERT_EQ(s["stack"].size(), 5u);
  EXPECT_EQ(s["stack"][0], "refapp::busyLoop(int)+0x1a");
  EXPECT_EQ(s["stack"][4], "main+0x12");
  ASSERT_EQ(s["stacks"].size(), 2u);
  EXPECT_EQ(s["stacks"][0]["count"], 7);
  EXPECT_EQ(s["stacks"][0]["frames"], s["stack"]);
  EXPECT_EQ(s["stacks"][1]["count"], 3);

  const nlohmann::json& n = j["slow_dispatches"][1];
  EXPECT_EQ(n["depth"], 1);
  EXPECT_EQ(n["keys"]["callback"], "refapp::onTick(refapp::Message*)");
  EXPECT_EQ(n["samples"], 0);
  EXPECT_TRUE(n["stack"].empty());

  ASSERT_EQ(j["slow_idle_handlers"].size(), 1u);
  EXPECT_EQ(j["slow_idle_handlers"][0]["target"],
            "refapp::IdleHandler::queueIdle()");

  const nlohmann::json& lost = j["lost"];
  EXPECT_EQ(lost["ringbuf_full"], 12);
  EXPECT_EQ(lost["orphan_samples"], 1);
  for (const char* k :
       {"hist_full", "depth_overflow", "unmatched_returns", "abandoned",
        "storage_fail", "key_faults", "stack_failures", "watch_full",
        "decode_errors", "hook_misses", "sample_overflow"})
    EXPECT_EQ(lost[k], 0) << k;
  uint64_t spans = 0;
  for (const auto& t : j["threads"]) spans += t["count"].get<uint64_t>();
  EXPECT_GT(spans, 0u);
  EXPECT_EQ(j["totals"]["spans"], spans) << "completed spans of all threads";
  EXPECT_EQ(j["totals"]["samples"], 11);
}

TEST(JsonReport, FramesAreSymbolizedOncePerAddress) {
  Fixture f;
  to_json(f.analysis, f.ctx);
  // 7 distinct frame addresses (the two stacks share 3 of 5 frames) and 3
  // key lookups (two vtables, one callback), each made once.
  EXPECT_EQ(f.sym.calls, 7 + 3);
}

std::string golden_path(const char* name) {
  return std::string(LT_TEST_DATA_DIR) + "/report/" + name;
}

TEST(TextReport, MatchesGoldenAndFits80Columns) {
  Fixture f;
  std::ostringstream os;
  write_text_report(os, f.analysis, f.ctx);
  std::string text = os.str();

  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(line.size(), 80u) << line;

  const std::string path = golden_path("basic.txt");
  if (const char* u = std::getenv("LT_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << text;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << " (LT_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str());
}

TEST(TextReport, KeyLinesArePresent) {
  Fixture f;
  std::ostringstream os;
  write_text_report(os, f.analysis, f.ctx);
  std::string text = os.str();
  EXPECT_NE(text.find("stuck here: 7 of 10 samples"), std::string::npos);
  EXPECT_NE(text.find("refapp::StallHandler what=7"), std::string::npos);
  EXPECT_NE(text.find("+ 1 other stack (3 samples)"), std::string::npos);
  EXPECT_NE(text.find("ring buffer full: 12 records lost (raise "
                      "--ringbuf-size)\n    filled by 1 samples/s\n"),
            std::string::npos);
  EXPECT_NE(text.find("depth 1"), std::string::npos);
  // With the size from the session header (recordings before it: none).
  f.analysis.ringbuf_bytes = 8u << 20;
  std::ostringstream sized;
  write_text_report(sized, f.analysis, f.ctx);
  EXPECT_NE(sized.str().find("ring buffer full: 12 records lost in 8M (raise "
                             "--ringbuf-size)"),
            std::string::npos);
  // What filled it: the floods' rates over the trace.
  f.analysis.counters.bpf[LT_CNT_IO] = 3'000'000;
  f.analysis.counters.bpf[LT_CNT_SAMPLES] = 1'000;
  f.ctx.duration_ns = 2'000'000'000;
  std::ostringstream rated;
  write_text_report(rated, f.analysis, f.ctx);
  EXPECT_NE(rated.str().find("    filled by 1.5M input messages/s, 500 "
                             "samples/s\n"),
            std::string::npos)
      << rated.str();
}

// A loop's waits (wait probe) and the wakes that ended them (wake probe):
// a table of their own, idle time apart from the spans; the JSON's
// threads carry them, its span total does not.
TEST(TextReport, LoopWaitsAreIdleTimeApartFromSpans) {
  std::vector<ProbeDef> probes = make_probes();
  DispatchOptions opts;
  opts.slow_ns = {16 * kMs, 50 * kMs};
  DispatchAnalyzer a(opts);
  ThreadHistogram d, w, k;
  d.pid = w.pid = k.pid = 4194304;
  d.tid = w.tid = k.tid = 4194303;
  d.comm = w.comm = k.comm = "a-very-long-com";
  for (int i = 0; i < 5; ++i) histogram_add(d, 2 * kMs);
  w.probe_id = 3;
  w.role = LT_ROLE_WAIT;
  for (int i = 0; i < 4; ++i) histogram_add(w, 2000 * kMs);
  k.probe_id = 4;
  k.role = LT_ROLE_WAKE;
  for (int i = 0; i < 3; ++i) histogram_add(k, 50'000);
  DispatchAnalysis r = a.finish({d, w, k}, Counters{});
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.slow_ns = opts.slow_ns;
  ctx.duration_ns = 10 * 1000 * kMs;
  std::ostringstream os;
  write_text_report(os, r, ctx);
  const std::string text = os.str();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(line.size(), 80u) << line;
  const size_t at = text.find("LOOP WAITS BY THREAD");
  ASSERT_NE(at, std::string::npos) << text;
  const size_t row = text.find("4194304/4194303", at);
  ASSERT_NE(row, std::string::npos) << text;
  const std::string line = text.substr(row, text.find('\n', row) - row);
  // 4 waits, 8 s idle of 10 s traced, 3 ended by a wake 50us after it.
  EXPECT_NE(line.find("       4   8.00s  80.0%      3"), std::string::npos)
      << line;
  EXPECT_NE(line.find("50.0us"), std::string::npos) << line;
  nlohmann::json j = to_json(r, ctx);
  EXPECT_EQ(j["totals"]["spans"], 5);
  std::set<std::string> roles;
  for (const auto& t : j["threads"]) roles.insert(t["role"]);
  EXPECT_EQ(roles, (std::set<std::string>{"dispatch", "wait", "wake"}));
}

TEST(TextReport, LostNoneAndLongLinesCut) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  DispatchOptions opts;
  opts.slow_ns = {16 * kMs, 50 * kMs};
  DispatchAnalyzer a(opts);
  SampleEvent s;
  s.pid = 4194304;
  s.tid = 4194303;
  s.span_id = 1;
  s.ts_ns = 5;
  for (int i = 0; i < 20; ++i) s.stack.frames.push_back(kSleep + i);
  a.consume(s);
  SpanEvent e = dispatch_span(kStallVtable, kOnTick, -123456789);
  e.pid = 4194304;
  e.tid = 4194303;
  e.comm = "a-very-long-com";  // 15, as long as a comm gets
  e.span_id = 1;
  e.duration_ns = 1234 * 1000 * kMs;
  e.cpu_ns = 1234 * 1000 * kMs;
  e.depth = 7;
  a.consume(e);
  ThreadHistogram h;
  h.pid = e.pid;
  h.tid = e.tid;
  h.comm = e.comm;
  histogram_add(h, e.duration_ns);
  DispatchAnalysis r = a.finish({h}, Counters{});

  ReportContext ctx;
  ctx.probes = &probes;
  ctx.symbolizer = &sym;
  ctx.slow_ns = opts.slow_ns;
  ctx.command_line = std::string(200, 'x');
  std::ostringstream os;
  write_text_report(os, r, ctx);
  std::string text = os.str();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(line.size(), 80u) << line;
  EXPECT_NE(text.find("\nlost: none\n"), std::string::npos);
  EXPECT_NE(text.find("... 8 more frames"), std::string::npos) << text;
}

// A stack whose Python frames were cut at LT_MAX_PYFRAMES says so in its
// own words, under its frames even when some are left out; a native walk
// cut short keeps its line. The JSON marks both truncated and the Python
// one python_cut.
TEST(TextReport, APythonCutIsNotANativeCut) {
  FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  DispatchOptions opts;
  opts.slow_ns = {16 * kMs, 50 * kMs};
  DispatchAnalyzer a(opts);
  for (uint64_t id : {1, 2}) {
    SpanEvent e = dispatch_span(kStallVtable, kOnTick, id);
    SampleEvent s;
    s.pid = e.pid;
    s.tid = e.tid;
    s.span_id = id;
    s.ts_ns = id * 1000 * kMs + 5 * kMs;
    if (id == 1) {
      for (int i = 0; i < 20; ++i) s.stack.frames.push_back(kBusyLoop + i);
      s.stack.python_cut = true;
    } else {
      s.stack.frames = {kSleep, kHandleMessage, kDispatch};
      s.stack.truncated = true;
    }
    a.consume(s);
    e.span_id = id;
    e.start_ns = id * 1000 * kMs;
    e.duration_ns = 100 * kMs;
    a.consume(e);
  }
  DispatchAnalysis r = a.finish({}, Counters{});
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.symbolizer = &sym;
  ctx.slow_ns = opts.slow_ns;
  std::ostringstream os;
  write_text_report(os, r, ctx);
  const std::string text = os.str();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + 1))
      ++n;
    return n;
  };
  const std::string python = fmt::format(
      "\n      ... 8 more frames\n      (Python stack cut: deeper than {} "
      "frames, the outermost not read)\n",
      LT_MAX_PYFRAMES);
  EXPECT_EQ(count(python), 1u) << text;
  EXPECT_EQ(count("Python stack cut"), 1u) << text;
  EXPECT_EQ(count("\n      (stack cut here: its callers were not read or "
                  "not trusted)\n"),
            1u)
      << text;

  nlohmann::json j = to_json(r, ctx);
  ASSERT_EQ(j["slow_dispatches"].size(), 2u);
  for (const auto& span : j["slow_dispatches"]) {
    ASSERT_EQ(span["stacks"].size(), 1u);
    const auto& st = span["stacks"][0];
    EXPECT_EQ(st["truncated"], true) << st.dump();
    if (st["frames"].size() == 20u) {
      EXPECT_EQ(st["python_cut"], true) << st.dump();
    } else {
      EXPECT_FALSE(st.contains("python_cut")) << st.dump();
    }
  }
}

// Names the traced process chose (its thread's name, a symbol of its
// binary) reach the terminal escaped: an ESC[2J cleared the screen, a
// newline forged a report line; bytes that are not UTF-8 went out raw.
TEST(TextReport, HostileNamesAreEscaped) {
  const uint64_t kEvil = 0x2600;
  FakeSymbolizer sym({{kStallVtable, "vtable for refapp::StallHandler"},
                      {kEvil, "evil\x1b[2J\nlost: none\xff"}});
  std::vector<ProbeDef> probes = make_probes();
  DispatchOptions opts;
  opts.slow_ns = {16 * kMs, 50 * kMs};
  DispatchAnalyzer a(opts);
  SpanEvent e = dispatch_span(kStallVtable, kEvil, 1);
  e.comm = "\x1b]0;pwn\x07\xff\xfe";
  e.span_id = 1;
  e.duration_ns = 100 * kMs;
  a.consume(e);
  ThreadHistogram h;
  h.pid = e.pid;
  h.tid = e.tid;
  h.comm = e.comm;
  histogram_add(h, e.duration_ns);
  DispatchAnalysis r = a.finish({h}, Counters{});
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.symbolizer = &sym;
  ctx.slow_ns = opts.slow_ns;
  std::ostringstream os;
  write_text_report(os, r, ctx);
  const std::string text = os.str();
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (u >= 0x20 && u != 0x7f && u != 0xff && u != 0xfe))
        << "byte " << static_cast<int>(u) << " in:\n"
        << text;
  }
  EXPECT_NE(text.find("callback=evil\\x1b[2J\\nlost: none\\xff"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\\x1b]0;pwn\\x07\\xff\\xfe"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nlost: none\\xff"), std::string::npos) << text;
  // The JSON report of the same run is valid UTF-8 (it parses back).
  std::string json = json_text(to_json(r, ctx));
  EXPECT_FALSE(nlohmann::json::parse(json, nullptr, false).is_discarded())
      << json;
}

// A sample goes to the innermost span running: an outer span whose time
// was all in a nested one has none of its own, and says where they are
// (GDK's event source dispatching a GTK key press, in meld).
TEST(TextReport, AnOuterSpanSaysItsSamplesAreInTheNestedOne) {
  DispatchAnalysis a;
  auto add = [&a](uint32_t depth, uint64_t start, uint64_t dur,
                  uint32_t samples) {
    SlowSpan s;
    s.span.pid = s.span.tid = 7;
    s.span.comm = "meld";
    s.span.role = LT_ROLE_DISPATCH;
    s.span.depth = depth;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    s.nsamples = samples;
    if (samples) {
      StackGroup g;
      g.frames = {0x1234};
      g.count = samples;
      s.stacks.push_back(g);
    }
    a.slow.push_back(s);
  };
  add(0, 100 * kMs, 180 * kMs, 0);
  add(1, 101 * kMs, 178 * kMs, 166);
  add(0, 400 * kMs, 50 * kMs, 0);  // nothing nested: no samples at all
  ReportContext ctx;
  ctx.slow_ns = {16 * kMs, 16 * kMs};
  ctx.start_ns = 1;
  std::ostringstream os;
  write_text_report(os, a, ctx);
  const std::string out = os.str();
  EXPECT_NE(out.find("    no stack samples of its own: 166 in the nested "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" (#2)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("    no stack samples\n"), std::string::npos) << out;
}

// A blocking place's time (switch to wakeup) and the split's blocked time
// (the kernel's counters) differ by microseconds; the place is never shown
// as more than the whole.
TEST(TextReport, ABlockingPlaceIsNoMoreThanTheBlockedTime) {
  DispatchAnalysis a;
  SlowSpan s;
  s.span.pid = s.span.tid = 7;
  s.span.comm = "meld";
  s.span.role = LT_ROLE_DISPATCH;
  s.span.start_ns = 100 * kMs;
  s.span.duration_ns = 16'700'000;
  s.span.cpu_ns = 14'540'000;  // blocked: 2.16 ms
  BlockGroup g;
  g.frames = {0x1234};
  g.count = 10;
  g.blocked_ns = 2'170'000;
  s.blocked.push_back(g);
  a.slow.push_back(s);
  ReportContext ctx;
  ctx.slow_ns = {16 * kMs, 16 * kMs};
  ctx.start_ns = 1;
  std::ostringstream os;
  write_text_report(os, a, ctx);
  EXPECT_NE(os.str().find("    blocked here: 2.16ms of 2.16ms (10 times)"),
            std::string::npos)
      << os.str();
}

TEST(TextReport, EmptyRun) {
  ReportContext ctx;
  ctx.slow_ns = {16 * kMs, 16 * kMs};
  std::ostringstream os;
  write_text_report(os, DispatchAnalysis{}, ctx);
  EXPECT_NE(os.str().find("no spans"), std::string::npos);
  EXPECT_NE(os.str().find("looptrace check PROFILE"), std::string::npos);
  EXPECT_NE(os.str().find("lost: none"), std::string::npos);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// A slow delivery names what ran on its thread between due and start.
TEST(DeliveryReport, RunningInsteadAndFields) {
  const uint64_t ms = 1'000'000;
  DispatchAnalysis a;
  auto add = [&a](uint32_t tid, uint32_t role, uint64_t start, uint64_t dur) {
    SlowSpan s;
    s.span.pid = 1;
    s.span.tid = tid;
    s.span.role = role;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    a.slow.push_back(s);
  };
  add(1, LT_ROLE_DISPATCH, 100 * ms, 40 * ms);  // overlaps [110, 145)
  add(2, LT_ROLE_DISPATCH, 100 * ms, 40 * ms);  // another thread
  add(1, LT_ROLE_IDLE, 150 * ms, 30 * ms);      // after the dispatch start
  add(1, LT_ROLE_DELIVERY, 110 * ms, 35 * ms);  // due 110, started 145
  std::vector<ProbeDef> probes(1);
  probes[0].resolved_symbol = "Loop::dispatch(Msg*)";
  ReportContext ctx;
  ctx.probes = &probes;
  explain_slow_spans(a);  // as the analysis does
  nlohmann::json j = to_json(a, ctx);
  ASSERT_EQ(j["slow_deliveries"].size(), 1u);
  const auto& d = j["slow_deliveries"][0];
  EXPECT_EQ(d["due_ns"], 110 * ms);
  EXPECT_EQ(d["start_ns"], 145 * ms);
  EXPECT_EQ(d["lag_ns"], 35 * ms);
  ASSERT_EQ(d["running_instead"].size(), 1u) << d.dump();
  const auto& instead =
      j["blamed_spans"][d["running_instead"][0].get<size_t>()];
  EXPECT_EQ(instead["start_ns"], 100 * ms);
  EXPECT_EQ(instead["role"], "dispatch");
  EXPECT_EQ(j["slow_dispatches"].size(), 2u);
}

// Nested slow spans: a delivery is behind both the outer and the inner one
// when both ran past its due time, and behind neither once both ended.
TEST(DeliveryReport, RunningInsteadSeesNestedSpans) {
  const uint64_t ms = 1'000'000;
  DispatchAnalysis a;
  auto add = [&a](uint32_t role, uint64_t start, uint64_t dur) {
    SlowSpan s;
    s.span.pid = 1;
    s.span.tid = 1;
    s.span.role = role;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    a.slow.push_back(s);
  };
  add(LT_ROLE_DISPATCH, 100 * ms, 200 * ms);  // outer [100, 300)
  add(LT_ROLE_DISPATCH, 120 * ms, 30 * ms);   // nested [120, 150)
  add(LT_ROLE_DISPATCH, 160 * ms, 20 * ms);   // nested [160, 180)
  RunningInstead running(a);
  SpanEvent d;
  d.pid = d.tid = 1;
  d.role = LT_ROLE_DELIVERY;
  d.start_ns = 140 * ms;  // due 140, dispatched 310
  d.duration_ns = 170 * ms;
  auto got = running(d);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0]->span.start_ns, 100 * ms);
  EXPECT_EQ(got[1]->span.start_ns, 120 * ms);
  EXPECT_EQ(got[2]->span.start_ns, 160 * ms);
  d.start_ns = 155 * ms;   // the first nested span had ended, the second
  d.duration_ns = 4 * ms;  // not begun when it was dispatched at 159
  got = running(d);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]->span.start_ns, 100 * ms);
  d.start_ns = 300 * ms;  // all ended
  EXPECT_TRUE(running(d).empty());
}

// The text groups late messages into backlogs: those due before the
// previous late ones were all dispatched, with the slow spans behind them.
TEST(DeliveryReport, TextGroupsBacklogs) {
  const uint64_t ms = 1'000'000;
  DispatchAnalysis a;
  auto add = [&a](uint32_t tid, uint32_t role, uint64_t start, uint64_t dur,
                  uint64_t what) {
    SlowSpan s;
    s.span.pid = 1;
    s.span.tid = tid;
    s.span.comm = "loop";
    s.span.role = role;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    s.span.keys[0] = what;
    a.slow.push_back(s);
  };
  add(1, LT_ROLE_DISPATCH, 100 * ms, 50 * ms, 7);  // the stall [100, 150)
  // Due during the stall, dispatched one after the other as it drains.
  add(1, LT_ROLE_DELIVERY, 110 * ms, 40 * ms, 1);  // -> 150
  add(1, LT_ROLE_DELIVERY, 120 * ms, 45 * ms, 2);  // -> 165 (worst)
  add(1, LT_ROLE_DELIVERY, 160 * ms, 20 * ms, 3);  // due before 165: same
  add(1, LT_ROLE_DELIVERY, 400 * ms, 20 * ms, 4);  // drained: a new one
  add(2, LT_ROLE_DELIVERY, 130 * ms, 20 * ms, 5);  // another thread
  std::vector<ProbeDef> probes(1);
  probes[0].resolved_symbol = "Loop::dispatch(Msg*)";
  probes[0].keys.push_back(
      KeyDef{"what", "arg0", *parse_key_expr("arg0"), KeyFormat::kInt, {}});
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.slow_ns = {16 * ms, 16 * ms, 16 * ms};
  ctx.start_ns = 0;
  a.first_event_ns = 0;
  std::ostringstream os;
  explain_slow_spans(a);  // as the analysis does
  write_text_report(os, a, ctx);
  const std::string out = os.str();
  EXPECT_NE(out.find("SLOW DELIVERIES: 5 (>= 16.0ms) in 3 backlogs"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("#1   due +0.110s..+0.160s  3 late, lag up to 45.0ms"),
            std::string::npos)
      << out;
  // Targets are the key alone here (format_target is tested above).
  EXPECT_NE(out.find("worst: 2 (due +0.120s)"), std::string::npos) << out;
  EXPECT_NE(out.find("behind 50.0ms 7 at +0.100s"), std::string::npos) << out;
  EXPECT_NE(out.find("#2   due +0.130s  lag 20.0ms  1/2 loop"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("#3   due +0.400s  lag 20.0ms  1/1 loop"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("behind dispatches each shorter than the slow threshold"),
            std::string::npos)
      << out;
}

// Late messages of a thread that was stopped (SIGSTOP) between dispatches:
// the stop is the reason, in the text and the JSON, not dispatches "each
// shorter than the slow threshold"; a stopped span's split says stopped.
TEST(DeliveryReport, AStoppedThreadIsNotLag) {
  const uint64_t ms = 1'000'000;
  DispatchAnalysis a;
  auto add = [&a](uint32_t role, uint64_t start, uint64_t dur) {
    SlowSpan s;
    s.span.pid = 1;
    s.span.tid = 1;
    s.span.comm = "loop";
    s.span.role = role;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    a.slow.push_back(s);
  };
  add(LT_ROLE_DELIVERY, 110 * ms, 500 * ms);  // due 110, dispatched 610
  add(LT_ROLE_DELIVERY, 300 * ms, 311 * ms);  // due 300, dispatched 611
  add(LT_ROLE_DELIVERY, 900 * ms, 20 * ms);   // a later backlog, no stop
  add(LT_ROLE_DISPATCH, 1000 * ms, 3000 * ms);
  a.slow.back().span.cpu_ns = 1000 * ms;
  a.slow.back().span.stopped_ns = 2000 * ms;
  a.stops.push_back(StopEvent{1, 1, 605 * ms, 100 * ms});  // 100..605
  a.stops.push_back(StopEvent{1, 2, 700 * ms, 0});         // another thread
  std::vector<ProbeDef> probes(1);
  probes[0].resolved_symbol = "Loop::dispatch(Msg*)";
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.slow_ns = {16 * ms, 16 * ms, 16 * ms};
  explain_slow_spans(a);
  ASSERT_EQ(a.backlogs.size(), 2u);
  EXPECT_EQ(a.backlogs[0].stopped_ns, 495 * ms);  // 110..605
  EXPECT_EQ(a.backlogs[1].stopped_ns, 0u);
  std::ostringstream os;
  write_text_report(os, a, ctx);
  const std::string out = os.str();
  EXPECT_NE(out.find("    thread stopped 495ms (SIGSTOP, debugger, freezer): "
                     "nothing ran\n"),
            std::string::npos)
      << out;
  // Only the later backlog, which no stop explains, says so.
  size_t shorter = out.find("behind dispatches each shorter");
  EXPECT_NE(shorter, std::string::npos) << out;
  EXPECT_EQ(out.find("behind dispatches each shorter", shorter + 1),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("blocked 0ns (0%)  stopped 2.00s (66%)"),
            std::string::npos)
      << out;
  nlohmann::json j = to_json(a, ctx);
  ASSERT_EQ(j["slow_deliveries"].size(), 3u);
  EXPECT_EQ(j["slow_deliveries"][0]["stopped_ns"], 495 * ms);
  EXPECT_EQ(j["slow_deliveries"][1]["stopped_ns"], 305 * ms);
  EXPECT_FALSE(j["slow_deliveries"][2].contains("stopped_ns"));
  EXPECT_EQ(j["delivery_backlogs"][0]["stopped_ns"], 495 * ms);
  EXPECT_EQ(j["slow_dispatches"][0]["stopped_ns"], 2000 * ms);
  EXPECT_EQ(j["slow_dispatches"][0]["blocked_ns"], 0u);
}

// Late messages held by a sync barrier, not by a slow dispatch: the backlog
// names the barrier that was up, and not one of another thread.
TEST(DeliveryReport, TextNamesABarrierUpMeanwhile) {
  const uint64_t ms = 1'000'000;
  DispatchAnalysis a;
  SlowSpan late;
  late.span.pid = late.span.tid = 1;
  late.span.role = LT_ROLE_DELIVERY;
  late.span.start_ns = 210 * ms;  // due 210, dispatched 600
  late.span.duration_ns = 390 * ms;
  a.slow.push_back(late);
  BarrierAnalysis barriers;
  Barrier b;
  b.pid = b.tid = 1;
  b.token = 4;
  b.posted_ns = 200 * ms;
  b.removed_ns = 600 * ms;
  barriers.barriers.push_back(b);
  b.tid = 2;  // another thread's
  b.token = 5;
  barriers.barriers.push_back(b);
  std::vector<ProbeDef> probes(1);
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.slow_ns = {16 * ms, 16 * ms, 16 * ms};
  ctx.barriers = &barriers;
  std::ostringstream os;
  explain_slow_spans(a);  // as the analysis does
  note_barriers_up(a, barriers);
  write_text_report(os, a, ctx);
  const std::string out = os.str();
  EXPECT_NE(out.find("a sync barrier was up: token 4 posted +0.200s, removed "
                     "after 400ms"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("token 5"), std::string::npos) << out;
  EXPECT_EQ(out.find("shorter than the slow threshold"), std::string::npos)
      << out;
  nlohmann::json j = to_json(a, ctx);
  const auto& up = j["slow_deliveries"][0]["sync_barriers_up"];
  ASSERT_EQ(up.size(), 1u) << j.dump();
  EXPECT_EQ(up[0]["token"], 4);
  EXPECT_EQ(up[0]["posted_ns"], 200 * ms);
  EXPECT_EQ(up[0]["removed_ns"], 600 * ms);
}

// A backlog behind many slow spans names the five longest.
TEST(DeliveryReport, TextNamesTheLongestSpansOfABacklog) {
  const uint64_t ms = 1'000'000;
  DispatchAnalysis a;
  auto add = [&a](uint32_t role, uint64_t start, uint64_t dur, uint64_t what) {
    SlowSpan s;
    s.span.pid = s.span.tid = 1;
    s.span.role = role;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    s.span.keys[0] = what;
    a.slow.push_back(s);
  };
  // Seven slow dispatches back to back, 20..26 ms long; one message due at
  // each one's start waits behind it.
  uint64_t t = 100 * ms;
  for (uint64_t i = 0; i < 7; ++i) {
    add(LT_ROLE_DISPATCH, t, (20 + i) * ms, 10 + i);
    add(LT_ROLE_DELIVERY, t, (20 + i) * ms, 0);
    t += (20 + i) * ms;
  }
  std::vector<ProbeDef> probes(1);
  probes[0].keys.push_back(
      KeyDef{"what", "arg0", *parse_key_expr("arg0"), KeyFormat::kInt, {}});
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.slow_ns = {16 * ms, 16 * ms, 16 * ms};
  std::ostringstream os;
  explain_slow_spans(a);  // as the analysis does
  write_text_report(os, a, ctx);
  const std::string out = os.str();
  EXPECT_NE(out.find("in 1 backlog\n"), std::string::npos) << out;
  EXPECT_NE(out.find("7 late, lag up to 26.0ms"), std::string::npos) << out;
  for (int what : {10, 11})
    EXPECT_EQ(out.find(fmt::format(" {} at +", what)), std::string::npos)
        << out;
  for (int what : {12, 13, 14, 15, 16})
    EXPECT_NE(out.find(fmt::format(" {} at +", what)), std::string::npos)
        << out;
  EXPECT_NE(out.find("and 2 shorter slow spans"), std::string::npos) << out;
  // The JSON groups them the same way.
  nlohmann::json j = to_json(a, ctx);
  ASSERT_EQ(j["delivery_backlogs"].size(), 1u);
  EXPECT_EQ(j["delivery_backlogs"][0]["late"], 7);
  EXPECT_EQ(j["delivery_backlogs"][0]["worst_lag_ns"], 26 * ms);
  EXPECT_EQ(j["delivery_backlogs"][0]["behind"].size(), 7u);
}

}  // namespace
}  // namespace looptrace
