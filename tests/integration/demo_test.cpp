// `looptrace demo`, README's first command: it runs the reference app under
// looptrace and exits 0 only when what looptrace found matches the app's
// own log (every injected stall, the idle handler, the barrier, every
// acknowledged input event).
#include <filesystem>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

TEST(Demo, FindsEverythingTheAppInjected) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string json = dir.file("report.json");
  // As on a fresh machine: nothing mounted tracefs (README's command failed
  // there once while passing where it was mounted).
  // Its scratch directory (the app's log) is removed when it is done.
  TempDir tmp;
  RunResult r = run(without_tracefs({"env", "TMPDIR=" + tmp.path(),
                                     looptrace_bin(), "demo", "--json", json}),
                    60000);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("4 of 4 injected stalls found"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("stall announced"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("MISSED"), std::string::npos) << r.out;
  // The barrier stall was announced live, on stderr, before the app exited.
  size_t stall = r.err.find("STALL: sync barrier");
  size_t exit = r.err.find("refapp: exit");
  ASSERT_NE(stall, std::string::npos) << r.err;
  ASSERT_NE(exit, std::string::npos) << r.err;
  EXPECT_LT(stall, exit) << r.err;
  nlohmann::json report = read_json(json);
  expect_split_adds_up(report);
  EXPECT_EQ(report["slow_idle_handlers"].size(), 1u);
  EXPECT_EQ(report["barriers"].size(), 1u);
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()))
      << std::filesystem::directory_iterator(tmp.path())->path();
}

// A usage error is the one line, before the demo's banner; nothing is left
// in TMPDIR.
TEST(Demo, UsageErrorComesBeforeTheBanner) {
  LT_REQUIRE_BPF();
  TempDir tmp;
  RunResult r = run({"env", "TMPDIR=" + tmp.path(), looptrace_bin(), "demo",
                     "--json", "/nonexistent-lt/r.json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("looptrace: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent-lt/r.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("looptrace demo:"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

}  // namespace
}  // namespace lt_test
