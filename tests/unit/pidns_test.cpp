// The PID namespace looptrace runs in, and a process's pids across
// namespaces (NSpid), checked against the process's own getpid().
#include "proc/pidns.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace looptrace::proc {
namespace {

TEST(PidNamespace, OwnIsTheOneProcNames) {
  Result<PidNamespace> ns = own_pid_namespace();
  ASSERT_TRUE(ns.ok()) << ns.status().message();
  EXPECT_NE(ns->ino, 0u);
  // Pid 1 of /proc, where it can be seen, lives in /proc's namespace,
  // which is ours.
  struct stat st {};
  if (stat("/proc/1/ns/pid", &st) == 0) {
    EXPECT_EQ(st.st_ino, ns->ino);
  }
}

TEST(PidNamespace, NsPidsEndWithTheOwnPid) {
  std::vector<pid_t> ids = ns_pids(getpid());
  ASSERT_FALSE(ids.empty());
  // /proc is our namespace's (own_pid_namespace checks it): one pid, ours.
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids.back(), getpid());
  EXPECT_TRUE(ns_pids(0).empty());
  EXPECT_TRUE(ns_pids(-1).empty());
}

}  // namespace
}  // namespace looptrace::proc
