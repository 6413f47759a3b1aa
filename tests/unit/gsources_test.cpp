// GLib sources of a program's own kinds, found in a process's memory
// (proc/gsources.h), on this process: GSource-shaped structs in its heap,
// GSourceFuncs-shaped tables in its read-only data.
#include "proc/gsources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace looptrace::proc {
namespace {

extern "C" int lt_test_custom_dispatch(void*, void*, void*) { return 1; }
extern "C" int lt_test_known_dispatch(void*, void*, void*) { return 1; }
extern "C" int lt_test_other_dispatch(void*, void*, void*) { return 1; }
extern "C" int lt_test_freed_dispatch(void*, void*, void*) { return 1; }

using Fn = int (*)(void*, void*, void*);
// { prepare, check, dispatch, finalize }, as const data in the binary.
const Fn kKnownFuncs[4] = {nullptr, nullptr, lt_test_known_dispatch, nullptr};
const Fn kCustomFuncs[4] = {nullptr, nullptr, lt_test_custom_dispatch, nullptr};
// Custom tables that would be found but for their sources' context or
// reference count.
const Fn kOtherFuncs[4] = {nullptr, nullptr, lt_test_other_dispatch, nullptr};
const Fn kFreedFuncs[4] = {nullptr, nullptr, lt_test_freed_dispatch, nullptr};
// A table whose dispatch is not code: not a source's.
const uint64_t kNotFuncs[4] = {0, 0, 0x1234, 0};

// The public head of a GSource.
struct Source {
  void* callback_data;
  void* callback_funcs;
  const void* source_funcs;
  uint32_t ref_count;
  uint32_t pad;
  void* context;
  uint64_t rest[7];
};

TEST(GSources, ACustomKindOfAKnownSourcesContextIsFound) {
  int context = 0, other_context = 0;  // stand-ins: only their addresses count
  auto sources = std::make_unique<Source[]>(5);
  // The custom source lies before the known one: its table waits in the
  // one pass until the known source names its context.
  sources[0] = {nullptr, nullptr, kCustomFuncs, 2, 0, &context, {}};
  sources[1] = {nullptr, nullptr, kKnownFuncs, 1, 0, &context, {}};
  sources[2] = {nullptr, nullptr, kNotFuncs, 1, 0, &context, {}};
  // Another context's, never reached from a known source: not found.
  sources[3] = {nullptr, nullptr, kOtherFuncs, 1, 0, &other_context, {}};
  // Freed (no references): not a source.
  sources[4] = {nullptr, nullptr, kFreedFuncs, 0, 0, &context, {}};
  const uint32_t pid = static_cast<uint32_t>(getpid());
  auto all = read_maps(pid);
  ASSERT_TRUE(all.ok()) << all.status().message();
  // The files, and of the anonymous memory the sources' mapping only:
  // under AddressSanitizer the rest is terabytes of shadow, scanned first.
  std::vector<MapEntry> kept;
  for (const MapEntry& m : *all)
    if (m.is_file() || m.contains(reinterpret_cast<uint64_t>(sources.get())))
      kept.push_back(m);
  const std::vector<MapEntry>* maps = &kept;
  auto got = scan_custom_gsources(pid, *maps,
                                  {reinterpret_cast<uint64_t>(kKnownFuncs)});
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 1u);
  const CustomGSource& c = (*got)[0];
  EXPECT_EQ(c.funcs, reinterpret_cast<uint64_t>(kCustomFuncs));
  EXPECT_EQ(c.dispatch, reinterpret_cast<uint64_t>(&lt_test_custom_dispatch));
  // Where a uprobe goes: this binary, at the function's file offset.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(c.path, std::string(exe, static_cast<size_t>(n)));
  const MapEntry* m = nullptr;
  for (const MapEntry& e : *maps)
    if (e.contains(c.dispatch)) m = &e;
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(c.file_offset, c.dispatch - m->start + m->pgoff);
}

TEST(GSources, NoGLibIsAnError) {
  auto got = find_custom_gsources(static_cast<uint32_t>(getpid()));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("does not map libglib-2.0.so"),
            std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace looptrace::proc
