// Folded stacks: each line parses back (as flamegraph.pl splits it: the
// count after the last space, frames on ';') to the stacks and sample
// counts of the slow spans.
#include "report/folded_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "findings_fixture.h"

namespace looptrace {
namespace {

using namespace fixture;

// Stack (frames joined by ';') -> count; a line that does not parse is a
// test failure.
std::map<std::string, uint64_t> parse_folded(const std::string& text) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos || sp + 1 == line.size() ||
        line.find_first_not_of("0123456789", sp + 1) != std::string::npos) {
      ADD_FAILURE() << "no count at the end of: " << line;
      continue;
    }
    EXPECT_EQ(out.count(line.substr(0, sp)), 0u) << "stack twice: " << line;
    out[line.substr(0, sp)] = std::stoull(line.substr(sp + 1));
  }
  return out;
}

std::vector<std::string> frames_of(const std::string& stack) {
  std::vector<std::string> out;
  std::istringstream in(stack);
  std::string f;
  while (std::getline(in, f, ';')) out.push_back(f);
  return out;
}

TEST(FoldedReport, ParsesBackToTheSampledStacksAndCounts) {
  TraceFixture f;
  std::ostringstream os;
  ASSERT_TRUE(write_folded(os, f.found, f.ctx).ok());
  const std::string kHandler =
      "main;Looper::loop();Handler::dispatchMessage(Message&);"
      "StallHandler::handleMessage(Message const&);";
  // Outermost first, under the thread's comm and the span's target; one
  // frame per function, whatever the offset of each sample in it.
  const std::map<std::string, uint64_t> want = {
      // Spans a (7) and d (5): the same handler, the same functions.
      {"loopapp;StallHandler what=7;" + kHandler + "busyLoop(int)", 12},
      {"loopapp;StallHandler what=7;" + kHandler +
           "std::this_thread::sleep_for<long, std::ratio<1l, 1000l> >",
       3},
      // No symbol: the library's name, else [unknown]; ';' and the line
      // break in a name do not split it.
      {"loopapp;StallHandler what=3;main;Looper::loop();[unknown];"
       "[libfoo.so];operator: odd()",
       2},
      {"loopapp;IdleHandler::queueIdle();" + kHandler + "busyLoop(int)", 4},
  };
  std::map<std::string, uint64_t> got = parse_folded(os.str());
  EXPECT_EQ(got, want) << os.str();
  uint64_t samples = 0;
  for (const SlowSpan& s : f.found.analysis.slow) samples += s.nsamples;
  uint64_t total = 0;
  for (const auto& [stack, n] : got) {
    total += n;
    EXPECT_EQ(frames_of(stack).size(), 7u) << stack;
  }
  EXPECT_EQ(total, samples) << "every sample counted once";
}

TEST(FoldedReport, LinesAreSorted) {
  TraceFixture f;
  std::ostringstream os;
  ASSERT_TRUE(write_folded(os, f.found, f.ctx).ok());
  std::istringstream in(os.str());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end()));
}

TEST(FoldedReport, NoSamplesNoLines) {
  Findings found;
  ReportContext ctx;
  std::ostringstream os;
  ASSERT_TRUE(write_folded(os, found, ctx).ok());
  EXPECT_EQ(os.str(), "");
}

// Off-CPU: where slow spans blocked, weighed in whole microseconds, the
// kernel wait as the last frame ("[blocked]" when its stack names none);
// a place under a microsecond in all is left out.
TEST(FoldedBlocked, WhereSlowSpansBlockedInMicroseconds) {
  TraceFixture f;
  BlockGroup sleep;
  sleep.frames = sleep_stack();
  sleep.blocked_ns = 90 * kMs + 999;
  sleep.count = 2;
  f.found.analysis.slow[0].blocked.push_back(sleep);
  BlockGroup tiny;
  tiny.frames = busy_stack(0);
  tiny.blocked_ns = 999;
  f.found.analysis.slow[0].blocked.push_back(tiny);
  // The same place in the same handler later: its time adds up.
  f.found.analysis.slow[3].blocked.push_back(sleep);
  std::ostringstream os;
  ASSERT_TRUE(write_folded_blocked(os, f.found, f.ctx).ok());
  const std::map<std::string, uint64_t> want = {
      {"loopapp;StallHandler what=7;main;Looper::loop();"
       "Handler::dispatchMessage(Message&);"
       "StallHandler::handleMessage(Message const&);"
       "std::this_thread::sleep_for<long, std::ratio<1l, 1000l> >;[blocked]",
       2 * 90000}};
  EXPECT_EQ(parse_folded(os.str()), want) << os.str();
  std::ostringstream none;
  ASSERT_TRUE(write_folded_blocked(none, Findings{}, f.ctx).ok());
  EXPECT_EQ(none.str(), "");
}

TEST(FoldedReport, AFailedStreamIsAnError) {
  TraceFixture f;
  std::ostringstream os;
  os.setstate(std::ios::badbit);
  EXPECT_FALSE(write_folded(os, f.found, f.ctx).ok());
}

TEST(FoldedFrame, KeepsFramesApartAndOnOneLine) {
  EXPECT_EQ(folded_frame("a;b"), "a:b");
  EXPECT_EQ(folded_frame("a\nb\r\tc"), "a b  c");
  EXPECT_EQ(folded_frame(""), "[unknown]");
  EXPECT_EQ(folded_frame("std::map<int, int>::at(int) const"),
            "std::map<int, int>::at(int) const");
}

}  // namespace
}  // namespace looptrace
