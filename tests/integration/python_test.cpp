// Python frames in the stacks of Debian's python3 (CPython 3.11), read
// from the interpreter's frames at sample time: a python3-gi GLib loop
// whose timeout callback busy-loops in a Python function, attached with
// -p and no option. The frames' functions, files and lines come from the
// program's source itself.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;

// Index of the first frame that is `name (file:line)` for one of `lines`
// in `frames`, -1 if none.
int find_frame(const std::vector<std::string>& frames, const std::string& name,
               const std::vector<int>& lines) {
  for (size_t i = 0; i < frames.size(); ++i)
    for (int l : lines)
      if (frames[i] == fmt::format("{} (glib_loop.py:{})", name, l))
        return static_cast<int>(i);
  return -1;
}

// Index of the first frame starting with `prefix`, -1 if none.
int find_native(const std::vector<std::string>& frames,
                const std::string& prefix) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
  return -1;
}

// Where glib_loop.py is while it busy-loops: in busy_for (its loop, or
// now_ns called from it), called by App.stall, from App.run's loop: the
// lines, from the source.
struct BusyLines {
  int busy_while, busy_add, stall_call, loop_run;
};

BusyLines busy_lines(const std::string& src) {
  return {line_of(src, "    while now_ns() < deadline:"),
          line_of(src, "        x += 1"), line_of(src, "busy_for(ms * 1000000"),
          line_of(src, "        self.loop.run()")};
}

// The slow dispatch of `report` that holds the one stall python logged in
// `log` (nullptr: none; the log's stalls are checked).
void stall_span(const nlohmann::json& report, const std::string& log,
                const nlohmann::json** out) {
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  *out = span_holding(report["slow_dispatches"], stalls[0], kToleranceNs);
  ASSERT_NE(*out, nullptr) << report["slow_dispatches"].dump();
}

// The stacks (frames, innermost first) of the slow dispatch of `report`
// that holds the stall python logged in `log`.
void stall_stacks(const nlohmann::json& report, const std::string& log,
                  std::vector<std::vector<std::string>>* out) {
  const nlohmann::json* slow = nullptr;
  ASSERT_NO_FATAL_FAILURE(stall_span(report, log, &slow));
  ASSERT_FALSE((*slow)["stacks"].empty()) << slow->dump();
  for (const auto& st : (*slow)["stacks"]) {
    out->emplace_back();
    for (const auto& f : st["frames"])
      out->back().push_back(f.get<std::string>());
  }
}

std::string dump(const std::vector<std::vector<std::string>>& stacks) {
  std::string all;
  for (const auto& frames : stacks) {
    for (const auto& f : frames) all += f + " < ";
    all += "\n";
  }
  return all;
}

// Stacks naming busy_for and App.stall at their lines, callee first (and
// App.run after them when it is there); with `native`, the native frames
// of GLib's dispatch between the callback and the loop's run, and
// Py_RunMain last. Returns how many stacks name them.
int check_stacks(const std::vector<std::vector<std::string>>& stacks,
                 const BusyLines& l, bool native) {
  int named = 0, to_main = 0;
  for (const auto& frames : stacks) {
    const int busy = find_frame(frames, "busy_for", {l.busy_while, l.busy_add});
    const int stall = find_frame(frames, "App.stall", {l.stall_call});
    const int run_at = find_frame(frames, "App.run", {l.loop_run});
    if (busy < 0 || stall < 0) continue;
    ++named;
    EXPECT_LT(busy, stall) << dump(stacks);
    if (run_at >= 0) {
      EXPECT_LT(stall, run_at) << dump(stacks);
    }
    if (!native) continue;
    const int dispatch = find_native(frames, "g_main_context_dispatch+");
    const int main_run = find_native(frames, "Py_RunMain+");
    EXPECT_LT(stall, dispatch) << dump(stacks);
    EXPECT_LT(dispatch, run_at) << dump(stacks);
    // A stack deeper than the copied 8 KiB stops short (truncated): most
    // reach the interpreter's main.
    if (main_run >= 0) {
      EXPECT_LT(run_at, main_run) << dump(stacks);
      ++to_main;
    }
  }
  if (native) {
    EXPECT_GT(to_main * 2, named) << dump(stacks);
  }
  return named;
}

// glib_loop.py with one 200 ms busy stall, attached with -p and no option
// ("default": whole native stacks, the CFI's where python3 keeps no frame
// pointers), with --call-graph fp (the Python frames, but native frames
// end early) or dwarf.
class PythonFrames : public ::testing::TestWithParam<const char*> {};

TEST_P(PythonFrames, StacksOfABusyCallbackNameItsPythonFunctions) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  const std::string mode = GetParam();
  const bool dwarf = mode == "dwarf";
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  const BusyLines l = busy_lines(src);
  ASSERT_TRUE(l.busy_while && l.busy_add && l.stall_call && l.loop_run);

  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  const std::string rec = dir.file("run.ltrec");
  std::vector<std::string> lt_args = {"--json", json};
  // With dwarf, also a recording: read back where the process is gone.
  if (dwarf)
    lt_args.insert(lt_args.end(), {"--call-graph", "dwarf", "-o", rec});
  if (mode == "fp") lt_args.insert(lt_args.end(), {"--call-graph", "fp"});
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(trace_glib_loop(
      dir, {"--kind", "busy", "--stall", "200@300", "--duration", "800"},
      lt_args, &r));
  std::vector<std::vector<std::string>> stacks;
  ASSERT_NO_FATAL_FAILURE(stall_stacks(read_json(json), log, &stacks));
  EXPECT_GT(check_stacks(stacks, l, mode != "fp"), 0)
      << "no stack names busy_for and App.stall at lines " << l.busy_while
      << "/" << l.busy_add << " and " << l.stall_call << ":\n"
      << dump(stacks);
  if (!dwarf) return;
  const std::string replayed = dir.file("replayed.json");
  RunResult rr = run({looptrace_bin(), "report", rec, "--json", replayed});
  ASSERT_EQ(rr.exit_code, 0) << rr.err;
  std::vector<std::vector<std::string>> again;
  ASSERT_NO_FATAL_FAILURE(stall_stacks(read_json(replayed), log, &again));
  EXPECT_EQ(again, stacks) << "the recording names the same frames";
}

INSTANTIATE_TEST_SUITE_P(CallGraph, PythonFrames,
                         ::testing::Values("fp", "default", "dwarf"));

// Python frames checked against the interpreter's own account: the busy
// callback logs traceback.extract_stack() as it begins (glib_loop.py
// --dump-stack); every sample looptrace took in busy_for holds, outside
// busy_for, the same Python frames: function, file and line, in order.
TEST(PythonFrames, TheInterpretersOwnStackAgrees) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(
      trace_glib_loop(dir,
                      {"--kind", "busy", "--stall", "200@300", "--duration",
                       "800", "--dump-stack"},
                      {"--json", json}, &r));
  auto dumped = events(read_jsonl(log), "stack");
  ASSERT_EQ(dumped.size(), 1u);
  // The interpreter's, innermost first, without busy_for itself:
  // "name (file:line)" with the name's last component.
  std::vector<std::string> want;
  const auto& frames = dumped[0]["frames"];
  ASSERT_GE(frames.size(), 2u);
  for (size_t i = frames.size() - 1; i-- > 0;) {
    std::string file = frames[i]["file"];
    want.push_back(fmt::format(
        "{} ({}:{})", frames[i]["name"].get<std::string>(),
        file.substr(file.rfind('/') + 1), frames[i]["line"].get<int>()));
  }
  std::vector<std::vector<std::string>> stacks;
  ASSERT_NO_FATAL_FAILURE(stall_stacks(read_json(json), log, &stacks));
  int compared = 0, agreed = 0;
  for (const auto& st : stacks) {
    // Its Python frames ("... (x.py:N)"), with qualnames cut to their
    // last component as traceback names them.
    std::vector<std::string> py;
    for (const auto& f : st) {
      if (f.find(".py:") == std::string::npos) continue;
      const size_t paren = f.find(" (");
      const std::string qual = f.substr(0, paren);
      py.push_back(qual.substr(qual.rfind('.') + 1) + f.substr(paren));
    }
    size_t at = 0;
    while (at < py.size() && !py[at].starts_with("busy_for (")) ++at;
    if (at == py.size()) continue;  // not in busy_for
    ++compared;
    std::vector<std::string> outer(py.begin() + at + 1, py.end());
    agreed += outer == want;
    EXPECT_EQ(outer, want) << dump(stacks);
  }
  EXPECT_GE(compared, 3) << dump(stacks);  // distinct stacks
  EXPECT_EQ(agreed, compared);
}

// A Python callback that sleeps (time.sleep in a GLib timeout): where it
// blocked names its Python frames too, App.stall at the line of its
// time.sleep call (from the source), and the text report marks that line
// as the key one. Attached with -p and no other option.
TEST(PythonBlocking, TheBlockingPointOfASleepingCallbackNamesItsPythonLine) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  const int sleep_line =
      line_of(src, "                time.sleep(ms / 1000.0 / pieces)");
  ASSERT_GT(sleep_line, 0);
  const std::string want =
      fmt::format("App.stall (glib_loop.py:{})", sleep_line);
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(
      trace_glib_loop(dir, {"--stall", "sleep:100@300", "--duration", "700"},
                      {"--json", json}, &r));
  const nlohmann::json report = read_json(json);
  const nlohmann::json* slow = nullptr;
  ASSERT_NO_FATAL_FAILURE(stall_span(report, log, &slow));
  bool named = false;
  for (const auto& b : (*slow)["blocked"])
    for (const auto& f : b["frames"]) named = named || f == want;
  EXPECT_TRUE(named) << "no blocking point names " << want << ":\n"
                     << (*slow)["blocked"].dump();
  // The text report marks it under "blocked here:".
  const size_t blocked_at = r.out.find("blocked here:");
  ASSERT_NE(blocked_at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    > " + want, blocked_at), std::string::npos)
      << r.out;
}

// A GLib source whose callback is a Python callable is named by it: the
// bound method python3-gi was given (GLib.timeout_add, idle_add,
// io_add_watch), "qualname (file:line of its def)", the line read from the
// program's source. With -p, no option, and a recording: its report
// names it too, with the process gone.
struct CallbackKind {
  const char* source;  // glib_loop.py --source
  const char* list;    // the report's list
  const char* label;   // the profile's label
  const char* method;  // what runs the stall, and its def
  const char* def;
};

class PythonCallbacks : public ::testing::TestWithParam<CallbackKind> {};

TEST_P(PythonCallbacks, ALoopCallbackIsNamedByItsPythonFunction) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  const CallbackKind& k = GetParam();
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  const int def_line = line_of(src, k.def);
  ASSERT_GT(def_line, 0) << k.def;
  const std::string want =
      fmt::format("{} {} (glib_loop.py:{})", k.label, k.method, def_line);
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  const std::string rec = dir.file("run.ltrec");
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(
      trace_glib_loop(dir,
                      {"--source", k.source, "--stall", "sleep:60@300",
                       "--stall", "busy:40@600", "--duration", "900"},
                      {"--slow", "20ms", "--json", json, "-o", rec}, &r));
  const std::string replayed = dir.file("replayed.json");
  RunResult rr = run({looptrace_bin(), "report", rec, "--json", replayed});
  ASSERT_EQ(rr.exit_code, 0) << rr.err;
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  for (const std::string& file : {json, replayed}) {
    const auto report = read_json(file);
    for (const auto& st : stalls) {
      const nlohmann::json* m = span_holding(report[k.list], st, kToleranceNs);
      ASSERT_NE(m, nullptr) << file << ": " << st.dump() << "\n"
                            << report[k.list].dump();
      // (A source's name may follow: python3-gi names its idle sources.)
      const std::string target = (*m)["target"];
      EXPECT_EQ(target.rfind(want, 0), 0u) << file << ": " << target;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Glib, PythonCallbacks,
    ::testing::Values(
        CallbackKind{"timeout", "slow_dispatches", "GLib timeout", "App.stall",
                     "    def stall(self, index, start=None):"},
        CallbackKind{"idle", "slow_idle_handlers", "GLib idle", "App.stall",
                     "    def stall(self, index, start=None):"},
        CallbackKind{"io", "slow_dispatches", "GLib I/O watch", "App.readable",
                     "    def readable(self, *_):"}),
    [](const ::testing::TestParamInfo<CallbackKind>& i) {
      return std::string(i.param.source);
    });

}  // namespace
}  // namespace lt_test
