// Budgets for lab runs: `--fail-if` on record and on report. Ground truth:
// the stall the reference app logs.
#include <sys/stat.h>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

TEST(Budgets, ABrokenBudgetExits3AndSaysWhich) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string log = dir.file("app.jsonl"), rec = dir.file("t.lt");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "-q",
                     "-o",
                     rec,
                     "--json",
                     dir.file("r.json"),
                     "--fail-if",
                     "dispatch.max > 100ms",
                     "--fail-if",
                     "lost > 0",
                     "--fail-if",
                     "dispatch.count < 100",
                     "--",
                     refapp_bin(),
                     "--rate",
                     "300",
                     "--duration",
                     "1500",
                     "--stall",
                     "busy:150@500",
                     "--log",
                     log});
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_GT(stalls[0]["duration_ns"].get<uint64_t>(), 100'000'000u);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("looptrace: budget broken: dispatch.max"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("budget broken: lost"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("budget broken: dispatch.count"), std::string::npos)
      << r.err;
  json j = read_json(dir.file("r.json"));
  ASSERT_EQ(j["budgets"].size(), 3u) << j["budgets"].dump();
  EXPECT_TRUE(j["budgets"][0]["broken"].get<bool>());
  EXPECT_FALSE(j["budgets"][1]["broken"].get<bool>());
  EXPECT_FALSE(j["budgets"][2]["broken"].get<bool>());

  // The recording judged later: the same verdicts; a looser budget holds.
  RunResult later = run({looptrace_bin(), "report", rec, "-q", "--fail-if",
                         "dispatch.max > 100ms"});
  EXPECT_EQ(later.exit_code, 3) << later.err;
  RunResult held = run(
      {looptrace_bin(), "report", rec, "-q", "--fail-if", "dispatch.max > 1s"});
  EXPECT_EQ(held.exit_code, 0) << held.err;
  EXPECT_EQ(held.err, "");
}

TEST(Budgets, ABadExpressionFailsBeforeTracing) {
  LT_REQUIRE_BPF();
  TempDir dir;
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "--fail-if",
           "dispatch.p99 >> 16ms", "--", refapp_bin(), "--rate", "100",
           "--duration", "5000", "--log", dir.file("app.jsonl")},
          20000);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  struct stat st {};
  EXPECT_NE(stat(dir.file("app.jsonl").c_str(), &st), 0) << "it ran";
}

}  // namespace
}  // namespace lt_test
