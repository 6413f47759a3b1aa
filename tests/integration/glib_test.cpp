// A real event loop nobody here wrote: GLib's main loop in Debian's python3
// (python3-gi). Its timeout callbacks block for times they log themselves.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;  // the 1 ms

class GlibLoop : public ::testing::TestWithParam<const char*> {};

TEST_P(GlibLoop, StallsInTimeoutCallbacksAreReported) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  const int64_t steal_before = steal_ns();
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--dispatch",
                     "libglib-2.0.so.0:g_main_context_dispatch",
                     "--slow",
                     "20ms",
                     "--json",
                     json,
                     "-q",
                     "--",
                     "/usr/bin/python3",
                     tests_dir() + "/programs/glib_loop.py",
                     "--kind",
                     GetParam(),
                     "--stall",
                     "40@400",
                     "--stall",
                     "90@900",
                     "--stall",
                     "150@1500",
                     "--duration",
                     "2200",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t stolen = steal_ns() - steal_before;
  auto lines = read_jsonl(log);
  auto stalls = events(lines, "stall");
  auto summary = events(lines, "summary");
  ASSERT_EQ(summary.size(), 1u);
  // The loop thread's whole wait for a CPU during the run, by the kernel's
  // own count: an upper bound of what fell inside a span.
  const int64_t run_delay =
      std::max<int64_t>(0, summary[0]["run_delay_ns"].get<int64_t>());
  ASSERT_EQ(stalls.size(), 3u) << "python logged its stalls";
  nlohmann::json report = read_json(json);
  expect_split_adds_up(report);
  const auto& slow = report["slow_dispatches"];
  for (const auto& st : stalls) {
    // The dispatch span starts a little before the callback (GLib's own
    // bookkeeping) and ends a little after it; match by containment.
    const nlohmann::json* m = span_holding(slow, st, kToleranceNs);
    ASSERT_NE(m, nullptr) << st.dump() << "\nreported: " << slow.dump();
    int64_t d = static_cast<int64_t>((*m)["duration_ns"].get<uint64_t>()) -
                static_cast<int64_t>(st["duration_ns"].get<uint64_t>());
    // The span also covers GLib's and PyGObject's work around the callback;
    // time the thread spent waiting for a CPU or the host took from the
    // vCPU (steal) may fall there rather than between python's clock reads:
    // machine load, not measurement error.
    const int64_t tol = kToleranceNs + run_delay + stolen;
    EXPECT_LE(std::llabs(d), tol)
        << "looptrace " << (*m)["duration_ns"] << " vs python "
        << st["duration_ns"] << "; the thread's run-queue wait " << run_delay
        << ", steal " << stolen;
  }
  EXPECT_EQ(slow.size(), stalls.size()) << slow.dump();
}

INSTANTIATE_TEST_SUITE_P(Kinds, GlibLoop, ::testing::Values("sleep", "busy"));

// glib_loop.py (APP_ARGS) under `looptrace record LT_ARGS`: the report, the
// stalls python logged, and what may lengthen a span beyond its callback
// besides GLib's own work: the loop thread's run-queue wait and the host's
// steal during the run.
struct GlibRun {
  nlohmann::json report;
  std::vector<nlohmann::json> lines;  // the app's whole log
  std::vector<nlohmann::json> stalls;
  int64_t slack_ns = 0;  // kToleranceNs + run-queue wait + steal
};

void run_glib(const std::vector<std::string>& lt_args,
              const std::vector<std::string>& app_args, GlibRun* out) {
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  std::vector<std::string> cmd = {looptrace_bin(), "record"};
  cmd.insert(cmd.end(), lt_args.begin(), lt_args.end());
  cmd.insert(cmd.end(), {"--json", json, "-q", "--", "/usr/bin/python3",
                         tests_dir() + "/programs/glib_loop.py"});
  cmd.insert(cmd.end(), app_args.begin(), app_args.end());
  cmd.insert(cmd.end(), {"--log", log});
  const int64_t steal_before = steal_ns();
  RunResult r = run(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t stolen = steal_ns() - steal_before;
  auto lines = read_jsonl(log);
  out->lines = lines;
  out->stalls = events(lines, "stall");
  auto summary = events(lines, "summary");
  ASSERT_EQ(summary.size(), 1u);
  const int64_t run_delay =
      std::max<int64_t>(0, summary[0]["run_delay_ns"].get<int64_t>());
  out->slack_ns = kToleranceNs + run_delay + stolen;
  out->report = read_json(json);
  expect_split_adds_up(out->report);
}

// Span `s` holds stall `st` (python's clock reads inside its callback).
bool holds(const nlohmann::json& s, const nlohmann::json& st) {
  uint64_t start = s["start_ns"], dur = s["duration_ns"];
  return start <= st["start_ns"].get<uint64_t>() &&
         start + dur >= st["end_ns"].get<uint64_t>();
}

// The span of `list` (of `probe` if given) that holds stall `st`.
const nlohmann::json* span_holding(const nlohmann::json& list,
                                   const nlohmann::json& st,
                                   const std::string& probe = "") {
  const nlohmann::json* m = nullptr;
  for (const auto& s : list)
    if ((probe.empty() || s["probe"] == probe) && holds(s, st)) m = &s;
  return m;
}

// Its callback's time, and no more than GLib's work around it.
void expect_callback_time(const nlohmann::json& span, const nlohmann::json& st,
                          int64_t slack_ns) {
  int64_t d = static_cast<int64_t>(span["duration_ns"].get<uint64_t>()) -
              static_cast<int64_t>(st["duration_ns"].get<uint64_t>());
  EXPECT_LE(std::llabs(d), slack_ns)
      << "looptrace " << span.dump() << "\nvs python " << st.dump();
}

// One span per source, not per batch: GLib's timeout sources are
// dispatched by its static g_timeout_dispatch, which no symbol names in
// Debian's stripped libglib but the exported table g_timeout_funcs holds
// (its dispatch slot, 16 bytes in). Two stalls due at the same moment run
// in one g_main_context_dispatch batch; each gets its own span.
TEST(GlibSources, EachTimeoutOfABatchIsItsOwnSpan) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  const std::string source = "*(g_timeout_funcs+16)";
  GlibRun g;
  ASSERT_NO_FATAL_FAILURE(
      run_glib({"--dispatch", "libglib-2.0.so.0:g_main_context_dispatch",
                "--dispatch", "libglib-2.0.so.0:" + source, "--slow", "20ms"},
               {"--stall", "busy:40@500", "--stall", "busy:70@500", "--stall",
                "sleep:50@1000", "--duration", "1500"},
               &g));
  ASSERT_EQ(g.stalls.size(), 3u);
  const auto& slow = g.report["slow_dispatches"];
  int sources = 0;
  for (const auto& s : slow)
    if (s["probe"] == source) ++sources;
  EXPECT_EQ(sources, 3) << slow.dump();
  for (const auto& st : g.stalls) {
    const nlohmann::json* m = span_holding(slow, st, source);
    ASSERT_NE(m, nullptr) << st.dump() << "\n" << slow.dump();
    // Inside the batch's span.
    EXPECT_EQ((*m)["depth"], 1) << m->dump();
    // Its own callback only: not the other stall of the batch.
    for (const auto& other : g.stalls) {
      if (other["index"] == st["index"]) continue;
      EXPECT_FALSE(holds(*m, other)) << m->dump() << "\n" << other.dump();
    }
    expect_callback_time(*m, st, g.slack_ns);
  }
  // The two stalls due together were one batch: one g_main_context_dispatch
  // span holds both (what the per-batch probe alone would report as one).
  int batches_with_both = 0;
  for (const auto& s : slow)
    if (s["probe"] == "g_main_context_dispatch" && holds(s, g.stalls[0]) &&
        holds(s, g.stalls[1]))
      ++batches_with_both;
  EXPECT_EQ(batches_with_both, 1) << slow.dump();
}

// A nested main loop, as gtk_dialog_run runs one: a timeout's callback
// runs GLib.MainLoop for 600 ms, and two stalls due meanwhile are
// dispatched inside it. The outer timeout is one span as long as its
// callback, the stalls are their own spans nested in it (depth 1), each
// as long as its callback; every return is paired with its entry and
// nothing else is slow.
TEST(GlibSources, NestedMainLoopsArePaired) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  GlibRun g;
  ASSERT_NO_FATAL_FAILURE(run_glib(
      {"--profile", "glib", "--slow", "30ms"},
      {"--nested-loop", "600@400", "--stall", "busy:50@600", "--stall",
       "sleep:60@800", "--stall", "busy:40@1300", "--duration", "1600"},
      &g));
  auto nested = events(g.lines, "nested");
  ASSERT_EQ(nested.size(), 1u);
  ASSERT_EQ(g.stalls.size(), 3u);
  const auto& slow = g.report["slow_dispatches"];
  // The nested loop's callback, and the three stalls.
  EXPECT_EQ(slow.size(), 4u) << slow.dump();
  const nlohmann::json* outer = span_holding(slow, nested[0]);
  ASSERT_NE(outer, nullptr) << slow.dump();
  EXPECT_EQ((*outer)["depth"], 0) << outer->dump();
  nlohmann::json as_stall = nested[0];
  as_stall["duration_ns"] = nested[0]["end_ns"].get<uint64_t>() -
                            nested[0]["start_ns"].get<uint64_t>();
  expect_callback_time(*outer, as_stall, g.slack_ns);
  for (const auto& st : g.stalls) {
    // The innermost span holding it is its own.
    const nlohmann::json* m = nullptr;
    for (const auto& s : slow)
      if (holds(s, st) && (m == nullptr || s["depth"] > (*m)["depth"])) m = &s;
    ASSERT_NE(m, nullptr) << st.dump() << "\n" << slow.dump();
    const bool inside = st["at_ms"].get<int>() < 1000;
    EXPECT_EQ((*m)["depth"], inside ? 1 : 0) << m->dump();
    EXPECT_EQ(holds(*outer, st), inside) << st.dump();
    expect_callback_time(*m, st, g.slack_ns);
  }
  EXPECT_EQ(g.report["lost"]["unmatched_returns"], 0)
      << g.report["lost"].dump();
}

// A source's name (g_source_set_name), read from the GSource when its slow
// span ends: each named stall is reported with its own name, and an
// unnamed source with none.
TEST(GlibSources, ANamedSourceIsReportedByItsName) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  GlibRun g;
  ASSERT_NO_FATAL_FAILURE(
      run_glib({"--profile", "glib", "--slow", "20ms"},
               {"--name-sources", "--stall", "busy:40@300", "--stall",
                "sleep:50@700", "--duration", "1200"},
               &g));
  ASSERT_EQ(g.stalls.size(), 2u);
  const auto& slow = g.report["slow_dispatches"];
  EXPECT_EQ(slow.size(), g.stalls.size()) << slow.dump();
  for (const auto& st : g.stalls) {
    const nlohmann::json* m = span_holding(slow, st);
    ASSERT_NE(m, nullptr) << st.dump() << "\n" << slow.dump();
    const std::string name = fmt::format("stall-{}", st["index"].get<int>());
    EXPECT_EQ((*m)["keys"]["name"], name) << m->dump();
    EXPECT_NE((*m)["target"].get<std::string>().find(" name=" + name),
              std::string::npos)
        << m->dump();
    expect_callback_time(*m, st, g.slack_ns);
  }
  // Without names: no name key.
  GlibRun plain;
  ASSERT_NO_FATAL_FAILURE(
      run_glib({"--profile", "glib", "--slow", "20ms"},
               {"--stall", "busy:40@300", "--duration", "700"}, &plain));
  ASSERT_EQ(plain.report["slow_dispatches"].size(), 1u);
  const auto& m = plain.report["slow_dispatches"][0];
  EXPECT_TRUE(m["keys"]["name"].is_null()) << m.dump();
  EXPECT_EQ(m["target"].get<std::string>().find("name="), std::string::npos);
}

// GLib timeouts' delivery lag: a timeout due during a stall (added by the
// stall's callback, 10 ms out) is dispatched when the stall ends. Its due
// time is GLib's, read between the app's two clock reads around the
// source's creation; its lag, from its GSource's ready time to the
// dispatch, is the app's own (its callback start - due) within 1 ms, it is
// reported as slow behind the stall, and the profile says which GLib it
// checked.
TEST(GlibSources, ALateTimeoutHasItsDeliveryLag) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  GlibRun g;
  ASSERT_NO_FATAL_FAILURE(run_glib(
      {"--profile", "glib", "--slow", "20ms", "--slow-delivery", "20ms"},
      {"--late-timer", "10", "--stall", "busy:60@300", "--stall",
       "sleep:80@700", "--duration", "1200"},
      &g));
  ASSERT_EQ(g.stalls.size(), 2u);
  auto late = events(g.lines, "late");
  ASSERT_EQ(late.size(), 2u);
  const auto& slow = g.report["slow_deliveries"];
  for (const auto& l : late) {
    const std::string name = fmt::format("late-{}", l["index"].get<int>());
    const nlohmann::json* m = nullptr;
    for (const auto& d : slow)
      if (d["target"].get<std::string>().find(" name=" + name) !=
          std::string::npos)
        m = &d;
    ASSERT_NE(m, nullptr) << name << "\n" << slow.dump();
    // GLib read its clock for the due time between the app's two reads
    // (in microseconds: up to 1 us below them).
    EXPECT_GE(diff((*m)["due_ns"], l["due_ns"]), -1'000) << m->dump() << "\n"
                                                         << l.dump();
    EXPECT_LE(diff((*m)["due_ns"], l["due_by_ns"]), 0) << m->dump() << "\n"
                                                       << l.dump();
    const int64_t app_lag = diff(l["start_ns"], l["due_ns"]);
    EXPECT_GE(app_lag, 40'000'000) << l.dump();
    EXPECT_LE(std::llabs((*m)["lag_ns"].get<int64_t>() - app_lag), g.slack_ns)
        << m->dump() << "\n"
        << l.dump();
  }
  // Nothing else is late but what waited behind a stall (the 2 ms tick
  // timer does too): each slow delivery was due while one ran.
  for (const auto& d : slow) {
    bool behind = false;
    for (const auto& st : g.stalls)
      behind = behind || (d["due_ns"].get<uint64_t>() + g.slack_ns >=
                              st["start_ns"].get<uint64_t>() &&
                          d["due_ns"].get<uint64_t>() <=
                              st["end_ns"].get<uint64_t>() + g.slack_ns);
    EXPECT_TRUE(behind) << d.dump();
  }
}

// The glib profile tells the source kinds apart: a stall run by an idle
// source is an idle handler, one run by an I/O watch (a GIOChannel's) or a
// unix fd source a dispatch of that kind, named so, each within 1 ms of
// the callback's own clock; nothing else is slow (the timeouts that hand
// the stalls over are fast).
struct SourceKind {
  const char* source;  // glib_loop.py --source
  const char* list;    // the report's list
  const char* label;
};

class GlibSourceKinds : public ::testing::TestWithParam<SourceKind> {};

TEST_P(GlibSourceKinds, EachKindIsNamedAndTimed) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  const SourceKind& k = GetParam();
  GlibRun g;
  ASSERT_NO_FATAL_FAILURE(
      run_glib({"--profile", "glib", "--slow", "20ms"},
               {"--source", k.source, "--stall", "sleep:50@300", "--stall",
                "busy:40@600", "--duration", "900"},
               &g));
  ASSERT_EQ(g.stalls.size(), 2u);
  const auto& list = g.report[k.list];
  EXPECT_EQ(g.report["slow_dispatches"].size() +
                g.report["slow_idle_handlers"].size(),
            g.stalls.size())
      << g.report["slow_dispatches"].dump()
      << g.report["slow_idle_handlers"].dump();
  for (const auto& st : g.stalls) {
    ASSERT_EQ(st["source"], k.source);
    const nlohmann::json* m = span_holding(list, st);
    ASSERT_NE(m, nullptr) << st.dump() << "\n" << list.dump();
    EXPECT_EQ(
        (*m)["target"].get<std::string>().rfind(std::string(k.label) + " ", 0),
        0u)
        << m->dump();
    expect_callback_time(*m, st, g.slack_ns);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Glib, GlibSourceKinds,
    ::testing::Values(SourceKind{"idle", "slow_idle_handlers", "GLib idle"},
                      SourceKind{"io", "slow_dispatches", "GLib I/O watch"},
                      SourceKind{"unix-fd", "slow_dispatches", "GLib unix fd"}),
    [](const ::testing::TestParamInfo<SourceKind>& i) {
      std::string n = i.param.source;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

// glib_loop.py (APP_ARGS, its loop starting 2 s after python does: time
// to attach before the first stall) traced by `looptrace record -p PID
// --slow 20ms` with no probe option, where tracefs is not mounted:
// looptrace's stderr in *err.
void run_glib_attached(const std::vector<std::string>& app_args, GlibRun* out,
                       std::string* err) {
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   tests_dir() + "/programs/glib_loop.py",
                                   "--start-delay",
                                   "2000",
                                   "--log",
                                   log};
  argv.insert(argv.end(), app_args.begin(), app_args.end());
  Process app(argv, dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "glib_loop: ready", 10000));
  const int64_t steal_before = steal_ns();
  RunResult r = run(without_tracefs({looptrace_bin(), "record", "-p",
                                     std::to_string(app.pid()), "--slow",
                                     "20ms", "--json", json}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(app.wait(10000), 0);
  const int64_t stolen = steal_ns() - steal_before;
  *err = r.err;
  out->lines = read_jsonl(log);
  out->stalls = events(out->lines, "stall");
  auto summary = events(out->lines, "summary");
  ASSERT_EQ(summary.size(), 1u);
  out->slack_ns =
      kToleranceNs + stolen +
      std::max<int64_t>(0, summary[0]["run_delay_ns"].get<int64_t>());
  out->report = read_json(json);
}

// Each stall of g is one slow dispatch whose target begins with `target`,
// within 1 ms of the callback's own clock; nothing else is slow.
void expect_stalls_as(const GlibRun& g, const std::string& target) {
  const auto& slow = g.report["slow_dispatches"];
  EXPECT_EQ(slow.size(), g.stalls.size()) << slow.dump();
  for (const auto& st : g.stalls) {
    const nlohmann::json* m = span_holding(slow, st);
    ASSERT_NE(m, nullptr) << st.dump() << "\n" << slow.dump();
    EXPECT_EQ((*m)["target"].get<std::string>().rfind(target, 0), 0u)
        << m->dump();
    expect_callback_time(*m, st, g.slack_ns);
  }
}

// A source kind of the program's own (a PyGObject GLib.Source subclass:
// PyGObject's GSourceFuncs, whose dispatch function no symbol names),
// attached before looptrace: found in the process's memory with -p and no
// option, each stall one "GLib custom" span named by the source's name,
// within 1 ms of the callback's own clock; nothing else slow.
TEST(GlibSources, ACustomSourceKindIsFoundAndTimed) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  GlibRun g;
  std::string err;
  ASSERT_NO_FATAL_FAILURE(
      run_glib_attached({"--source", "custom", "--stall", "busy:40@300",
                         "--stall", "sleep:60@700", "--duration", "1200"},
                        &g, &err));
  EXPECT_NE(err.find("looptrace:   dispatch GLib custom: "), std::string::npos)
      << err;
  EXPECT_NE(err.find("_gi."), std::string::npos) << err;  // PyGObject's
  ASSERT_EQ(g.stalls.size(), 2u);
  for (const auto& st : g.stalls) EXPECT_EQ(st["source"], "custom");
  expect_stalls_as(g, "GLib custom name=lt-custom");
}

// The same program started by looptrace (-- COMMAND): nothing is attached
// yet to search for, so no custom source kind is probed, and the banner
// says that such sources are not traced.
TEST(GlibSources, WithACommandCustomSourcesAreSaidToBeUntraced) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  RunResult r = run(without_tracefs(
      {looptrace_bin(), "record", "--profile", "glib", "--", "/usr/bin/python3",
       tests_dir() + "/programs/glib_loop.py", "--source", "custom",
       "--duration", "300"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("looptrace: glib: sources of a program's own kinds "
                       "(GDK's event source, GLib.Source subclasses) are "
                       "found in a running process (-p) only: not traced\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("GLib custom"), std::string::npos) << r.err;
}

// -p PID and no probe option: the process's libraries choose the built-in
// glib profile, looptrace says so and where it attached, and each stall is
// one GLib timeout span within 1 ms of the callback's own clock.
TEST(GlibSources, ProfileIsFoundFromTheProcessLibraries) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  GlibRun g;
  std::string err;
  ASSERT_NO_FATAL_FAILURE(
      run_glib_attached({"--stall", "busy:40@300", "--stall", "sleep:60@700",
                         "--duration", "1200"},
                        &g, &err));
  EXPECT_NE(err.find(fmt::format("looptrace: profile glib: pid {} maps ",
                                 g.lines.at(0)["pid"].get<int>())),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("libglib-2.0.so.0"), std::string::npos) << err;
  EXPECT_NE(err.find("*(g_timeout_funcs+16) at offset 0x"), std::string::npos)
      << err;
  // The GLib version the profile's structure reads were checked against.
  EXPECT_NE(err.find(" (GLib 2."), std::string::npos) << err;
  ASSERT_EQ(g.stalls.size(), 2u);
  expect_stalls_as(g, "GLib timeout ");
}

}  // namespace
}  // namespace lt_test
