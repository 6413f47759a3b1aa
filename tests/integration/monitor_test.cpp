// `looptrace monitor`: always on. Ground truth from the reference app's own
// log (every dispatch logged with --log-slow 0.01, stalls, the summary's
// dispatch count) and from /proc (the monitor's fds and memory).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<std::string> dumps_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".lt") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The monitor, started on `args`, ready (its probes attached).
struct Monitor {
  Monitor(const TempDir& dir, std::vector<std::string> args)
      : err(dir.file("mon.err")),
        proc(
            [&] {
              args.insert(args.begin(), {looptrace_bin(), "monitor"});
              return args;
            }(),
            dir.file("mon.out"), dir.file("mon.err")) {}
  bool ready() {
    return wait_for_text(err, "SIGINT or SIGTERM to stop", 20000);
  }
  int stop() {
    proc.signal(SIGINT);
    return proc.wait(20000);
  }
  std::string log() { return read_file(err); }
  std::string err;
  Process proc;
};

// The app's dispatches (every one logged: --log-slow 0.01) that ended in
// [from, to].
size_t dispatches_ending(const std::vector<json>& log, uint64_t from,
                         uint64_t to) {
  size_t n = 0;
  for (const json& e : log) {
    if (e["event"] != "slow" && e["event"] != "stall") continue;
    uint64_t end = e["end_ns"].get<uint64_t>();
    n += end >= from && end <= to;
  }
  return n;
}

uint64_t dispatch_count(const json& report, uint64_t tid) {
  for (const json& t : report["threads"])
    if (t["tid"] == tid && t["role"] == "dispatch")
      return t["count"].get<uint64_t>();
  return 0;
}

TEST(Monitor, DumpHoldsTheStallAndEveryDispatchOfItsWindow) {
  LT_REQUIRE_BPF();
  TempDir dir;
  fs::create_directory(dir.file("dumps"));
  std::string log = dir.file("app.jsonl");
  Process app(
      {refapp_bin(), "--rate", "200", "--start-delay", "3000", "--duration",
       "5000", "--stall", "busy:400@3500", "--log-slow", "0.01", "--log", log},
      dir.file("app.out"), dir.file("app.err"));
  Monitor mon(dir, {"-p", std::to_string(app.pid()), "--window", "2s",
                    "--dump-dir", dir.file("dumps"), "--dump-if",
                    "dispatch > 300ms", "--dump-pprof"});
  ASSERT_TRUE(mon.ready()) << mon.log();
  ASSERT_EQ(app.wait(30000), 0);
  ASSERT_EQ(mon.stop(), 0) << mon.log();

  std::vector<std::string> dumps = dumps_in(dir.file("dumps"));
  ASSERT_EQ(dumps.size(), 1u) << mon.log();
  struct stat st {};
  ASSERT_EQ(stat(dumps[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(dumps[0].find("-" + std::to_string(app.pid()) + "-refapp.lt"),
            std::string::npos)
      << dumps[0];
  EXPECT_NE(mon.log().find("looptrace: dump pid " + std::to_string(app.pid()) +
                           " (refapp): dispatch "),
            std::string::npos)
      << mon.log();

  RunResult r =
      run({looptrace_bin(), "report", dumps[0], "--json", dir.file("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("monitor dump: dispatch "), std::string::npos)
      << r.out.substr(0, 400);
  json report = read_json(dir.file("r.json"));
  ASSERT_TRUE(report["dump_reason"].is_string()) << report["dump_reason"];
  EXPECT_TRUE(report["dump_reason"].get<std::string>().starts_with(
      "monitor dump: dispatch "))
      << report["dump_reason"];
  std::vector<json> app_log = read_jsonl(log);
  std::vector<json> stalls = events(app_log, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const json& stall = stalls[0];
  bool found = false;
  for (const json& s : report["slow_dispatches"])
    found =
        found || std::llabs(diff(s["start_ns"].get<uint64_t>(),
                                 stall["start_ns"].get<uint64_t>())) < 100'000;
  EXPECT_TRUE(found) << report["slow_dispatches"];
  // Every dispatch of the 2 s before the stall's end (the window is judged
  // by the probes' clock, µs from the app's: one at each edge may differ).
  uint64_t end = stall["end_ns"].get<uint64_t>();
  size_t truth = dispatches_ending(app_log, end - 2'000'000'000, end);
  uint64_t got = dispatch_count(report, stall["tid"].get<uint64_t>());
  EXPECT_NEAR(static_cast<double>(got), static_cast<double>(truth), 1.0)
      << "dispatches in the dump";
  EXPECT_GT(truth, 300u);

  // Its stacks as pprof beside it, which pprof itself reads: the stall's
  // function is there.
  std::string pb = dumps[0].substr(0, dumps[0].size() - 3) + ".pb.gz";
  ASSERT_EQ(stat(pb.c_str(), &st), 0)
      << pb << "\n"
      << mon.log() << run({"/bin/ls", "-la", dir.file("dumps")}).out;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (access("/usr/bin/go", X_OK) != 0) {
    if (bpf_required()) FAIL() << "golang-go missing (scripts/setup.sh)";
    return;
  }
  RunResult top =
      run({"/usr/bin/env", "HOME=" + dir.path(), "PPROF_TMPDIR=" + dir.path(),
           "/usr/bin/go", "tool", "pprof", "-symbolize=none", "-top", pb});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("refapp::busyStall"), std::string::npos) << top.out;
}

TEST(Monitor, TwoStallsWithinDumpEveryGiveOneDumpAndACount) {
  LT_REQUIRE_BPF();
  TempDir dir;
  fs::create_directory(dir.file("dumps"));
  std::string log = dir.file("app.jsonl");
  Process app({refapp_bin(), "--rate", "100", "--start-delay", "3000",
               "--duration", "2500", "--stall", "busy:400@800", "--stall",
               "sleep:400@1600", "--log", log},
              dir.file("app.out"), dir.file("app.err"));
  Monitor mon(dir,
              {"-p", std::to_string(app.pid()), "--dump-dir", dir.file("dumps"),
               "--dump-every", "60s", "--dump-if", "dispatch > 300ms"});
  ASSERT_TRUE(mon.ready()) << mon.log();
  ASSERT_EQ(app.wait(30000), 0);
  ASSERT_EQ(mon.stop(), 0) << mon.log();
  std::vector<std::string> dumps = dumps_in(dir.file("dumps"));
  ASSERT_EQ(dumps.size(), 1u) << mon.log();
  EXPECT_NE(
      mon.log().find("1 dumps (1 held back by --dump-every or a pile-up)"),
      std::string::npos)
      << mon.log();
  // The dump is the first stall's: the second came after it was written.
  RunResult r = run({looptrace_bin(), "report", dumps[0], "-q", "--json",
                     dir.file("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = read_json(dir.file("r.json"));
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  uint64_t last_end = 0;
  for (const json& s : report["slow_dispatches"])
    last_end = std::max(last_end, s["start_ns"].get<uint64_t>() +
                                      s["duration_ns"].get<uint64_t>());
  EXPECT_LT(std::llabs(diff(last_end, stalls[0]["end_ns"].get<uint64_t>())),
            1'000'000);
}

TEST(Monitor, HangIsDumpedWhileItStillRuns) {
  LT_REQUIRE_BPF();
  TempDir dir;
  fs::create_directory(dir.file("dumps"));
  std::string log = dir.file("app.jsonl");
  Process app(
      {refapp_bin(), "--rate", "100", "--start-delay", "3000", "--duration",
       "5000", "--stall", "sleep:3000@1000", "--log", log},
      dir.file("app.out"), dir.file("app.err"));
  Monitor mon(dir, {"-p", std::to_string(app.pid()), "--hang", "500ms",
                    "--dump-dir", dir.file("dumps"), "--dump-if", "hang"});
  ASSERT_TRUE(mon.ready()) << mon.log();
  ASSERT_TRUE(wait_for_text(mon.err, "looptrace: dump pid", 15000))
      << mon.log();
  // The app logs its stall when it ends: not yet.
  EXPECT_TRUE(events(read_jsonl(log), "stall").empty());
  ASSERT_EQ(app.wait(30000), 0);
  ASSERT_EQ(mon.stop(), 0) << mon.log();
  std::vector<std::string> dumps = dumps_in(dir.file("dumps"));
  ASSERT_EQ(dumps.size(), 1u);
  RunResult r = run({looptrace_bin(), "report", dumps[0], "-q", "--json",
                     dir.file("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = read_json(dir.file("r.json"));
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const json* hung = nullptr;
  for (const json& s : report["slow_dispatches"])
    if (s["in_flight"] == true) hung = &s;
  ASSERT_NE(hung, nullptr) << report["slow_dispatches"];
  EXPECT_LT(std::llabs(diff((*hung)["start_ns"].get<uint64_t>(),
                            stalls[0]["start_ns"].get<uint64_t>())),
            100'000);
  uint64_t age = (*hung)["duration_ns"].get<uint64_t>();
  EXPECT_GE(age, 500'000'000u);
  EXPECT_LT(age, 1'500'000'000u) << "dumped within a second of --hang";
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1))
    n++;
  return n;
}

// fds and resident KiB of a process.
std::pair<size_t, long> fds_and_rss(pid_t pid) {
  size_t fds = 0;
  for (const auto& e :
       fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)e;
    fds++;
  }
  long rss = 0;
  std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  std::smatch m;
  if (std::regex_search(status, m, std::regex(R"(VmRSS:\s+(\d+) kB)")))
    rss = std::stol(m[1]);
  return {fds, rss};
}

TEST(Monitor, FollowsProcessesThatComeAndGoAndKeepsNothingOfThem) {
  LT_REQUIRE_BPF();
  TempDir dir;
  // Every process running the refapp binary, from now on.
  Monitor mon(dir, {"--profile", "refapp"});
  ASSERT_TRUE(mon.ready()) << mon.log();
  auto one_app = [&](int i) {
    std::string log = dir.file("app" + std::to_string(i) + ".jsonl");
    RunResult r =
        run({refapp_bin(), "--rate", "200", "--duration", "150", "--log", log});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_jsonl(log);
  };
  // The first few warm the monitor's caches (the binary's symbols).
  for (int i = 0; i < 5; ++i) one_app(i);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  auto [fds0, rss0] = fds_and_rss(mon.proc.pid());
  std::vector<json> last;
  for (int i = 5; i < 50; ++i) last = one_app(i);
  // Each is forgotten a second or two after it exits.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  auto [fds1, rss1] = fds_and_rss(mon.proc.pid());
  EXPECT_EQ(fds1, fds0) << "fds left behind";
  EXPECT_LT(rss1 - rss0, 4096) << "KiB kept after 45 processes came and went";
  EXPECT_TRUE(mon.proc.running());
  ASSERT_EQ(mon.stop(), 0) << mon.log();
  std::string text = mon.log();
  EXPECT_EQ(count_of(text, "looptrace: attach pid "), 50u) << text;
  EXPECT_EQ(count_of(text, "looptrace: detach pid "), 50u) << text;
  EXPECT_NE(text.find("stopped (interrupted): 0 processes traced"),
            std::string::npos)
      << text;
  // The last one's spans, counted exactly.
  std::vector<json> summary = events(last, "summary");
  ASSERT_EQ(summary.size(), 1u);
  std::string pid = std::to_string(summary[0]["pid"].get<int>());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      text, m,
      std::regex("detach pid " + pid +
                 R"( \(refapp\): exited after (\d+) dispatches)")))
      << text;
  EXPECT_EQ(std::stoull(m[1]), summary[0]["dispatches"].get<uint64_t>());
}

TEST(Monitor, HangupIsNotAStop) {
  LT_REQUIRE_BPF();
  TempDir dir;
  Monitor mon(dir, {"--profile", "refapp"});
  ASSERT_TRUE(mon.ready()) << mon.log();
  mon.proc.signal(SIGHUP);
  ASSERT_TRUE(wait_for_text(mon.err, "looptrace: monitor running: ", 5000))
      << mon.log();
  EXPECT_TRUE(mon.proc.running());
  mon.proc.signal(SIGTERM);
  EXPECT_EQ(mon.proc.wait(20000), 0);
  EXPECT_NE(mon.log().find("monitor stopped (terminated)"), std::string::npos)
      << mon.log();
}

TEST(Monitor, BadOptionsAreOneLineUsageErrors) {
  TempDir dir;
  write_file(dir.file("file"), "x");
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"--dump-if", "dispach > 1ms", "--dump-dir",
                                 dir.path()},
        {"--dump-if", "hang >", "--dump-dir", dir.path()},
        {"--dump-dir", dir.file("missing")},
        {"--dump-dir", dir.file("file")},
        {"--dump-every", "5s"},
        {"--window", "0"},
        {"--window-max", "12"},
        {"--dump-dir", dir.path(), "--dump-max-bytes", "lots"},
        {"-p", "0"}}) {
    bad.insert(bad.begin(), {looptrace_bin(), "monitor"});
    RunResult r = run(bad);
    EXPECT_EQ(r.exit_code, 2) << bad[2] << ": " << r.err;
    // One line, and a hint line for a trigger that does not parse.
    EXPECT_GE(count_lines(r.err), 1) << r.err;
    EXPECT_LE(count_lines(r.err), 2) << r.err;
    EXPECT_EQ(r.err.rfind("looptrace: error: ", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace lt_test
