// Where a uprobe goes in glibc's socket wrappers: past the single-threaded
// check that the kernel would single-step (bytes from Debian 12's libc.so.6).
#include <gtest/gtest.h>

#include <cstdint>

#include "profiles/resolve.h"

namespace looptrace {
namespace {

TEST(UprobeOffset, SkipsCmpbAndMovToTheConditionalJump) {
  // sendto: cmpb $0x0,0xd0931(%rip); mov %ecx,%r10d; je +0x14
  const uint8_t sendto[] = {0x80, 0x3d, 0x31, 0x09, 0x0d, 0x00,
                            0x00, 0x41, 0x89, 0xca, 0x74, 0x14};
  EXPECT_EQ(single_threaded_check_skip(sendto, sizeof(sendto)), 10u);
}

TEST(UprobeOffset, SkipsCmpbAloneBeforeAJump) {
  // sendmsg: cmpb $0x0,0xd09d1(%rip); je +0x17
  const uint8_t sendmsg[] = {0x80, 0x3d, 0xd1, 0x09, 0x0d, 0x00,
                             0x00, 0x74, 0x17, 0xb8, 0x2e};
  EXPECT_EQ(single_threaded_check_skip(sendmsg, sizeof(sendmsg)), 7u);
}

TEST(UprobeOffset, LeavesOtherProloguesAlone) {
  // recvmsg: push %rbx (emulated) first.
  const uint8_t recvmsg[] = {0x53, 0x48, 0x83, 0xec, 0x10, 0x80, 0x3d};
  EXPECT_EQ(single_threaded_check_skip(recvmsg, sizeof(recvmsg)), 0u);
  // cmpb not followed by a conditional jump: stay at the entry.
  const uint8_t no_jump[] = {0x80, 0x3d, 0, 0, 0, 0, 0, 0x48, 0x89, 0xe5};
  EXPECT_EQ(single_threaded_check_skip(no_jump, sizeof(no_jump)), 0u);
  // cmpb with another addressing mode (80 7f: disp8(%rdi)).
  const uint8_t other[] = {0x80, 0x7f, 0x10, 0x00, 0x74, 0x05, 0, 0, 0};
  EXPECT_EQ(single_threaded_check_skip(other, sizeof(other)), 0u);
  // Truncated code.
  const uint8_t cut[] = {0x80, 0x3d, 0x31, 0x09, 0x0d};
  EXPECT_EQ(single_threaded_check_skip(cut, sizeof(cut)), 0u);
}

}  // namespace
}  // namespace looptrace
