// The input text report: per channel, the stage table and the worst events,
// grouped by the dispatch they waited behind.
#include "report/input_report.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

InputEventInfo event(uint32_t seq, uint64_t sent_ms, uint64_t latency_ms) {
  InputEventInfo e;
  e.channel = 7;
  e.pid = e.tid = 10;
  e.seq = seq;
  e.type = InputType::kMotion;
  e.sent_ns = sent_ms * kMs;
  e.received_ns = e.sent_ns;
  e.handling_start_ns = e.sent_ns + latency_ms * kMs;
  e.finished_ns = e.handling_start_ns;
  e.has_finish = true;
  return e;
}

SpanEvent stall() {
  SpanEvent s;
  s.pid = s.tid = 10;
  s.span_id = 42;
  s.start_ns = 100 * kMs;
  s.duration_ns = 200 * kMs;
  return s;
}

TEST(InputTextReport, WorstEventsAreGroupedByWhatTheyWaitedBehind) {
  InputAnalysis a;
  // Three events behind the 200 ms stall, then two slow ones with no slow
  // dispatch to name, then two fast ones.
  for (uint32_t i = 0; i < 3; ++i) {
    InputEventInfo e = event(1 + i, 150 + 10 * i, 180 - 10 * i);
    InputBlame b;
    b.arrival_ns = e.sent_ns;
    b.chain.push_back({stall(), true});
    e.blame = b;
    a.events.push_back(e);
  }
  for (uint32_t i = 0; i < 2; ++i) {
    InputEventInfo e = event(4 + i, 400 + 10 * i, 120);
    InputBlame b;
    b.arrival_ns = e.sent_ns;
    b.unattributed_ns = 120 * kMs;
    e.blame = b;
    a.events.push_back(e);
  }
  a.events.push_back(event(6, 600, 2));
  a.events.push_back(event(7, 610, 3));
  InputChannelSummary c;
  c.channel = 7;
  c.pid = 10;
  c.events = 7;
  a.channels.push_back(c);
  std::vector<ProbeDef> probes(1);
  probes[0].resolved_symbol = "Loop::dispatch";
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.start_ns = 100 * kMs;  // times are shown from here
  std::ostringstream os;
  write_input_report(os, a, DispatchAnalysis{}, ctx);
  const std::string out = os.str();
  // Worst first: the stall's group (180 ms), the unnamed run (120 ms), the
  // fast pair.
  size_t g1 = out.find(
      "3 events, seq 1..3: arrived +50.0ms..+70.0ms, "
      "consumed up to 180ms later");
  size_t g2 = out.find(
      "2 events, seq 4..5: arrived +300ms..+310ms, "
      "consumed up to 120ms later");
  size_t g3 = out.find(
      "2 events, seq 6..7: arrived +500ms..+510ms, "
      "consumed up to 3.00ms later");
  ASSERT_NE(g1, std::string::npos) << out;
  ASSERT_NE(g2, std::string::npos) << out;
  ASSERT_NE(g3, std::string::npos) << out;
  EXPECT_LT(g1, g2);
  EXPECT_LT(g2, g3);
  EXPECT_NE(out.find("behind Loop::dispatch (200ms)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("behind dispatches each shorter than the slow threshold "
                     "(120ms, the worst)"),
            std::string::npos)
      << out;
}

TEST(InputTextReport, ALoneEventIsShownAsItself) {
  InputAnalysis a;
  a.events.push_back(event(9, 200, 5));
  InputChannelSummary c;
  c.channel = 7;
  c.events = 1;
  a.channels.push_back(c);
  std::ostringstream os;
  ReportContext ctx;
  ctx.start_ns = 100 * kMs;
  write_input_report(os, a, DispatchAnalysis{}, ctx);
  EXPECT_NE(os.str().find("seq 9 motion: arrived +100ms, consumed 5.00ms "
                          "later"),
            std::string::npos)
      << os.str();
}

}  // namespace
}  // namespace looptrace
