// resolve_probes: how many probes one run can attach, said in terms of what
// the user gave (probes, and the functions a glob matched).
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

  // With one probe fewer they fit exactly.
  probes.pop_back();
  ASSERT_TRUE(resolve_probes(&probes, ResolveContext{}).ok());
  EXPECT_EQ(probes.size(), 32u);
}

// Input roles are socket-call probes: they take no slot of the table.
TEST(ResolveProbes, InputProbesTakeNoSlot) {
  std::vector<ProbeDef> probes(32, probe("lt_plain_function"));
  probes.push_back(probe("lt_plain_function", LT_ROLE_INPUT_RECV));
  Status st = resolve_probes(&probes, ResolveContext{});
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace looptrace
