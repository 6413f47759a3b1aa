// Stripped code: a clear error for a name, and exact counts at a 0x file
// offset (computed here from nm and readelf on the unstripped twin).
#include <cstdint>
#include <sstream>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

const std::string kPrograms = LT_TEST_PROGRAMS_DIR;

// File offset of `symbol` in `path`: nm's address mapped through the
// PT_LOAD segment that contains it (readelf -lW).
uint64_t file_offset_of(const std::string& path, const std::string& symbol) {
  RunResult nm = run({"nm", path});
  uint64_t vaddr = 0;
  std::istringstream lines(nm.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (f >> addr >> type >> name && name == symbol)
      vaddr = std::stoull(addr, nullptr, 16);
  }
  if (vaddr == 0) return 0;
  RunResult re = run({"readelf", "-lW", path});
  std::istringstream segs(re.out);
  while (std::getline(segs, line)) {
    std::istringstream f(line);
    std::string type, off, va, pa, filesz, memsz;
    if (!(f >> type >> off >> va >> pa >> filesz >> memsz) || type != "LOAD")
      continue;
    uint64_t o = std::stoull(off, nullptr, 16),
             v = std::stoull(va, nullptr, 16),
             fs = std::stoull(filesz, nullptr, 16);
    if (vaddr >= v && vaddr < v + fs) return vaddr - v + o;
  }
  return 0;
}

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
