// Every list of the JSON report is bounded; what is left out is counted,
// and what is kept is what matters most (the longest spans and lags).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "analysis/backlog.h"
#include "analysis/dispatch.h"
#include "analysis/list_limits.h"
#include "report/input_report.h"
#include "report/report.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(KeepBest, AllWhenTheyFit) {
  size_t omitted = 99;
  std::vector<int> v{3, 1, 2};
  EXPECT_EQ(limits::keep_best(v, 3, std::greater<int>(), &omitted), v);
  EXPECT_EQ(omitted, 0u);
}

TEST(KeepBest, TheBestInTheirOriginalOrder) {
  size_t omitted = 0;
  std::vector<int> v{5, 1, 9, 3, 7, 2};
  EXPECT_EQ(limits::keep_best(v, 3, std::greater<int>(), &omitted),
            (std::vector<int>{5, 9, 7}));
  EXPECT_EQ(omitted, 3u);
  // Ties go to the earlier item.
  std::vector<int> same{4, 4, 4, 4};
  EXPECT_EQ(limits::keep_best(same, 2, std::greater<int>(), &omitted),
            (std::vector<int>{4, 4}));
  EXPECT_EQ(omitted, 2u);
}

struct FakeRun {
  DispatchAnalysis a;
  std::vector<ProbeDef> probes = std::vector<ProbeDef>(1);
  ReportContext ctx;
  FakeRun() { ctx.probes = &probes; }
  SlowSpan& add(uint32_t role, uint64_t start, uint64_t dur) {
    SlowSpan s;
    s.span.pid = 1;
    s.span.tid = 1;
    s.span.role = role;
    s.span.start_ns = start;
    s.span.duration_ns = dur;
    a.slow.push_back(s);
    return a.slow.back();
  }
};

TEST(JsonLimits, SlowDeliveriesKeepTheLongestLags) {
  FakeRun r;
  const size_t n = limits::kJsonMaxSpans + 5;
  // Lags grow with i except five tiny ones spread through the run: those
  // are the ones left out.
  for (size_t i = 0; i < n; ++i) {
    bool tiny = i % (n / 5) == 7;
    r.add(LT_ROLE_DELIVERY, 1000 * kMs + i * 10 * kMs,
          tiny ? 1 * kMs : 20 * kMs + i);
  }
  explain_slow_spans(r.a);  // as the analysis does
  nlohmann::json j = to_json(r.a, r.ctx);
  const auto& d = j["slow_deliveries"];
  ASSERT_EQ(d.size(), limits::kJsonMaxSpans);
  EXPECT_EQ(j["slow_deliveries_omitted"], 5u);
  uint64_t prev = 0;
  for (const auto& e : d) {
    EXPECT_GT(e["lag_ns"].get<uint64_t>(), 1 * kMs) << e.dump();
    EXPECT_GT(e["due_ns"].get<uint64_t>(), prev) << "in time order";
    prev = e["due_ns"].get<uint64_t>();
  }
  EXPECT_EQ(j["slow_dispatches_omitted"], 0u);
  EXPECT_EQ(j["slow_idle_handlers_omitted"], 0u);
  EXPECT_EQ(j["threads_omitted"], 0u);
}

TEST(JsonLimits, SlowDispatchesKeepAHangInProgress) {
  FakeRun r;
  for (size_t i = 0; i < limits::kJsonMaxSpans + 1; ++i)
    r.add(LT_ROLE_DISPATCH, i * 100 * kMs, 50 * kMs);
  // Short, but still running when tracing stopped: always listed.
  r.add(LT_ROLE_DISPATCH, 1, 20 * kMs).span.in_flight = true;
  explain_slow_spans(r.a);  // as the analysis does
  nlohmann::json j = to_json(r.a, r.ctx);
  ASSERT_EQ(j["slow_dispatches"].size(), limits::kJsonMaxSpans);
  EXPECT_EQ(j["slow_dispatches_omitted"], 2u);
  bool hang = false;
  for (const auto& e : j["slow_dispatches"]) hang = hang || e["in_flight"];
  EXPECT_TRUE(hang);
}

TEST(JsonLimits, RunningInsteadAndStacksAreBounded) {
  FakeRun r;
  // One delivery due at 0 that waited behind 150 slow dispatches.
  for (uint64_t i = 0; i < 150; ++i)
    r.add(LT_ROLE_DISPATCH, 1 + i * 20 * kMs, (i == 42 ? 19 : 17) * kMs);
  r.add(LT_ROLE_DELIVERY, 0, 150 * 20 * kMs);
  SlowSpan& stuck = r.add(LT_ROLE_IDLE, 4000 * kMs, 100 * kMs);
  for (uint64_t i = 0; i < limits::kJsonMaxStacks + 3; ++i) {
    StackGroup g;
    g.frames = {0x1000 + i};
    g.count = static_cast<uint32_t>(100 - i);
    stuck.stacks.push_back(g);
  }
  explain_slow_spans(r.a);  // as the analysis does
  nlohmann::json j = to_json(r.a, r.ctx);
  const auto& d = j["slow_deliveries"][0];
  ASSERT_EQ(d["running_instead"].size(), limits::kJsonMaxRelated);
  EXPECT_EQ(d["running_instead_omitted"], 50u);
  bool longest = false;
  for (const auto& i : d["running_instead"])
    longest = longest ||
              j["blamed_spans"][i.get<size_t>()]["duration_ns"] == 19 * kMs;
  EXPECT_TRUE(longest) << "the longest span that ran instead is listed";
  EXPECT_FALSE(d.contains("sync_barriers_up_omitted"));

  const auto& idle = j["slow_idle_handlers"][0];
  ASSERT_EQ(idle["stacks"].size(), limits::kJsonMaxStacks);
  EXPECT_EQ(idle["stacks_omitted"], 3u);
  EXPECT_EQ(idle["stacks"][0]["count"], 100u) << "most samples first";
  EXPECT_FALSE(j["slow_dispatches"][0].contains("stacks_omitted"));
}

// A backlog: every slow delivery of a long catch-up waited behind the same
// slow dispatches. Each of those is written once, and a delivery names them
// by index: the report grows by a bounded number of bytes per delivery, not
// by the 100 spans it names (a 30 s backlogged run wrote 215 MB).
TEST(JsonLimits, ABacklogsSpansAreWrittenOnce) {
  FakeRun r;
  constexpr size_t kBehind = limits::kJsonMaxRelated;
  constexpr size_t kLate = 2000;
  for (uint64_t i = 0; i < kBehind; ++i)
    r.add(LT_ROLE_DISPATCH, 1 + i * 20 * kMs, 17 * kMs);
  // Every delivery due before the first dispatch, dispatched after the last.
  for (uint64_t i = 0; i < kLate; ++i)
    r.add(LT_ROLE_DELIVERY, 0, kBehind * 20 * kMs + i * 1000);
  explain_slow_spans(r.a);
  const nlohmann::json j = to_json(r.a, r.ctx);
  ASSERT_EQ(j["slow_deliveries"].size(), kLate);
  ASSERT_EQ(j["blamed_spans"].size(), kBehind);
  // Each one named by every delivery, and each index names the right span.
  for (const auto& d : j["slow_deliveries"]) {
    ASSERT_EQ(d["running_instead"].size(), kBehind);
    for (size_t k = 0; k < kBehind; ++k) {
      const auto& b = j["blamed_spans"][d["running_instead"][k].get<size_t>()];
      ASSERT_EQ(b["start_ns"], 1 + k * 20 * kMs);
      ASSERT_EQ(b["role"], "dispatch");
    }
  }
  const nlohmann::json none = nlohmann::json::array();
  nlohmann::json without = j;
  without["slow_deliveries"] = none;
  without["delivery_backlogs"] = none;
  const double per_delivery =
      static_cast<double>(j.dump().size() - without.dump().size()) / kLate;
  // 100 indices of up to 3 digits and the delivery's own fields; 100 spans
  // written out would be over 7 KB.
  EXPECT_LT(per_delivery, 800.0);
}

TEST(JsonLimits, ThreadsAreBoundedAndTotalsCountThemAll) {
  FakeRun r;
  for (uint32_t t = 0; t < limits::kJsonMaxThreads + 10; ++t) {
    ThreadSummary s;
    s.pid = 1;
    s.tid = t + 1;
    s.count = 10;
    s.slow_count = t == 5 ? 1 : 0;
    r.a.threads.push_back(s);
  }
  explain_slow_spans(r.a);  // as the analysis does
  nlohmann::json j = to_json(r.a, r.ctx);
  EXPECT_EQ(j["threads"].size(), limits::kJsonMaxThreads);
  EXPECT_EQ(j["threads_omitted"], 10u);
  EXPECT_EQ(j["totals"]["spans"], 10u * (limits::kJsonMaxThreads + 10));
  bool slow_one = false;
  for (const auto& t : j["threads"]) slow_one = slow_one || t["tid"] == 6;
  EXPECT_TRUE(slow_one) << "a thread with slow spans is kept";
}

TEST(JsonLimits, InputEventsAreTheAnalysisListAndItsCount) {
  // The analysis lists (input_analysis_test); the JSON says what it left
  // out.
  InputAnalysis in;
  for (uint32_t i = 0; i < 3; ++i) {
    InputEventInfo e;
    e.seq = i + 1;
    e.received_ns = 1000 + i;
    in.events.push_back(e);
  }
  in.total = 3 + 5;
  in.not_listed = 5;
  FakeRun r;
  size_t listed = 0;
  for_each_input_event_json(in, r.a, r.ctx,
                            [&](const nlohmann::json&) { ++listed; });
  EXPECT_EQ(listed, 3u);
  nlohmann::json s = input_summary_to_json(in, r.a, r.ctx);
  EXPECT_EQ(s["input_summary"]["not_listed"], 5u);
  EXPECT_EQ(s["input_summary"]["events"], 8u);
}

TEST(JsonLimits, BlameSaysHowManyDispatchesTheAnalysisLeftOut) {
  InputAnalysis in;
  InputEventInfo e;
  e.received_ns = 1;
  InputBlame b;
  for (uint64_t i = 0; i < 3; ++i) {
    BlameSpan s;
    s.span.start_ns = 10 + i * 10 * kMs;
    s.span.duration_ns = (5 - i) * kMs;
    b.chain.push_back(s);
  }
  b.primary = 2;
  b.omitted = 20;
  e.blame = b;
  in.events.push_back(e);
  in.total = 1;
  FakeRun r;
  nlohmann::json got;
  for_each_input_event_json(in, r.a, r.ctx,
                            [&](const nlohmann::json& j) { got = j; });
  const auto& blame = got["blame"];
  ASSERT_EQ(blame["dispatches"].size(), 3u);
  EXPECT_EQ(blame["dispatches_omitted"], 20u);
  EXPECT_EQ(blame["start_ns"], 10 + 2 * 10 * kMs);
  EXPECT_EQ(blame["duration_ns"], 3 * kMs);
}

}  // namespace
}  // namespace looptrace
