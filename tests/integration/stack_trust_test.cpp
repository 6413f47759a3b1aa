// No frame that cannot be trusted, with no --call-graph option, in
// thousands of stacks of Debian's python3 (a GLib loop) and Xvfb, both
// built without frame pointers: every frame's address lies in an
// executable mapping of its process (the process's /proc/PID/maps, read by
// the test while it still runs), and every stack either reaches its
// thread's start or is marked truncated. Stack samples, blocking points
// and the wakers of the process's own threads are all checked.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

// Python frames carry looptrace's own tag, not an address (they are named
// from the interpreter's frames): no mapping to check.
constexpr uint64_t kPyFrameTag = 0xfe00'0000'0000'0000ull;

// The executable mappings of pid, from its maps.
std::vector<std::pair<uint64_t, uint64_t>> exec_ranges(int pid) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  std::ifstream in(fmt::format("/proc/{}/maps", pid));
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &lo, &hi, perms) == 3 &&
        perms[2] == 'x')
      out.emplace_back(lo, hi);
  }
  return out;
}

struct Checked {
  uint64_t stacks = 0;   // samples, blocking points and wakeups checked
  uint64_t whole = 0;    // of them, reaching the thread's start
  std::string problems;  // the first few bad stacks
};

// One JSON stack (stacks[], blocked[] or wakers[] entry) of pid.
void check_stack(const json& st, const json& detail,
                 const std::vector<std::pair<uint64_t, uint64_t>>& exec,
                 Checked* c) {
  const uint64_t count = st["count"];
  c->stacks += count;
  std::string bad;
  for (const json& f : detail) {
    const uint64_t a = f["addr"];
    if ((a & kPyFrameTag) == kPyFrameTag) continue;
    bool in = false;
    for (const auto& r : exec) in = in || (a >= r.first && a < r.second);
    if (!in) bad += fmt::format("0x{:x} in no executable mapping; ", a);
  }
  static const std::set<std::string> starts = {"_start", "clone3", "clone",
                                               "start_thread"};
  const bool whole = !detail.empty() && detail.back()["function"].is_string() &&
                     starts.count(detail.back()["function"]) != 0;
  if (whole) c->whole += count;
  if (!whole && st["truncated"] != true)
    bad += "neither reaches the thread's start nor is marked truncated; ";
  if (!bad.empty() && c->problems.size() < 4000)
    c->problems += bad + st.dump() + "\n";
}

// Every stack of pid's slow spans in a report.
void check_report(const json& report, const char* list, int pid, Checked* c) {
  const auto exec = exec_ranges(pid);
  ASSERT_FALSE(exec.empty()) << "pid " << pid << " has no maps";
  for (const json& s : report[list]) {
    if (s["pid"] != pid) continue;
    for (const json& st : s["stacks"])
      check_stack(st, st["frames_detail"], exec, c);
    if (!s.contains("blocked")) continue;
    for (const json& b : s["blocked"]) {
      check_stack(b, b["frames_detail"], exec, c);
      for (const json& w : b["wakers"])
        if (w["pid"] == pid && w.contains("frames_detail"))
          check_stack(w, w["frames_detail"], exec, c);
    }
  }
}

// A GLib loop in Debian's python3 whose callbacks are busy 20 ms of every
// 25, sampled at 4 kHz for `seconds`.
void python_stacks(int seconds, Checked* c) {
  TempDir dir;
  const std::string out = dir.file("r.json");
  std::vector<std::string> argv = {
      "/usr/bin/python3", tests_dir() + "/programs/glib_loop.py",
      "--kind",           "busy",
      "--duration",       std::to_string(seconds * 1000 + 30000)};
  for (int at = 300; at < seconds * 1000 + 10000; at += 25)
    argv.insert(argv.end(), {"--stall", fmt::format("20@{}", at)});
  Process app(argv, dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "glib_loop: ready", 10000));
  RunResult r =
      run({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
           "--dispatch", "libglib-2.0.so.0:g_main_context_dispatch", "--slow",
           "10ms", "--sample-after", "1ms", "--sample-freq", "4000",
           "--duration", fmt::format("{}s", seconds), "-q", "--json", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(app.running()) << read_file(dir.file("app.err"));
  json report = read_json(out);
  check_report(report, "slow_dispatches", app.pid(), c);
  EXPECT_EQ(report["lost"]["ringbuf_full"], 0) << report["lost"].dump();
  app.signal(SIGTERM);
  app.wait(5000);
}

// Xvfb waiting for its clients (WaitForSomething), who connect and move the
// pointer: where it blocks and its samples.
void xvfb_stacks(int seconds, Checked* c) {
  TempDir dir;
  Process xvfb({"/usr/bin/Xvfb", "-displayfd", "1", "-nolisten", "tcp",
                "-screen", "0", "640x480x24"},
               dir.file("xvfb.out"), dir.file("xvfb.err"));
  std::string display;
  for (int i = 0; i < 500 && display.empty(); ++i) {
    std::string n = read_file(dir.file("xvfb.out"));
    if (n.find('\n') != std::string::npos)
      display = ":" + n.substr(0, n.find('\n'));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(display.empty()) << read_file(dir.file("xvfb.err"));
  const std::string out = dir.file("r.json");
  Process lt({looptrace_bin(), "record", "-p", std::to_string(xvfb.pid()),
              "--dispatch", "Xvfb:WaitForSomething", "--slow", "200us",
              "--duration", fmt::format("{}s", seconds), "--json", out},
             dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 30000))
      << read_file(dir.file("lt.err"));
  RunResult clients = run(
      {"/bin/sh", "-c",
       fmt::format("end=$(($(date +%s) + {})); i=0; while [ $(date +%s) -lt "
                   "$end ]; do i=$((i + 1)); DISPLAY={} xdotool mousemove "
                   "$((i % 600)) $((i % 400)) getmouselocation >/dev/null; "
                   "done",
                   seconds, display)},
      (seconds + 30) * 1000);
  EXPECT_EQ(clients.exit_code, 0) << clients.err;
  ASSERT_EQ(lt.wait((seconds + 60) * 1000), 0) << read_file(dir.file("lt.err"));
  check_report(read_json(out), "slow_dispatches", xvfb.pid(), c);
  xvfb.signal(SIGTERM);
  xvfb.wait(5000);
}

TEST(DefaultUnwind, NoGarbageFrameInPython3AndXvfb) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_INSTALLED(have_system_python() && have_xvfb_and_xdotool(),
                       "python3, Xvfb or xdotool");
  Checked py, x;
  ASSERT_NO_FATAL_FAILURE(xvfb_stacks(4, &x));
  // How many samples a run gets depends on the machine's load: runs until
  // there are enough.
  for (int round = 0; round < 5 && py.stacks + x.stacks < 10000; ++round)
    ASSERT_NO_FATAL_FAILURE(python_stacks(6, &py));
  EXPECT_EQ(py.problems, "");
  EXPECT_EQ(x.problems, "");
  EXPECT_GE(py.stacks + x.stacks, 10000u)
      << py.stacks << " python3, " << x.stacks << " Xvfb";
  EXPECT_GE(x.stacks, 100u);
  // Most of them whole: the CFI reaches the thread's start.
  EXPECT_GE(py.whole, py.stacks * 9 / 10);
  EXPECT_GE(x.whole, x.stacks * 9 / 10);
  std::printf("checked %llu python3 stacks (%llu whole), %llu Xvfb (%llu)\n",
              static_cast<unsigned long long>(py.stacks),
              static_cast<unsigned long long>(py.whole),
              static_cast<unsigned long long>(x.stacks),
              static_cast<unsigned long long>(x.whole));
}

}  // namespace
}  // namespace lt_test
