// Python frames in the stacks of Debian's python3 (CPython 3.11), read
// from the interpreter's frames at sample time: a python3-gi GLib loop
// whose timeout callback busy-loops in a Python function, attached with
// -p and no option. The frames' functions, files and lines come from the
// program's source itself.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;

// The line of `path` holding `text` (1-based), 0 if none.
int line_of(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(text) != std::string::npos) return n;
  return 0;
}

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

TEST(PythonFrames, StacksOfABusyCallbackNameItsPythonFunctions) {
  LT_REQUIRE_BPF();
  if (access("/usr/bin/python3", X_OK) != 0) {
    if (bpf_required()) FAIL() << "/usr/bin/python3 missing (scripts/setup.sh)";
    GTEST_SKIP() << "/usr/bin/python3 missing";
  }
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  // Where the program is while it busy-loops: in busy_for (its loop, or
  // now_ns called from it), called by App.stall, from App.run's loop.
  const int busy_while = line_of(src, "    while now_ns() < deadline:");
  const int busy_add = line_of(src, "        x += 1");
  const int stall_call = line_of(src, "busy_for(ms * 1000000)");
  const int loop_run = line_of(src, "        self.loop.run()");
  ASSERT_TRUE(busy_while && busy_add && stall_call && loop_run);

  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  Process app({"/usr/bin/python3", src, "--start-delay", "2000", "--kind",
               "busy", "--stall", "200@300", "--duration", "800", "--log", log},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "glib_loop: ready", 10000));
  RunResult r = run({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
                     "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(app.wait(10000), 0);
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const uint64_t st_start = stalls[0]["start_ns"], st_end = stalls[0]["end_ns"];
  nlohmann::json report = read_json(json);
  const nlohmann::json* slow = nullptr;
  for (const auto& s : report["slow_dispatches"]) {
    uint64_t start = s["start_ns"], dur = s["duration_ns"];
    if (start <= st_start + kToleranceNs &&
        start + dur + kToleranceNs >= st_end)
      slow = &s;
  }
  ASSERT_NE(slow, nullptr) << report["slow_dispatches"].dump();
  ASSERT_FALSE((*slow)["stacks"].empty()) << slow->dump();
  int named = 0;
  std::string all;
  for (const auto& st : (*slow)["stacks"]) {
    std::vector<std::string> frames;
    for (const auto& f : st["frames"]) frames.push_back(f.get<std::string>());
    for (const auto& f : frames) all += f + " < ";
    all += "\n";
    const int busy = find_frame(frames, "busy_for", {busy_while, busy_add});
    const int stall = find_frame(frames, "App.stall", {stall_call});
    const int run_at = find_frame(frames, "App.run", {loop_run});
    if (busy < 0 || stall < 0) continue;
    // Callee before caller, the loop's own frame outermost.
    EXPECT_LT(busy, stall) << all;
    if (run_at >= 0) EXPECT_LT(stall, run_at) << all;
    ++named;
  }
  EXPECT_GT(named, 0) << "no stack names busy_for and App.stall at lines "
                      << busy_while << "/" << busy_add << " and " << stall_call
                      << ":\n"
                      << all;
}

}  // namespace
}  // namespace lt_test
