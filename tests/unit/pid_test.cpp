// -p PID: parsed strictly, and refused when the process has exited; a
// process whose leader thread exited while others run is still a target.
#include "proc/pid.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace looptrace::proc {
namespace {

TEST(ParsePid, DecimalProcessIds) {
  EXPECT_EQ(*parse_pid("1"), 1);
  EXPECT_EQ(*parse_pid("4242"), 4242);
  EXPECT_EQ(*parse_pid("2147483647"), 2147483647);
}

TEST(ParsePid, EverythingElseIsAUsageError) {
  // "" is what -p "$(pidof nosuchapp)" gives; 0 and negatives used to mean
  // every process, and 0x10 pid 16.
  for (const char* bad :
       {"", "0", "-5", "-1", "+7", "0x10", "abc", " 12", "12 ", "12abc", "1.5",
        "2147483648", "99999999999999999999"}) {
    auto r = parse_pid(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' parsed as " << *r;
    EXPECT_EQ(r.status().exit_code(), 2) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(StatState, LetterAfterTheLastParen) {
  EXPECT_EQ(stat_state("42 (refapp) S 1 42"), 'S');
  // A comm may hold spaces and parentheses.
  EXPECT_EQ(stat_state("42 (a) Z (b) R 1 42"), 'R');
  EXPECT_EQ(stat_state("42 (x) Z"), 'Z');
  EXPECT_EQ(stat_state("42 (x)"), '\0');
  EXPECT_EQ(stat_state("garbage"), '\0');
}

// PF_KTHREAD (0x00200000) in the flags, the ninth field: kthreadd's line
// as 6.18 shows it, and a user process's.
TEST(StatKernelThread, FlagsField) {
  EXPECT_TRUE(stat_kernel_thread(
      "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 22"));
  EXPECT_FALSE(stat_kernel_thread(
      "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 1 0 22"));
  EXPECT_FALSE(stat_kernel_thread("42 (x) S 1 42"));
  EXPECT_FALSE(stat_kernel_thread("garbage"));
  std::ifstream in("/proc/self/stat");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(stat_kernel_thread(ss.str()));
}

TEST(CheckPidTarget, KernelThreadIsRefused) {
  std::ifstream in("/proc/2/stat");
  std::stringstream ss;
  ss << in.rdbuf();
  if (!stat_kernel_thread(ss.str()))
    GTEST_SKIP() << "pid 2 is not kthreadd here (a PID namespace)";
  Status st = check_pid_target(2);
  EXPECT_EQ(st.kind(), ErrorKind::kUsage);
  EXPECT_EQ(st.message(),
            "pid 2 is a kernel thread: it runs no program to trace");
}

// The state letter of `pid` as /proc shows it.
char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::stringstream ss;
  ss << in.rdbuf();
  return stat_state(ss.str());
}

bool wait_for_state(pid_t pid, char want) {
  for (int i = 0; i < 500; ++i) {
    if (state_of(pid) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(CheckPidTarget, LiveProcessIsATarget) {
  EXPECT_TRUE(check_pid_target(getpid()).ok());
}

TEST(CheckPidTarget, MissingPidIsNotFound) {
  // Beyond PID_MAX_LIMIT (4194304): no process can have it.
  Status st = check_pid_target(2147483000);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_EQ(st.message(), "pid 2147483000 not found");
}

TEST(CheckPidTarget, ZombieIsRefusedClearly) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  // Not reaped yet: a zombie.
  ASSERT_TRUE(wait_for_state(child, 'Z'));
  Status st = check_pid_target(child);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_NE(st.message().find("zombie"), std::string::npos) << st.message();
}

TEST(CheckPidTarget, ExitedLeaderWithLiveThreadsIsATarget) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::thread([] { pause(); }).detach();
    // Only the leader thread exits; the process lives on in the other.
    syscall(SYS_exit, 0);
  }
  ASSERT_TRUE(wait_for_state(child, 'Z'));
  Status st = check_pid_target(child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace looptrace::proc
