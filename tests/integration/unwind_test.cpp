// Stacks of programs built without frame pointers (as distributions build
// them): --call-graph dwarf, and auto (the default), unwind samples by the
// CFI in .eh_frame. Ground truth: the reference app's own call chain
// (refapp/README.md) and its log of each stall.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

// The function of a frame "function+0x12"; "0x7f... (module)" as it is.
std::string function_of(const std::string& frame) {
  std::string f = frame;
  size_t plus = f.rfind("+0x");
  if (plus != std::string::npos) f.resize(plus);
  return f;
}

const json* span_of(const json& report, const json& stall) {
  for (const json& s : report["slow_dispatches"])
    if (std::llabs(diff(s["start_ns"], stall["start_ns"])) < 5'000'000)
      return &s;
  return nullptr;
}

// The refapp profile's dispatch probe, on `app` (the built-in profile
// names the frame-pointer build).
std::string dispatch_profile(const TempDir& dir, const std::string& app) {
  json probe = {
      {"role", "dispatch"},
      {"binary", app},
      {"symbol", "refapp::Looper::dispatchMessage(refapp::Message*)"},
      {"keys",
       {{{"name", "target"}, {"expr", "*(*(arg1+0))"}, {"format", "vtable"}},
        {{"name", "what"}, {"expr", "u32 *(arg1+16)"}, {"format", "int"}}}}};
  json profile = {{"name", "refapp-dispatch"}, {"probes", {probe}}};
  std::string path = dir.file("profile.json");
  write_file(path, profile.dump());
  return path;
}

// Runs `app` under --call-graph `mode` (empty: no option) with two busy
// stalls; the stack most samples of each stall were in, as function names.
std::vector<std::vector<std::string>> stall_stacks(const std::string& app,
                                                   const std::string& mode,
                                                   std::vector<json>* raw) {
  TempDir dir;
  std::string log = dir.file("app.jsonl"), out = dir.file("r.json");
  std::vector<std::string> cmd = {looptrace_bin(), "record", "--profile",
                                  dispatch_profile(dir, app), "-q"};
  if (!mode.empty()) cmd.insert(cmd.end(), {"--call-graph", mode});
  cmd.insert(cmd.end(), {"--json", out, "--", app, "--rate", "100",
                         "--duration", "2200", "--stall", "busy:300@500",
                         "--stall", "busy:300@1300", "--log", log});
  RunResult r = run(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  EXPECT_EQ(stalls.size(), 2u);
  json report = read_json(out);
  expect_split_adds_up(report);
  std::vector<std::vector<std::string>> stacks;
  for (const json& st : stalls) {
    const json* s = span_of(report, st);
    EXPECT_NE(s, nullptr) << "stall not reported: " << st.dump();
    if (!s || (*s)["stacks"].empty()) {
      stacks.emplace_back();
      continue;
    }
    raw->push_back((*s)["stacks"][0]);
    std::vector<std::string> names;
    for (const json& f : (*s)["stacks"][0]["frames"])
      names.push_back(function_of(f.get<std::string>()));
    stacks.push_back(names);
  }
  return stacks;
}

bool contains(const std::vector<std::string>& v, const std::string& what) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) {
    return s.find(what) != std::string::npos;
  });
}

// The stalls of `app` recorded under --call-graph `mode` (empty: none)
// have the app's whole call chain, down to the thread's start.
void expect_whole_app_stacks(const std::string& app, const std::string& mode) {
  std::vector<json> raw;
  auto stacks = stall_stacks(app, mode, &raw);
  ASSERT_EQ(stacks.size(), 2u);
  // The app's call chain (refapp/README.md), innermost first.
  const std::vector<std::string> chain = {
      "refapp::busyStall", "refapp::StallHandler::handleMessage",
      "refapp::Looper::dispatchMessage", "refapp::Looper::pollOnce",
      "refapp::Looper::loop"};
  for (const auto& names : stacks) {
    std::string all;
    for (const std::string& n : names) all += n + " < ";
    size_t at = 0;
    for (const std::string& fn : chain) {
      auto it = std::find_if(names.begin() + static_cast<long>(at), names.end(),
                             [&](const std::string& n) {
                               return n.find(fn) != std::string::npos;
                             });
      ASSERT_NE(it, names.end()) << fn << " missing, in order, from " << all;
      at = static_cast<size_t>(it - names.begin()) + 1;
    }
    // Then the thread's start: std::thread's in libstdc++, start_thread and
    // clone3 in libc, the last, named from glibc's separate debug file
    // (libc6-dbg, found by build-id: Debian's libc.so.6 has no .symtab).
    ASSERT_GE(names.size(), at + 2) << all;
    EXPECT_TRUE(contains({names.begin() + static_cast<long>(at), names.end()},
                         "libstdc++"))
        << all;
    EXPECT_NE(names.back().find("clone3"), std::string::npos) << all;
    EXPECT_NE(names[names.size() - 2].find("start_thread"), std::string::npos)
        << all;
  }
  for (const json& s : raw) {
    EXPECT_EQ(s["unwind"], "dwarf") << s.dump();
    EXPECT_EQ(s["truncated"], false) << s.dump();
  }
}

TEST(DwarfUnwind, AppWithoutFramePointersGivesTheWholeStack) {
  LT_REQUIRE_BPF();
  expect_whole_app_stacks(refapp_nofp_bin(), "dwarf");
}

// No option: each module unwound as it allows, whole stacks with frame
// pointers or without.
TEST(DefaultUnwind, AppWithoutFramePointersGivesTheWholeStack) {
  LT_REQUIRE_BPF();
  expect_whole_app_stacks(refapp_nofp_bin(), "");
}

TEST(DefaultUnwind, AppWithFramePointersGivesTheWholeStack) {
  LT_REQUIRE_BPF();
  expect_whole_app_stacks(refapp_bin(), "");
}

TEST(DwarfUnwind, FramePointersAloneLoseTheCallersThere) {
  LT_REQUIRE_BPF();
  // The same app and stalls with frame pointers only: what dwarf fixes.
  std::vector<json> raw;
  auto stacks = stall_stacks(refapp_nofp_bin(), "fp", &raw);
  ASSERT_EQ(stacks.size(), 2u);
  for (const auto& names : stacks)
    EXPECT_FALSE(contains(names, "refapp::Looper::loop") &&
                 contains(names, "start_thread"))
        << "frame pointers of a -fomit-frame-pointer build gave a whole "
           "stack: the test app is not what it should be";
}

TEST(DwarfUnwind, SameFramesAsTheFramePointerBuild) {
  LT_REQUIRE_BPF();
  std::vector<json> raw_fp, raw_dwarf;
  auto fp = stall_stacks(refapp_bin(), "fp", &raw_fp);
  auto dwarf = stall_stacks(refapp_nofp_bin(), "dwarf", &raw_dwarf);
  ASSERT_EQ(fp.size(), 2u);
  ASSERT_EQ(dwarf.size(), 2u);
  // The app's own frames, from the stalling function to the loop: the same
  // functions in the same order in both builds.
  auto app_frames = [](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const std::string& n : names)
      if (n.find("refapp::") != std::string::npos) out.push_back(n);
    return out;
  };
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(app_frames(dwarf[i]), app_frames(fp[i]));
}

TEST(DwarfUnwind, DebiansPython3GlibLoopDownToMain) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  // Debian builds python3 and GLib without frame pointers: a busy
  // callback's stack by frame pointers is a frame or two.
  TempDir dir;
  std::string log = dir.file("glib.jsonl"), out = dir.file("r.json");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--dispatch",
                     "libglib-2.0.so.0:g_main_context_dispatch",
                     "--slow",
                     "50ms",
                     "--call-graph",
                     "dwarf",
                     "--json",
                     out,
                     "-q",
                     "--",
                     "/usr/bin/python3",
                     tests_dir() + "/programs/glib_loop.py",
                     "--kind",
                     "busy",
                     "--stall",
                     "150@400",
                     "--duration",
                     "1000",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  json report = read_json(out);
  expect_split_adds_up(report);
  const json* m = nullptr;
  for (const json& s : report["slow_dispatches"])
    if (s["start_ns"].get<uint64_t>() <=
            stalls[0]["start_ns"].get<uint64_t>() &&
        s["start_ns"].get<uint64_t>() + s["duration_ns"].get<uint64_t>() >=
            stalls[0]["end_ns"].get<uint64_t>())
      m = &s;
  ASSERT_NE(m, nullptr) << report["slow_dispatches"].dump();
  ASSERT_FALSE((*m)["stacks"].empty());
  const json& st = (*m)["stacks"][0];
  std::vector<std::string> names;
  std::string all;
  for (const json& f : st["frames"]) {
    names.push_back(function_of(f.get<std::string>()));
    all += names.back() + " < ";
  }
  EXPECT_EQ(st["unwind"], "dwarf") << all;
  // The interpreter evaluating the callback, GLib dispatching it from its
  // main loop, and python's entry point (python3's exported symbols).
  EXPECT_TRUE(contains(names, "_PyEval_EvalFrameDefault")) << all;
  EXPECT_TRUE(contains(names, "g_main_context_dispatch")) << all;
  EXPECT_TRUE(contains(names, "g_main_loop_run")) << all;
  EXPECT_TRUE(contains(names, "Py_BytesMain") || contains(names, "main"))
      << all;
}

}  // namespace
}  // namespace lt_test
