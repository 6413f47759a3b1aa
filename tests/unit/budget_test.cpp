// Budgets (--fail-if): the grammar, every operator and unit, every metric
// against synthetic report documents, clear errors, and runs that measured
// nothing.
#include "budget/budget.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/backlog.h"
#include "analysis/input.h"
#include "report/findings.h"

namespace looptrace {
namespace {

using nlohmann::json;

constexpr uint64_t kMs = 1'000'000;

Budget parse_ok(const std::string& text) {
  Result<Budget> b = parse_budget(text);
  EXPECT_TRUE(b.ok()) << text << ": " << b.status().message();
  return b.ok() ? *b : Budget{};
}

// The error message for a bad expression (kUsage, one line).
std::string parse_error(const std::string& text) {
  Result<Budget> b = parse_budget(text);
  EXPECT_FALSE(b.ok()) << "accepted: " << text;
  if (b.ok()) return "";
  EXPECT_EQ(b.status().kind(), ErrorKind::kUsage) << text;
  EXPECT_EQ(b.status().message().find('\n'), std::string::npos)
      << b.status().message();
  return b.status().message();
}

BudgetOutcome eval(const std::string& expr, const json& report) {
  std::vector<BudgetOutcome> o = evaluate_budgets({parse_ok(expr)}, report);
  EXPECT_EQ(o.size(), 1u);
  return o.empty() ? BudgetOutcome{} : o[0];
}

json thread(uint32_t pid, uint32_t tid, const char* comm, const char* role,
            uint64_t count, uint64_t p50, uint64_t p90, uint64_t p99,
            uint64_t max, uint64_t sum, uint64_t slow = 0) {
  return {{"pid", pid},    {"tid", tid},     {"comm", comm},
          {"role", role},  {"count", count}, {"slow_count", slow},
          {"p50_ns", p50}, {"p90_ns", p90},  {"p99_ns", p99},
          {"max_ns", max}, {"sum_ns", sum}};
}

json lost(uint64_t ringbuf_full = 0, uint64_t orphan_samples = 0) {
  return {{"ringbuf_full", ringbuf_full},
          {"hist_full", 0},
          {"depth_overflow", 0},
          {"unmatched_returns", 0},
          {"abandoned", 0},
          {"storage_fail", 0},
          {"key_faults", 0},
          {"stack_failures", 0},
          {"delivery_unmatched", 0},
          {"python_cut", 0},
          {"python_names_cut", 0},
          {"js_cut", 0},
          {"watch_full", 0},
          {"unseen_switches", 0},
          {"blocks_capped", 0},
          {"decode_errors", 0},
          {"hook_misses", 0},
          {"orphan_samples", orphan_samples},
          {"sample_overflow", 0}};
}

json stage(uint64_t count, uint64_t p50, uint64_t p90, uint64_t p99,
           uint64_t max) {
  return {{"count", count},
          {"p50_ns", p50},
          {"p90_ns", p90},
          {"p99_ns", p99},
          {"max_ns", max}};
}

// A run with everything: two loop threads (one also runs idle handlers),
// deliveries, a hang in flight at the end, barriers and two input channels.
// One frames[] entry of the JSON report.
json frames(uint32_t pid, uint32_t tid, uint64_t count, uint64_t janky,
            uint64_t missed, uint64_t p50, uint64_t p90, uint64_t p99,
            uint64_t max) {
  return {{"pid", pid},
          {"tid", tid},
          {"comm", "gtk"},
          {"source", "[gtk+] gdk_frame_clock_paint_idle"},
          {"count", count},
          {"janky", janky},
          {"frozen", 0},
          {"missed_vsyncs", missed},
          {"in_flight", 0},
          {"fps", 60.0},
          {"refresh_ns", 16666667},
          {"p50_ns", p50},
          {"p90_ns", p90},
          {"p99_ns", p99},
          {"max_ns", max}};
}

json full_report() {
  json r = {
      {"version", 1},
      {"threads",
       {thread(10, 10, "app", "dispatch", 1000, 2 * kMs, 5 * kMs, 23 * kMs,
               120 * kMs, 3000 * kMs, 4),
        thread(10, 10, "app", "idle", 50, 1 * kMs, 2 * kMs, 3 * kMs, 60 * kMs,
               100 * kMs, 1),
        thread(10, 11, "worker", "dispatch", 500, 3 * kMs, 4 * kMs, 9 * kMs,
               30 * kMs, 1600 * kMs, 1),
        thread(10, 10, "app", "delivery", 900, 1 * kMs, 4 * kMs, 20 * kMs,
               40 * kMs, 900 * kMs, 3)}},
      {"threads_omitted", 0},
      {"slow_dispatches",
       {{{"pid", 10},
         {"tid", 10},
         {"comm", "app"},
         {"duration_ns", 120 * kMs},
         {"in_flight", false},
         {"cut_short", nullptr}},
        {{"pid", 10},
         {"tid", 11},
         {"comm", "worker"},
         {"duration_ns", 5000 * kMs},
         {"in_flight", true},
         {"cut_short", nullptr}}}},
      {"slow_dispatches_omitted", 4},
      {"slow_idle_handlers",
       {{{"pid", 10},
         {"tid", 10},
         {"comm", "app"},
         {"duration_ns", 60 * kMs},
         {"in_flight", false},
         {"cut_short", nullptr}}}},
      {"slow_idle_handlers_omitted", 0},
      {"slow_deliveries",
       {{{"pid", 10}, {"tid", 10}, {"comm", "app"}, {"lag_ns", 40 * kMs}},
        {{"pid", 10}, {"tid", 10}, {"comm", "app"}, {"lag_ns", 17 * kMs}},
        {{"pid", 10}, {"tid", 10}, {"comm", "app"}, {"lag_ns", 16 * kMs}}}},
      {"slow_deliveries_omitted", 0},
      {"lost", lost(12, 1)},
      {"barrier_summary",
       {{"posted", 7},
        {"removed", 5},
        {"stalled", 2},
        {"leaked", 1},
        {"unknown_removes", 3},
        {"duplicate_posts", 0},
        {"not_listed", 0},
        {"stall_threshold_ns", 3000 * kMs}}},
      {"input_summary", {{"events", 300}, {"channels", 2}}},
      {"input_channels",
       {{{"channel", "socket:[100]"},
         {"pid", 10},
         {"comm", "app"},
         {"events", 200},
         {"unfinished", 1},
         {"blamed", 2},
         {"stages", json::object()}},
        {{"channel", "socket:[200]"},
         {"pid", 10},
         {"comm", "app"},
         {"events", 100},
         {"unfinished", 0},
         {"blamed", 3},
         {"stages", json::object()}}}},
  };
  // Two GTK threads' frames: the second drew fewer, worse.
  r["frames"] = {
      frames(10, 10, 300, 3, 7, 2 * kMs, 4 * kMs, 50 * kMs, 52 * kMs),
      frames(20, 20, 100, 2, 90, 3 * kMs, 5 * kMs, 800 * kMs, 900 * kMs)};
  r["frames"][1]["frozen"] = 1;
  // Every stage: channel 1 is worse at p99/max, channel 2 at p50/p90.
  for (int s = 0; s < kInputStages; ++s) {
    std::string name(input_stage_name(static_cast<InputStage>(s)));
    r["input_channels"][0]["stages"][name] =
        stage(200, 1 * kMs, 2 * kMs, 90 * kMs, 150 * kMs);
    r["input_channels"][1]["stages"][name] =
        stage(100, 4 * kMs, 5 * kMs, 6 * kMs, 7 * kMs);
  }
  return r;
}

// A run that traced loops but had nothing in them, no barrier probes and no
// input: what `looptrace record` writes when the target never dispatched.
json empty_run() {
  return {{"version", 1},
          {"threads", json::array()},
          {"threads_omitted", 0},
          {"slow_dispatches", json::array()},
          {"slow_dispatches_omitted", 0},
          {"slow_idle_handlers", json::array()},
          {"slow_idle_handlers_omitted", 0},
          {"slow_deliveries", json::array()},
          {"slow_deliveries_omitted", 0},
          {"lost", lost()}};
}

// ---- grammar ----

TEST(BudgetParse, EveryOperator) {
  struct Case {
    const char* text;
    BudgetOp op;
    const char* normalized;
  };
  for (const Case& c :
       {Case{"dispatch.p99 > 16ms", BudgetOp::kGt, "dispatch.p99 > 16ms"},
        Case{"dispatch.p99 >= 16ms", BudgetOp::kGe, "dispatch.p99 >= 16ms"},
        Case{"dispatch.p99 < 16ms", BudgetOp::kLt, "dispatch.p99 < 16ms"},
        Case{"dispatch.p99 <= 16ms", BudgetOp::kLe, "dispatch.p99 <= 16ms"},
        Case{"dispatch.p99 == 16ms", BudgetOp::kEq, "dispatch.p99 == 16ms"},
        Case{"dispatch.p99 != 16ms", BudgetOp::kNe, "dispatch.p99 != 16ms"},
        // Spaces are optional and normalized.
        Case{"dispatch.p99>=16ms", BudgetOp::kGe, "dispatch.p99 >= 16ms"},
        Case{"  dispatch.p99\t!=  16ms ", BudgetOp::kNe,
             "dispatch.p99 != 16ms"}}) {
    Budget b = parse_ok(c.text);
    EXPECT_EQ(b.op, c.op) << c.text;
    EXPECT_EQ(b.text, c.normalized);
    EXPECT_EQ(b.metric, "dispatch.p99");
    EXPECT_EQ(b.limit, 16 * kMs);
    EXPECT_EQ(b.limit_text, "16ms");
  }
}

TEST(BudgetParse, DurationUnits) {
  EXPECT_EQ(parse_ok("dispatch.max > 250ns").limit, 250u);
  EXPECT_EQ(parse_ok("dispatch.max > 16us").limit, 16'000u);
  EXPECT_EQ(parse_ok("dispatch.max > 16ms").limit, 16 * kMs);
  EXPECT_EQ(parse_ok("dispatch.max > 2s").limit, 2000 * kMs);
  EXPECT_EQ(parse_ok("dispatch.max > 1.5s").limit, 1500 * kMs);
  EXPECT_EQ(parse_ok("dispatch.max > 0.5ms").limit, 500'000u);
  // Zero is zero in every unit.
  EXPECT_EQ(parse_ok("dispatch.max > 0").limit, 0u);
  EXPECT_EQ(parse_ok("dispatch.max > 0").kind, MetricKind::kDuration);
}

TEST(BudgetParse, Counts) {
  Budget b = parse_ok("lost > 0");
  EXPECT_EQ(b.kind, MetricKind::kCount);
  EXPECT_EQ(b.limit, 0u);
  EXPECT_EQ(parse_ok("dispatch.count < 100").limit, 100u);
  EXPECT_EQ(parse_ok("slow.count >= 3").limit, 3u);
  EXPECT_EQ(parse_ok("barrier.stalled > 0").metric, "barrier.stalled");
  EXPECT_EQ(parse_ok("lost > 18446744073709551615").limit,
            18446744073709551615u);
}

TEST(BudgetParse, BadExpressionsSayWhatAndWhere) {
  struct Case {
    const char* text;
    std::vector<const char*> says;
  };
  for (const Case& c : std::vector<Case>{
           {"", {"empty", "METRIC OP VALUE"}},
           {"   ", {"empty"}},
           {"> 16ms", {"expected a metric at column 1", "'>'"}},
           {"dispach.p99 > 16ms",
            {"unknown metric 'dispach.p99' at column 1",
             "did you mean 'dispatch.p99'"}},
           {"cpu.load > 1", {"unknown metric 'cpu.load' at column 1"}},
           {"dispatch.p99 16ms",
            {"expected an operator", "column 14", "'16ms'"}},
           {"dispatch.p99", {"expected an operator", "end of the expression"}},
           {"dispatch.p99 = 16ms", {"column 14", "'='", "'=='"}},
           {"dispatch.p99 => 16ms", {"column 14", "'=>'"}},
           {"dispatch.p99 >", {"expected a duration", "column 15"}},
           {"lost >", {"expected a whole number", "column 7"}},
           {"dispatch.p99 > 16", {"is a duration", "'16'", "needs a unit"}},
           {"dispatch.p99 > 16xs",
            {"is a duration", "'16xs'", "column 16", "bad duration"}},
           {"dispatch.p99 > -1ms", {"'-1ms'", "negative"}},
           {"lost > 5ms", {"lost is a count", "'5ms'", "whole number"}},
           {"lost > 1.5", {"is a count", "'1.5'"}},
           {"lost > 18446744073709551616", {"too large"}},
           {"lost > 0 0", {"unexpected '0' at column 10"}},
           {"lost > 0 && dispatch.p99 > 1ms", {"unexpected"}},
           {"lost > 0\nlost > 1", {"one line"}},
       }) {
    std::string msg = parse_error(c.text);
    EXPECT_EQ(msg.rfind("--fail-if '", 0), 0u) << msg;
    for (const char* s : c.says)
      EXPECT_NE(msg.find(s), std::string::npos)
          << "'" << c.text << "' -> " << msg << "\n  should say: " << s;
  }
}

TEST(BudgetParse, UnknownMetricHintListsTheFamilies) {
  Result<Budget> b = parse_budget("nope > 1");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().hint().find("dispatch|idle|delivery"),
            std::string::npos);
}

TEST(BudgetParse, EveryListedMetricParses) {
  std::set<std::string> names;
  for (const BudgetMetric& m : budget_metrics()) {
    EXPECT_TRUE(names.insert(m.name).second) << "twice: " << m.name;
    EXPECT_FALSE(m.meaning.empty()) << m.name;
    Budget b = parse_ok(m.name + (m.kind == MetricKind::kDuration  ? " > 1ms"
                                  : m.kind == MetricKind::kPercent ? " > 1%"
                                                                   : " > 1"));
    EXPECT_EQ(b.metric, m.name);
    EXPECT_EQ(b.kind, m.kind);
  }
  // The examples.
  for (const char* name :
       {"dispatch.p99", "input.total_latency_dur.max", "lost", "slow.count",
        "idle.max", "barrier.stalled", "dispatch.count"})
    EXPECT_TRUE(names.count(name)) << name;
}

// ---- operators ----

TEST(BudgetEval, EveryOperatorAtAndAroundTheLimit) {
  json r = full_report();  // dispatch.p99 = 23ms (the worse thread)
  struct Case {
    const char* expr;
    bool broken;
  };
  for (const Case& c :
       {Case{"dispatch.p99 > 22ms", true}, Case{"dispatch.p99 > 23ms", false},
        Case{"dispatch.p99 >= 23ms", true}, Case{"dispatch.p99 >= 24ms", false},
        Case{"dispatch.p99 < 24ms", true}, Case{"dispatch.p99 < 23ms", false},
        Case{"dispatch.p99 <= 23ms", true}, Case{"dispatch.p99 <= 22ms", false},
        Case{"dispatch.p99 == 23ms", true},
        Case{"dispatch.p99 == 23000001ns", false},
        Case{"dispatch.p99 != 22ms", true},
        Case{"dispatch.p99 != 23ms", false}}) {
    BudgetOutcome o = eval(c.expr, r);
    EXPECT_TRUE(o.known) << c.expr;
    EXPECT_EQ(o.value, 23 * kMs) << c.expr;
    EXPECT_EQ(o.broken, c.broken) << c.expr;
  }
}

// ---- every metric ----

TEST(BudgetEval, SpanMetricsAggregateOverThreads) {
  json r = full_report();
  struct Case {
    const char* metric;
    uint64_t value;
  };
  for (const Case& c : {
           // Counts and sums add up over threads.
           Case{"dispatch.count", 1500},
           Case{"dispatch.sum", 4600 * kMs},
           // Listed slow spans + the omitted ones (the in-flight hang too).
           Case{"dispatch.slow", 6},
           Case{"slow.count", 6},
           // Percentiles: the worst thread.
           Case{"dispatch.p50", 3 * kMs},
           Case{"dispatch.p90", 5 * kMs},
           Case{"dispatch.p99", 23 * kMs},
           // max: the hang still running at the end (not in threads[]).
           Case{"dispatch.max", 5000 * kMs},
           Case{"idle.count", 50},
           Case{"idle.slow", 1},
           Case{"idle.sum", 100 * kMs},
           Case{"idle.p50", 1 * kMs},
           Case{"idle.p90", 2 * kMs},
           Case{"idle.p99", 3 * kMs},
           Case{"idle.max", 60 * kMs},
           Case{"delivery.count", 900},
           Case{"delivery.slow", 3},
           Case{"delivery.sum", 900 * kMs},
           Case{"delivery.p50", 1 * kMs},
           Case{"delivery.p90", 4 * kMs},
           Case{"delivery.p99", 20 * kMs},
           Case{"delivery.max", 40 * kMs},
       }) {
    BudgetOutcome o = eval(std::string(c.metric) + " != 0", r);
    EXPECT_TRUE(o.known) << c.metric << ": " << o.detail;
    EXPECT_EQ(o.value, c.value) << c.metric;
  }
  // Where the worst value comes from.
  EXPECT_EQ(eval("dispatch.p50 > 1ms", r).detail, "pid 10 tid 11 worker");
  EXPECT_EQ(eval("dispatch.p99 > 1ms", r).detail, "pid 10 tid 10 app");
  EXPECT_EQ(eval("dispatch.max > 1ms", r).detail,
            "pid 10 tid 11 worker, still running at the end");
  EXPECT_EQ(eval("dispatch.count > 1", r).detail, "2 threads");
}

TEST(BudgetEval, MaxIncludesSpansCutShort) {
  json r = full_report();
  r["slow_idle_handlers"][0]["duration_ns"] = 900 * kMs;
  r["slow_idle_handlers"][0]["cut_short"] = "exit";
  BudgetOutcome o = eval("idle.max > 50ms", r);
  EXPECT_EQ(o.value, 900 * kMs);
  EXPECT_EQ(o.detail, "pid 10 tid 10 app, cut short by exit");
}

TEST(BudgetEval, OmittedThreadsAreNamedInTheDetail) {
  json r = full_report();
  r["threads_omitted"] = 5;
  EXPECT_NE(eval("dispatch.p99 > 1ms", r).detail.find("5 threads not listed"),
            std::string::npos);
}

TEST(BudgetEval, InputMetricsTakeTheWorstChannel) {
  json r = full_report();
  EXPECT_EQ(eval("input.events > 0", r).value, 300u);
  EXPECT_EQ(eval("input.unfinished > 0", r).value, 1u);
  EXPECT_EQ(eval("input.blamed > 0", r).value, 5u);
  for (int s = 0; s < kInputStages; ++s) {
    std::string p =
        "input." + std::string(input_stage_name(static_cast<InputStage>(s)));
    EXPECT_EQ(eval(p + ".count > 0", r).value, 300u) << p;
    EXPECT_EQ(eval(p + ".p50 > 0", r).value, 4 * kMs) << p;
    EXPECT_EQ(eval(p + ".p90 > 0", r).value, 5 * kMs) << p;
    EXPECT_EQ(eval(p + ".p99 > 0", r).value, 90 * kMs) << p;
    EXPECT_EQ(eval(p + ".max > 0", r).value, 150 * kMs) << p;
  }
  BudgetOutcome o = eval("input.total_latency_dur.max > 100ms", r);
  EXPECT_TRUE(o.broken);
  EXPECT_EQ(o.detail, "channel socket:[100] (pid 10 app)");
}

TEST(BudgetEval, BarrierAndLostMetrics) {
  json r = full_report();
  EXPECT_EQ(eval("barrier.posted > 0", r).value, 7u);
  EXPECT_EQ(eval("barrier.removed > 0", r).value, 5u);
  EXPECT_EQ(eval("barrier.stalled > 0", r).value, 2u);
  EXPECT_EQ(eval("barrier.leaked > 0", r).value, 1u);
  EXPECT_EQ(eval("barrier.unknown_removes > 0", r).value, 3u);
  BudgetOutcome lost = eval("lost > 0", r);
  EXPECT_TRUE(lost.broken);
  EXPECT_EQ(lost.value, 13u);
  EXPECT_EQ(lost.detail, "orphan_samples 1, ringbuf_full 12");
  EXPECT_EQ(eval("lost.ringbuf_full > 0", r).value, 12u);
  EXPECT_EQ(eval("lost.orphan_samples > 0", r).value, 1u);
  EXPECT_EQ(eval("lost.hist_full > 0", r).value, 0u);
  EXPECT_FALSE(eval("lost.hist_full > 0", r).broken);
}

// Every metric in the table reads something from a full report.
TEST(BudgetEval, EveryMetricIsKnownInAFullReport) {
  json r = full_report();
  for (const BudgetMetric& m : budget_metrics()) {
    BudgetOutcome o = eval(m.name + " == 0", r);
    EXPECT_TRUE(o.known) << m.name << ": " << o.detail;
  }
}

// frames.*: counts summed, statistics of the worst thread, and the janky
// ratio of all frames (the budgets).
TEST(BudgetEval, FrameMetrics) {
  json r = full_report();
  EXPECT_EQ(eval("frames.count > 0", r).value, 400u);
  EXPECT_EQ(eval("frames.janky > 0", r).value, 5u);
  EXPECT_EQ(eval("frames.frozen > 0", r).value, 1u);
  BudgetOutcome dropped = eval("frames.dropped > 0", r);
  EXPECT_EQ(dropped.value, 97u);
  EXPECT_TRUE(dropped.broken);
  BudgetOutcome p99 = eval("frames.p99 > 16ms", r);
  EXPECT_EQ(p99.value, 800 * kMs);
  EXPECT_EQ(p99.detail, "pid 20 tid 20 gtk");
  EXPECT_TRUE(p99.broken);
  // 5 of 400 frames: 1.25%, broken at 1%, holds at 1.25% and 2%.
  BudgetOutcome ratio = eval("frames.janky_ratio > 1%", r);
  EXPECT_EQ(ratio.value, 125u);
  EXPECT_TRUE(ratio.broken);
  EXPECT_EQ(budget_broken_line(ratio),
            "looptrace: budget broken: frames.janky_ratio = 1.25% > 1% (5 of "
            "400 frames)");
  EXPECT_FALSE(eval("frames.janky_ratio > 1.25%", r).broken);
  EXPECT_FALSE(eval("frames.janky_ratio >= 2%", r).broken);
  // 1 janky of 301 frames is 0.34% (rounded up): over 0.33%.
  r["frames"] = {frames(10, 10, 301, 1, 1, kMs, kMs, kMs, kMs)};
  EXPECT_EQ(eval("frames.janky_ratio > 0.33%", r).value, 34u);
  json out = budgets_to_json({eval("frames.janky_ratio > 0.5%", r)});
  EXPECT_EQ(out[0]["unit"], "basis_points");
  EXPECT_EQ(out[0]["limit"], 50);
}

// Input to frame: the input.total_to_frame_dur.p99 > 50ms, the
// worst channel's; unknown (so broken) when no frames were traced (no
// frames[]) even though input was.
TEST(BudgetEval, InputToFrame) {
  json r = full_report();
  BudgetOutcome o = eval("input.total_to_frame_dur.p99 > 50ms", r);
  EXPECT_TRUE(o.known) << o.detail;
  EXPECT_EQ(o.value, 90 * kMs);
  EXPECT_TRUE(o.broken);
  EXPECT_EQ(o.detail, "channel socket:[100] (pid 10 app)");
  EXPECT_FALSE(eval("input.total_to_frame_dur.p99 > 90ms", r).broken);
  EXPECT_EQ(eval("input.consume_to_frame_dur.count > 0", r).value, 300u);
  r.erase("frames");
  for (json& c : r["input_channels"]) {
    c["stages"].erase("total_to_frame_dur");
    c["stages"].erase("consume_to_frame_dur");
  }
  BudgetOutcome none = eval("input.total_to_frame_dur.p99 > 50ms", r);
  EXPECT_FALSE(none.known);
  EXPECT_TRUE(none.broken);  // nothing measured is no pass
  EXPECT_NE(none.detail.find("no frame probes"), std::string::npos)
      << none.detail;
}

TEST(BudgetParse, Percentages) {
  EXPECT_EQ(parse_ok("frames.janky_ratio > 1%").limit, 100u);
  EXPECT_EQ(parse_ok("frames.janky_ratio>0.5%").limit, 50u);
  EXPECT_EQ(parse_ok("frames.janky_ratio > 12.25%").limit, 1225u);
  EXPECT_EQ(parse_ok("frames.janky_ratio > 100%").limit, 10000u);
  for (const char* bad :
       {"frames.janky_ratio > 1", "frames.janky_ratio > 1.%",
        "frames.janky_ratio > 0.125%", "frames.janky_ratio > 101%",
        "frames.janky_ratio > -1%", "frames.janky_ratio > 16ms",
        "frames.janky_ratio > %"}) {
    Result<Budget> b = parse_budget(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("frames.janky_ratio is a percentage"),
              std::string::npos)
        << b.status().message();
  }
}

// ---- no data ----

TEST(BudgetNoData, AnEmptyRunBreaksEveryStatisticButCounts) {
  json r = empty_run();
  // A run that traced nothing: the counts are known, and 0.
  BudgetOutcome count = eval("dispatch.count < 100", r);
  EXPECT_TRUE(count.known);
  EXPECT_EQ(count.value, 0u);
  EXPECT_TRUE(count.broken);
  EXPECT_FALSE(eval("slow.count >= 3", r).broken);
  EXPECT_FALSE(eval("lost > 0", r).broken);
  // Statistics of nothing are unknown, and unknown is broken: "p99 under
  // 16ms" is not shown by a run without a single dispatch.
  for (const char* expr : {"dispatch.p99 > 16ms", "dispatch.max > 16ms",
                           "idle.max > 50ms", "delivery.p90 > 16ms"}) {
    BudgetOutcome o = eval(expr, r);
    EXPECT_FALSE(o.known) << expr;
    EXPECT_TRUE(o.broken) << expr;
    EXPECT_EQ(o.detail.rfind("no data: no ", 0), 0u) << o.detail;
  }
}

TEST(BudgetNoData, InputAndBarrierMetricsWithoutTheirProbes) {
  json r = empty_run();
  for (const BudgetMetric& m : budget_metrics()) {
    bool input = m.name.rfind("input.", 0) == 0;
    bool barrier = m.name.rfind("barrier.", 0) == 0;
    bool frames = m.name.rfind("frames.", 0) == 0;
    if (!input && !barrier && !frames) continue;
    BudgetOutcome o =
        eval(m.name + (m.kind == MetricKind::kPercent ? " > 0%" : " > 0"), r);
    EXPECT_FALSE(o.known) << m.name;
    EXPECT_TRUE(o.broken) << m.name;
    EXPECT_NE(o.detail.find(input    ? "traced no input"
                            : frames ? "no frame probes"
                                     : "no barrier probes"),
              std::string::npos)
        << m.name << ": " << o.detail;
  }
  BudgetOutcome o = eval("input.total_latency_dur.max > 100ms", r);
  EXPECT_EQ(budget_broken_line(o),
            "looptrace: budget broken: input.total_latency_dur.max > 100ms: "
            "no data: the run traced no input (--input)");
}

TEST(BudgetNoData, AStageNoEventReached) {
  json r = full_report();
  // Raw channels have no ack stage; another run's events were never acked.
  for (auto& c : r["input_channels"]) c["stages"]["ack_latency_dur"] = nullptr;
  BudgetOutcome o = eval("input.ack_latency_dur.p99 > 10ms", r);
  EXPECT_FALSE(o.known);
  EXPECT_TRUE(o.broken);
  EXPECT_EQ(eval("input.ack_latency_dur.count > 0", r).value, 0u);
}

TEST(BudgetNoData, AnEmptyDocumentKnowsNothing) {
  for (const BudgetMetric& m : budget_metrics()) {
    BudgetOutcome o = eval(m.name + " > 0", json::object());
    EXPECT_FALSE(o.known) << m.name;
    EXPECT_TRUE(o.broken) << m.name;
  }
}

TEST(BudgetEval, MalformedFieldsAreNotThere) {
  json r = full_report();
  r["threads"][0]["p99_ns"] = "23ms";
  r["threads"][2]["p99_ns"] = -1;
  BudgetOutcome o = eval("dispatch.p99 > 1ms", r);
  EXPECT_FALSE(o.known);
  EXPECT_TRUE(o.broken);
}

// ---- outputs ----

TEST(BudgetOutput, JsonAndLines) {
  json r = full_report();
  std::vector<Budget> budgets = {parse_ok("dispatch.p99 > 16ms"),
                                 parse_ok("lost.hist_full > 0"),
                                 parse_ok("barrier.stalled>0")};
  std::vector<BudgetOutcome> out = evaluate_budgets(budgets, r);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(any_budget_broken(out));
  EXPECT_FALSE(any_budget_broken({out[1]}));

  json j = budgets_to_json(out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0], json({{"expr", "dispatch.p99 > 16ms"},
                        {"metric", "dispatch.p99"},
                        {"op", ">"},
                        {"unit", "ns"},
                        {"limit", 16 * kMs},
                        {"value", 23 * kMs},
                        {"known", true},
                        {"broken", true},
                        {"detail", "pid 10 tid 10 app"}}));
  EXPECT_EQ(j[1]["broken"], false);
  EXPECT_EQ(j[1]["unit"], "count");
  EXPECT_EQ(j[2]["expr"], "barrier.stalled > 0");

  std::ostringstream os;
  write_broken_budgets(os, out);
  EXPECT_EQ(os.str(),
            "looptrace: budget broken: dispatch.p99 = 23.0ms > 16ms "
            "(pid 10 tid 10 app)\n"
            "looptrace: budget broken: barrier.stalled = 2 > 0\n");

  std::vector<BudgetOutcome> none =
      evaluate_budgets({parse_ok("idle.max > 1s")}, empty_run());
  EXPECT_EQ(budgets_to_json(none)[0]["value"], nullptr);
  EXPECT_EQ(budgets_to_json(none)[0]["known"], false);
}

// The metrics read the document the JSON writer makes, not a guess of it.
TEST(BudgetEval, AgainstTheJsonReportWriter) {
  Findings found;
  ThreadSummary t;
  t.pid = 42;
  t.tid = 43;
  t.comm = "loop";
  t.count = 10;
  t.slow_count = 1;
  t.sum_ns = 200 * kMs;
  t.pct = {10, 2 * kMs, 3 * kMs, 150 * kMs, 150 * kMs};
  found.analysis.threads.push_back(t);
  SlowSpan s;
  s.span.pid = 42;
  s.span.tid = 43;
  s.span.comm = "loop";
  s.span.start_ns = 1000;
  s.span.duration_ns = 150 * kMs;
  found.analysis.slow.push_back(s);
  found.analysis.counters.bpf[LT_CNT_RB_FULL] = 2;
  found.has_barriers = true;
  found.barriers.posted = 3;
  found.barriers.stalled = 1;
  found.has_input = true;
  InputChannelSummary c;
  c.channel = 77;
  c.pid = 42;
  c.comm = "loop";
  c.events = 5;
  c.blamed = 1;
  c.stages[static_cast<int>(InputStage::kTotalLatency)] = {
      5, 1 * kMs, 2 * kMs, 120 * kMs, 130 * kMs};
  found.input.channels.push_back(c);
  explain_slow_spans(found.analysis);  // as the analysis does
  ReportContext ctx;
  ctx.slow_ns[LT_ROLE_DISPATCH] = 16 * kMs;

  json doc = findings_to_json(found, ctx);
  std::vector<BudgetOutcome> out = evaluate_budgets(
      {parse_ok("dispatch.p99 > 100ms"), parse_ok("dispatch.max > 100ms"),
       parse_ok("dispatch.count != 10"), parse_ok("slow.count != 1"),
       parse_ok("lost != 2"), parse_ok("lost.ringbuf_full != 2"),
       parse_ok("barrier.stalled != 1"), parse_ok("barrier.posted != 3"),
       parse_ok("input.blamed != 1"),
       parse_ok("input.total_latency_dur.max > 100ms"),
       parse_ok("input.total_latency_dur.count != 5")},
      doc);
  std::vector<uint64_t> want = {150 * kMs, 150 * kMs, 10, 1,         2, 2,
                                1,         3,         1,  130 * kMs, 5};
  std::vector<bool> broken = {true,  true,  false, false, false, false,
                              false, false, false, true,  false};
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].known) << out[i].expr << ": " << out[i].detail;
    EXPECT_EQ(out[i].value, want[i]) << out[i].expr;
    EXPECT_EQ(out[i].broken, broken[i]) << out[i].expr;
  }
}

}  // namespace
}  // namespace looptrace
