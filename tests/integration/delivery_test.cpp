// Delivery lag: from a message's due time (read at enqueue) to the start of
// its dispatch, against the times the app logs itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 500'000;  // the 0.5 ms

TEST(DeliveryLag, EveryLateMessageOfABurstWithItsLag) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  const uint64_t slow_ns = 5'000'000;
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "--slow-delivery",
           "5ms", "--json", json, "-q", "--", refapp_bin(), "--rate", "0",
           "--burst", "20@300", "--duration", "800", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = events(read_jsonl(log), "delivery");
  ASSERT_EQ(truth.size(), 20u);
  nlohmann::json report = read_json(json);
  const auto& slow = report["slow_deliveries"];
  auto find = [&](uint64_t start) -> const nlohmann::json* {
    for (const auto& s : slow)
      if (std::llabs(diff(s["start_ns"], start)) < kToleranceNs) return &s;
    return nullptr;
  };
  size_t expected = 0;
  for (const auto& d : truth) {
    uint64_t lag = d["lag_ns"];
    if (lag < slow_ns + kToleranceNs) continue;  // clearly late ones only
    ++expected;
    const nlohmann::json* m = find(d["start_ns"]);
    ASSERT_NE(m, nullptr) << d.dump() << "\nreported: " << slow.dump();
    EXPECT_LE(std::llabs(diff((*m)["lag_ns"], d["lag_ns"])), kToleranceNs);
    EXPECT_LE(std::llabs(diff((*m)["due_ns"], d["due_ns"])), kToleranceNs);
    EXPECT_NE((*m)["target"].get<std::string>().find("refapp::BurstHandler"),
              std::string::npos);
  }
  EXPECT_GE(expected, 10u) << "a 20-message burst of 1 ms each";
  // Nothing reported that the app did not see late.
  for (const auto& s : slow) {
    bool seen = false;
    for (const auto& d : truth)
      seen = seen ||
             (std::llabs(diff(s["start_ns"], d["start_ns"])) < kToleranceNs &&
              d["lag_ns"].get<uint64_t>() + kToleranceNs >= slow_ns);
    EXPECT_TRUE(seen) << s.dump();
  }
  // The lag distribution counts every dispatch of an enqueued message.
  uint64_t lag_count = 0, dispatches = 0;
  for (const auto& t : report["threads"]) {
    if (t["role"] == "delivery") lag_count += t["count"].get<uint64_t>();
    if (t["role"] == "dispatch") dispatches += t["count"].get<uint64_t>();
  }
  EXPECT_EQ(lag_count, dispatches);
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// Android's hysteresis: after one slow delivery, quiet until the lag drains
// below 10 ms. A burst whose lags only grow past a 12 ms threshold is
// reported once.
TEST(DeliveryLag, HysteresisReportsAGrowingBacklogOnce) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "--slow-delivery",
                     "12ms",
                     "--delivery-hysteresis",
                     "--json",
                     json,
                     "-q",
                     "--",
                     refapp_bin(),
                     "--rate",
                     "0",
                     "--burst",
                     "20@300",
                     "--duration",
                     "800",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = events(read_jsonl(log), "delivery");
  ASSERT_EQ(truth.size(), 20u);
  nlohmann::json report = read_json(json);
  const auto& slow = report["slow_deliveries"];
  ASSERT_EQ(slow.size(), 1u) << slow.dump();
  // It is the app's first message late by 12 ms (lags only grow: each
  // waits for the ones before it), within the tolerance at the boundary.
  const nlohmann::json* m = nullptr;
  for (const auto& d : truth)
    if (std::llabs(diff(slow[0]["start_ns"], d["start_ns"])) < 500'000) m = &d;
  ASSERT_NE(m, nullptr) << slow.dump();
  EXPECT_LE(std::llabs(diff(slow[0]["lag_ns"], (*m)["lag_ns"])), 500'000);
  EXPECT_GE((*m)["lag_ns"].get<uint64_t>() + 500'000, 12'000'000u);
  for (const auto& d : truth) {
    if (d["start_ns"].get<uint64_t>() >= (*m)["start_ns"].get<uint64_t>())
      continue;
    EXPECT_LT(d["lag_ns"].get<uint64_t>(), 12'000'000u + 500'000u)
        << "an earlier late message was not reported: " << d.dump();
  }
}

}  // namespace
}  // namespace lt_test
