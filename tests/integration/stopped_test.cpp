// A stopped process is not a slow one: SIGSTOP inside a dispatch and
// between dispatches, timed by the test itself (CLOCK_MONOTONIC around
// kill()), shows as stopped time in the span's split and as the reason
// for the deliveries due meanwhile, never as blocked time or as lag behind
// dispatches.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness.h"

namespace lt_test {
namespace {

// SIGSTOP and SIGCONT take effect when the target next enters the kernel
// or is scheduled: a few ms on a loaded machine.
constexpr int64_t kStopToleranceNs = 30'000'000;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<uint64_t>(ts.tv_nsec);
}

void sleep_until(uint64_t t) {
  uint64_t n = now_ns();
  if (t > n) std::this_thread::sleep_for(std::chrono::nanoseconds(t - n));
}

struct Stop {
  uint64_t from = 0;  // just before SIGSTOP
  uint64_t to = 0;    // just after SIGCONT
  int64_t length() const { return static_cast<int64_t>(to - from); }
};

Stop stop_for(pid_t app, uint64_t at, std::chrono::milliseconds len) {
  sleep_until(at);
  Stop s;
  s.from = now_ns();
  kill(app, SIGSTOP);
  std::this_thread::sleep_for(len);
  kill(app, SIGCONT);
  s.to = now_ns();
  return s;
}

TEST(StoppedTime, SigstopIsStoppedNotBlockedNorLag) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  // A 3 s busy stall at 1 s (late on a loaded machine); ordinary dispatches
  // around it. The app runs under looptrace, traced from its first instruction.
  Process tracer({looptrace_bin(), "record", "--profile", "refapp", "--json",
                  json, "--", refapp_bin(), "--rate", "200", "--duration",
                  "6500", "--stall", "busy:3000@1000", "--log", log},
                 dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(log, "\"start\"", 30000))
      << read_file(dir.file("lt.err"));
  const nlohmann::json start = events(read_jsonl(log), "start")[0];
  const uint64_t t0 = start["t0_ns"];
  const pid_t app = start["pid"].get<int>();
  const Stop in_stall =
      stop_for(app, t0 + 2'200'000'000, std::chrono::milliseconds(500));
  // The stall is logged when it ends: then a stop between dispatches.
  ASSERT_TRUE(wait_for_text(log, "\"stall\"", 30000));
  const Stop between =
      stop_for(app, now_ns() + 300'000'000, std::chrono::milliseconds(500));
  ASSERT_EQ(tracer.wait(30000), 0) << read_file(dir.file("lt.err"));

  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const nlohmann::json& st = stalls[0];
  ASSERT_LT(st["start_ns"].get<uint64_t>(), in_stall.from)
      << "the first stop must fall inside the stall (machine too slow?)";
  ASSERT_GT(st["end_ns"].get<uint64_t>(), in_stall.to);
  ASSERT_LT(st["end_ns"].get<uint64_t>(), between.from);
  nlohmann::json report = read_json(json);
  expect_split_adds_up(report);

  // The stall: its stopped time is the stop's, its blocked time none.
  const nlohmann::json* stall = nullptr;
  for (const auto& s : report["slow_dispatches"])
    if (std::llabs(diff(s["start_ns"], st["start_ns"])) < 2'000'000) stall = &s;
  ASSERT_NE(stall, nullptr) << report["slow_dispatches"].dump();
  ASSERT_TRUE(stall->contains("stopped_ns")) << stall->dump();
  EXPECT_LE(std::llabs(diff((*stall)["stopped_ns"], 0) - in_stall.length()),
            kStopToleranceNs)
      << stall->dump() << " vs a stop of " << in_stall.length() << " ns";
  EXPECT_LT((*stall)["blocked_ns"].get<uint64_t>(), 20'000'000u)
      << stall->dump();

  // Between dispatches: the deliveries due while it was stopped are
  // explained by the stop, not by dispatches that ran instead.
  uint64_t late_in_stop = 0;
  for (const auto& d : report["slow_deliveries"]) {
    uint64_t due = d["due_ns"];
    if (due < between.from || due + kStopToleranceNs > between.to) continue;
    ++late_in_stop;
    ASSERT_TRUE(d.contains("stopped_ns")) << d.dump();
    // Stopped from (about) its due time to SIGCONT.
    EXPECT_LE(std::llabs(diff(d["stopped_ns"], 0) -
                         static_cast<int64_t>(between.to - due)),
              kStopToleranceNs)
        << d.dump();
    // A dispatch that ran meanwhile is named only if it was itself the one
    // stopped (the stop fell inside it): its split then says so.
    for (const auto& i : d["running_instead"]) {
      // Indices into the spans the report lists once.
      const auto& r = report["blamed_spans"].at(i.get<size_t>());
      if (r["start_ns"].get<uint64_t>() + kStopToleranceNs > between.to)
        continue;
      const nlohmann::json* x = nullptr;
      for (const auto& s : report["slow_dispatches"])
        if (s["start_ns"] == r["start_ns"]) x = &s;
      ASSERT_NE(x, nullptr) << r.dump();
      EXPECT_GE(x->value("stopped_ns", 0) + kStopToleranceNs,
                static_cast<uint64_t>(between.length()))
          << "blamed on a dispatch for the stopped interval: " << d.dump();
    }
  }
  EXPECT_GT(late_in_stop, 50u) << "200 messages a second for 0.5 s";
  bool backlog_found = false;
  for (const auto& b : report["delivery_backlogs"]) {
    if (b["first_due_ns"].get<uint64_t>() > between.to ||
        b["last_dispatch_ns"].get<uint64_t>() < between.from)
      continue;
    backlog_found = true;
    ASSERT_TRUE(b.contains("stopped_ns")) << b.dump();
    // Both stops, where the backlog lasted from one to the other.
    int64_t expected = 0;
    for (const Stop& x : {in_stall, between}) {
      uint64_t from = std::max<uint64_t>(x.from, b["first_due_ns"]);
      uint64_t to = std::min<uint64_t>(x.to, b["last_dispatch_ns"]);
      if (to > from) expected += static_cast<int64_t>(to - from);
    }
    EXPECT_LE(std::llabs(diff(b["stopped_ns"], 0) - expected),
              2 * kStopToleranceNs)
        << b.dump();
  }
  EXPECT_TRUE(backlog_found) << report["delivery_backlogs"].dump();
  const std::string text = read_file(dir.file("lt.out"));
  EXPECT_NE(text.find("thread stopped "), std::string::npos) << text;
  EXPECT_EQ(text.find("behind dispatches each shorter"), std::string::npos)
      << text;
}

// A cgroup v2 freezer (a paused container) is stopped time too.
TEST(StoppedTime, CgroupFreezerIsStoppedNotBlocked) {
  LT_REQUIRE_BPF();
  std::string root;
  for (const char* r : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
    if (access((std::string(r) + "/cgroup.controllers").c_str(), F_OK) == 0)
      root = r;
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string cg =
      root + "/looptrace-test-freeze-" + std::to_string(getpid());
  if (mkdir(cg.c_str(), 0755) != 0) GTEST_SKIP() << "cannot create " << cg;
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  Process tracer({looptrace_bin(), "record", "--profile", "refapp", "--json",
                  json, "--", refapp_bin(), "--rate", "200", "--duration",
                  "5000", "--stall", "busy:3000@1000", "--log", log},
                 dir.file("lt.out"), dir.file("lt.err"));
  Stop frozen;
  {
    EXPECT_TRUE(wait_for_text(log, "\"start\"", 30000))
        << read_file(dir.file("lt.err"));
    const nlohmann::json start = events(read_jsonl(log), "start")[0];
    const uint64_t t0 = start["t0_ns"];
    const int app = start["pid"].get<int>();
    write_file(cg + "/cgroup.procs", std::to_string(app));
    sleep_until(t0 + 2'200'000'000);
    frozen.from = now_ns();
    write_file(cg + "/cgroup.freeze", "1");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    write_file(cg + "/cgroup.freeze", "0");
    frozen.to = now_ns();
  }
  const int rc = tracer.wait(30000);
  rmdir(cg.c_str());  // empty once the app exited
  ASSERT_EQ(rc, 0) << read_file(dir.file("lt.err"));
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_LT(stalls[0]["start_ns"].get<uint64_t>(), frozen.from);
  ASSERT_GT(stalls[0]["end_ns"].get<uint64_t>(), frozen.to);
  nlohmann::json report = read_json(json);
  expect_split_adds_up(report);
  const nlohmann::json* stall = nullptr;
  for (const auto& s : report["slow_dispatches"])
    if (std::llabs(diff(s["start_ns"], stalls[0]["start_ns"])) < 2'000'000)
      stall = &s;
  ASSERT_NE(stall, nullptr) << report["slow_dispatches"].dump();
  ASSERT_TRUE(stall->contains("stopped_ns")) << stall->dump();
  EXPECT_LE(std::llabs(diff((*stall)["stopped_ns"], 0) - frozen.length()),
            kStopToleranceNs)
      << stall->dump() << " vs a freeze of " << frozen.length() << " ns";
  EXPECT_LT((*stall)["blocked_ns"].get<uint64_t>(), 20'000'000u)
      << stall->dump();
}

}  // namespace
}  // namespace lt_test
