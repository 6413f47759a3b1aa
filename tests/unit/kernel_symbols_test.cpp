// Kernel frames: /proc/kallsyms text to function names.
#include "symbolize/kernel_symbols.h"

#include <gtest/gtest.h>

#include <sstream>

namespace looptrace {
namespace {

TEST(KernelSymbols, NamesTextSymbolsAndModules) {
  KernelSymbols k;
  k.load_text(
      "ffffffff81000000 T _stext\n"
      "ffffffff81000100 t do_nanosleep\n"
      "ffffffff81000200 D some_data\n"  // data: not a frame
      "ffffffff81000300 T schedule\n"
      "garbage line\n"
      "zzzz T bad_address\n"
      "0000000000000000 T hidden_by_kptr_restrict\n"
      "ffffffffc0000000 t mod_fn\t[ext4]\n");
  EXPECT_EQ(k.size(), 4u);
  Frame f = k.symbolize(0xffffffff81000123);
  EXPECT_EQ(f.function, "do_nanosleep");
  EXPECT_EQ(f.offset, 0x23u);
  EXPECT_EQ(f.module, "[kernel]");
  // Data symbols do not cut the function before them short.
  EXPECT_EQ(k.symbolize(0xffffffff81000250).function, "do_nanosleep");
  Frame m = k.symbolize(0xffffffffc0000010);
  EXPECT_EQ(m.function, "mod_fn");
  EXPECT_EQ(m.module, "[ext4]");
  EXPECT_FALSE(k.symbolize(0x1000).known());  // below every symbol
}

TEST(KernelSymbols, HiddenAddressesLeaveFramesUnknown) {
  KernelSymbols k;
  k.load_text(
      "0000000000000000 T do_nanosleep\n"
      "0000000000000000 T schedule\n");
  EXPECT_EQ(k.size(), 0u);
  Frame f = k.symbolize(0xffffffff81000123);
  EXPECT_FALSE(f.known());
  EXPECT_EQ(f.addr, 0xffffffff81000123u);
}

// The irq entry bounds the off-CPU hooks need, found by a scan that
// stops once it has them; a hidden (0) or malformed address is not found.
TEST(KernelSymbols, ScanFindsNamedAddressesOnly) {
  std::istringstream in(
      "ffffffff81000000 T _stext\n"
      "zzzz T __irqentry_text_end\n"
      "ffffffff81e00000 T __irqentry_text_start\n"
      "0000000000000000 T hidden\n"
      "ffffffff81e01000 T __irqentry_text_end\n"
      "ffffffff81e02000 T __irqentry_text_end\n"
      "ffffffffc0000000 t mod_fn\t[ext4]\n");
  std::vector<uint64_t> at = KernelSymbols::scan_for(
      in, {"__irqentry_text_start", "__irqentry_text_end", "hidden", "mod_fn",
           "missing"});
  EXPECT_EQ(at, (std::vector<uint64_t>{0xffffffff81e00000, 0xffffffff81e01000,
                                       0, 0xffffffffc0000000, 0}));
}

}  // namespace
}  // namespace looptrace
