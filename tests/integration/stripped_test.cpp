// Stripped code: a clear error for a name, and exact counts at a 0x file
// offset (computed here from nm and readelf on the unstripped twin).
#include <cstdint>
#include <sstream>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

const std::string kPrograms = LT_TEST_PROGRAMS_DIR;

TEST(Stripped, NameIsRefusedOffsetCountsExactly) {
  LT_REQUIRE_BPF();
  const std::string stripped = kPrograms + "/elf_target_stripped";
  RunResult named = run({looptrace_bin(), "record", "--dispatch",
                         stripped + ":lt_plain_function", "-d", "1s"});
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_NE(named.err.find("stripped"), std::string::npos) << named.err;

  uint64_t off =
      file_offset_of(kPrograms + "/elf_target_pie", "lt_plain_function");
  ASSERT_NE(off, 0u);
  TempDir dir;
  const std::string json = dir.file("report.json");
  std::ostringstream hex;
  hex << "0x" << std::hex << off;
  RunResult r =
      run({looptrace_bin(), "record", "--dispatch", stripped + ":" + hex.str(),
           "--json", json, "-q", "--", stripped, "--call", "23"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json report = read_json(json);
  uint64_t count = 0;
  for (const auto& t : report["threads"]) count += t["count"].get<uint64_t>();
  EXPECT_EQ(count, 23u) << report.dump();
}

}  // namespace
}  // namespace lt_test
