// `looptrace report REC --slow ... --barrier-stall ...`: thresholds may be
// raised over the recorded ones, never lowered below what the recording
// could have seen.
#include <gtest/gtest.h>

#include <string>

#include "base/status.h"
#include "pipeline/analysis.h"
#include "trace/events.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

Thresholds recorded() {
  Thresholds t;
  t.slow_ns = {16 * kMs, 16 * kMs, 10 * kMs};
  t.barrier_stall_ns = 3000 * kMs;
  return t;
}

TEST(ThresholdOverrides, RaisedOnesApply) {
  ThresholdOverrides o;
  o.slow_ns[LT_ROLE_DISPATCH] = 50 * kMs;
  o.barrier_stall_ns = 5000 * kMs;
  auto t = apply_overrides(recorded(), o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->slow_ns[LT_ROLE_DISPATCH], 50 * kMs);
  EXPECT_EQ(t->slow_ns[LT_ROLE_IDLE], 16 * kMs);
  EXPECT_EQ(t->barrier_stall_ns, 5000 * kMs);
  // The recorded value itself is not a lowering.
  o.barrier_stall_ns = 3000 * kMs;
  ASSERT_TRUE(apply_overrides(recorded(), o).ok());
}

// Shorter spans never crossed the ring buffer.
TEST(ThresholdOverrides, SlowBelowTheRecordedIsRefused) {
  ThresholdOverrides o;
  o.slow_ns[LT_ROLE_DISPATCH] = 5 * kMs;
  auto t = apply_overrides(recorded(), o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().kind(), ErrorKind::kUsage);
  EXPECT_EQ(t.status().message(),
            "--slow 5.00ms is below the recorded 16.0ms: shorter spans never "
            "reached the recording");
  // With --record-all every span did.
  Thresholds all = recorded();
  all.record_all = true;
  auto any = apply_overrides(all, o);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->slow_ns[LT_ROLE_DISPATCH], 5 * kMs);
}

// What waited behind a barrier was read once it had been up the recorded
// threshold: a barrier stalled sooner would show no waiting messages.
// Refused even with --record-all, which is about spans.
TEST(ThresholdOverrides, BarrierStallBelowTheRecordedIsRefused) {
  ThresholdOverrides o;
  o.barrier_stall_ns = 500 * kMs;
  for (bool record_all : {false, true}) {
    Thresholds r = recorded();
    r.record_all = record_all;
    auto t = apply_overrides(r, o);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().kind(), ErrorKind::kUsage);
    EXPECT_EQ(t.status().message(),
              "--barrier-stall 500ms is below the recorded 3.00s: what "
              "waited behind a barrier was read only at the recorded "
              "threshold");
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
  }
}

// The analysis of a replay refuses the same, from the session header.
TEST(ThresholdOverrides, TheAnalysisRefusesFromTheSessionHeader) {
  ThresholdOverrides o;
  o.barrier_stall_ns = 1000 * kMs;
  Analysis analysis(nullptr, o);
  SessionEvent s;
  s.thresholds = recorded();
  analysis.consume(Event(s));
  ASSERT_TRUE(analysis.configured());
  EXPECT_FALSE(analysis.status().ok());
  EXPECT_EQ(analysis.status().kind(), ErrorKind::kUsage);
  EXPECT_NE(analysis.status().message().find("the recorded 3.00s"),
            std::string::npos)
      << analysis.status().message();
}

}  // namespace
}  // namespace looptrace
