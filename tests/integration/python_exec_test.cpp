// A thread that runs a GLib loop without Python, then execs python3 and
// runs PyGObject's loop: its loop callbacks are named by their Python
// functions all the same. (The kernel remembers per thread that a process
// runs no CPython, so that a GLib dispatch elsewhere costs no lookup; the
// exec, and the interpreter the loader finds after it, must undo that.)
// And callbacks that exec() makes and drops one after another, each code
// object freed as soon as it ran and its memory taken by the next one's:
// each is named by itself (the kernel reads the names when it first sees
// a code object, not userspace later).
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;

TEST(PythonAfterExec, ALoopThatExecsIntoPythonHasItsCallbacksNamed) {
  LT_REQUIRE_BPF();
  if (access("/usr/bin/python3", X_OK) != 0) {
    if (bpf_required()) FAIL() << "/usr/bin/python3 missing (scripts/setup.sh)";
    GTEST_SKIP() << "/usr/bin/python3 missing";
  }
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  const int def_line = line_of(src, "    def stall(self, index, start=None):");
  ASSERT_GT(def_line, 0);
  const std::string want =
      fmt::format("GLib timeout App.stall (glib_loop.py:{})", def_line);
  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  // 50 timeouts of glib_exec's own C callback first, in the same thread.
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "glib",
                     "--slow",
                     "20ms",
                     "--json",
                     json,
                     "--",
                     std::string(LT_TEST_PROGRAMS_DIR) + "/glib_exec",
                     "50",
                     "/usr/bin/python3",
                     src,
                     "--source",
                     "timeout",
                     "--stall",
                     "busy:40@300",
                     "--stall",
                     "sleep:60@500",
                     "--duration",
                     "800",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.err.find("glib_exec: 50 dispatches done"), std::string::npos)
      << r.err;
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  const auto report = read_json(json);
  for (const auto& st : stalls) {
    const nlohmann::json* m = nullptr;
    for (const auto& s : report["slow_dispatches"]) {
      uint64_t start = s["start_ns"], dur = s["duration_ns"];
      if (start <= st["start_ns"].get<uint64_t>() + kToleranceNs &&
          start + dur + kToleranceNs >= st["end_ns"].get<uint64_t>())
        m = &s;
    }
    ASSERT_NE(m, nullptr) << st.dump() << "\n"
                          << report["slow_dispatches"].dump();
    const std::string target = (*m)["target"];
    EXPECT_EQ(target.rfind(want, 0), 0u) << target;
  }
}

TEST(PythonAfterExec, CallbacksFreedRightAfterTheirStallAreNamedRight) {
  LT_REQUIRE_BPF();
  if (access("/usr/bin/python3", X_OK) != 0) {
    if (bpf_required()) FAIL() << "/usr/bin/python3 missing (scripts/setup.sh)";
    GTEST_SKIP() << "/usr/bin/python3 missing";
  }
  TempDir dir;
  const std::string log = dir.file("rounds.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r = run({looptrace_bin(), "record", "--profile", "glib", "--slow",
                     "30ms", "--json", json, "--", "/usr/bin/python3",
                     tests_dir() + "/programs/py_exec_callbacks.py", "--rounds",
                     "6", "--stall-ms", "60", "--gap-ms", "20", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 6u);
  const auto report = read_json(json);
  for (const auto& st : stalls) {
    const nlohmann::json* m = nullptr;
    for (const auto& s : report["slow_dispatches"]) {
      uint64_t start = s["start_ns"], dur = s["duration_ns"];
      if (start <= st["start_ns"].get<uint64_t>() + kToleranceNs &&
          start + dur + kToleranceNs >= st["end_ns"].get<uint64_t>())
        m = &s;
    }
    ASSERT_NE(m, nullptr) << st.dump() << "\n"
                          << report["slow_dispatches"].dump();
    // Its callback, by the name and line the program gave it.
    const std::string name = st["name"], file = st["file"];
    const int def_line = st["def_line"];
    const std::string want =
        fmt::format("GLib timeout {} ({}:{})", name, file, def_line);
    const std::string target = (*m)["target"];
    EXPECT_EQ(target.rfind(want, 0), 0u) << target;
    // Its stacks: the busy loop in cb_N, at a line of cb_N's body.
    int in_body = 0, other_cb = 0;
    for (const auto& stack : (*m)["stacks"])
      for (const std::string f : stack["frames"]) {
        if (f.rfind("cb_", 0) != 0) continue;
        if (f.rfind(name + " (" + file + ":", 0) != 0) {
          ++other_cb;
          continue;
        }
        const int line = std::stoi(f.substr(f.rfind(':') + 1));
        if (line > def_line && line <= def_line + 5) ++in_body;
      }
    EXPECT_GT(in_body, 0) << (*m).dump();
    EXPECT_EQ(other_cb, 0) << (*m).dump();
  }
}

}  // namespace
}  // namespace lt_test
