// AOSP's own native Looper (Debian's android-libutils, AOSP 10;
// tests/programs/android_looper.cpp) traced with `looptrace record -p PID`
// and no other option: the android profile chosen from libutils.so, each
// native message and fd callback the span of the virtual call pollInner
// makes, checked against the program's own CLOCK_MONOTONIC log.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

const std::string kPrograms = LT_TEST_PROGRAMS_DIR;
constexpr int64_t kToleranceNs = 200'000;  // the 0.2 ms

// The slow span of the program's thread that ran the logged dispatch d.
const nlohmann::json* span_of(const nlohmann::json& report,
                              const nlohmann::json& d) {
  const nlohmann::json* best = nullptr;
  for (const auto& s : report["slow_dispatches"]) {
    const int64_t start = s["start_ns"],
                  end = start + s["duration_ns"].get<int64_t>();
    if (s["tid"] == d["tid"] && start <= d["start_ns"].get<int64_t>() &&
        end >= d["end_ns"].get<int64_t>())
      best = &s;
  }
  return best;
}

// The built test program: a test without it fails where BPF tests must
// run (LOOPTRACE_REQUIRE_BPF=1), else skips.
#define LT_REQUIRE_ANDROID_PROGRAM(prog)                                 \
  do {                                                                   \
    if (access((prog).c_str(), X_OK) != 0) {                             \
      if (bpf_required())                                                \
        FAIL() << (prog)                                                 \
               << " not built: android-libutils-dev (scripts/setup.sh)"; \
      GTEST_SKIP() << (prog) << " not built (android-libutils-dev)";     \
    }                                                                    \
  } while (0)

// The program run with `args` and its log in dir, traced from its ready
// line by `looptrace record -p PID` plus `lt_args` to its end: its log,
// looptrace's JSON and stderr. `before(pid)` runs first, if given.
struct Traced {
  int pid = 0;
  std::vector<nlohmann::json> truth;
  nlohmann::json report;
  std::string lt_err;
};
void trace_program(const TempDir& dir, const std::string& prog,
                   std::vector<std::string> args,
                   const std::vector<std::string>& lt_args, Traced* out,
                   const std::function<void(int)>& before = {}) {
  const std::string log = dir.file("truth.jsonl"), json = dir.file("r.json");
  args.insert(args.begin(), {prog, "--log", log});
  Process app(args, dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 10000))
      << read_file(dir.file("app.err"));
  out->pid = app.pid();
  if (before) before(app.pid());
  std::vector<std::string> argv{looptrace_bin(),           "record", "-p",
                                std::to_string(app.pid()), "--json", json};
  argv.insert(argv.end(), lt_args.begin(), lt_args.end());
  Process lt(argv, dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 15000))
      << read_file(dir.file("lt.err"));
  ASSERT_EQ(app.wait(20000), 0) << read_file(dir.file("app.err"));
  ASSERT_EQ(lt.wait(15000), 0) << read_file(dir.file("lt.err"));
  out->lt_err = read_file(dir.file("lt.err"));
  out->truth = read_jsonl(log);
  out->report = read_json(json);
}

// The stalls the program logged, each with the slow span that ran it (a
// stall without one is a failure here, and left out).
std::vector<std::pair<nlohmann::json, const nlohmann::json*>> stalled_spans(
    const Traced& t) {
  std::vector<std::pair<nlohmann::json, const nlohmann::json*>> out;
  for (const auto& d : events(t.truth, "dispatch")) {
    if (d["stall"].is_null()) continue;
    const nlohmann::json* s = span_of(t.report, d);
    if (s == nullptr) {
      ADD_FAILURE() << "no slow span: " << d.dump();
      continue;
    }
    out.emplace_back(d, s);
  }
  return out;
}

// Delivery lag, from sendMessageAtTime's due time to the dispatch: each
// message the program saw start 16 ms (the default --slow-delivery) or
// more after its due time is a slow delivery with that lag, named by its
// handler's class and what; nothing else is; the lag distribution counts
// every message dispatched.
void expect_delivery_lag_as_logged(const nlohmann::json& report,
                                   const std::vector<nlohmann::json>& truth,
                                   int pid) {
  constexpr int64_t kSlow = 16'000'000;
  const auto name = [](const std::string& handler, int what) {
    return fmt::format("Looper message (anonymous namespace)::{} what={}",
                       handler == "tick" ? "TickHandler" : "PostHandler", what);
  };
  std::map<std::string, int64_t> due, lag;  // by target, from the log
  for (const auto& p : events(truth, "post"))
    due[name(p["handler"], p["what"])] = p["due_ns"];
  for (const auto& d : events(truth, "dispatch")) {
    if (d["kind"] == "fd") continue;
    const std::string n =
        name(d["kind"] == "message" ? "tick" : "post", d["what"]);
    ASSERT_EQ(due.count(n), 1u) << n << " has no post in the log";
    lag[n] = d["start_ns"].get<int64_t>() - due[n];
  }
  std::map<std::string, const nlohmann::json*> reported;
  for (const auto& s : report["slow_deliveries"]) reported[s["target"]] = &s;
  size_t late = 0;
  for (const auto& [n, l] : lag) {
    auto it = reported.find(n);
    if (l >= kSlow + kToleranceNs) {
      ++late;
      EXPECT_NE(it, reported.end()) << n << " waited " << l;
    }
    if (it == reported.end()) continue;
    EXPECT_LE(std::llabs((*it->second)["lag_ns"].get<int64_t>() - l),
              kToleranceNs)
        << it->second->dump() << " logged lag " << l;
    EXPECT_EQ((*it->second)["due_ns"].get<int64_t>(), due[n]);
    reported.erase(it);
  }
  for (const auto& [n, s] : reported)
    ADD_FAILURE() << "late by looptrace, not by the log: " << s->dump()
                  << (lag.count(n) ? fmt::format(" logged lag {}", lag[n])
                                   : std::string(" never dispatched"));
  // The stalls (30 ms or more) hold back several poster messages each.
  EXPECT_GE(late, 5u);
  uint64_t lags = 0, dispatched = 0;
  for (const auto& t : report["threads"])
    if (t["pid"] == pid && t["role"] == "delivery")
      lags += t["count"].get<uint64_t>();
  const auto done = events(truth, "done");
  for (const char* k : {"messages", "posted"})
    dispatched += done.at(0)[k].get<uint64_t>();
  EXPECT_EQ(lags, dispatched);
}

TEST(AndroidLooper, EveryStallIsTheSpanOfItsVirtualCallNamedByItsClass) {
  LT_REQUIRE_BPF();
  const std::string prog = kPrograms + "/android_looper";
  LT_REQUIRE_ANDROID_PROGRAM(prog);
  TempDir dir;
  Traced traced;
  trace_program(dir, prog,
                {"--duration", "2500", "--stall", "busy:40@20", "--stall",
                 "sleep:50@60", "--stall", "lock:60@100", "--fd-stall",
                 "busy:30@10", "--fd-stall", "sleep:40@30"},
                {}, &traced);
  if (HasFatalFailure()) return;
  EXPECT_NE(traced.lt_err.find(fmt::format(
                "looptrace: profile android: pid {} maps ", traced.pid)),
            std::string::npos)
      << traced.lt_err;

  const auto& truth = traced.truth;
  const nlohmann::json& report = traced.report;
  const std::string log = dir.file("truth.jsonl");
  const auto dispatches = events(truth, "dispatch");
  const auto done = events(truth, "done");
  ASSERT_EQ(done.size(), 1u) << read_file(log);
  // Every dispatch counted once: the program started them after tracing.
  uint64_t counted = 0;
  for (const auto& t : report["threads"])
    if (t["pid"] == traced.pid && t["role"] == "dispatch")
      counted += t["count"].get<uint64_t>();
  EXPECT_EQ(counted, done[0]["messages"].get<uint64_t>() +
                         done[0]["posted"].get<uint64_t>() +
                         done[0]["callbacks"].get<uint64_t>());

  size_t stalls = 0;
  for (const auto& d : dispatches) {
    if (d["stall"].is_null()) continue;
    ++stalls;
    const nlohmann::json* s = span_of(report, d);
    ASSERT_NE(s, nullptr) << d.dump() << "\n"
                          << report["slow_dispatches"].dump();
    const int64_t dur =
        d["end_ns"].get<int64_t>() - d["start_ns"].get<int64_t>();
    EXPECT_LE(std::llabs((*s)["duration_ns"].get<int64_t>() - dur),
              kToleranceNs)
        << s->dump() << "\n"
        << d.dump();
    const std::string target = (*s)["target"];
    if (d["kind"] == "message") {
      // The class as the program's symbols name it (its own namespace).
      EXPECT_EQ(target, fmt::format("Looper message (anonymous "
                                    "namespace)::TickHandler what={}",
                                    d["what"].get<int>()))
          << s->dump();
    } else {
      EXPECT_EQ(target.rfind("Looper fd callback (anonymous "
                             "namespace)::PipeCallback fd=",
                             0),
                0u)
          << s->dump();
    }
    if (d["stall"] == "lock") {
      ASSERT_FALSE((*s)["blocked"].empty()) << s->dump();
      const auto& b = (*s)["blocked"][0];
      ASSERT_FALSE(b["wakers"].empty()) << b.dump();
      const auto unlocks = events(truth, "unlock");
      ASSERT_EQ(unlocks.size(), 1u);
      EXPECT_EQ(b["wakers"][0]["tid"], unlocks[0]["tid"]) << b.dump();
    }
  }
  EXPECT_EQ(stalls, 5u) << read_file(log);
  expect_delivery_lag_as_logged(report, truth, traced.pid);
  // Nothing else slow but what the program's own clock saw over 16 ms.
  for (const auto& s : report["slow_dispatches"]) {
    bool seen = false;
    for (const auto& d : dispatches)
      seen =
          seen || (s["tid"] == d["tid"] &&
                   std::llabs(s["start_ns"].get<int64_t>() -
                              d["start_ns"].get<int64_t>()) < 2'000'000 &&
                   d["end_ns"].get<int64_t>() - d["start_ns"].get<int64_t>() >
                       15'000'000);
    EXPECT_TRUE(seen) << "not slow by the program's log: " << s.dump();
  }
}

// The loop's idle time: each wait in pollInner's epoll_wait, against the
// program's own timing of every epoll_wait call (its own definition, which
// libutils' PLT call reaches); the waits another thread's Looper::wake()
// ended, against the waits that slept and returned the wake eventfd alone.
TEST(AndroidLooper, TheLoopsIdleTimeIsItsEpollWaitAndWakeIsWhatEndedIt) {
  LT_REQUIRE_BPF();
  const std::string prog = kPrograms + "/android_looper";
  LT_REQUIRE_ANDROID_PROGRAM(prog);
  TempDir dir;
  Traced traced;
  trace_program(dir, prog, {"--duration", "2500", "--stall", "busy:40@20"}, {},
                &traced);
  if (HasFatalFailure()) return;
  const auto waits = events(traced.truth, "wait");
  const auto done = events(traced.truth, "done");
  ASSERT_EQ(done.size(), 1u) << read_file(dir.file("truth.jsonl"));
  ASSERT_GE(waits.size(), 200u);
  const nlohmann::json* idle = nullptr;
  const nlohmann::json* woken = nullptr;
  for (const auto& t : traced.report["threads"]) {
    if (t["pid"] != traced.pid || t["tid"] != traced.pid) continue;
    if (t["role"] == "wait") idle = &t;
    if (t["role"] == "wake") woken = &t;
  }
  ASSERT_NE(idle, nullptr) << traced.report["threads"].dump();
  ASSERT_NE(woken, nullptr) << traced.report["threads"].dump();

  // Every wait counted once (the program timed them from its first
  // message, after tracing began), their sum its time in epoll_wait: each
  // call-site span is longer by the two uprobes around the call and the
  // program's own timing (about 2 us a wait here), never shorter.
  int64_t logged_ns = 0, woken_by_wake = 0;
  int64_t max_wake_ns = 0;
  const auto posts = events(traced.truth, "post");
  std::vector<int64_t> post_ns;
  for (const auto& p : posts)
    if (p["handler"] == "post")
      post_ns.push_back(p["due_ns"].get<int64_t>() - 3'000'000);
  for (const auto& w : waits) {
    const int64_t start = w["start_ns"], end = w["end_ns"];
    logged_ns += end - start;
    // Slept, and only the wake eventfd was ready: a wake() ended it.
    if (end - start < 500'000 || w["ready"] == 0 || w["pipe"] == true) continue;
    ++woken_by_wake;
    // The poster logs a post, calls sendMessageAtTime (and wake()), sleeps
    // 7 ms: the wake() that ended this wait is that of the last post logged
    // before the wait began or of a later one, so its latency is at most
    // the time from that post to the wait's end.
    auto it = std::lower_bound(post_ns.begin(), post_ns.end(), start);
    if (it != post_ns.begin())
      max_wake_ns = std::max(max_wake_ns, end - *(it - 1));
  }
  const auto n = static_cast<int64_t>(waits.size());
  EXPECT_GE((*idle)["count"].get<int64_t>(), n - 1);
  EXPECT_LE((*idle)["count"].get<int64_t>(), n + 1);
  const int64_t sum = (*idle)["sum_ns"];
  EXPECT_GE(sum, logged_ns - 1'000'000) << "logged " << logged_ns;
  EXPECT_LE(sum, logged_ns + n * 30'000) << "logged " << logged_ns;
  // The poster posts every 7 ms to a loop mostly asleep: most posts wake it.
  ASSERT_GE(woken_by_wake, 100);
  const int64_t by_wake = (*woken)["count"];
  EXPECT_GE(by_wake, woken_by_wake * 9 / 10) << "logged " << woken_by_wake;
  EXPECT_LE(by_wake, woken_by_wake * 11 / 10 + 5) << "logged " << woken_by_wake;
  EXPECT_GT((*woken)["max_ns"].get<int64_t>(), 0);
  EXPECT_LE((*woken)["max_ns"].get<int64_t>(), max_wake_ns + 200'000);
}

// Call sites are found in the library's own bytes: with another tracer's
// uprobes on them (this looptrace's, attached for every process), the
// breakpoints they put into every private mapping of the file must not be
// decoded as the code. A second looptrace on the same process resolves
// the same call sites.
TEST(AndroidLooper, ASecondTracerFindsTheCallSitesTheFirstProbes) {
  LT_REQUIRE_BPF();
  const std::string prog = kPrograms + "/android_looper";
  LT_REQUIRE_ANDROID_PROGRAM(prog);
  TempDir dir;
  Process app({prog, "--duration", "4000", "--log", dir.file("truth.jsonl")},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 10000))
      << read_file(dir.file("app.err"));
  const std::string pid = std::to_string(app.pid());
  Process first({looptrace_bin(), "record", "-p", pid, "-d", "3s"},
                dir.file("first.out"), dir.file("first.err"));
  ASSERT_TRUE(wait_for_text(dir.file("first.err"), "tracing", 15000))
      << read_file(dir.file("first.err"));
  RunResult second = run({looptrace_bin(), "check", "android", "-p", pid});
  EXPECT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("android: 5 of 5 probes resolve"),
            std::string::npos)
      << second.out << second.err;
  EXPECT_NE(second.out.find("(call qword ptr [rax + 0x10])"), std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("(call epoll_wait)"), std::string::npos)
      << second.out;
  EXPECT_EQ(first.wait(15000), 0) << read_file(dir.file("first.err"));
  EXPECT_EQ(app.wait(15000), 0);
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// The generic form: --dispatch-call BINARY:FUNCTION times every virtual
// call inside FUNCTION, each named by the class of the object called.
// Checked on AOSP's pollInner with no profile: the same stalls, the same
// classes; an offset that is no call of it is a usage error naming those
// that are.
TEST(DispatchCall, EveryVirtualCallInsideAFunctionIsASpanNamedByItsClass) {
  LT_REQUIRE_BPF();
  const std::string prog = kPrograms + "/android_looper";
  LT_REQUIRE_ANDROID_PROGRAM(prog);
  TempDir dir;
  const std::string fn = "libutils.so:android::Looper::pollInner(int)";
  auto bad_offset = [&](int pid) {
    RunResult bad = run({looptrace_bin(), "record", "-p", std::to_string(pid),
                         "--dispatch-call", fn + "+0x1", "--duration", "1s"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("+0x1 is no virtual call (its virtual calls: +0x"),
              std::string::npos)
        << bad.err;
  };
  Traced t;
  trace_program(dir, prog,
                {"--duration", "1500", "--stall", "busy:30@20", "--fd-stall",
                 "sleep:30@10"},
                {"--dispatch-call", fn}, &t, bad_offset);
  if (HasFatalFailure()) return;
  const auto stalls = stalled_spans(t);
  for (const auto& [d, s] : stalls) {
    EXPECT_LE(
        std::llabs((*s)["duration_ns"].get<int64_t>() -
                   (d["end_ns"].get<int64_t>() - d["start_ns"].get<int64_t>())),
        kToleranceNs)
        << s->dump();
    EXPECT_EQ((*s)["target"], d["kind"] == "message"
                                  ? "(anonymous namespace)::TickHandler"
                                  : "(anonymous namespace)::PipeCallback")
        << s->dump();
  }
  EXPECT_EQ(stalls.size(), 2u) << read_file(dir.file("truth.jsonl"));
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// A stripped program: its classes (in an anonymous namespace) have no
// vtable symbols left (nm says so), and are named from their RTTI, as
// the unstripped program's symbols name them.
TEST(AndroidLooper, AStrippedProgramsClassesAreNamedFromTheirRtti) {
  LT_REQUIRE_BPF();
  const std::string built = kPrograms + "/android_looper";
  LT_REQUIRE_ANDROID_PROGRAM(built);
  TempDir dir;
  const std::string prog = dir.file("android_looper");
  RunResult strip = run({"objcopy", "--strip-all", built, prog});
  ASSERT_EQ(strip.exit_code, 0) << strip.err;
  RunResult nm = run({"nm", prog});
  ASSERT_NE(nm.err.find("no symbols"), std::string::npos) << nm.out;
  Traced t;
  trace_program(dir, prog,
                {"--duration", "1200", "--stall", "busy:30@20", "--fd-stall",
                 "busy:30@10"},
                {}, &t);
  if (HasFatalFailure()) return;
  const auto stalls = stalled_spans(t);
  for (const auto& [d, s] : stalls) {
    const std::string target = (*s)["target"];
    EXPECT_EQ(
        target.rfind(d["kind"] == "message" ? "Looper message (anonymous "
                                              "namespace)::TickHandler what="
                                            : "Looper fd callback (anonymous "
                                              "namespace)::PipeCallback fd=",
                     0),
        0u)
        << s->dump();
  }
  EXPECT_EQ(stalls.size(), 2u) << read_file(dir.file("truth.jsonl"));
}

}  // namespace
}  // namespace lt_test
