// What `record` traces (-p PID, -- COMMAND, --system-wide): checked before
// anything is traced, one clear line each; a command held before its exec
// until released.
#include "proc/target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace looptrace {
namespace {

TEST(Target, OneKindOfTargetOnly) {
  Target t;
  Status st = t.check(getppid(), {"true"}, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_NE(st.message().find("only one of -p PID, -- COMMAND"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(Target().check(-1, {"true"}, true).ok());
}

TEST(Target, NotLooptraceItself) {
  Status st = Target().check(getpid(), {}, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_NE(st.message().find("is looptrace itself"), std::string::npos);
}

TEST(Target, ACommandNotOnThePathIsAnError) {
  Target t;
  Status st = t.check(-1, {"looptrace-no-such-command-xyz"}, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("looptrace-no-such-command-xyz"),
            std::string::npos)
      << st.message();
}

TEST(Target, DescribesWhatItTraces) {
  Target all;
  ASSERT_TRUE(all.check(-1, {}, true).ok());
  EXPECT_EQ(all.describe(), "all processes");
  EXPECT_EQ(all.pid(), -1);
  Target parent;
  ASSERT_TRUE(parent.check(getppid(), {}, false).ok());
  EXPECT_EQ(parent.pid(), getppid());
  EXPECT_EQ(parent.describe().rfind("pid " + std::to_string(getppid()), 0), 0u)
      << parent.describe();
}

// The command starts held: its pid exists before its exec, and an exec
// that fails comes back as the release's error.
TEST(Target, ACommandRunsOnlyOnceReleased) {
  Target t;
  ASSERT_TRUE(t.check(-1, {"true"}, false).ok());
  const std::string& path = t.command_path();
  ASSERT_GE(path.size(), 5u);
  EXPECT_EQ(path.substr(path.size() - 5), "/true") << path;
  ASSERT_TRUE(t.start(false).ok());
  ASSERT_GT(t.pid(), 0);
  EXPECT_EQ(t.describe(), "pid " + std::to_string(t.pid()) + " (true)");
  EXPECT_TRUE(t.release().ok());
}

}  // namespace
}  // namespace looptrace
