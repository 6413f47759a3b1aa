// Idle handlers: the stalls a message printer never sees. The refapp
// profile times refapp::MessageQueue::runIdleHandler as an `idle` span.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 500'000;  // the 0.5 ms

TEST(IdleHandlers, SlowIdleHandlersAreFoundWithTheirDurations) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "--slow",
                     "15ms",
                     "--json",
                     json,
                     "-q",
                     "--",
                     refapp_bin(),
                     "--rate",
                     "200",
                     "--idle-handlers",
                     "2",
                     "--idle-stall",
                     "busy:30@300",
                     "--idle-stall",
                     "sleep:60@800",
                     "--idle-stall",
                     "busy:120@1300",
                     "--duration",
                     "2000",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = read_jsonl(log);
  auto idle = events(truth, "idle");
  ASSERT_EQ(idle.size(), 3u) << "the app ran each slow idle handler once";
  nlohmann::json report = read_json(json);
  expect_split_adds_up(report);
  const auto& slow = report["slow_idle_handlers"];
  for (const auto& st : idle) {
    const nlohmann::json* m = nullptr;
    for (const auto& s : slow)
      if (std::llabs(diff(s["start_ns"], st["start_ns"])) < 2'000'000) m = &s;
    ASSERT_NE(m, nullptr) << st.dump() << "\nreported: " << slow.dump();
    EXPECT_LE(std::llabs(diff((*m)["duration_ns"], st["duration_ns"])),
              kToleranceNs)
        << "looptrace " << (*m)["duration_ns"] << " vs app "
        << st["duration_ns"];
    // The handler's class, from its vtable, as a user would name it.
    EXPECT_EQ((*m)["target"], "refapp::SlowIdleHandler");
    if (st["kind"] == "busy") {
      EXPECT_FALSE((*m)["stack"].empty()) << "a busy idle handler is sampled";
    }
  }
  EXPECT_EQ(slow.size(), idle.size()) << slow.dump();
  // No idle handler is mistaken for a dispatch.
  for (const auto& s : report["slow_dispatches"]) {
    for (const auto& st : idle) {
      EXPECT_GT(std::llabs(diff(s["start_ns"], st["start_ns"])), 2'000'000)
          << s.dump();
    }
  }
  // Every idle run is counted, apart from dispatches.
  auto summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  uint64_t tid = summary[0]["threads"][0]["tid"];
  uint64_t idle_count = 0, dispatch_count = 0;
  for (const auto& t : report["threads"]) {
    if (t["tid"] != tid) continue;
    if (t["role"] == "idle") idle_count += t["count"].get<uint64_t>();
    if (t["role"] == "dispatch") dispatch_count += t["count"].get<uint64_t>();
  }
  EXPECT_EQ(idle_count, summary[0]["threads"][0]["idle_runs"].get<uint64_t>());
  EXPECT_EQ(dispatch_count,
            summary[0]["threads"][0]["dispatches"].get<uint64_t>());
}

}  // namespace
}  // namespace lt_test
