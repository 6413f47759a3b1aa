#include <gtest/gtest.h>

#include "analysis/barrier.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

class BarrierAnalysisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProbeDef post;
    post.id = 0;
    post.role = LT_ROLE_BARRIER_POST;
    post.keys.push_back(
        {"queue", "arg0", {}, KeyFormat::kHex, {}, KeyRole::kQueue});
    ProbeDef remove;
    remove.id = 1;
    remove.role = LT_ROLE_BARRIER_REMOVE;
    remove.keys.push_back(
        {"queue", "arg0", {}, KeyFormat::kHex, {}, KeyRole::kQueue});
    remove.keys.push_back(
        {"token", "arg1", {}, KeyFormat::kInt, {}, KeyRole::kToken});
    probes_ = {post, remove};
  }
  PointEvent post(uint32_t pid, uint64_t queue, uint64_t token, uint64_t ts) {
    PointEvent e;
    e.pid = e.tid = pid;
    e.ts_ns = ts;
    e.probe_id = 0;
    e.role = LT_ROLE_BARRIER_POST;
    e.keys[0] = queue;
    e.ret = token;
    e.frames = {0x1000, 0x2000};
    return e;
  }
  PointEvent remove(uint32_t pid, uint64_t queue, uint64_t token, uint64_t ts) {
    PointEvent e;
    e.pid = e.tid = pid;
    e.ts_ns = ts;
    e.probe_id = 1;
    e.role = LT_ROLE_BARRIER_REMOVE;
    e.keys[0] = queue;
    e.keys[1] = token;
    return e;
  }
  std::vector<ProbeDef> probes_;
};

TEST_F(BarrierAnalysisTest, LifetimesMatchByProcessQueueAndToken) {
  BarrierAnalyzer an({}, &probes_);
  // Token 1 on two queues of one process and in another process.
  an.consume(post(10, 0xa, 1, 100 * kMs));
  an.consume(post(10, 0xb, 1, 110 * kMs));
  an.consume(post(20, 0xa, 1, 120 * kMs));
  an.consume(remove(10, 0xb, 1, 115 * kMs));
  an.consume(remove(20, 0xa, 1, 150 * kMs));
  an.consume(remove(10, 0xa, 1, 200 * kMs));
  BarrierAnalysis a = an.finish(1000 * kMs);
  ASSERT_EQ(a.barriers.size(), 3u);
  EXPECT_EQ(a.barriers[0].lifetime_ns(), 100 * kMs);
  EXPECT_EQ(a.barriers[1].lifetime_ns(), 5 * kMs);
  EXPECT_EQ(a.barriers[2].lifetime_ns(), 30 * kMs);
  EXPECT_EQ(a.barriers[0].post_stack.size(), 2u);
  EXPECT_EQ(a.posted, 3u);
  EXPECT_EQ(a.removed, 3u);
  EXPECT_EQ(a.leaked + a.stalled + a.unknown_removes + a.duplicate_posts, 0u);
}

TEST_F(BarrierAnalysisTest, TokenIsTheLow32BitsOfTheReturnRegister) {
  BarrierAnalyzer an({}, &probes_);
  an.consume(post(10, 0xa, 0xdeadbeef00000007ull, 100 * kMs));
  an.consume(remove(10, 0xa, 0xffffffff00000007ull, 101 * kMs));
  BarrierAnalysis a = an.finish(200 * kMs);
  ASSERT_EQ(a.barriers.size(), 1u);
  EXPECT_EQ(a.barriers[0].token, 7u);
  EXPECT_TRUE(a.barriers[0].removed());
}

TEST_F(BarrierAnalysisTest, RemoveBeforePostStillPairs) {
  BarrierAnalyzer an({}, &probes_);
  an.consume(remove(10, 0xa, 3, 105 * kMs));
  an.consume(post(10, 0xa, 3, 100 * kMs));
  BarrierAnalysis a = an.finish(200 * kMs);
  ASSERT_EQ(a.barriers.size(), 1u);
  EXPECT_EQ(a.barriers[0].lifetime_ns(), 5 * kMs);
  EXPECT_EQ(a.unknown_removes, 0u);
}

TEST_F(BarrierAnalysisTest, UnknownTokenDuplicateAndLeak) {
  BarrierAnalyzer an({}, &probes_);
  an.consume(remove(10, 0xa, 9, 50 * kMs));  // never posted
  an.consume(post(10, 0xa, 4, 100 * kMs));
  an.consume(post(10, 0xa, 4, 120 * kMs));  // posted again: duplicate
  BarrierAnalysis a = an.finish(200 * kMs);
  EXPECT_EQ(a.unknown_removes, 1u);
  EXPECT_EQ(a.duplicate_posts, 1u);
  EXPECT_EQ(a.leaked, 1u);
  ASSERT_EQ(a.barriers.size(), 1u);
  EXPECT_FALSE(a.barriers[0].removed());
  EXPECT_EQ(a.barriers[0].posted_ns, 120 * kMs);
}

TEST_F(BarrierAnalysisTest, StallAnnouncedOnceWhenTheThresholdIsCrossed) {
  BarrierOptions opts;
  opts.stall_ns = 3000 * kMs;
  BarrierAnalyzer an(opts, &probes_);
  an.consume(post(10, 0xa, 1, 1000 * kMs));
  an.consume(post(10, 0xa, 2, 1500 * kMs));
  EXPECT_TRUE(an.check_stalls(3999 * kMs).empty());
  auto s = an.check_stalls(4000 * kMs);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].token, 1u);
  EXPECT_EQ(s[0].stalled_ns, 4000 * kMs);
  EXPECT_TRUE(an.check_stalls(4100 * kMs).empty()) << "announced once";
  an.consume(remove(10, 0xa, 2, 1600 * kMs));  // short: never a stall
  BarrierAnalysis a = an.finish(9000 * kMs);
  EXPECT_EQ(a.stalled, 1u);
  EXPECT_EQ(a.leaked, 1u);
}

TEST_F(BarrierAnalysisTest, LongLifetimeSeenOnlyAtRemovalIsAStall) {
  BarrierOptions opts;
  opts.stall_ns = 3000 * kMs;
  BarrierAnalyzer an(opts, &probes_);
  an.consume(post(10, 0xa, 1, 0));
  an.consume(remove(10, 0xa, 1, 3500 * kMs));
  BarrierAnalysis a = an.finish(4000 * kMs);
  EXPECT_EQ(a.stalled, 1u);
  ASSERT_EQ(a.barriers.size(), 1u);
  EXPECT_TRUE(a.barriers[0].stalled);
  EXPECT_EQ(a.leaked, 0u);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// A barrier with nothing waiting behind it is not (yet) a stall; it becomes
// one once synchronous messages are due behind it.
TEST(BarrierStalls, NeedWaitingSyncMessagesWhenKnown) {
  const uint64_t ms = 1'000'000;
  std::vector<ProbeDef> probes(1);
  probes[0].id = 0;
  probes[0].role = LT_ROLE_BARRIER_POST;
  BarrierOptions opts;
  opts.stall_ns = 3000 * ms;
  BarrierAnalyzer an(opts, &probes);
  PointEvent post;
  post.pid = post.tid = 1;
  post.ts_ns = 0;
  post.ret = 5;
  an.consume(post);
  int64_t waiting = 0;
  auto fn = [&waiting](const Barrier&) {
    return std::make_pair(waiting, uint64_t{123});
  };
  EXPECT_TRUE(an.check_stalls(3500 * ms, fn).empty());
  waiting = 4;
  auto s = an.check_stalls(3600 * ms, fn);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].waiting_sync, 4);
  EXPECT_EQ(s[0].oldest_sync_due_ns, 123u);
  EXPECT_EQ(s[0].stalled_ns, 3600 * ms);
}

}  // namespace
}  // namespace looptrace
