// Bad input: one clear line on stderr, a non-zero exit code, no crash.
#include <unistd.h>

#include <string>

#include "harness.h"

namespace lt_test {
namespace {

// Exit code 2 (usage) or 1, an "error:" line naming the culprit, at most a
// hint line after it.
void expect_clean_error(const RunResult& r, int code,
                        const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_NE(r.err.find("looptrace: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_LE(count_lines(r.err), 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Errors, PidNotFound) {
  LT_REQUIRE_BPF();
  RunResult r = run(
      {looptrace_bin(), "record", "--profile", "refapp", "-p", "999999999"});
  expect_clean_error(r, 2, "pid 999999999 not found");
}

TEST(Errors, BinaryNotFound) {
  LT_REQUIRE_BPF();
  RunResult r = run({looptrace_bin(), "record", "--dispatch",
                     "libdoesnotexist.so.7:foo", "-d", "1s"});
  expect_clean_error(r, 2, "libdoesnotexist.so.7");
}

TEST(Errors, NotAnElfFile) {
  LT_REQUIRE_BPF();
  RunResult r = run({looptrace_bin(), "record", "--dispatch",
                     tests_dir() + "/integration/harness.h:foo", "-d", "1s"});
  expect_clean_error(r, 2, "not an ELF file");
}

TEST(Errors, SymbolNotFoundSuggestsCloseMatches) {
  LT_REQUIRE_BPF();
  RunResult r =
      run({looptrace_bin(), "record", "--dispatch",
           refapp_bin() + ":refapp::Looper::dispatchMesage", "-d", "1s"});
  expect_clean_error(r, 2, "not found");
  EXPECT_NE(r.err.find("dispatchMessage"), std::string::npos)
      << "suggests the real name: " << r.err;
}

TEST(Errors, BadDuration) {
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "--slow", "16xs"});
  expect_clean_error(r, 2, "16xs");
}

TEST(Errors, MalformedProfileFile) {
  TempDir dir;
  std::string p = dir.file("bad.json");
  FILE* f = fopen(p.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("{\"probes\": [{\"binary\": 3}]}", f);
  fclose(f);
  RunResult r = run({looptrace_bin(), "record", "--profile", p});
  expect_clean_error(r, 2, "bad.json");
}

TEST(Errors, NotRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another user";
  RunResult r =
      run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
           looptrace_bin(), "record", "--profile", "refapp", "-d", "1s"});
  expect_clean_error(r, 4, "needs root");
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// Input channel picks name a socket of the traced process, or fail clearly.
TEST(Errors, InputFdThatIsNotASocket) {
  LT_REQUIRE_BPF();
  TempDir dir;
  Process sleeper({"sleep", "30"}, dir.file("out"), dir.file("err"));
  RunResult r =
      run({looptrace_bin(), "record", "-p", std::to_string(sleeper.pid()),
           "--input-fd", "1", "-d", "1s"});
  expect_clean_error(r, 2, "is not a socket");
  r = run({looptrace_bin(), "record", "-p", std::to_string(sleeper.pid()),
           "--input-fd", "987", "-d", "1s"});
  expect_clean_error(r, 2, "has no fd 987");
  r = run({looptrace_bin(), "record", "-p", std::to_string(sleeper.pid()),
           "--input-peer", "/tmp/.no-such-server", "-d", "1s"});
  expect_clean_error(r, 2, "no socket connected to /tmp/.no-such-server");
  r = run({looptrace_bin(), "record", "-p", std::to_string(sleeper.pid()),
           "--input-peer", "auto", "-d", "1s"});
  expect_clean_error(r, 2, "has no X11 or Wayland connection");
}

TEST(Errors, InputFdNeedsAPid) {
  LT_REQUIRE_BPF();
  RunResult r = run({looptrace_bin(), "record", "--input-fd", "3", "-d", "1s"});
  expect_clean_error(r, 2, "need -p PID");
}

TEST(Errors, InputBinaryWithoutSocketFunctions) {
  LT_REQUIRE_BPF();
  RunResult r = run({looptrace_bin(), "record", "--input", "--input-mode",
                     "uprobe", "--input-binary", refapp_bin(), "-d", "1s"});
  expect_clean_error(r, 2, "has none of the socket functions");
}

}  // namespace
}  // namespace lt_test
