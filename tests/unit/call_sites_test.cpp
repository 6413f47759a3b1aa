// Virtual-call sites: AOSP's Looper::pollInner as Debian builds it, and
// byte fixtures of calls that are not virtual calls.
#include "elf/call_sites.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "elf/elf_file.h"
#include "elf/resolve.h"

namespace looptrace::elf {
namespace {

constexpr const char* kLibutils =
    "/usr/lib/x86_64-linux-gnu/android/libutils.so.0";

// android-libutils (AOSP 10): pollInner's two dispatches, and nothing
// else, by objdump -d: handler->handleMessage(message) and
// callback->handleEvent(fd, events, data), both `call *0x10(%rax)`.
TEST(CallSites, AospPollInnerHasItsTwoDispatches) {
  if (access(kLibutils, R_OK) != 0)
    GTEST_SKIP() << kLibutils << " missing (scripts/setup.sh)";
  auto file = ElfFile::Open(kLibutils);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto m = resolve_symbol(*file, "android::Looper::pollInner(int)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto sites = virtual_calls(*file, *m);
  ASSERT_TRUE(sites.ok()) << sites.status().message();
  ASSERT_EQ(sites->size(), 2u);
  for (const CallSite& s : *sites) {
    EXPECT_EQ(s.slot, 0x10) << s.text;
    EXPECT_EQ(s.length, 3u) << s.text;  // ff 50 10
    EXPECT_EQ(s.text, "call qword ptr [rax + 0x10]");
    uint8_t bytes[3] = {};
    ASSERT_TRUE(file->read_bytes(s.vaddr, bytes, 3).ok());
    EXPECT_EQ(bytes[0], 0xff);
    EXPECT_EQ(bytes[1], 0x50);
    EXPECT_EQ(bytes[2], 0x10);
  }
  EXPECT_LT((*sites)[0].vaddr, (*sites)[1].vaddr);
  // handleMessage(const Message&): `mov %r12,%rsi`; handleEvent(int fd,
  // ...): `mov %r12d,%esi`.
  EXPECT_EQ((*sites)[0].arg1_bits, 64);
  EXPECT_EQ((*sites)[1].arg1_bits, 32);
}

std::vector<CallSite> decode(std::vector<uint8_t> code) {
  return virtual_calls(code.data(), code.size(), 0x1000);
}

// mov (%rdi),%rax; mov %r12,%rsi; call *0x10(%rax)
TEST(CallSites, AVtableLoadFromThisIsAVirtualCall) {
  auto s = decode({0x48, 0x8b, 0x07, 0x4c, 0x89, 0xe6, 0xff, 0x50, 0x10});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].vaddr, 0x1006u);
  EXPECT_EQ(s[0].length, 3u);
  EXPECT_EQ(s[0].slot, 0x10);
  EXPECT_EQ(s[0].arg1_bits, 64);
}

// mov (%rbx),%rax; mov %rbx,%rdi; call *0x18(%rax): this copied to %rdi.
TEST(CallSites, ThisCopiedIntoRdiStillCounts) {
  auto s = decode({0x48, 0x8b, 0x03, 0x48, 0x89, 0xdf, 0xff, 0x50, 0x18});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].slot, 0x18);
}

// What is refused: a function pointer in a struct (mov 0x8(%rdi),%rax;
// call *%rax and call *0x10(%rbx) with %rbx from elsewhere), a vtable
// load whose object is not what %rdi holds at the call, a clobbered
// register, and a call through %rip.
TEST(CallSites, OtherIndirectCallsAreNotVirtualCalls) {
  // mov 0x8(%rdi),%rax; call *%rax
  EXPECT_TRUE(decode({0x48, 0x8b, 0x47, 0x08, 0xff, 0xd0}).empty());
  // mov 0x8(%rdi),%rax; call *0x10(%rax): loaded from +8, not the vtable
  EXPECT_TRUE(decode({0x48, 0x8b, 0x47, 0x08, 0xff, 0x50, 0x10}).empty());
  // mov (%rbx),%rax; call *0x10(%rax): %rdi is not the object
  EXPECT_TRUE(decode({0x48, 0x8b, 0x03, 0xff, 0x50, 0x10}).empty());
  // mov (%rdi),%rax; mov %rsi,%rdi; call *0x10(%rax): %rdi replaced
  EXPECT_TRUE(
      decode({0x48, 0x8b, 0x07, 0x48, 0x89, 0xf7, 0xff, 0x50, 0x10}).empty());
  // mov (%rdi),%rax; mov %rsi,%rax; call *0x10(%rax): %rax replaced
  EXPECT_TRUE(
      decode({0x48, 0x8b, 0x07, 0x48, 0x89, 0xf0, 0xff, 0x50, 0x10}).empty());
  // call *0x10(%rip)
  EXPECT_TRUE(decode({0xff, 0x15, 0x10, 0x00, 0x00, 0x00}).empty());
  // Nothing decodable.
  EXPECT_TRUE(decode({}).empty());
}

// pollInner's one call to epoll_wait (`call epoll_wait@plt`, objdump -d):
// found through the PLT stub's GOT slot and its JUMP_SLOT relocation;
// its other imports (systemTime, pthread_mutex_lock, ...) are not it, and
// a function it never calls is an empty answer.
TEST(CallSites, AospPollInnerCallsEpollWaitOnceThroughThePlt) {
  if (access(kLibutils, R_OK) != 0)
    GTEST_SKIP() << kLibutils << " missing (scripts/setup.sh)";
  auto file = ElfFile::Open(kLibutils);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto m = resolve_symbol(*file, "android::Looper::pollInner(int)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto sites = calls_to(*file, *m, "epoll_wait");
  ASSERT_TRUE(sites.ok()) << sites.status().message();
  ASSERT_EQ(sites->size(), 1u);
  const CallSite& s = (*sites)[0];
  EXPECT_EQ(s.length, 5u);  // e8 rel32
  uint8_t op = 0;
  ASSERT_TRUE(file->read_bytes(s.vaddr, &op, 1).ok());
  EXPECT_EQ(op, 0xe8);
  EXPECT_GT(s.vaddr, m->vaddr);
  EXPECT_LT(s.vaddr, m->vaddr + m->size);
  auto reads = calls_to(*file, *m, "read");
  ASSERT_TRUE(reads.ok());
  EXPECT_EQ(reads->size(), 2u);  // objdump -d: two `call read@plt`
  auto none = calls_to(*file, *m, "epoll_ctl");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// call rel32 and call *%rax: only the first is a direct call, its target
// the address after it plus the displacement.
TEST(CallSites, DirectCallsAndTheirTargets) {
  std::vector<uint8_t> code = {0xe8, 0x10, 0x00, 0x00, 0x00, 0xff, 0xd0};
  auto s = direct_calls(code.data(), code.size(), 0x1000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].vaddr, 0x1000u);
  EXPECT_EQ(s[0].length, 5u);
  EXPECT_EQ(s[0].target, 0x1015u);
}

}  // namespace
}  // namespace looptrace::elf
