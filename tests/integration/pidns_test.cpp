// PID namespaces (containers): looptrace inside one traces a command and a
// -p pid by the pids of that namespace; looptrace outside traces a process
// inside by its host pid. Ground truth: the reference app's own log.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

// Every dispatch of the app's threads, as its dispatch probe counts them.
uint64_t reported_dispatches(const nlohmann::json& report, int pid) {
  uint64_t n = 0;
  for (const auto& t : report["threads"])
    if (t["role"] == "dispatch" && t["pid"] == pid)
      n += t["count"].get<uint64_t>();
  return n;
}

// The app's one stall, found: the StallHandler dispatch that ran when the
// app's log says (its own clock reads, taken inside the dispatch, lag the
// probe by a preemption on a loaded machine).
void expect_stall_found(const nlohmann::json& report,
                        const nlohmann::json& stall, int pid,
                        bool tid_as_logged = true) {
  const nlohmann::json* m = nullptr;
  for (const auto& s : report["slow_dispatches"])
    if (s["target"].get<std::string>().find("StallHandler") !=
            std::string::npos &&
        std::llabs(diff(s["start_ns"], stall["start_ns"])) < 50'000'000)
      m = &s;
  ASSERT_NE(m, nullptr) << stall.dump();
  EXPECT_EQ((*m)["pid"], pid);
  if (tid_as_logged) {
    EXPECT_EQ((*m)["tid"], stall["tid"]);
  }
  EXPECT_GE((*m)["duration_ns"].get<int64_t>() + 500'000,
            stall["duration_ns"].get<int64_t>())
      << m->dump();
}

class PidNamespace : public ::testing::Test {
 protected:
  void SetUp() override {
    LT_REQUIRE_BPF();
    if (run({"unshare", "-pf", "--mount-proc", "true"}).exit_code != 0)
      GTEST_SKIP() << "unshare -pf --mount-proc does not work here";
  }
  TempDir dir_;
};

// `unshare -pf --mount-proc looptrace record -- refapp`: looptrace is pid 1
// of the new namespace, the app pid 2; every dispatch is counted.
TEST_F(PidNamespace, CommandInsideANamespace) {
  const std::string log = dir_.file("truth.jsonl");
  const std::string json = dir_.file("report.json");
  RunResult r = run({"unshare", "-pf", "--mount-proc", looptrace_bin(),
                     "record", "--profile", "refapp", "--json", json, "--",
                     refapp_bin(), "--rate", "200", "--duration", "2000",
                     "--stall", "busy:100@1000", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = read_jsonl(log);
  auto summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  const int pid = summary[0]["pid"];
  EXPECT_LT(pid, 10) << "the app ran in the new namespace";
  nlohmann::json report = read_json(json);
  EXPECT_EQ(reported_dispatches(report, pid),
            summary[0]["dispatches"].get<uint64_t>())
      << report["threads"].dump();
  auto stalls = events(truth, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  expect_stall_found(report, stalls[0], pid);
}

// -p with the namespace's pid, from a shell inside it.
TEST_F(PidNamespace, PidInsideANamespace) {
  const std::string log = dir_.file("truth.jsonl");
  const std::string json = dir_.file("report.json");
  const std::string script =
      "\"$1\" --rate 200 --start-delay 5000 --duration 2500 --stall "
      "busy:100@1000 --log \"$3\" 2>\"$4\" & app=$!; "
      "for i in $(seq 50); do grep -q ready \"$4\" && break; sleep 0.1; done; "
      "\"$2\" record --profile refapp -p $app --json \"$5\"; rc=$?; "
      "wait $app; exit $rc";
  RunResult r =
      run({"unshare", "-pf", "--mount-proc", "sh", "-c", script, "sh",
           refapp_bin(), looptrace_bin(), log, dir_.file("app.err"), json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto truth = read_jsonl(log);
  auto summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  const int pid = summary[0]["pid"];
  EXPECT_LT(pid, 10) << "the app ran in the new namespace";
  nlohmann::json report = read_json(json);
  // Attached before the app's start (--start-delay, long enough for a
  // loaded machine to load BPF): it sees every one.
  EXPECT_EQ(reported_dispatches(report, pid),
            summary[0]["dispatches"].get<uint64_t>())
      << report["threads"].dump();
  auto stalls = events(truth, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  expect_stall_found(report, stalls[0], pid);
}

// From the host, a process in a container is traced by its host pid, and
// the banner names its pid in there too.
TEST_F(PidNamespace, HostTracesAProcessInsideANamespace) {
  const std::string log = dir_.file("truth.jsonl");
  const std::string json = dir_.file("report.json");
  Process app({"unshare", "-pf", "--mount-proc", refapp_bin(), "--rate", "200",
               "--start-delay", "5000", "--duration", "2500", "--stall",
               "busy:100@1000", "--log", log},
              dir_.file("app.out"), dir_.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir_.file("app.err"), "ready pid=", 5000));
  // unshare's child is the app.
  std::ifstream kids("/proc/" + std::to_string(app.pid()) + "/task/" +
                     std::to_string(app.pid()) + "/children");
  int host_pid = 0;
  ASSERT_TRUE(kids >> host_pid);
  Process tracer({looptrace_bin(), "record", "--profile", "refapp", "-p",
                  std::to_string(host_pid), "--json", json},
                 dir_.file("lt.out"), dir_.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir_.file("lt.err"), "tracing", 10000))
      << read_file(dir_.file("lt.err"));
  EXPECT_NE(read_file(dir_.file("lt.err"))
                .find("pid " + std::to_string(host_pid) +
                      " (pid 1 in its PID namespace)"),
            std::string::npos)
      << read_file(dir_.file("lt.err"));
  EXPECT_EQ(app.wait(15000), 0);
  if (tracer.running()) tracer.signal(SIGINT);
  ASSERT_EQ(tracer.wait(15000), 0) << read_file(dir_.file("lt.err"));
  auto truth = read_jsonl(log);
  auto summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]["pid"], 1) << "the app's own pid is the namespace's";
  nlohmann::json report = read_json(json);
  EXPECT_EQ(reported_dispatches(report, host_pid),
            summary[0]["dispatches"].get<uint64_t>())
      << report["threads"].dump();
  auto stalls = events(truth, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  // The app logs its tids in its namespace; the report has the host's.
  expect_stall_found(report, stalls[0], host_pid, false);
}

// A namespace whose /proc is the host's (unshare -pf without
// --mount-proc): its pids and /proc's disagree; one line, exit 1.
TEST_F(PidNamespace, ProcOfAnotherNamespaceIsRefused) {
  RunResult r = run({"unshare", "-pf", looptrace_bin(), "record", "--profile",
                     "refapp", "--", refapp_bin(), "--duration", "500"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/proc belongs to another PID namespace"),
            std::string::npos)
      << r.err;
  EXPECT_LE(count_lines(r.err), 2) << r.err;
}

}  // namespace
}  // namespace lt_test
