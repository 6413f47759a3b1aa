// perf maps (/tmp/perf-PID.map): the parser on text fixtures, the lookup
// with overlapping ranges, and ProcSymbolizer reading a map for a pid that
// does not exist (mappings given with add_mappings, the map's directory
// overridden).
#include "symbolize/perf_map.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/text.h"
#include "proc/maps.h"
#include "symbolize/proc_symbolizer.h"

namespace looptrace {
namespace {

TEST(PerfMapParse, LinesAsNodeWritesThem) {
  PerfMapParse p = parse_perf_map(
      "3c2a8e0c0e0 4a JS:~onTimer /tmp/x.js:3:17\n"
      "7f00aa000000 1f0 Builtin:ArgumentsAdaptorTrampoline\n"
      "0x1000 0x10 LazyCompile:*busy file:///a b.js:1:1\n"
      "ABCDEF 8 upper case hex\r\n"
      "\n"
      "   \n");
  EXPECT_EQ(p.malformed, 0u);
  EXPECT_EQ(p.dropped, 0u);
  ASSERT_EQ(p.entries.size(), 4u);
  EXPECT_EQ(p.entries[0].start, 0x3c2a8e0c0e0u);
  EXPECT_EQ(p.entries[0].size, 0x4au);
  EXPECT_EQ(p.entries[0].name, "JS:~onTimer /tmp/x.js:3:17");
  EXPECT_EQ(p.entries[1].name, "Builtin:ArgumentsAdaptorTrampoline");
  EXPECT_EQ(p.entries[2].start, 0x1000u);
  EXPECT_EQ(p.entries[2].name, "LazyCompile:*busy file:///a b.js:1:1");
  EXPECT_EQ(p.entries[3].start, 0xabcdefu);
  EXPECT_EQ(p.entries[3].name, "upper case hex");  // no '\r'
}

TEST(PerfMapParse, MalformedLinesAreSkippedAndCounted) {
  PerfMapParse p = parse_perf_map(
      "1000 10 good\n"
      "1000\n"                       // no size
      "1000 10\n"                    // no name
      "1000 10    \n"                // a blank name
      "xyz 10 name\n"                // not hex
      "1000 0 empty\n"               // size 0 covers nothing
      "10000000000000000 1 big\n"    // 17 digits
      "ffffffffffffffff 2 wraps\n"   // start + size past 2^64
      "1000g 10 junk after start\n"  // no space after START
      "\x01\x02\xff garbage\n"
      "2000 20 last good, no newline");
  EXPECT_EQ(p.malformed, 9u);
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].name, "good");
  EXPECT_EQ(p.entries[1].start, 0x2000u);
  EXPECT_EQ(p.entries[1].name, "last good, no newline");
}

TEST(PerfMapParse, EntriesPastTheCapAreDroppedAndCounted) {
  PerfMapParse p = parse_perf_map("1 1 a\n2 1 b\nbad\n3 1 c\n4 1 d\n", 2);
  EXPECT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.dropped, 2u);
  EXPECT_EQ(p.malformed, 1u);
}

// The map is the traced process's to write: a name of 10 KB is kept to
// kMaxPerfMapName bytes and says it was cut.
TEST(PerfMapParse, LongNamesAreCutMarkedAndCounted) {
  const std::string longname = "JS:~" + std::string(10'000, 'n');
  PerfMapParse p = parse_perf_map("1 1 " + longname + "\n2 1 short\n");
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.cut, 1u);
  EXPECT_EQ(p.entries[0].name.size(), kMaxPerfMapName);
  EXPECT_EQ(p.entries[0].name,
            longname.substr(0, kMaxPerfMapName - kCutMark.size()) +
                std::string(kCutMark));
  EXPECT_EQ(p.entries[1].name, "short");
}

// Bounded by bytes, not only by entries: 50 000 names of 10 KB took the
// tracer to 524 MB.
TEST(PerfMapParse, EntriesPastTheByteCapAreDroppedAndCounted) {
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += fmt::format("{:x} 1 {}\n", i + 1, std::string(10'000, 'x'));
  const size_t each = kMaxPerfMapName + kPerfMapEntryCost;
  PerfMapParse p = parse_perf_map(text, kMaxPerfMapEntries, 10 * each + 1);
  EXPECT_EQ(p.entries.size(), 10u);
  EXPECT_EQ(p.dropped, 90u);
  EXPECT_EQ(p.cut, 10u);
  PerfMap map;
  for (PerfMapEntry& e : p.entries) map.add(std::move(e));
  EXPECT_EQ(map.bytes(), 10 * each);
}

TEST(PerfMapLookup, LaterEntriesWinWhereRangesOverlap) {
  PerfMap map;
  map.add({0x1000, 0x100, "old"});      // [1000, 1100)
  map.add({0x1040, 0x40, "middle"});    // [1040, 1080): splits old
  map.add({0x10f0, 0x20, "over end"});  // [10f0, 1110): cuts old's tail
  map.add({0x2000, 0x10, "far"});
  EXPECT_EQ(map.find(0xfff).name, "");
  EXPECT_EQ(map.find(0x1000).name, "old");
  EXPECT_EQ(map.find(0x1000).start, 0x1000u);
  EXPECT_EQ(map.find(0x103f).name, "old");
  EXPECT_EQ(map.find(0x1040).name, "middle");
  EXPECT_EQ(map.find(0x1040).start, 0x1040u);
  EXPECT_EQ(map.find(0x107f).name, "middle");
  EXPECT_EQ(map.find(0x1080).name, "old");
  EXPECT_EQ(map.find(0x1080).start, 0x1000u);  // the entry's own start
  EXPECT_EQ(map.find(0x10ef).name, "old");
  EXPECT_EQ(map.find(0x10f0).name, "over end");
  EXPECT_EQ(map.find(0x110f).name, "over end");
  EXPECT_EQ(map.find(0x1110).name, "");
  EXPECT_EQ(map.find(0x2005).name, "far");

  // Code freed and replaced: one entry over several.
  map.add({0x0, 0x3000, "all"});
  EXPECT_EQ(map.find(0x1040).name, "all");
  EXPECT_EQ(map.find(0x2005).name, "all");
  EXPECT_EQ(map.pieces(), 1u);
  // The same range written again (a JIT that re-registers code).
  map.add({0x0, 0x3000, "again"});
  EXPECT_EQ(map.find(0x0).name, "again");
  EXPECT_EQ(map.find(0x2fff).name, "again");
  EXPECT_EQ(map.pieces(), 1u);
}

// A pid no process can have (above pid_max's ceiling of 2^22).
constexpr uint32_t kFakePid = (1u << 22) + 4242;

class PerfMapSymbolizeTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lt-perfmap-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/perf-" + std::to_string(kFakePid) + ".map";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void append(const std::string& text) {
    std::ofstream(path_, std::ios::app) << text;
  }
  ProcSymbolizer make() {
    ProcSymbolizerOptions opts;
    opts.perf_map_dir = dir_;
    opts.perf_map_recheck_ns = 0;
    return ProcSymbolizer(opts);
  }
  static std::vector<MapEntry> maps() {
    MapEntry anon;
    anon.start = 0x3c2a8e00000;
    anon.end = 0x3c2a8f00000;
    anon.perms = "rwxp";
    MapEntry lib;  // a file that cannot be opened: no ELF symbols
    lib.start = 0x7f0000000000;
    lib.end = 0x7f0000100000;
    lib.perms = "r-xp";
    lib.path = "/nonexistent/libjit.so";
    lib.inode = 1;
    return {anon, lib};
  }

  std::string dir_, path_;
};

TEST_F(PerfMapSymbolizeTest, AnonymousCodeIsNamedByTheMap) {
  append("3c2a8e0c0e0 4a JS:~onTimer /tmp/x.js:3:17\n");
  append("this line is garbage\n");
  append("7f0000001000 100 stub in a file without symbols\n");
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());

  Frame f = sym.symbolize(kFakePid, 0x3c2a8e0c0e0 + 0x10);
  EXPECT_EQ(f.function, "JS:~onTimer /tmp/x.js:3:17");
  EXPECT_EQ(f.offset, 0x10u);
  EXPECT_EQ(f.module, "[anon]");
  EXPECT_EQ(f.to_string(), "JS:~onTimer /tmp/x.js:3:17+0x10");

  Frame stub = sym.symbolize(kFakePid, 0x7f0000001080);
  EXPECT_EQ(stub.function, "stub in a file without symbols");
  EXPECT_EQ(stub.module, "/nonexistent/libjit.so");

  Frame miss = sym.symbolize(kFakePid, 0x3c2a8e0c0e0 + 0x4a);
  EXPECT_FALSE(miss.known());
  EXPECT_EQ(miss.module, "[anon]");
}

TEST_F(PerfMapSymbolizeTest, TheMapIsReadAgainWhenItGrows) {
  append("3c2a8e0c0e0 4a JS:~first /tmp/x.js:1:1\n");
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).function,
            "JS:~first /tmp/x.js:1:1");
  const uint64_t later = 0x3c2a8e0d000;
  EXPECT_FALSE(sym.symbolize(kFakePid, later).known());

  // The JIT compiles more, and reuses the first function's memory.
  append("3c2a8e0d000 20 JS:*later /tmp/x.js:9:1\n");
  append("3c2a8e0c0c0 100 JS:*reused /tmp/x.js:5:1\n");
  EXPECT_EQ(sym.symbolize(kFakePid, later + 4).function,
            "JS:*later /tmp/x.js:9:1");
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).function,
            "JS:*reused /tmp/x.js:5:1");
}

TEST_F(PerfMapSymbolizeTest, AHalfWrittenLastLineIsReadOnceComplete) {
  append("3c2a8e0c0e0 4a JS:~a\n3c2a8e0d000 20 JS:~trunc");
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0d000).function, "JS:~trunc");
  append("ated /tmp/y.js:2:2\n");
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0d001).function,
            "JS:~truncated /tmp/y.js:2:2");
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).function, "JS:~a");
}

TEST_F(PerfMapSymbolizeTest, AMapWrittenAfreshIsReadFromTheStart) {
  append("3c2a8e0c0e0 4a JS:~before a restart of the JIT /x.js:1:1\n");
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).function,
            "JS:~before a restart of the JIT /x.js:1:1");
  // Shorter than before: not an append.
  std::ofstream(path_, std::ios::trunc) << "3c2a8e0d000 20 JS:~after\n";
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0d000).function, "JS:~after");
  EXPECT_FALSE(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).known());
}

TEST_F(PerfMapSymbolizeTest, ALargeMapIsReadWhole) {
  // About 6 MB: more than one read, with lines across the reads' ends.
  std::string text;
  const uint64_t base = 0x3c2a8e00000;
  constexpr int kLines = 100'000;
  for (int i = 0; i < kLines; i++)
    text += fmt::format("{:x} 10 JS:~function_number_{:06} /srv/app.js:{}:1\n",
                        base + 16 * static_cast<uint64_t>(i), i, i);
  ASSERT_GT(text.size(), 5u << 20);
  append(text);
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  for (int i : {0, 1, 4242, 70000, kLines - 1}) {
    Frame f = sym.symbolize(kFakePid, base + 16 * static_cast<uint64_t>(i) + 3);
    EXPECT_EQ(f.function,
              fmt::format("JS:~function_number_{:06} /srv/app.js:{}:1", i, i));
    EXPECT_EQ(f.offset, 3u);
  }
}

TEST_F(PerfMapSymbolizeTest, HugeNamesAreCutAndEscapedWhereShown) {
  // 2 000 names of 10 KB (20 MB), one with terminal escapes in it.
  std::string text;
  const uint64_t base = 0x3c2a8e00000;
  for (int i = 0; i < 2000; i++)
    text += fmt::format("{:x} 10 JS:~{}{}\n", base + 16 * uint64_t(i),
                        i == 7 ? "\x1b[2J\xff" : "", std::string(10'000, 'a'));
  append(text);
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  Frame f = sym.symbolize(kFakePid, base + 16 * 1999);
  EXPECT_EQ(f.function.size(), kMaxPerfMapName);
  EXPECT_TRUE(f.function.ends_with(kCutMark)) << f.function;
  Frame evil = sym.symbolize(kFakePid, base + 16 * 7);
  EXPECT_TRUE(evil.function.starts_with("JS:~\x1b[2J\xff"));
  EXPECT_TRUE(printable(evil.function).starts_with("JS:~\\x1b[2J\\xff"));
}

TEST_F(PerfMapSymbolizeTest, ASymlinkIsNotFollowed) {
  std::string real = dir_ + "/real.map";
  std::ofstream(real) << "3c2a8e0c0e0 4a JS:~planted\n";
  ASSERT_EQ(symlink(real.c_str(), path_.c_str()), 0);
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  EXPECT_FALSE(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).known());
}

TEST_F(PerfMapSymbolizeTest, AMapOfAnotherUserIsIgnored) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  append("3c2a8e0c0e0 4a JS:~foreign\n");
  // Neither root, nor us, nor the (unknown) owner of the fake pid.
  ASSERT_EQ(chown(path_.c_str(), 12345, 12345), 0);
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  EXPECT_FALSE(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).known());

  ASSERT_EQ(chown(path_.c_str(), 0, 0), 0);
  append("\n");  // a new mtime and size: read again
  EXPECT_EQ(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).function, "JS:~foreign");
}

TEST_F(PerfMapSymbolizeTest, NoMapNoName) {
  ProcSymbolizer sym = make();
  sym.add_mappings(kFakePid, maps());
  Frame f = sym.symbolize(kFakePid, 0x3c2a8e0c0e0);
  EXPECT_FALSE(f.known());
  EXPECT_EQ(f.module, "[anon]");
  // A directory where the map should be is not read.
  ASSERT_EQ(mkdir(path_.c_str(), 0755), 0);
  EXPECT_FALSE(sym.symbolize(kFakePid, 0x3c2a8e0c0e0).known());
}

}  // namespace
}  // namespace looptrace
