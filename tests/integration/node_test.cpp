// JIT frames from perf maps: Node run with --perf-basic-prof writes
// /tmp/perf-PID.map, and the stacks of its slow timer dispatches name the
// JavaScript function that was busy. Ground truth: the program's own log
// of each busy run (tests/programs/node_timer.js), CLOCK_MONOTONIC.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

constexpr char kNode[] = "/usr/bin/node";
constexpr int kRuns = 3;
constexpr int kBusyMs = 200;
// A dispatch contains its busy run, which starts a little after it (Node's
// processTimers and listOnTimeout run first, the callback may be compiled
// lazily) and is followed by the log write and the 20 ms tick timer that
// expired meanwhile, all in the same RunTimers call.
constexpr int64_t kStartWindowNs = 20'000'000;
constexpr int64_t kExtraNs = 25'000'000;

void run_node_timers(const std::string& call_graph) {
  TempDir dir;
  std::string log = dir.file("node.jsonl"), out = dir.file("r.json");
  int64_t steal_before = steal_ns();
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "node", "--call-graph",
           call_graph, "--json", out, "--", kNode, "--perf-basic-prof",
           // Its V8 log, or it lands in the working directory.
           "--no-logfile-per-isolate", "--logfile=" + dir.file("v8.log"),
           tests_dir() + "/programs/node_timer.js", log, std::to_string(kRuns),
           std::to_string(kBusyMs)});
  const int64_t tol = kExtraNs + (steal_ns() - steal_before);
  std::vector<json> lines = read_jsonl(log);
  // Node leaves its perf map behind when it exits.
  std::vector<json> ready = events(lines, "ready");
  if (!ready.empty())
    std::remove(
        ("/tmp/perf-" + std::to_string(ready[0]["pid"].get<int>()) + ".map")
            .c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // With a perf map the JavaScript is named: no hint to turn it on (the
  // text report is there, without -q).
  EXPECT_NE(r.out.find("SLOW DISPATCHES"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hint: JavaScript frames are unnamed"),
            std::string::npos)
      << r.out;
  std::vector<json> busy = events(lines, "busy");
  ASSERT_EQ(busy.size(), static_cast<size_t>(kRuns));
  json report = read_json(out);
  expect_split_adds_up(report);

  // Callbacks into JavaScript that are not timers (an immediate, an fs
  // completion): each within one "Node callback" span
  // (node::InternalMakeCallback), which holds little else.
  std::vector<json> callbacks = events(lines, "callback_busy");
  ASSERT_EQ(callbacks.size(), 2u);
  for (const json& c : callbacks) {
    uint64_t start = std::stoull(c["start_ns"].get<std::string>());
    uint64_t end = std::stoull(c["end_ns"].get<std::string>());
    const json* match = nullptr;
    for (const json& s : report["slow_dispatches"]) {
      uint64_t s0 = s["start_ns"], dur = s["duration_ns"];
      if (s["target"] == "Node callback" && s0 <= start && s0 + dur >= end)
        match = &s;
    }
    ASSERT_NE(match, nullptr) << c.dump() << "\n"
                              << report["slow_dispatches"].dump();
    EXPECT_LE((*match)["duration_ns"].get<int64_t>(), diff(end, start) + tol)
        << match->dump();
  }

  for (const json& b : busy) {
    uint64_t start = std::stoull(b["start_ns"].get<std::string>());
    uint64_t end = std::stoull(b["end_ns"].get<std::string>());
    const json* match = nullptr;
    for (const json& s : report["slow_dispatches"]) {
      int64_t lead = diff(start, s["start_ns"].get<uint64_t>());
      if (lead >= 0 && lead < kStartWindowNs) match = &s;
    }
    ASSERT_NE(match, nullptr)
        << "busy run at " << start
        << " not reported: " << report["slow_dispatches"].dump();
    const json& s = *match;
    // The built-in node profile's timers phase: one call per batch of
    // expired JS timers (nm -C /usr/bin/node | grep RunTimers).
    EXPECT_EQ(s["target"], "Node timers") << s.dump();
    int64_t logged = diff(end, start);
    int64_t traced = s["duration_ns"].get<int64_t>();
    EXPECT_GE(traced, logged) << "the dispatch contains the busy run";
    EXPECT_LE(traced, logged + tol);

    ASSERT_FALSE(s["stacks"].empty()) << s.dump();
    bool named = false;
    std::string all;
    for (const json& st : s["stacks"]) {
      for (const json& f : st["frames"]) {
        std::string frame = f.get<std::string>();
        all += frame + " < ";
        // "JS:*busyLoopForLooptrace /path/node_timer.js:25:30+0x4f9"
        if (frame.find("busyLoopForLooptrace") != std::string::npos &&
            frame.find("node_timer.js") != std::string::npos)
          named = true;
      }
      all += "\n";
    }
    EXPECT_TRUE(named) << "no JIT frame names busyLoopForLooptrace:\n" << all;
    // The dispatch probe's own caller chain, from node's .symtab.
    EXPECT_NE(all.find("node::Environment::RunTimers"), std::string::npos)
        << all;
  }
}

void require_node() { LT_REQUIRE_INSTALLED(access(kNode, X_OK) == 0, kNode); }

// V8's JIT code keeps frame pointers, and so does Node's own C++: the
// kernel's frame-pointer walk already reaches the JS frames.
TEST(NodePerfMap, BusyTimerNamedInFramePointerStacks) {
  LT_REQUIRE_BPF();
  require_node();
  if (IsSkipped() || HasFatalFailure()) return;
  run_node_timers("fp");
}

// Without --perf-basic-prof, the busy timer's JavaScript frames are named
// from V8's own metadata (tests/integration/node_js_test.cpp checks them
// against err.stack): no hint to restart node with a flag.
TEST(NodePerfMap, WithoutAPerfMapJsIsNamedAndNoHintIsGiven) {
  LT_REQUIRE_BPF();
  require_node();
  if (IsSkipped() || HasFatalFailure()) return;
  TempDir dir;
  std::string log = dir.file("node.jsonl");
  RunResult r = run({looptrace_bin(), "record", "--profile", "node", "--",
                     kNode, tests_dir() + "/programs/node_timer.js", log, "1",
                     std::to_string(kBusyMs)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(events(read_jsonl(log), "busy").size(), 1u);
  EXPECT_EQ(r.out.find("hint: JavaScript frames are unnamed"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("busyLoopForLooptrace (node_timer.js:"),
            std::string::npos)
      << r.out;
}

TEST(NodePerfMap, BusyTimerNamedInDwarfStacks) {
  LT_REQUIRE_BPF();
  require_node();
  if (IsSkipped() || HasFatalFailure()) return;
  run_node_timers("dwarf");
}

}  // namespace
}  // namespace lt_test
