// Names from a traced process, made safe for a terminal (printable) and
// for JSON (json_text), and cut at a bound (cut_name).
#include "base/text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/json_text.h"

namespace looptrace {
namespace {

TEST(Printable, EscapesWhatATerminalActsOn) {
  // ESC[2J clears the screen; a newline forges a line of the report.
  EXPECT_EQ(printable("\x1b[2Jx\nlooptrace: fake"),
            "\\x1b[2Jx\\nlooptrace: fake");
  EXPECT_EQ(printable(std::string("a\0b\tc\x7f\r", 7)), "a\\0b\\tc\\x7f\\x0d");
  // U+009B is an 8-bit CSI; U+202E reverses what follows on the screen.
  EXPECT_EQ(printable("a\xc2\x9b"
                      "2Jb"),
            "a\\u009b2Jb");
  EXPECT_EQ(printable("x\xe2\x80\xaey"), "x\\u202ey");
}

TEST(Printable, InvalidUtf8ByteByByteValidAsItIs) {
  // prctl(PR_SET_NAME, "\xff\xfe"): a thread name that is not UTF-8.
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("plain ünïcode …"), "plain ünïcode …");
  // Truncated, overlong, a surrogate, past U+10FFFF.
  EXPECT_EQ(printable("a\xc3"), "a\\xc3");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(printable("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

TEST(Printable, CutsBetweenCharacters) {
  EXPECT_EQ(printable("abcdef", 3), "abc...");
  EXPECT_EQ(printable("abc", 3), "abc");
  // "ü" is two bytes: a cut at 2 keeps "a" and not half of it.
  EXPECT_EQ(printable("aüb", 2), "a...");
}

TEST(CutName, MarksACutAndStaysWithinTheBound) {
  EXPECT_EQ(cut_name("short", 10), "short");
  std::string cut = cut_name(std::string(100, 'x'), 10);
  EXPECT_EQ(cut, std::string(7, 'x') + "…");
  EXPECT_EQ(cut.size(), 10u);
  // Never half a character before the mark.
  EXPECT_EQ(cut_name("ab€€€€", 9), "ab€…");
}

// An invalid byte in a thread name, a str key or a JIT's name made
// nlohmann throw type_error.316 and looptrace abort.
TEST(JsonText, InvalidUtf8BecomesReplacementCharacter) {
  nlohmann::json j = {{"comm", "\xff\xfe"}, {"target", "ok \x1b[2J"}};
  std::string text;
  ASSERT_NO_THROW(text = json_text(j));
  EXPECT_EQ(text,
            "{\"comm\":\"\xef\xbf\xbd\xef\xbf\xbd\",\"target\":\"ok "
            "\\u001b[2J\"}");
  // It parses back: valid JSON, valid UTF-8.
  EXPECT_EQ(nlohmann::json::parse(text)["comm"], "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(json_text(nlohmann::json::array({1, 2}), 2), "[\n  1,\n  2\n]");
}

}  // namespace
}  // namespace looptrace
