// Sync barriers: lifetimes against the app's own log, a leak announced
// live with the stack that posted it, and no false stalls at frame rate.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 500'000;  // the 0.5 ms

const nlohmann::json* find_barrier(const nlohmann::json& list, uint64_t token) {
  for (const auto& b : list)
    if (b["token"] == token) return &b;
  return nullptr;
}

TEST(SyncBarriers, LifetimesAndALeakAnnouncedLive) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  const std::string live = dir.file("events.jsonl");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "--barrier-stall",
                     "1s",
                     "--events",
                     live,
                     "--json",
                     json,
                     "--",
                     refapp_bin(),
                     "--rate",
                     "200",
                     "--async-rate",
                     "50",
                     "--barrier",
                     "20@300",
                     "--barrier",
                     "300@600",
                     "--barrier-leak",
                     "1200",
                     "--barrier-report-ms",
                     "1000",
                     "--duration",
                     "3000",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = read_jsonl(log);
  auto posts = events(truth, "barrier_post");
  auto removes = events(truth, "barrier_remove");
  ASSERT_EQ(posts.size(), 3u);
  ASSERT_EQ(removes.size(), 2u);
  nlohmann::json report = read_json(json);
  const auto& list = report["barriers"];
  ASSERT_EQ(list.size(), 3u) << list.dump();
  for (const auto& p : posts) {
    const nlohmann::json* b = find_barrier(list, p["token"]);
    ASSERT_NE(b, nullptr) << p.dump();
    EXPECT_LE(std::llabs(diff((*b)["posted_ns"], p["posted_ns"])),
              kToleranceNs);
    EXPECT_EQ((*b)["queue"], p["queue"]);
  }
  for (const auto& rm : removes) {
    const nlohmann::json* b = find_barrier(list, rm["token"]);
    ASSERT_NE(b, nullptr);
    ASSERT_FALSE((*b)["lifetime_ns"].is_null());
    EXPECT_LE(std::llabs(diff((*b)["lifetime_ns"], rm["lifetime_ns"])),
              kToleranceNs)
        << "looptrace " << (*b)["lifetime_ns"] << " vs app "
        << rm["lifetime_ns"];
    EXPECT_FALSE((*b)["stalled"].get<bool>());
  }
  // The leak: never removed, announced within 0.5 s of crossing 1 s, with
  // the function that posted it in the stack.
  auto leak = events(truth, "barrier_leak");
  ASSERT_EQ(leak.size(), 1u);
  const nlohmann::json* b = find_barrier(list, leak[0]["token"]);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE((*b)["removed_ns"].is_null());
  EXPECT_TRUE((*b)["stalled"].get<bool>());
  EXPECT_EQ(report["barrier_summary"]["leaked"], 1);
  auto announced = read_jsonl(live);
  ASSERT_EQ(announced.size(), 1u) << read_file(live);
  EXPECT_EQ(announced[0]["token"], leak[0]["token"]);
  uint64_t due = leak[0]["posted_ns"].get<uint64_t>() + 1'000'000'000;
  uint64_t detected = announced[0]["detected_ns"];
  EXPECT_GE(detected + kToleranceNs, due);
  EXPECT_LE(detected, due + 500'000'000) << "announced within 0.5 s";
  bool poster = false;
  for (const auto& f : announced[0]["post_stack"])
    poster = poster || f.get<std::string>().find(
                           "refapp::BarrierHandler::handleMessage") == 0;
  EXPECT_TRUE(poster) << announced[0]["post_stack"].dump();
  EXPECT_NE(r.err.find("STALL: sync barrier token"), std::string::npos)
      << r.err;

  // How many sync messages wait behind it: the app counts its own queue when
  // its 1 s check runs; looptrace when it detects the stall. Sync work piles
  // up at the background rate (200/s), so the counts may differ by what
  // arrived in between.
  auto app_stalled = events(truth, "barrier_stalled");
  ASSERT_EQ(app_stalled.size(), 1u);
  int64_t dt = std::llabs(diff(detected, app_stalled[0]["at_ns"]));
  int64_t slack = 1 + dt * 250 / 1'000'000'000;
  ASSERT_FALSE(announced[0]["waiting_sync_messages"].is_null());
  EXPECT_LE(std::llabs(announced[0]["waiting_sync_messages"].get<int64_t>() -
                       app_stalled[0]["sync_waiting"].get<int64_t>()),
            slack)
      << announced[0].dump() << "\napp: " << app_stalled[0].dump();
  EXPECT_EQ(announced[0]["oldest_sync_due_ns"],
            app_stalled[0]["oldest_sync_due_ns"]);
  // At the end (the app logs its leak as it exits; nothing runs after).
  EXPECT_EQ((*b)["waiting_sync_messages"], leak[0]["sync_waiting"]);
}

// A UI toolkit posts and removes a barrier every frame: never a stall.
TEST(SyncBarriers, NoFalseStallAtSixtyBarriersASecond) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "--barrier-stall",
           "100ms", "--json", json, "-q", "--", refapp_bin(), "--rate", "200",
           "--barrier-rate", "60", "--duration", "2000", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = read_jsonl(log);
  auto posts = events(truth, "barrier_post");
  ASSERT_GE(posts.size(), 100u);
  nlohmann::json report = read_json(json);
  const auto& summary = report["barrier_summary"];
  EXPECT_EQ(summary["posted"], posts.size());
  EXPECT_EQ(summary["removed"], events(truth, "barrier_remove").size());
  EXPECT_EQ(summary["stalled"], 0);
  EXPECT_EQ(summary["unknown_removes"], 0);
  EXPECT_EQ(r.err.find("STALL"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// Without a profile: barrier probes given on the command line, with the
// token's argument position.
TEST(SyncBarriers, AdHocProbesWithArgumentPositions) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  const std::string bin = refapp_bin();
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--barrier-post",
                     bin + ":refapp::MessageQueue::postSyncBarrier(long)",
                     "--barrier-remove",
                     bin + ":refapp::MessageQueue::removeSyncBarrier(int)",
                     "--queue-arg",
                     "0",
                     "--token-arg",
                     "1",
                     "--json",
                     json,
                     "-q",
                     "--",
                     bin,
                     "--rate",
                     "100",
                     "--barrier",
                     "40@300",
                     "--barrier",
                     "90@600",
                     "--duration",
                     "1000",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto removes = events(read_jsonl(log), "barrier_remove");
  ASSERT_EQ(removes.size(), 2u);
  nlohmann::json report = read_json(json);
  ASSERT_EQ(report["barriers"].size(), 2u) << report["barriers"].dump();
  for (const auto& rm : removes) {
    const nlohmann::json* b = find_barrier(report["barriers"], rm["token"]);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ((*b)["queue"], rm["queue"]);
    EXPECT_LE(std::llabs(diff((*b)["lifetime_ns"], rm["lifetime_ns"])),
              kToleranceNs);
  }
}

}  // namespace
}  // namespace lt_test
