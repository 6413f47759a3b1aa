// Span pairing on the stack pointer: a uretprobe's return is matched with
// the frame entered at its stack pointer, so dispatches that never return
// (left by longjmp) are found dead as the kernel finds their return
// instances dead, counted, and do not shift the spans after them; and a
// tail call between two probed functions (one return ends both) keeps both
// spans. Ground truth: tests/programs/longjmp_loop's own log
// (CLOCK_MONOTONIC) and, for the tail call, objdump's disassembly.
#include <algorithm>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

// The span lies around the program's first and last clock reads in the
// function; it may exceed them by the probes' own cost and a preemption.
constexpr int64_t kSlackNs = 1'000'000;
// longjmp_loop's defaults: 40 dispatches of 8 ms, every 4th escaping (the
// last always returns), then 10 tail calls of 8 + 8 ms.
constexpr int kDispatches = 40;
constexpr int kTails = 10;

std::string program() {
  return std::string(LT_TEST_PROGRAMS_DIR) + "/longjmp_loop";
}

class SpanPairing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!bpf_unavailable_reason().empty()) return;
    TempDir dir;
    const std::string out = dir.file("r.json"), log = dir.file("app.jsonl");
    const std::string bin = program();
    RunResult r = run({looptrace_bin(),
                       "record",
                       "-q",
                       "--dispatch",
                       bin + ":lj_dispatch",
                       "--dispatch",
                       bin + ":lj_tail_outer",
                       "--dispatch",
                       bin + ":lj_tail_inner",
                       "--slow",
                       "5ms",
                       "--json",
                       out,
                       "--",
                       bin,
                       "--dispatches",
                       std::to_string(kDispatches),
                       "--tail",
                       std::to_string(kTails),
                       "--log",
                       log});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    log_ = new std::vector<json>(read_jsonl(log));
    std::vector<json> summary = events(*log_, "summary");
    ASSERT_EQ(summary.size(), 1u);
    // A wait for a CPU between the probe and the program's clock read
    // lengthens a span: the thread's whole wait bounds it.
    slack_ns_ = kSlackNs +
                std::max<int64_t>(0, summary[0]["run_delay_ns"].get<int64_t>());
    report_ = new json(read_json(out));
  }
  static void TearDownTestSuite() {
    delete log_;
    delete report_;
    log_ = nullptr;
    report_ = nullptr;
  }
  void SetUp() override {
    LT_REQUIRE_BPF();
    ASSERT_NE(report_, nullptr);
  }

  // Slow spans of `probe`.
  static std::vector<json> spans_of(const std::string& probe) {
    std::vector<json> v;
    for (const json& s : (*report_)["slow_dispatches"])
      if (s["probe"] == probe) v.push_back(s);
    return v;
  }
  // The span that holds the program's clock reads `from` and `to`.
  static const json* span_holding(const std::vector<json>& spans,
                                  const json& from, const json& to) {
    for (const json& s : spans) {
      uint64_t start = s["start_ns"], dur = s["duration_ns"];
      if (start <= from.get<uint64_t>() && start + dur >= to.get<uint64_t>())
        return &s;
    }
    return nullptr;
  }

  static std::vector<json>* log_;
  static json* report_;
  static int64_t slack_ns_;
};

std::vector<json>* SpanPairing::log_ = nullptr;
json* SpanPairing::report_ = nullptr;
int64_t SpanPairing::slack_ns_ = kSlackNs;

TEST_F(SpanPairing, DispatchesLeftByLongjmpAreCountedAndTheRestStayExact) {
  std::vector<json> dispatches = events(*log_, "dispatch");
  ASSERT_EQ(dispatches.size(), static_cast<size_t>(kDispatches));
  std::vector<json> spans = spans_of("lj_dispatch");
  int escaped = 0;
  for (const json& d : dispatches) {
    const json* s = span_holding(spans, d["start_ns"], d["end_ns"]);
    if (d["escaped"].get<bool>()) {
      ++escaped;
      EXPECT_EQ(s, nullptr)
          << "a span for a dispatch that never returned: " << d.dump();
      continue;
    }
    ASSERT_NE(s, nullptr) << d.dump();
    int64_t truth = diff(d["end_ns"], d["start_ns"]);
    int64_t dur = (*s)["duration_ns"].get<int64_t>();
    EXPECT_GE(dur, truth) << s->dump();
    EXPECT_LE(dur, truth + slack_ns_) << s->dump();
    // Not nested under a frame that never returned.
    EXPECT_EQ((*s)["depth"], 0) << s->dump();
    EXPECT_FALSE((*s)["in_flight"].get<bool>()) << s->dump();
  }
  ASSERT_GT(escaped, 0);
  EXPECT_EQ(spans.size(), static_cast<size_t>(kDispatches - escaped));
  const json& lost = (*report_)["lost"];
  EXPECT_EQ(lost["abandoned"], escaped) << lost.dump();
  EXPECT_EQ(lost["unmatched_returns"], 0) << lost.dump();
  EXPECT_EQ(lost["depth_overflow"], 0) << lost.dump();
  // Their samples were dropped with them, not left waiting.
  EXPECT_EQ(lost["orphan_samples"], 0) << lost.dump();
  // The thread's count is of the spans that returned: the dispatches that
  // did, and both spans of each tail call.
  ASSERT_EQ((*report_)["threads"].size(), 1u);
  EXPECT_EQ((*report_)["threads"][0]["count"],
            kDispatches - escaped + 2 * kTails);
}

TEST_F(SpanPairing, TailCallEndsBothSpansAtOneReturn) {
  // The program's own code: lj_tail_outer jumps to lj_tail_inner.
  RunResult dis = run({"objdump", "-d", "--no-show-raw-insn",
                       "--disassemble=lj_tail_outer", program()});
  ASSERT_EQ(dis.exit_code, 0) << dis.err;
  ASSERT_NE(dis.out.find("jmp"), std::string::npos) << dis.out;
  ASSERT_NE(dis.out.find("<lj_tail_inner>"), std::string::npos) << dis.out;

  std::vector<json> tails = events(*log_, "tail");
  ASSERT_EQ(tails.size(), static_cast<size_t>(kTails));
  std::vector<json> outer = spans_of("lj_tail_outer");
  std::vector<json> inner = spans_of("lj_tail_inner");
  EXPECT_EQ(outer.size(), tails.size());
  EXPECT_EQ(inner.size(), tails.size());
  for (const json& t : tails) {
    const json* o = span_holding(outer, t["start_ns"], t["end_ns"]);
    const json* i = span_holding(inner, t["inner_start_ns"], t["end_ns"]);
    ASSERT_NE(o, nullptr) << t.dump();
    ASSERT_NE(i, nullptr) << t.dump();
    int64_t o_truth = diff(t["end_ns"], t["start_ns"]);
    int64_t i_truth = diff(t["end_ns"], t["inner_start_ns"]);
    EXPECT_GE((*o)["duration_ns"].get<int64_t>(), o_truth) << o->dump();
    EXPECT_LE((*o)["duration_ns"].get<int64_t>(), o_truth + slack_ns_)
        << o->dump();
    EXPECT_GE((*i)["duration_ns"].get<int64_t>(), i_truth) << i->dump();
    EXPECT_LE((*i)["duration_ns"].get<int64_t>(), i_truth + slack_ns_)
        << i->dump();
    EXPECT_EQ((*o)["depth"], 0) << o->dump();
    EXPECT_EQ((*i)["depth"], 1) << i->dump();
  }
}

// Spans nested deeper than the kernel's LT_MAX_DEPTH (8) frames: the outer
// 8 are timed exactly, the deeper ones counted, each once: generated =
// counted + lost. lj_nest calls itself 10 deep, 5 times.
TEST(SpanNesting, DeeperThanTheFrameStackIsCountedExactly) {
  LT_REQUIRE_BPF();
  constexpr int kNests = 5, kDepth = 10, kMaxDepth = 8;
  TempDir dir;
  const std::string out = dir.file("r.json"), log = dir.file("app.jsonl");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "-q",
                     "--dispatch",
                     program() + ":lj_nest",
                     "--slow",
                     "5ms",
                     "--json",
                     out,
                     "--",
                     program(),
                     "--dispatches",
                     "1",
                     "--tail",
                     "0",
                     "--nests",
                     std::to_string(kNests),
                     "--nest",
                     std::to_string(kDepth),
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> nests = events(read_jsonl(log), "nest");
  ASSERT_EQ(nests.size(), static_cast<size_t>(kNests));
  json report = read_json(out);
  EXPECT_EQ(report["lost"]["depth_overflow"], kNests * (kDepth - kMaxDepth))
      << report["lost"].dump();
  EXPECT_EQ(report["lost"]["abandoned"], 0);
  EXPECT_EQ(report["lost"]["unmatched_returns"], 0);
  ASSERT_EQ(report["threads"].size(), 1u);
  EXPECT_EQ(report["threads"][0]["count"], kNests * kMaxDepth);
  for (const json& n : nests) {
    // One span per depth 0..7, each around the innermost call's busy loop.
    std::vector<int> depths;
    for (const json& s : report["slow_dispatches"]) {
      uint64_t start = s["start_ns"], dur = s["duration_ns"];
      if (start <= n["start_ns"].get<uint64_t>() &&
          start + dur >= n["end_ns"].get<uint64_t>())
        depths.push_back(s["depth"].get<int>());
    }
    std::sort(depths.begin(), depths.end());
    std::vector<int> want(kMaxDepth);
    for (int d = 0; d < kMaxDepth; ++d) want[d] = d;
    EXPECT_EQ(depths, want) << n.dump();
  }
}

}  // namespace
}  // namespace lt_test
