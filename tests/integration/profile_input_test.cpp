// Hostile profiles and key expressions on the command line: one
// "looptrace: error:" line (and at most a hint), exit code 2, never a crash
// or a hang. No root needed: all of it is refused before tracing starts.
#include <sys/stat.h>

#include <string>

#include "harness.h"

namespace lt_test {
namespace {

void expect_usage_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("looptrace: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_LE(count_lines(r.err), 2) << r.err;
}

std::string write(const TempDir& dir, const std::string& name,
                  const std::string& text) {
  std::string path = dir.file(name);
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return path;
  fputs(text.c_str(), f);
  fclose(f);
  return path;
}

// A wrong type aborted with SIGABRT (nlohmann type_error.302).
TEST(ProfileInput, WrongTypeIsAUsageError) {
  TempDir dir;
  std::string p = write(dir, "p.json",
                        R"({"name": 5, "probes": [{"binary": "a", )"
                        R"("symbol": "f"}]})");
  expect_usage_error(run({looptrace_bin(), "record", "--profile", p}),
                     "p.json: name: expected a string, got number");
  p = write(dir, "q.json",
            R"({"probes": [{"binary": "a", "symbol": "f", "keys": )"
            R"([{"name": "k", "expr": "arg1", "format": null}]}]})");
  expect_usage_error(run({looptrace_bin(), "record", "--profile", p}),
                     "probes[0].keys[0].format: expected a string");
}

// /dev/zero was read until bad_alloc, a FIFO hung, a directory was "not
// valid JSON".
TEST(ProfileInput, NonRegularFilesAreRefusedAtOnce) {
  TempDir dir;
  std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_usage_error(
      run({looptrace_bin(), "record", "--profile", "/dev/zero"}, 10000),
      "not a regular file (a character device)");
  expect_usage_error(run({looptrace_bin(), "record", "--profile", fifo}, 10000),
                     "not a regular file (a FIFO)");
  expect_usage_error(
      run({looptrace_bin(), "record", "--profile", dir.file("")}, 10000),
      "not a regular file (a directory)");
}

// 30000 nested '*' or parentheses overflowed the stack.
TEST(ProfileInput, DeeplyNestedKeyIsRefused) {
  std::string stars = "x=" + std::string(30000, '*') + "arg1";
  expect_usage_error(
      run({looptrace_bin(), "record", "--dispatch", "a:f", "--key", stars}),
      "nested deeper than");
  TempDir dir;
  std::string parens =
      std::string(30000, '(') + "arg1" + std::string(30000, ')');
  std::string p = write(dir, "p.json",
                        R"({"probes": [{"binary": "a", "symbol": "f", )"
                        R"("keys": [{"name": "k", "expr": ")" +
                            parens + R"("}]}]})");
  expect_usage_error(run({looptrace_bin(), "record", "--profile", p}),
                     "nested deeper than");
}

}  // namespace
}  // namespace lt_test
