// What a machine lacks is named, with the fix, before anything is loaded;
// what looptrace can provide for itself (tracefs) it provides without
// changing the machine. Each missing piece is simulated in a private mount
// namespace (unshare -m), so the machine's own mounts stay as they are.
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

// `setup` (shell) runs in a private mount namespace, then looptrace with
// `args`; its exit code and stderr are looptrace's.
RunResult run_in_namespace(const std::string& setup,
                           const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "unshare",      "-m", "--propagation",           "private",
      "sh",           "-c", setup + " && exec \"$@\"", "sh",
      looptrace_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, 30000);
}

void expect_one_error(const RunResult& r, int code, const std::string& needle,
                      const std::string& hint) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err.rfind("looptrace: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: " + hint), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 2) << r.err;
}

const std::vector<std::string> kRecord = {"record", "--profile", "refapp", "-d",
                                          "1s"};

TEST(Environment, NoBtfIsNamedWithTheKernelOption) {
  LT_REQUIRE_BPF();
  RunResult r =
      run_in_namespace("mount -t tmpfs none /sys/kernel/btf", kRecord);
  expect_one_error(r, 1, "this kernel has no BTF", "");
  EXPECT_NE(r.err.find("CONFIG_DEBUG_INFO_BTF=y"), std::string::npos);
}

TEST(Environment, NoUprobePmuIsNamedWithTheKernelOption) {
  LT_REQUIRE_BPF();
  RunResult r = run_in_namespace(
      "mount -t tmpfs none /sys/bus/event_source/devices", kRecord);
  expect_one_error(r, 1, "no uprobe PMU", "a kernel built with");
  EXPECT_NE(r.err.find("CONFIG_UPROBE_EVENTS=y"), std::string::npos);
}

TEST(Environment, ConfidentialityLockdownIsNamed) {
  LT_REQUIRE_BPF();
  RunResult r = run_in_namespace(
      "mount -t tmpfs none /sys/kernel/security && "
      "echo 'none integrity [confidentiality]' "
      "> /sys/kernel/security/lockdown",
      kRecord);
  expect_one_error(r, 4, "kernel lockdown is in confidentiality mode",
                   "boot with lockdown=integrity");
}

// Forced onto the per-call syscall tracepoints where nothing mounted
// tracefs, looptrace mounts it in a namespace of its own: it traces, and
// the namespace it was started in has no tracefs afterwards.
TEST(Environment, TracefsIsMountedOnlyWhereLooptraceSeesIt) {
  LT_REQUIRE_BPF();
  std::vector<std::string> argv = without_tracefs(
      {"sh", "-c",
       "LOOPTRACE_SYSCALL_HOOK=tracepoint \"$@\"; rc=$?; "
       "echo tracefs-mounts=$(grep -c ' tracefs ' /proc/self/mounts); "
       "exit $rc",
       "sh", looptrace_bin(), "-v", "record", "--input", "-d", "300ms", "--",
       "sleep", "1"});
  RunResult r = run(argv, 30000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("mounted tracefs on /sys/kernel/tracing in "
                       "looptrace's own mount namespace"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("input channels (syscall tracepoints)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("tracefs-mounts=0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lt_test
