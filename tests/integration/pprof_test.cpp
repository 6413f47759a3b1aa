// --pprof read by pprof itself (`go tool pprof`, Debian's golang-go): the
// reference app's busy stall is the top function of the on-CPU profile and
// its sleep stall's time is where it slept, as the app logs them; a
// recording replayed writes the same profile.
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

// Skips (fails when BPF tests are required) without Go's pprof.
#define LT_REQUIRE_GO()                                                     \
  do {                                                                      \
    if (access("/usr/bin/go", X_OK) != 0) {                                 \
      if (bpf_required()) FAIL() << "golang-go missing (scripts/setup.sh)"; \
      GTEST_SKIP() << "golang-go missing";                                  \
    }                                                                       \
  } while (0)

struct TopRow {
  int64_t flat = 0, cum = 0;
  std::string name;
};

// `go tool pprof -top -unit=ns` of one sample type: its rows.
std::vector<TopRow> top(const TempDir& dir, const std::string& profile,
                        const std::string& type) {
  RunResult r = run({"/usr/bin/env", "HOME=" + dir.path(),
                     "PPROF_TMPDIR=" + dir.path(), "/usr/bin/go", "tool",
                     "pprof", "-symbolize=none", "-sample_index=" + type,
                     "-top", "-unit=ns", "-nodecount=50", profile});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<TopRow> rows;
  std::istringstream in(r.out);
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("flat%") != std::string::npos) {
      table = true;
      continue;
    }
    if (!table) continue;
    std::istringstream l(line);
    std::string flat, flat_pc, sum_pc, cum, cum_pc;
    TopRow row;
    if (!(l >> flat >> flat_pc >> sum_pc >> cum >> cum_pc)) continue;
    std::getline(l >> std::ws, row.name);
    auto ns = [](std::string v) {
      if (v.size() > 2 && v.compare(v.size() - 2, 2, "ns") == 0)
        v.resize(v.size() - 2);
      return std::strtoll(v.c_str(), nullptr, 10);
    };
    row.flat = ns(flat);
    row.cum = ns(cum);
    rows.push_back(row);
  }
  return rows;
}

const TopRow* row_of(const std::vector<TopRow>& rows, const std::string& fn) {
  for (const TopRow& r : rows)
    if (r.name.rfind(fn, 0) == 0) return &r;
  return nullptr;
}

std::string dump(const std::vector<TopRow>& rows) {
  std::string s;
  for (const TopRow& r : rows)
    s += std::to_string(r.flat) + " " + std::to_string(r.cum) + " " + r.name +
         "\n";
  return s;
}

TEST(Pprof, GoToolPprofNamesTheStallsAsTheAppLogsThem) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GO();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string prof = dir.file("p.pb.gz");
  const std::string rec = dir.file("run.lt");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--profile",
                     "refapp",
                     "-q",
                     "--pprof",
                     prof,
                     "-o",
                     rec,
                     "--",
                     refapp_bin(),
                     "--rate",
                     "200",
                     "--duration",
                     "1600",
                     "--stall",
                     "busy:120@400",
                     "--stall",
                     "sleep:100@900",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);
  const auto& busy = stalls[0]["kind"] == "busy" ? stalls[0] : stalls[1];
  const auto& sleep = stalls[0]["kind"] == "busy" ? stalls[1] : stalls[0];

  // On CPU: the busy stall's function on top, its samples no more than
  // the CPU time the app's own thread clock counted (1 ms each; +2 ms for
  // the two clock reads' edges).
  std::vector<TopRow> cpu = top(dir, prof, "cpu");
  ASSERT_FALSE(cpu.empty()) << r.err;
  EXPECT_EQ(cpu[0].name.rfind(busy["function"].get<std::string>(), 0), 0u)
      << dump(cpu);
  const int64_t busy_cpu = busy["cpu_ns"].get<int64_t>();
  EXPECT_GT(cpu[0].flat, 0);
  EXPECT_LE(cpu[0].flat, busy_cpu + 2'000'000) << dump(cpu);

  // Blocked: the sleep stall's time in the kernel's nanosleep, under the
  // app's sleeping function: its wall time less what it ran or waited for
  // a CPU (the app's clocks), within 10 %.
  std::vector<TopRow> blocked = top(dir, prof, "blocked");
  const TopRow* wait = row_of(blocked, "[do_nanosleep]");
  const TopRow* fn = row_of(blocked, sleep["function"].get<std::string>());
  ASSERT_NE(wait, nullptr) << dump(blocked);
  ASSERT_NE(fn, nullptr) << dump(blocked);
  EXPECT_EQ(fn->cum, wait->flat) << dump(blocked);
  const int64_t dur = sleep["duration_ns"].get<int64_t>();
  const int64_t not_blocked = sleep["cpu_ns"].get<int64_t>() +
                              std::max<int64_t>(0, sleep["run_delay_ns"]);
  EXPECT_LE(wait->flat, dur) << dump(blocked);
  EXPECT_GE(wait->flat, (dur - not_blocked) * 9 / 10) << dump(blocked);

  // The recording replayed gives pprof the same profile.
  const std::string again = dir.file("again.pb.gz");
  RunResult rep = run({looptrace_bin(), "report", rec, "-q", "--pprof", again});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(dump(top(dir, again, "cpu")), dump(cpu));
  EXPECT_EQ(dump(top(dir, again, "blocked")), dump(blocked));
}

TEST(Pprof, StdoutIsRefused) {
  LT_REQUIRE_BPF();
  RunResult r = run({looptrace_bin(), "record", "--profile", "refapp",
                     "--pprof", "-", "--", refapp_bin(), "--duration", "100"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--pprof: a profile is binary; give a file"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace lt_test
