// Record now, report later: a recording replays to the very JSON and text
// the live run wrote; a tracer killed with SIGKILL leaves a recording that
// replays up to its last block; outputs on stdout keep the command's own
// output out of them. Ground truth: the reference app's log.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

// The starts (CLOCK_MONOTONIC) of the slow dispatches a report lists.
std::vector<uint64_t> slow_starts(const json& report) {
  std::vector<uint64_t> out;
  for (const json& s : report["slow_dispatches"])
    out.push_back(s["start_ns"].get<uint64_t>());
  return out;
}

// True if one of `starts` is within 100 µs of the app's own dispatch start
// (the uprobe fires a few µs before the app reads its clock).
bool found(const std::vector<uint64_t>& starts, uint64_t app_start) {
  for (uint64_t s : starts)
    if (std::llabs(diff(app_start, s)) < 100'000) return true;
  return false;
}

TEST(RecordReplay, ReplayGivesTheLiveJsonAndTextByteForByte) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string rec = dir.file("t.lt"), live = dir.file("live.json"),
              log = dir.file("app.jsonl");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "--input",
                     "-o",
                     rec,
                     "--json",
                     live,
                     "--barrier-stall",
                     "300ms",
                     "--",
                     refapp_bin(),
                     "--rate",
                     "300",
                     "--duration",
                     "2500",
                     "--stall",
                     "busy:120@500",
                     "--stall",
                     "sleep:90@1000",
                     "--barrier",
                     "600@1200",
                     "--input-rate",
                     "50",
                     "--input-stall",
                     "150@30",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(stat(rec.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  RunResult rep =
      run({looptrace_bin(), "report", rec, "--json", dir.file("replay.json")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(rep.err, "");
  EXPECT_EQ(read_file(dir.file("replay.json")), read_file(live));
  EXPECT_EQ(rep.out, r.out) << "the text report differs";

  // And what both say is true: every stall the app logged is there.
  json report = read_json(live);
  std::vector<uint64_t> starts = slow_starts(report);
  std::vector<json> app = read_jsonl(log);
  std::vector<json> stalls = events(app, "stall");
  ASSERT_EQ(stalls.size(), 2u);
  for (const json& s : stalls)
    EXPECT_TRUE(found(starts, s["start_ns"].get<uint64_t>()))
        << "stall at " << s["at_ms"] << " ms missing";
  EXPECT_GE(report["barriers"].size(), 1u);
  EXPECT_GE(report["input_events"].size(), 50u);

  // The same recording as a Perfetto trace and as folded stacks: each
  // stall is a slice on its thread starting where the app says it did, and
  // the busy stall's function is in the flame graph.
  RunResult out = run({looptrace_bin(), "report", rec, "-q", "--perfetto",
                       dir.file("p.json"), "--folded", dir.file("f.txt")});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  json trace = read_json(dir.file("p.json"));
  double base_us = trace["metadata"]["ts_base_ns"].get<double>() / 1000.0;
  for (const json& s : stalls) {
    double start_us = s["start_ns"].get<double>() / 1000.0;
    bool slice = false;
    for (const json& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["tid"] == s["tid"] &&
          std::abs(e["ts"].get<double>() + base_us - start_us) < 100)
        slice = true;
    EXPECT_TRUE(slice) << "no slice for the stall at " << s["at_ms"] << " ms";
  }
  std::string folded = read_file(dir.file("f.txt"));
  EXPECT_NE(folded.find("refapp::busyStall(long) "), std::string::npos)
      << folded.substr(0, 500);
}

TEST(RecordReplay, RaisedThresholdKeepsOnlyLongerSpans) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string rec = dir.file("t.lt"), log = dir.file("app.jsonl");
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "-q", "-o", rec,
           "--", refapp_bin(), "--rate", "200", "--duration", "1500", "--stall",
           "busy:40@400", "--stall", "busy:120@900", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunResult rep = run({looptrace_bin(), "report", rec, "-q", "--slow", "80ms",
                       "--json", dir.file("r.json")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  json report = read_json(dir.file("r.json"));
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  std::vector<uint64_t> starts = slow_starts(report);
  EXPECT_FALSE(found(starts, stalls[0]["start_ns"].get<uint64_t>()));
  EXPECT_TRUE(found(starts, stalls[1]["start_ns"].get<uint64_t>()));
  for (const json& s : report["slow_dispatches"])
    EXPECT_GE(s["duration_ns"].get<uint64_t>(), 80'000'000u);

  // Below what the kernel filtered with: refused, one line, exit 2.
  RunResult low = run({looptrace_bin(), "report", rec, "--slow", "5ms"});
  EXPECT_EQ(low.exit_code, 2);
  EXPECT_NE(low.err.find("below the recorded"), std::string::npos) << low.err;
  EXPECT_EQ(count_lines(low.err), 1) << low.err;
  // So is a barrier stall threshold below the recorded 3 s: what waited
  // behind a barrier was read only then.
  RunResult stall =
      run({looptrace_bin(), "report", rec, "--barrier-stall", "1s"});
  EXPECT_EQ(stall.exit_code, 2);
  EXPECT_NE(stall.err.find("below the recorded 3.00s"), std::string::npos)
      << stall.err;
  EXPECT_EQ(count_lines(stall.err), 1) << stall.err;
}

TEST(RecordReplay, SigkilledTracerLeavesAReplayableRecording) {
  LT_REQUIRE_BPF();
  TempDir dir;
  std::string rec = dir.file("t.lt"), log = dir.file("app.jsonl");
  // The app runs under -p, so killing the tracer does not touch it.
  Process app({refapp_bin(), "--rate", "200", "--duration", "6000",
               "--start-delay", "2500", "--stall", "busy:150@300", "--stall",
               "busy:150@1300", "--log", log},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 5000));
  Process tracer({looptrace_bin(), "record", "--profile", "refapp", "-q", "-o",
                  rec, "-p", std::to_string(app.pid())},
                 dir.file("lt.out"), dir.file("lt.err"));
  // Both stalls over (start delay 2.5 s, for an attach of 1-2 s, + 1.45 s)
  // and a flush (0.5 s) later.
  usleep(5'000'000);
  tracer.signal(SIGKILL);
  tracer.wait(5000);
  app.signal(SIGTERM);
  app.wait(5000);

  RunResult rep =
      run({looptrace_bin(), "report", rec, "-q", "--json", dir.file("r.json")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.err.find("has no end"), std::string::npos) << rep.err;
  json report = read_json(dir.file("r.json"));
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  std::vector<uint64_t> starts = slow_starts(report);
  for (const json& s : stalls)
    EXPECT_TRUE(found(starts, s["start_ns"].get<uint64_t>()))
        << "stall at " << s["at_ms"] << " ms lost with the tracer";
}

TEST(RecordReplay, CommandOutputStaysOutOfAJsonOnStdout) {
  LT_REQUIRE_BPF();
  TempDir dir;
  RunResult r = run({looptrace_bin(), "record", "--profile", "refapp", "--json",
                     "-", "--", "/bin/sh", "-c",
                     "echo NOISE-FROM-THE-COMMAND; exec " + refapp_bin() +
                         " --rate 100 --duration 600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "stdout is not one JSON document:\n"
                                 << r.out.substr(0, 300);
  // (The command line, in the JSON's "command", names it too.)
  EXPECT_NE(r.out.rfind("NOISE", 0), 0u);
  EXPECT_EQ(r.out.find("\nNOISE"), std::string::npos);
  EXPECT_NE(r.err.find("NOISE-FROM-THE-COMMAND"), std::string::npos);
}

TEST(RecordReplay, BadRecordingPathFailsBeforeTracing) {
  LT_REQUIRE_BPF();
  TempDir dir;
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "-o",
           dir.file("no/such/dir/t.lt"), "--", refapp_bin(), "--rate", "100",
           "--duration", "5000", "--log", dir.file("app.jsonl")},
          20000);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  // Nothing ran: the command never started.
  struct stat st {};
  EXPECT_NE(stat(dir.file("app.jsonl").c_str(), &st), 0);
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// A disk that fills up mid-run: the text report is still printed, the
// events that did not fit are counted (exit 1), and what was written
// replays. The small filesystem is a tmpfs in a private mount namespace.
TEST(RecordReplay, FullDiskKeepsWhatFitAndCountsTheRest) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string fs = dir.file("fs"), log = dir.file("app.jsonl");
  const std::string script =
      "mkdir -p " + fs + " && mount -t tmpfs -o size=256k none " + fs +
      " || exit 97; " + looptrace_bin() +
      " record --profile refapp --input -o " + fs + "/t.lt -- " + refapp_bin() +
      " --rate 500 --input-rate 2000 --duration 3000 --stall busy:100@300"
      " --log " +
      log + "; rc=$?; cp " + fs + "/t.lt " + dir.file("t.lt") + "; exit $rc";
  RunResult r =
      run({"unshare", "-m", "--propagation", "private", "sh", "-c", script});
  ASSERT_NE(r.exit_code, 97) << "no tmpfs: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("events not recorded"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("SLOW DISPATCHES"), std::string::npos)
      << "no text report:\n"
      << r.out;
  RunResult rep = run({looptrace_bin(), "report", dir.file("t.lt"), "-q",
                       "--json", dir.file("r.json")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  // The first stall was early enough to fit.
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_TRUE(found(slow_starts(read_json(dir.file("r.json"))),
                    stalls[0]["start_ns"].get<uint64_t>()));
}

}  // namespace
}  // namespace lt_test
