// Error lines stay one whole line whatever bytes a name read from a file
// holds.
#include "base/log.h"

#include <gtest/gtest.h>

#include <string>

namespace looptrace {
namespace {

TEST(Log, PrintableEscapesControlBytes) {
  EXPECT_EQ(log::printable(std::string("a\0b\nc\td\x01\x7f", 9)),
            "a\\0b\\nc\\td\\x01\\x7f");
  EXPECT_EQ(log::printable("plain ünïcode"), "plain ünïcode");
  EXPECT_EQ(log::printable("abcdef", 3), "abc...");
  EXPECT_EQ(log::printable("abc", 3), "abc");
}

// A log line quoting a name that is not UTF-8 or holds a terminal
// sequence writes neither raw.
TEST(Log, WarningWithHostileNameIsEscaped) {
  testing::internal::CaptureStderr();
  log::warn("thread '{}' of '{}'", "\xff\xfe", "\x1b[2J\x1b]0;t\x07");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "looptrace: warning: thread '\\xff\\xfe' of "
            "'\\x1b[2J\\x1b]0;t\\x07'\n");
}

// A NUL in a symbol cut the message short.
TEST(Log, ErrorLineWithANulIsWrittenWholeAndEscaped) {
  testing::internal::CaptureStderr();
  log::error("symbol '{}' not found", std::string("main\0bar\nx", 10));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "looptrace: error: symbol 'main\\0bar\\nx' not found\n");
}

}  // namespace
}  // namespace looptrace
