// Which frames of a user stack are trusted, and how --call-graph auto
// merges the frame-pointer and CFI stacks of one sample.
#include "unwind/stack_trust.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace looptrace {
namespace {

// Executable: [0x1000, 0x2000) (a file's text), [0x5000, 0x6000) ([vdso]).
const char* kMaps =
    "00001000-00002000 r-xp 00001000 08:01 42 /usr/bin/app\n"
    "00002000-00003000 r--p 00002000 08:01 42 /usr/bin/app\n"
    "00003000-00004000 rw-p 00000000 00:00 0 [heap]\n"
    "00005000-00006000 r-xp 00000000 00:00 0 [vdso]\n"
    "7ffd0000-7ffe0000 rw-p 00000000 00:00 0 [stack]\n";

TEST(ExecRanges, OnlyExecutableMappingsContainFrames) {
  ExecRanges exec{std::string(kMaps)};
  EXPECT_TRUE(exec.contains(0x1000));
  EXPECT_TRUE(exec.contains(0x1fff));
  EXPECT_FALSE(exec.contains(0x2000));  // read-only data
  EXPECT_FALSE(exec.contains(0x3500));  // heap
  EXPECT_TRUE(exec.contains(0x5010));
  EXPECT_FALSE(exec.contains(0x0));
  EXPECT_FALSE(exec.contains(0x20));
  EXPECT_FALSE(exec.contains(0x7372615000367465ull));
  EXPECT_FALSE(exec.contains(0x7ffd1000));
  // Unreadable maps: nothing to judge by.
  EXPECT_TRUE(ExecRanges().contains(0x20));
  // Garbage text: no mapping.
  EXPECT_FALSE(ExecRanges(std::string("zz-\n1-0 r-xp\n-\n")).contains(0));
}

TEST(ExecRanges, TheFirstUntrustedFrameEndsTheStack) {
  ExecRanges exec{std::string(kMaps)};
  // writev+0x10 <- 0x0 <- 0x20 <- 0x7372615000367465, as fp gave it.
  std::vector<uint64_t> f = {0x1010, 0x0, 0x20, 0x7372615000367465ull};
  EXPECT_TRUE(cut_untrusted(exec, &f));
  EXPECT_EQ(f, std::vector<uint64_t>{0x1010});
  // __poll+0x10 <- [heap]: cut, and so is a frame after it that looks fine.
  f = {0x1010, 0x3500, 0x1020};
  EXPECT_TRUE(cut_untrusted(exec, &f));
  EXPECT_EQ(f, std::vector<uint64_t>{0x1010});
  f = {0x1010, 0x5020, 0x1020};
  EXPECT_FALSE(cut_untrusted(exec, &f));
  EXPECT_EQ(f.size(), 3u);
}

UnwindResult cfi(std::vector<uint64_t> frames, bool truncated) {
  UnwindResult r;
  r.frames = std::move(frames);
  r.truncated = truncated;
  return r;
}

TEST(MergeStacks, AWholeCfiStackIsTheStack) {
  ExecRanges exec{std::string(kMaps)};
  // Frame pointers lost the caller of a function without them.
  MergedStack m =
      merge_stacks({0x1010, 0x1030, 0x3000}, false,
                   cfi({0x1010, 0x1020, 0x1030, 0x1040}, false), exec);
  EXPECT_EQ(m.frames, (std::vector<uint64_t>{0x1010, 0x1020, 0x1030, 0x1040}));
  EXPECT_FALSE(m.truncated);
  EXPECT_TRUE(m.dwarf);
}

TEST(MergeStacks, CfiThatRanOffTheCopyContinuesByFramePointers) {
  ExecRanges exec{std::string(kMaps)};
  // The CFI stopped at 0x1030 (end of the copy); the frame pointers have
  // it at index 1 and go on to 0x1050, 0x1060.
  MergedStack m = merge_stacks({0x1010, 0x1030, 0x1050, 0x1060}, false,
                               cfi({0x1010, 0x1020, 0x1030}, true), exec);
  EXPECT_EQ(m.frames,
            (std::vector<uint64_t>{0x1010, 0x1020, 0x1030, 0x1050, 0x1060}));
  EXPECT_FALSE(m.truncated);
  EXPECT_TRUE(m.dwarf);
  // Recursion repeats an address: the deepest match at or above the CFI's
  // depth keeps every frame.
  m = merge_stacks({0x1010, 0x1030, 0x1030, 0x1030, 0x1060}, false,
                   cfi({0x1010, 0x1030, 0x1030}, true), exec);
  EXPECT_EQ(m.frames,
            (std::vector<uint64_t>{0x1010, 0x1030, 0x1030, 0x1030, 0x1060}));
  // Frame pointers that went wrong after the match: cut there, truncated.
  m = merge_stacks({0x1010, 0x1030, 0x1050, 0x3500, 0x1060}, false,
                   cfi({0x1010, 0x1020, 0x1030}, true), exec);
  EXPECT_EQ(m.frames, (std::vector<uint64_t>{0x1010, 0x1020, 0x1030, 0x1050}));
  EXPECT_TRUE(m.truncated);
  // A full frame-pointer buffer is no thread start either.
  m = merge_stacks({0x1010, 0x1030, 0x1050}, true, cfi({0x1010, 0x1030}, true),
                   exec);
  EXPECT_TRUE(m.truncated);
}

TEST(MergeStacks, NoCommonFrameKeepsTheLongerStackTruncatedIfUnsure) {
  ExecRanges exec{std::string(kMaps)};
  // The walks disagree: the CFI's stack, marked cut.
  MergedStack m = merge_stacks({0x1010, 0x1070}, false,
                               cfi({0x1010, 0x1020, 0x1030}, true), exec);
  EXPECT_EQ(m.frames, (std::vector<uint64_t>{0x1010, 0x1020, 0x1030}));
  EXPECT_TRUE(m.truncated);
  // No copy could be unwound: the frame pointers, if trusted.
  m = merge_stacks({0x1010, 0x1070, 0x1080}, false, cfi({}, true), exec);
  EXPECT_EQ(m.frames, (std::vector<uint64_t>{0x1010, 0x1070, 0x1080}));
  EXPECT_FALSE(m.truncated);
  EXPECT_FALSE(m.dwarf);
  // Garbage frame pointers never win by length.
  m = merge_stacks({0x1010, 0x0, 0x20, 0x7372615000367465ull}, false,
                   cfi({0x1010, 0x1020}, true), exec);
  EXPECT_EQ(m.frames, (std::vector<uint64_t>{0x1010, 0x1020}));
  EXPECT_TRUE(m.truncated);
  // A CFI stack through a garbage frame (libdw's rbp fallback) is cut.
  m = merge_stacks({0x1010}, false,
                   cfi({0x1010, 0x1020, 0x3500, 0x1040}, false), exec);
  EXPECT_EQ(m.frames, (std::vector<uint64_t>{0x1010, 0x1020}));
  EXPECT_TRUE(m.truncated);
}

}  // namespace
}  // namespace looptrace
