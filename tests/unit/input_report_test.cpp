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

InputGroup group(const InputEventInfo& worst, uint64_t n, uint32_t seq_lo,
                 uint32_t seq_hi, uint64_t first_ms, uint64_t last_ms) {
  InputGroup g;
  g.worst = worst;
  g.events = n;
  g.seq_lo = seq_lo;
  g.seq_hi = seq_hi;
  g.first_arrival_ns = first_ms * kMs;
  g.last_arrival_ns = last_ms * kMs;
  return g;
}

TEST(InputTextReport, WorstGroupsNameWhatTheyWaitedBehind) {
  // The analyser's groups (input_analysis_test): three events behind the
  // 200 ms stall, two slow ones with no slow dispatch to name, two fast.
  InputEventInfo behind = event(1, 150, 180);
  InputBlame b;
  b.arrival_ns = behind.sent_ns;
  b.chain.push_back({stall(), true});
  b.chain.push_back({stall(), false});
  b.omitted = 3;
  b.waited_ns = 190 * kMs;
  behind.blame = b;
  InputEventInfo unnamed = event(4, 400, 120);
  InputBlame u;
  u.arrival_ns = unnamed.sent_ns;
  u.unattributed_ns = 120 * kMs;
  unnamed.blame = u;
  InputChannelSummary c;
  c.channel = 7;
  c.pid = 10;
  c.events = 7;
  c.worst = {group(behind, 3, 1, 3, 150, 170),
             group(unnamed, 2, 4, 5, 400, 410),
             group(event(7, 610, 3), 2, 6, 7, 600, 610)};
  InputAnalysis a;
  a.total = 7;
  a.channels.push_back(c);
  std::vector<ProbeDef> probes(1);
  probes[0].resolved_symbol = "Loop::dispatch";
  ReportContext ctx;
  ctx.probes = &probes;
  ctx.start_ns = 100 * kMs;  // times are shown from here
  std::ostringstream os;
  write_input_report(os, a, DispatchAnalysis{}, ctx);
  const std::string out = os.str();
  EXPECT_NE(out.find("INPUT: 7 events on 1 channel"), std::string::npos) << out;
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
  // Those the analysis left out of the chain are counted all the same.
  EXPECT_NE(out.find("and 4 more dispatches; waited 190ms in all (the worst)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("behind dispatches each shorter than the slow threshold "
                     "(120ms, the worst)"),
            std::string::npos)
      << out;
}

TEST(InputTextReport, ALoneEventIsShownAsItself) {
  InputAnalysis a;
  InputChannelSummary c;
  c.channel = 7;
  c.events = 1;
  InputEventInfo e = event(9, 200, 5);
  c.worst = {group(e, 1, 9, 9, 200, 200)};
  a.channels.push_back(c);
  a.total = 1;
  std::ostringstream os;
  ReportContext ctx;
  ctx.start_ns = 100 * kMs;
  write_input_report(os, a, DispatchAnalysis{}, ctx);
  EXPECT_NE(os.str().find("seq 9 motion: arrived +100ms, consumed 5.00ms "
                          "later"),
            std::string::npos)
      << os.str();
}

// With frames traced: what "frame end" means under the channel, the frame
// stages in its table, and the event's frame end after its consumption;
// the JSON has frame_end_ns and the stages only then.
TEST(InputTextReport, FrameEndIsShownWhenFramesWereTraced) {
  InputAnalysis a;
  InputChannelSummary c;
  c.channel = 7;
  c.events = 1;
  InputEventInfo e = event(9, 200, 5);
  e.frame_end_ns = 212 * kMs;
  c.worst = {group(e, 1, 9, 9, 200, 200)};
  c.stages[static_cast<size_t>(InputStage::kTotalToFrame)] = {
      1, 12 * kMs, 12 * kMs, 12 * kMs, 12 * kMs};
  a.channels.push_back(c);
  a.events.push_back(e);
  a.total = 1;
  ReportContext ctx;
  ctx.start_ns = 100 * kMs;
  auto text = [&] {
    std::ostringstream os;
    write_input_report(os, a, DispatchAnalysis{}, ctx);
    return os.str();
  };
  std::string without = text();
  EXPECT_EQ(without.find("frame end ="), std::string::npos) << without;
  EXPECT_EQ(without.find("total_to_frame_dur"), std::string::npos) << without;
  EXPECT_FALSE(input_summary_to_json(a, DispatchAnalysis{},
                                     ctx)["input_channels"][0]["stages"]
                   .contains("total_to_frame_dur"));
  a.frames = true;
  std::string with = text();
  EXPECT_NE(with.find("  frame end = end of the first frame started after "
                      "it (not its present)\n"),
            std::string::npos)
      << with;
  EXPECT_NE(with.find("  total_to_frame_dur"), std::string::npos) << with;
  EXPECT_NE(with.find("seq 9 motion: arrived +100ms, consumed 5.00ms later, "
                      "frame end +112ms"),
            std::string::npos)
      << with;
  nlohmann::json j = input_summary_to_json(a, DispatchAnalysis{}, ctx);
  EXPECT_EQ(j["input_channels"][0]["stages"]["total_to_frame_dur"]["p99_ns"],
            12 * kMs);
  size_t seen = 0;
  for_each_input_event_json(
      a, DispatchAnalysis{}, ctx, [&seen, &e](const nlohmann::json& ev) {
        ++seen;
        EXPECT_EQ(ev["frame_end_ns"], e.frame_end_ns);
        EXPECT_EQ(ev["consume_to_frame_dur"], e.frame_end_ns - e.finished_ns);
      });
  EXPECT_EQ(seen, 1u);
}

// No channel seen: the report says which kinds were looked for (Android's
// SOCK_SEQPACKET channels; with a profile whose dispatch handles display
// input, -p's X11 and Wayland connections too) and how to pick one.
TEST(InputTextReport, NoChannelSaysWhatWasLookedForAndHowToPickOne) {
  auto report = [](bool display) {
    std::vector<ProbeDef> probes(1);
    if (display) probes[0].input = ProbeDef::InputMatch{};
    ReportContext ctx;
    ctx.probes = &probes;
    std::ostringstream os;
    write_input_report(os, InputAnalysis{}, DispatchAnalysis{}, ctx);
    return os.str();
  };
  const std::string plain = report(false), gtk = report(true);
  for (const std::string& out : {plain, gtk}) {
    EXPECT_NE(out.find("INPUT: 0 events on 0 channels"), std::string::npos)
        << out;
    EXPECT_NE(out.find("    Android InputChannels (AF_UNIX SOCK_SEQPACKET)\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("..."), std::string::npos) << out;  // nothing cut
  }
  EXPECT_NE(plain.find("  no input channel seen; looked for:\n"
                       "    Android InputChannels (AF_UNIX SOCK_SEQPACKET)\n"
                       "  pick one with -p PID and --input-peer auto (its X11 "
                       "and Wayland\n    connections), --input-peer PATH "
                       "(connected to PATH) or --input-fd FD\n"),
            std::string::npos)
      << plain;
  // A display profile traced -p's connections: they carried no input (a
  // program nobody types into), which is not "no channel".
  EXPECT_NE(gtk.find("  no input message seen on what was traced:\n"
                     "    X11 and Wayland connections of -p PID (the "
                     "profile's display input)\n"
                     "    Android InputChannels (AF_UNIX SOCK_SEQPACKET)\n"
                     "  (none while nothing was typed); another channel: "
                     "--input-peer PATH\n    (connected to PATH) or "
                     "--input-fd FD\n"),
            std::string::npos)
      << gtk;
  EXPECT_EQ(gtk.find("no input channel seen"), std::string::npos) << gtk;
}

// Display events matched in order among twins of one type and time: the
// channel says how many.
TEST(InputTextReport, AmbiguousDisplayMatchesAreCounted) {
  InputAnalysis a;
  InputChannelSummary c;
  c.channel = 7;
  c.chan_kind = LT_CHAN_X11;
  c.events = c.keys = 2;
  c.ambiguous = 2;
  a.channels.push_back(c);
  a.total = 2;
  std::ostringstream os;
  write_input_report(os, a, DispatchAnalysis{}, ReportContext{});
  EXPECT_NE(os.str().find("\n  2 events shared type and time with another: "
                          "matched in order (ambiguous)\n"),
            std::string::npos)
      << os.str();
}

}  // namespace
}  // namespace looptrace
