// Where the probe goes: a function that starts with endbr64 (x86 CET) is
// probed after it, and still every call is counted.
#include <cstdio>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

TEST(ProbePoint, Endbr64FunctionIsProbedAfterItAndCountedExactly) {
  LT_REQUIRE_BPF();
  const std::string bin = LT_BENCH_TARGET_BIN;
  // The test program's own objdump says the function starts with endbr64.
  RunResult dis = run({"sh", "-c",
                       "objdump -d --no-show-raw-insn " + bin +
                           " | grep -A1 '<lt_bench_dispatch_endbr>:'"});
  ASSERT_NE(dis.out.find("endbr64"), std::string::npos) << dis.out;

  TempDir dir;
  const std::string json = dir.file("report.json");
  RunResult r = run({looptrace_bin(), "--debug", "resolve", "record",
                     "--dispatch", bin + ":lt_bench_dispatch_endbr", "--json",
                     json, "-q", "--", bin, "--func", "lt_bench_dispatch_endbr",
                     "--calls", "1000", "--rounds", "3", "--warmup", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The symbol's file offset (nm + readelf), plus 4, is where it went.
  uint64_t off = file_offset_of(bin, "lt_bench_dispatch_endbr");
  ASSERT_NE(off, 0u);
  char want[64];
  std::snprintf(want, sizeof(want), "offset %#llx",
                static_cast<unsigned long long>(off + 4));
  EXPECT_NE(r.err.find(want), std::string::npos) << want << "\n" << r.err;
  nlohmann::json report = read_json(json);
  uint64_t count = 0;
  for (const auto& t : report["threads"]) count += t["count"].get<uint64_t>();
  EXPECT_EQ(count, 3000u);
}

}  // namespace
}  // namespace lt_test
