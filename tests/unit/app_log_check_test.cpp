// `looptrace demo`'s comparison of a report with the reference app's own
// log: what it counts as found, and what it names when looptrace reported
// a slow dispatch the app did not log.
#include "report/app_log_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace looptrace {
namespace {

using nlohmann::json;

json stall(uint64_t start, uint64_t dur) {
  return {{"event", "stall"},
          {"kind", "busy"},
          {"start_ns", start},
          {"duration_ns", dur}};
}

json slow(const std::string& target, uint64_t start, uint64_t dur, uint64_t cpu,
          uint64_t samples) {
  return {{"target", target},  {"start_ns", start}, {"duration_ns", dur},
          {"cpu_ns", cpu},     {"runq_ns", 0},      {"steal_ns", 6'000'000},
          {"samples", samples}};
}

TEST(AppLogCheck, ASlowDispatchTheAppDidNotLogIsNamedWithItsBooks) {
  const std::vector<json> log = {stall(1'000'000'000, 50'000'000)};
  json report = {{"slow_dispatches",
                  {slow("refapp::StallHandler what=0", 1'000'010'000,
                        50'000'000, 50'000'000, 49),
                   slow("refapp::WorkHandler what=896", 3'000'000'000,
                        49'138'478, 42'700'912, 2)}}};
  testing::internal::CaptureStdout();
  const bool ok = compare_with_app_log(log, report);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_FALSE(ok);
  EXPECT_NE(out.find("1 of 1 injected stalls found"), std::string::npos) << out;
  EXPECT_NE(out.find("1 reported slow dispatches are not in the app's log"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("not in the app's log: refapp::WorkHandler what=896 "
                     "49.1ms: cpu 42.7ms, runq 0ns, steal 6.00ms, 2 stack "
                     "samples"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("not in the app's log: refapp::StallHandler"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace looptrace
