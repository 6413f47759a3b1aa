// Shared helpers for the privileged integration tests: run programs, read
// the reference app's ground truth and looptrace's JSON report.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lt_test {

// Skips the test when BPF tracing is impossible here (not root, no BTF);
// with LOOPTRACE_REQUIRE_BPF=1 that is a failure instead.
#define LT_REQUIRE_BPF()                                    \
  do {                                                      \
    std::string _why = ::lt_test::bpf_unavailable_reason(); \
    if (!_why.empty()) {                                    \
      if (::lt_test::bpf_required())                        \
        FAIL() << "LOOPTRACE_REQUIRE_BPF=1 but " << _why;   \
      GTEST_SKIP() << _why;                                 \
    }                                                       \
  } while (0)

std::string bpf_unavailable_reason();
bool bpf_required();

// Skips the test when `have` is false: `what` (streamed into the message,
// e.g. "/usr/bin/python3" or "PyQt" << major) is not installed; with
// LOOPTRACE_REQUIRE_BPF=1 (CI, where scripts/setup.sh installed it) that
// is a failure instead.
#define LT_REQUIRE_INSTALLED(have, what)                 \
  do {                                                   \
    if (!(have)) {                                       \
      if (::lt_test::bpf_required())                     \
        FAIL() << what << " missing (scripts/setup.sh)"; \
      GTEST_SKIP() << what << " missing";                \
    }                                                    \
  } while (0)

// Debian's python3, which runs the tests' Python programs.
bool have_system_python();
#define LT_REQUIRE_SYSTEM_PYTHON() \
  LT_REQUIRE_INSTALLED(::lt_test::have_system_python(), "/usr/bin/python3")

// Xvfb and xdotool, which run and drive the tests' X11 clients.
bool have_xvfb_and_xdotool();

// A scratch directory removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A child process with stdout and stderr captured to files.
class Process {
 public:
  Process(std::vector<std::string> argv, const std::string& out_path,
          const std::string& err_path);
  ~Process();  // kills it if still running
  pid_t pid() const { return pid_; }
  // Waits up to timeout_ms; returns the exit code, 128+signal, or -1 on
  // timeout.
  int wait(int timeout_ms);
  bool running();
  void signal(int sig);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs argv to completion (timeout_ms, then killed) and captures output.
RunResult run(const std::vector<std::string>& argv, int timeout_ms = 120000);

// argv run in a private mount namespace with tracefs and debugfs unmounted,
// as on a fresh machine where nothing mounted them (exit 97 if they could
// not be unmounted): what looptrace needs must not depend on them.
std::vector<std::string> without_tracefs(const std::vector<std::string>& argv);

// Newlines in s: an error message is one line (two with a hint).
inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string read_file(const std::string& path);
// Writes `text` to `path` (a test's own file); a failure fails the test.
void write_file(const std::string& path, const std::string& text);
// JSON lines; malformed lines fail the test.
std::vector<nlohmann::json> read_jsonl(const std::string& path);
nlohmann::json read_json(const std::string& path);
// Lines of the ref app's log whose "event" equals `event`.
std::vector<nlohmann::json> events(const std::vector<nlohmann::json>& log,
                                   const std::string& event);

// Waits until `path` contains `needle` (e.g. "ready pid=").
bool wait_for_text(const std::string& path, const std::string& needle,
                   int timeout_ms);

// File offset of `symbol` in the ELF file at `path`, from nm's address and
// readelf's PT_LOAD headers (not from looptrace's own resolver); 0 if absent.
uint64_t file_offset_of(const std::string& path, const std::string& symbol);

// The steal column of /proc/stat, all CPUs, in ns: time a hypervisor ran
// something else. A thread can lose such time between a probe firing and
// the traced program reading its own clock, so ground truth taken inside a
// program is only as exact as the steal during the run allows.
int64_t steal_ns();
// One scheduler tick, from the kernel config (HZ=250 when unknown).
int64_t tick_ns();

// a - b for CLOCK_MONOTONIC nanoseconds.
inline int64_t diff(uint64_t a, uint64_t b) {
  return static_cast<int64_t>(a) - static_cast<int64_t>(b);
}

// Every slow span's wall time splits into CPU, run-queue wait, steal and
// blocked time that add up: cpu + runq + steal never exceeds the wall time
// by more than 1 % or 0.5 ms (blocked is the rest, so the four add up to
// the wall exactly). Failures are reported as gtest failures naming the
// span.
void expect_split_adds_up(const nlohmann::json& report);

// The lines of a source file (a test's program), 1-based: lines[0] is
// empty.
std::vector<std::string> source_lines(const std::string& path);
// The first line of `path` holding `text` (1-based), 0 if none.
int line_of(const std::string& path, const std::string& text);
// The lines of the top-level function that starts with the line beginning
// `def_text` in `path`: from its def to the line before the next
// top-level def or class (first 0 if there is no such line).
struct LineRange {
  int first = 0, last = 0;
  bool holds(int line) const { return line >= first && line <= last; }
};
LineRange function_lines(const std::string& path, const std::string& def_text);

// tests/programs/glib_loop.py run by Debian's python3 with --start-delay
// 2000, `app_args` and --log dir.file("glib.jsonl"), attached once it is
// ready by `looptrace record -p PID` and `lt_args`: both must exit 0.
// *lt is looptrace's run (its text report in out).
void trace_glib_loop(const TempDir& dir,
                     const std::vector<std::string>& app_args,
                     const std::vector<std::string>& lt_args, RunResult* lt);

// The span of `spans` (a report's list) that holds what the traced program
// logged as `logged` (its start_ns and end_ns), give or take tolerance_ns
// at each end; the last such one, nullptr if none.
const nlohmann::json* span_holding(const nlohmann::json& spans,
                                   const nlohmann::json& logged,
                                   int64_t tolerance_ns);

std::string looptrace_bin();
std::string refapp_bin();
// The reference app built without frame pointers (refapp/CMakeLists.txt).
std::string refapp_nofp_bin();
std::string tests_dir();

}  // namespace lt_test
