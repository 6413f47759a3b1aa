// While tracing: --live prints each slow dispatch as it ends, and a
// terminal gets a status line updated in place. Ground truth: the
// reference app's log.
#include <regex>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

TEST(Live, EachSlowDispatchIsPrintedAsItEnds) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string log = dir.file("app.jsonl");
  // -q: only what was asked for (--live) is printed.
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "-q", "--live",
           "--", refapp_bin(), "--rate", "200", "--duration", "2000", "--stall",
           "busy:120@400", "--stall", "sleep:200@1100", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  // "looptrace: slow dispatch 122ms refapp::StallHandler what=0 pid ..."
  std::regex line(
      R"(looptrace: slow dispatch ([0-9.]+)(ms|s) refapp::StallHandler what=(\d+) pid (\d+) tid (\d+))");
  std::vector<std::smatch> found;
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), line), end;
       it != end; ++it)
    found.push_back(*it);
  ASSERT_EQ(found.size(), stalls.size()) << r.err;
  for (size_t i = 0; i < stalls.size(); ++i) {
    const std::smatch& m = found[i];
    double ms = std::stod(m[1]) * (m[2] == "s" ? 1000 : 1);
    double truth = stalls[i]["duration_ns"].get<double>() / 1e6;
    // Three significant digits, and the probe a few µs outside the app's
    // own clock reads.
    EXPECT_NEAR(ms, truth, truth * 0.01 + 0.1) << m.str();
    EXPECT_EQ(std::stoi(m[3]), stalls[i]["what"].get<int>());
    EXPECT_EQ(std::stoul(m[5]), stalls[i]["tid"].get<uint64_t>());
  }
  // Nothing else was slow enough to print, and no report with -q.
  EXPECT_EQ(r.err.find("SLOW DISPATCHES"), std::string::npos);
  EXPECT_EQ(r.out, "");
}

TEST(Live, ATerminalGetsAStatusLineUpdatedInPlace) {
  LT_REQUIRE_BPF();
  TempDir dir;
  // Not -q: that silences progress lines, the status line too.
  // A pseudo-terminal on looptrace's stdout and stderr, read to the end
  // (script(1) would hang up at the end of its own stdin).
  const char* kPty =
      "import os, pty, sys\n"
      "pid, fd = pty.fork()\n"
      "if pid == 0:\n"
      "    os.execv(sys.argv[1], sys.argv[1:])\n"
      "out = b''\n"
      "while True:\n"
      "    try:\n"
      "        b = os.read(fd, 65536)\n"
      "    except OSError:\n"
      "        break\n"
      "    if not b:\n"
      "        break\n"
      "    out += b\n"
      "sys.stdout.buffer.write(out)\n"
      "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n";
  RunResult r = run({"/usr/bin/python3", "-c", kPty, looptrace_bin(), "record",
                     "--profile", "refapp", "--", refapp_bin(), "--rate", "300",
                     "--duration", "2500"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // "\rlooptrace: 1.23s traced, 241 spans, 0 slow, 0 lost\033[K"
  std::regex status(
      R"(\rlooptrace: ([0-9.]+)(ms|s) traced, (\d+) spans, 0 slow, 0 lost\x1b\[K)");
  uint64_t max_spans = 0;
  int updates = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), status), end;
       it != end; ++it) {
    ++updates;
    max_spans = std::max<uint64_t>(max_spans, std::stoull((*it)[3]));
  }
  EXPECT_GE(updates, 5) << r.out;
  // 300 dispatches a second for 2.5 s: counted by the kernel as they go
  // (the line is read once a second, so it lags by up to a second).
  EXPECT_GE(max_spans, 300u) << r.out;
  EXPECT_LE(max_spans, 300u * 3) << r.out;
  // Not without a terminal.
  RunResult plain = run({looptrace_bin(), "record", "--profile", "refapp", "--",
                         refapp_bin(), "--rate", "300", "--duration", "800"});
  EXPECT_EQ(plain.err.find("traced,"), std::string::npos) << plain.err;
}

}  // namespace
}  // namespace lt_test
