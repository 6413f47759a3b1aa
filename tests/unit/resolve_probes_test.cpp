// resolve_probes: how many probes one run can attach, said in terms of what
// the user gave (probes, and the functions a glob matched).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiles/profile.h"
#include "profiles/resolve.h"

namespace looptrace {
namespace {

const std::string kPie = std::string(LT_TEST_PROGRAMS_DIR) + "/elf_target_pie";

ProbeDef probe(const std::string& symbol, uint32_t role = LT_ROLE_DISPATCH) {
  ProbeDef p;
  p.role = role;
  p.binary = kPie;
  p.symbol = symbol;
  return p;
}

// 200 probes said "glob matches 1 functions ... at most 0 can be probed".
TEST(ResolveProbes, TooManyProbesSaysHowMany) {
  std::vector<ProbeDef> probes(200, probe("lt_plain_function"));
  Status st = resolve_probes(&probes, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "200 probes given; at most 32 can be attached in "
            "one run");
  EXPECT_EQ(st.kind(), ErrorKind::kUsage);
}

TEST(ResolveProbes, AGlobThatOverflowsTheTableCountsEveryProbe) {
  // lt_test::overloaded* matches two functions (nm: overloaded(int),
  // overloaded(double)); 31 other probes leave room for one.
  std::vector<ProbeDef> probes(30, probe("lt_plain_function"));
  probes.push_back(probe("lt_test::overloaded*"));
  probes.push_back(probe("lt_plain_function"));
  Status st = resolve_probes(&probes, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "glob 'lt_test::overloaded*' matches 2 functions in " + kPie +
                "; with the 31 other probes that is 33, and at most 32 can "
                "be attached in one run");
  EXPECT_FALSE(st.hint().empty());

  // With one probe fewer they fit exactly; the 30 copies of one function
  // are then attached once (OneFunctionTwiceIsProbedOnce).
  probes.pop_back();
  ASSERT_TRUE(resolve_probes(&probes, ResolveContext{}).ok());
  EXPECT_EQ(probes.size(), 3u);
}

// Call probes on AOSP's pollInner (Debian's android-libutils): a build
// whose calls do not match what the probe asks is refused in one line,
// naming what it has; the matches are each a call site and its return.
TEST(ResolveProbes, CallProbesThatMatchNoCallOfTheBuildAreRefused) {
  const std::string lib = "/usr/lib/x86_64-linux-gnu/android/libutils.so.0";
  if (access(lib.c_str(), R_OK) != 0)
    GTEST_SKIP() << lib << " missing (scripts/setup.sh)";
  auto call = [&](ProbeDef::CallMatch m, uint32_t role = LT_ROLE_DISPATCH) {
    ProbeDef p = probe("android::Looper::pollInner(int)", role);
    p.binary = lib;
    p.call = m;
    return std::vector<ProbeDef>{p};
  };
  ProbeDef::CallMatch slot;
  slot.slot = 0x18;  // both of its virtual calls go through 0x10
  auto probes = call(slot);
  Status st = resolve_probes(&probes, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            lib +
                ": android::Looper::pollInner(int) makes no virtual call "
                "through vtable offset 0x18: this build does not match the "
                "probe (2 virtual calls in it)");
  ProbeDef::CallMatch to;
  to.to = "epoll_ctl";  // rebuildEpollLocked's, not pollInner's
  probes = call(to, LT_ROLE_WAIT);
  st = resolve_probes(&probes, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), lib +
                              ": android::Looper::pollInner(int) makes no "
                              "call to epoll_ctl: this build does not match "
                              "the probe");
  to.to = "epoll_wait";
  probes = call(to, LT_ROLE_WAIT);
  st = resolve_probes(&probes, ResolveContext{});
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].return_offset, probes[0].file_offset + 5);
  EXPECT_NE(probes[0].resolved_symbol.find("(call epoll_wait)"),
            std::string::npos)
      << probes[0].resolved_symbol;
}

// Two probes at one function saw every call twice: each call's second
// entry and return were counted lost. Alike, they are one probe; with
// another role or other keys, refused.
TEST(ResolveProbes, OneFunctionTwiceIsProbedOnce) {
  std::vector<ProbeDef> probes{
      probe("lt_plain_function"), probe("lt_test::overloaded*"),
      probe("lt_plain_*"), probe("lt_test::overloaded(int)")};
  ASSERT_TRUE(resolve_probes(&probes, ResolveContext{}).ok());
  ASSERT_EQ(probes.size(), 3u);
  std::vector<std::string> names;
  for (size_t i = 0; i < probes.size(); ++i) {
    EXPECT_EQ(probes[i].id, i);
    names.push_back(probes[i].resolved_symbol);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"lt_plain_function",
                                             "lt_test::overloaded(double)",
                                             "lt_test::overloaded(int)"}));

  std::vector<ProbeDef> idle{probe("lt_plain_function"),
                             probe("lt_plain_function", LT_ROLE_IDLE)};
  Status st = resolve_probes(&idle, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.kind(), ErrorKind::kUsage);
  EXPECT_NE(st.message().find("dispatch " + kPie +
                              ":lt_plain_function and idle " + kPie +
                              ":lt_plain_function attach at the same "
                              "function, " +
                              kPie + " at offset 0x"),
            std::string::npos)
      << st.message();

  std::vector<ProbeDef> keyed{probe("lt_plain_function"),
                              probe("lt_plain_function")};
  keyed[1].keys.push_back(KeyDef{"what", "arg1", {}, KeyFormat::kInt, {}, {}});
  EXPECT_FALSE(resolve_probes(&keyed, ResolveContext{}).ok());
}

// Input roles are socket-call probes: they take no slot of the table.
TEST(ResolveProbes, InputProbesTakeNoSlot) {
  std::vector<ProbeDef> probes(32, probe("lt_plain_function"));
  probes.push_back(probe("lt_plain_function", LT_ROLE_INPUT_RECV));
  Status st = resolve_probes(&probes, ResolveContext{});
  EXPECT_TRUE(st.ok()) << st.message();
}

// A profile's version gate: the version the file exports must be one the
// profile was checked against; the probes carry it, or resolution stops
// with a line naming both.
TEST(ResolveProbes, VersionGateReadsTheFilesVersion) {
  auto profile = [](const std::string& checked) {
    return parse_profile(R"({"version": {"binary": ")" + kPie +
                             R"(", "name": "Test", "major":
                             "lt_test_major_version", "minor":
                             "lt_test_minor_version", "checked": [)" +
                             checked + R"(]}, "probes": [{"binary": ")" + kPie +
                             R"(", "symbol": "lt_plain_function"}]})",
                         "p.json");
  };
  auto ok = profile(R"("2.72", "2.74")");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_TRUE(ok->probes[0].gate.has_value());
  std::vector<ProbeDef> probes = ok->probes;
  ASSERT_TRUE(resolve_probes(&probes, ResolveContext{}).ok());
  EXPECT_EQ(probes[0].version, "Test 2.74");
  auto other = profile(R"("2.76")");
  ASSERT_TRUE(other.ok());
  probes = other->probes;
  Status st = resolve_probes(&probes, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), kPie +
                              " is Test 2.74; the profile was checked "
                              "against Test 2.76 only, and reads "
                              "structures that may differ");
  // A file without the version symbols is not the library.
  auto wrong = parse_profile(
      R"({"version": {"binary": ")" + kPie +
          R"(", "name": "Test", "major": "no_such_version", "minor": "x",
          "checked": ["2.74"]}, "probes": [{"binary": ")" +
          kPie + R"(", "symbol": "lt_plain_function"}]})",
      "p.json");
  ASSERT_TRUE(wrong.ok());
  probes = wrong->probes;
  st = resolve_probes(&probes, ResolveContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has no no_such_version symbol"),
            std::string::npos)
      << st.message();
}

TEST(ProfileVersion, MalformedGatesAreOneLineErrors) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"version": 5, "probes": [{"binary": "a", "symbol": "f"}]})",
       "profile p.json: version: expected an object, got number"},
      {R"({"version": {"binary": "a", "name": "G", "major": "x", "minor":
          "y"}, "probes": [{"binary": "a", "symbol": "f"}]})",
       "profile p.json: version.checked: a non-empty array of "
       "\"MAJOR.MINOR\" strings is required"},
      {R"({"version": {"binary": "a", "name": "G", "major": "x", "minor":
          "y", "checked": ["2"]}, "probes": [{"binary": "a", "symbol":
          "f"}]})",
       "profile p.json: version.checked[0]: expected \"MAJOR.MINOR\", got "
       "\"2\""},
      {R"({"version": {"binary": "a", "name": "G", "minor": "y", "checked":
          ["2.1"]}, "probes": [{"binary": "a", "symbol": "f"}]})",
       "profile p.json: version.major: missing (a string is required)"},
  };
  for (const auto& [text, want] : bad) {
    auto r = parse_profile(text, "p.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), want) << text;
  }
}

}  // namespace
}  // namespace looptrace
