// While tracing: --live prints each slow dispatch as it ends, and a
// terminal gets a status line updated in place. Ground truth: the
// reference app's log.
#include <algorithm>
#include <chrono>
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

// Runs argv with a pseudo-terminal on its stdout and stderr, read to the
// end (script(1) would hang up at the end of its own stdin); out is what
// the terminal got.
RunResult run_on_terminal(std::vector<std::string> argv) {
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
  argv.insert(argv.begin(), {"/usr/bin/python3", "-c", kPty});
  return run(argv);
}

TEST(Live, ATerminalGetsAStatusLineUpdatedInPlace) {
  LT_REQUIRE_BPF();
  TempDir dir;
  // Not -q: that silences progress lines, the status line too.
  RunResult r =
      run_on_terminal({looptrace_bin(), "record", "--profile", "refapp", "--",
                       refapp_bin(), "--rate", "300", "--duration", "2500"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // "\rlooptrace: 1.23s traced, 241 dispatches, 0 slow, 0 lost\033[K"
  std::regex status(
      R"(\rlooptrace: ([0-9.]+)(ms|s) traced, (\d+) dispatches(?:, \d+ idle)?, 0 slow(?:, \d+ janky frames)?, \d+ lost\x1b\[K)");
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

// With --input the status line counts input events as the report does:
// each once, though the app's read and the dispatcher's write (and the
// FINISHED going back) are four socket calls.
TEST(Live, TheStatusLineCountsInputEventsAsTheReportDoes) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string json_path = dir.file("report.json");
  RunResult r = run_on_terminal(
      {looptrace_bin(), "record", "--profile", "refapp", "--input", "--json",
       json_path, "--", refapp_bin(), "--rate", "100", "--duration", "2500",
       "--input-rate", "200", "--input-start", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::regex status(
      R"(\rlooptrace: [0-9.]+(?:ms|s) traced, \d+ dispatches(?:, \d+ idle)?, \d+ slow, (\d+) input events(?:, \d+ janky frames)?, \d+ lost\x1b\[K)");
  uint64_t last = 0;
  int updates = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), status), end;
       it != end; ++it) {
    ++updates;
    uint64_t n = std::stoull((*it)[1]);
    EXPECT_GE(n, last) << "the count only grows";
    last = n;
  }
  EXPECT_GE(updates, 5) << r.out;
  const uint64_t total = read_json(json_path)["input_summary"]["events"];
  ASSERT_GE(total, 300u);
  // The last line is drawn up to a quarter second before the end: about
  // 50 events short of the report, never above it (counting reads would
  // have shown about twice as many).
  EXPECT_LE(last, total) << r.out;
  EXPECT_GE(last, total * 3 / 4) << r.out;
}

TEST(Live, AHangIsAnnouncedWhileItRunsAndWhenItEnds) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string log = dir.file("app.jsonl"), events_path = dir.file("ev.jsonl");
  RunResult r = run(
      {looptrace_bin(),    "record", "--profile",  "refapp",        "-q",
       "--hang",           "1s",     "--events",   events_path,     "--json",
       dir.file("r.json"), "--",     refapp_bin(), "--rate",        "100",
       "--duration",       "4500",   "--stall",    "busy:3000@500", "--stall",
       "busy:600@4000",    "--log",  log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  const json& stall = stalls[0];
  std::vector<json> ev = read_jsonl(events_path);
  // The 3 s stall once when it crossed 1 s and once when it ended; the
  // 600 ms one never.
  ASSERT_EQ(ev.size(), 2u) << r.err;
  const json& hang = ev[0];
  EXPECT_EQ(hang["event"], "hang");
  EXPECT_EQ(hang["tid"], stall["tid"]);
  EXPECT_EQ(hang["target"], "refapp::StallHandler what=0");
  // Announced within 100 ms of crossing 1 s, by the app's own clock.
  int64_t seen =
      diff(hang["start_ns"].get<uint64_t>() + hang["age_ns"].get<uint64_t>(),
           stall["start_ns"].get<uint64_t>());
  EXPECT_GE(seen, 1'000'000'000 - 1'000'000);
  EXPECT_LE(seen, 1'100'000'000);
  // Where it is stuck: the stalling function, innermost.
  ASSERT_FALSE(hang["stack"].empty());
  EXPECT_NE(hang["stack"][0].get<std::string>().find("refapp::busyStall"),
            std::string::npos)
      << hang["stack"];
  // Its split so far adds up to at most its age.
  EXPECT_LE(hang["cpu_ns"].get<uint64_t>() + hang["runq_ns"].get<uint64_t>(),
            hang["age_ns"].get<uint64_t>());
  const json& over = ev[1];
  EXPECT_EQ(over["event"], "hang_end");
  EXPECT_EQ(over["span_id"], hang["span_id"]);
  double truth = stall["duration_ns"].get<double>();
  EXPECT_NEAR(over["duration_ns"].get<double>(), truth, truth * 0.01);
  // The same on stderr, and the span marked in the report.
  EXPECT_NE(r.err.find("looptrace: HANG dispatch refapp::StallHandler what=0 "
                       "running 1."),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("looptrace: hang over: dispatch refapp::StallHandler "
                       "what=0 after 3.0"),
            std::string::npos)
      << r.err;
  json report = read_json(dir.file("r.json"));
  expect_split_adds_up(report);
  size_t marked = 0;
  for (const json& s : report["slow_dispatches"])
    if (s.contains("hang_announced_ns")) {
      ++marked;
      EXPECT_EQ(s["start_ns"], hang["start_ns"]);
    }
  EXPECT_EQ(marked, 1u);
}

TEST(Live, DurationStopsOnTimeAndTheHangIsMeasuredToTheStop) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string log = dir.file("app.jsonl"), json_path = dir.file("r.json");
  // The stall begins after looptrace has attached (under 2 s, however
  // loaded the machine) and before its stop 2.5 s later, and runs past it.
  Process app({refapp_bin(), "--rate", "100", "--duration", "7000", "--stall",
               "busy:4500@2000", "--log", log},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(log, "\"start\"", 5000));
  Process lt({looptrace_bin(), "record", "--profile", "refapp", "-p",
              std::to_string(app.pid()), "-d", "2500ms", "--json", json_path},
             dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "Ctrl-C to stop", 10000));
  auto started = std::chrono::steady_clock::now();
  // The report is out 2.5 s after tracing began, not after the probes are
  // removed (about 100 ms each).
  while (!wait_for_text(dir.file("lt.out"), "SLOW DISPATCHES", 5) &&
         std::chrono::steady_clock::now() - started <
             std::chrono::seconds(10)) {
  }
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - started)
                  .count();
  ASSERT_EQ(lt.wait(20000), 0) << read_file(dir.file("lt.err"));
  EXPECT_LE(ms, 2500 + 100) << "the report came " << ms << " ms after start";
  EXPECT_GE(ms, 2500 - 50);
  ASSERT_EQ(app.wait(10000), 0);
  json report = read_json(json_path);
  expect_split_adds_up(report);
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  // The stall was still running at the stop: its age, CPU split and
  // samples all end at the trace's end.
  const json* hung = nullptr;
  for (const json& s : report["slow_dispatches"])
    if (s["in_flight"] == true) hung = &s;
  ASSERT_NE(hung, nullptr) << report["slow_dispatches"];
  EXPECT_EQ((*hung)["tid"], stalls[0]["tid"]);
  uint64_t age = (*hung)["duration_ns"].get<uint64_t>();
  EXPECT_LE(age, report["duration_ns"].get<uint64_t>());
  EXPECT_LE((*hung)["cpu_ns"].get<uint64_t>() +
                (*hung)["runq_ns"].get<uint64_t>() +
                (*hung)["steal_ns"].get<uint64_t>(),
            age);
  // It began inside the trace and ended after it.
  uint64_t stall_start = stalls[0]["start_ns"].get<uint64_t>();
  uint64_t stall_end = stalls[0]["end_ns"].get<uint64_t>();
  uint64_t stop = (*hung)["start_ns"].get<uint64_t>() + age;
  EXPECT_LT(stop, stall_end);
  EXPECT_GT(stop, stall_start);
  uint64_t last_sample = 0;
  for (const json& st : (*hung)["stacks"])
    last_sample = std::max(last_sample, st["last_ns"].get<uint64_t>());
  EXPECT_LE(last_sample, stop);
  EXPECT_GE(last_sample + 20'000'000, stop) << "samples up to the stop";
}

}  // namespace
}  // namespace lt_test
