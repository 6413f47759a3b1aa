// The /proc/PID/maps parser on recorded fixtures, and the /proc helpers on
// this test process.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "elf/resolve.h"
#include "proc/maps.h"
#include "proc/process.h"

namespace looptrace::proc {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(LT_TEST_DATA_DIR) + "/maps/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

std::vector<MapEntry> parse_fixture(const std::string& name) {
  Result<std::vector<MapEntry>> maps = parse_maps(fixture(name));
  EXPECT_TRUE(maps.ok()) << name << ": " << maps.status().message();
  return maps.ok() ? *maps : std::vector<MapEntry>{};
}

const MapEntry* find_path(const std::vector<MapEntry>& maps,
                          const std::string& path) {
  for (const MapEntry& e : maps)
    if (e.path == path) return &e;
  return nullptr;
}

TEST(ProcMapsTest, PieProgram) {
  std::vector<MapEntry> maps = parse_fixture("pie_program.maps");
  ASSERT_EQ(maps.size(), 40u);

  const MapEntry& first = maps[0];
  EXPECT_EQ(first.start, 0x563958c17000u);
  EXPECT_EQ(first.end, 0x563958c18000u);
  EXPECT_EQ(first.pgoff, 0u);
  EXPECT_EQ(first.perms, "r--p");
  EXPECT_EQ(first.dev, "fe:00");
  EXPECT_EQ(first.inode, 5309501u);
  EXPECT_EQ(first.path, "/usr/local/bin/elf_target_pie");
  EXPECT_FALSE(first.executable());
  EXPECT_TRUE(first.is_file());
  EXPECT_FALSE(first.deleted);

  const MapEntry& text = maps[1];
  EXPECT_TRUE(text.executable());
  EXPECT_EQ(text.pgoff, 0x1000u);
  EXPECT_TRUE(text.contains(0x563958c18000));
  EXPECT_FALSE(text.contains(0x563958c19000));

  // The kernel ends anonymous lines with a space after the inode.
  const MapEntry& anon = maps[11];
  EXPECT_EQ(anon.start, 0x7fce04bf3000u);
  EXPECT_EQ(anon.path, "");
  EXPECT_EQ(anon.inode, 0u);
  EXPECT_FALSE(anon.is_file());

  const MapEntry* vdso = find_path(maps, "[vdso]");
  ASSERT_NE(vdso, nullptr);
  EXPECT_TRUE(vdso->executable());
  EXPECT_FALSE(vdso->is_file());
  EXPECT_NE(find_path(maps, "[heap]"), nullptr);
  EXPECT_NE(find_path(maps, "[stack]"), nullptr);

  const MapEntry& vsyscall = maps.back();
  EXPECT_EQ(vsyscall.path, "[vsyscall]");
  EXPECT_EQ(vsyscall.start, 0xffffffffff600000u);
  EXPECT_EQ(vsyscall.perms, "--xp");
}

TEST(ProcMapsTest, Python3WithGlib) {
  std::vector<MapEntry> maps = parse_fixture("python3_glib.maps");
  ASSERT_FALSE(maps.empty());
  EXPECT_EQ(maps[0].start, 0x400000u);  // non-PIE interpreter
  EXPECT_EQ(maps[0].path, "/usr/bin/python3.11");

  const MapEntry* glib = find_mapped_file(maps, "libglib-2.0.so");
  ASSERT_NE(glib, nullptr);
  EXPECT_EQ(glib->path, "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0.7400.6");
  EXPECT_EQ(find_mapped_file(maps, "libglib-2.0.so.0.7400.6"), glib);
  ASSERT_NE(find_mapped_file(maps, "libglib-2.0"), nullptr);

  const MapEntry* py = find_mapped_file(maps, "python3");
  ASSERT_NE(py, nullptr);
  EXPECT_EQ(py->path, "/usr/bin/python3.11");
  const MapEntry* libc =
      find_mapped_file(maps, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_NE(libc, nullptr);
  EXPECT_EQ(libc->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

  // "libglib" must not match libpcre2 or libgobject by accident; "lib"
  // alone is not a prefix match (needs "." or "-" after it).
  EXPECT_EQ(find_mapped_file(maps, "libgobject-2.0.so"), nullptr);
  EXPECT_EQ(find_mapped_file(maps, "lib"), nullptr);
  EXPECT_EQ(find_mapped_file(maps, ""), nullptr);
}

TEST(ProcMapsTest, PathWithSpaces) {
  std::vector<MapEntry> maps = parse_fixture("path_with_spaces.maps");
  ASSERT_FALSE(maps.empty());
  EXPECT_EQ(maps[0].path, "/tmp/My App (x86)/elf target");
  EXPECT_EQ(maps[0].inode, 10953187u);
  EXPECT_FALSE(maps[0].deleted);
  ASSERT_NE(find_mapped_file(maps, "elf target"), nullptr);
}

TEST(ProcMapsTest, DeletedFiles) {
  std::vector<MapEntry> maps = parse_fixture("deleted.maps");
  ASSERT_FALSE(maps.empty());
  EXPECT_EQ(maps[1].path, "/tmp/elf_target_old");
  EXPECT_TRUE(maps[1].deleted);
  EXPECT_TRUE(maps[1].executable());

  const MapEntry* jit = find_path(maps, "/memfd:jit-cache");
  ASSERT_NE(jit, nullptr);
  EXPECT_TRUE(jit->deleted);
  EXPECT_EQ(jit->perms, "r-xs");
  EXPECT_EQ(jit->dev, "00:01");
  EXPECT_FALSE(find_path(maps, "/usr/lib/x86_64-linux-gnu/libc.so.6")->deleted);
}

TEST(ProcMapsTest, MalformedLineIsNamed) {
  Result<std::vector<MapEntry>> maps = parse_maps(fixture("malformed.maps"));
  ASSERT_FALSE(maps.ok());
  EXPECT_TRUE(maps.status().message().starts_with(
      "line 3: malformed maps entry '006d2000-00945000"))
      << maps.status().message();
}

TEST(ProcMapsTest, EdgeCases) {
  Result<std::vector<MapEntry>> maps = parse_maps("");
  ASSERT_TRUE(maps.ok());
  EXPECT_TRUE(maps->empty());

  // No final newline, CRLF, blank lines.
  maps = parse_maps(
      "\n00400000-00401000 r-xp 00000000 08:01 42 /bin/x\r\n\n"
      "00401000-00402000 rw-p 00001000 08:01 42 /bin/x");
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  ASSERT_EQ(maps->size(), 2u);
  EXPECT_EQ((*maps)[0].path, "/bin/x");
  EXPECT_EQ((*maps)[1].pgoff, 0x1000u);

  for (const char* bad : {
           "zz-10 r-xp 00000000 08:01 42 /x",       // bad hex
           "00400000 r-xp 00000000 08:01 42 /x",    // no range dash
           "2000-1000 r-xp 00000000 08:01 42 /x",   // end before start
           "1000-2000 rwxq 00000000 08:01 42 /x",   // bad perms
           "1000-2000 r-xp 00000000 0801 42 /x",    // bad dev
           "1000-2000 r-xp 00000000 08:01 4x2 /x",  // bad inode
           "1000-2000 r-xp",                        // truncated
       }) {
    maps = parse_maps(bad);
    ASSERT_FALSE(maps.ok()) << bad;
    EXPECT_TRUE(maps.status().message().starts_with("line 1: ")) << bad;
  }
}

void marker_function() {}

TEST(ProcTest, ReadOwnMaps) {
  Result<std::vector<MapEntry>> maps = read_maps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  auto addr = reinterpret_cast<uint64_t>(&marker_function);
  bool found = false;
  for (const MapEntry& e : *maps) {
    if (!e.contains(addr)) continue;
    found = true;
    EXPECT_TRUE(e.executable());
    EXPECT_EQ(std::filesystem::path(e.path).filename(), "looptrace_unit_tests");
  }
  EXPECT_TRUE(found);
}

TEST(ProcTest, Processes) {
  EXPECT_TRUE(pid_exists(getpid()));
  EXPECT_TRUE(pid_exists(1));
  EXPECT_FALSE(pid_exists(0));
  EXPECT_FALSE(pid_exists(0x7fffffff));
  EXPECT_FALSE(pid_exists(0xffffffff));

  Result<std::string> exe = exe_path(getpid());
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_EQ(std::filesystem::path(*exe).filename(), "looptrace_unit_tests");
  EXPECT_FALSE(exe_path(0x7fffffff).ok());

  // comm is truncated to 15 characters.
  std::string name = comm(getpid(), 0);
  EXPECT_FALSE(name.empty());
  EXPECT_TRUE(std::string("looptrace_unit_tests").starts_with(name)) << name;
  EXPECT_EQ(comm(getpid(), static_cast<uint32_t>(syscall(SYS_gettid))), name);
  EXPECT_EQ(comm(0x7fffffff, 0x7fffffff), "");
}

TEST(ProcTest, MissingProcess) {
  Result<std::vector<MapEntry>> maps = read_maps(0x7fffffff);
  ASSERT_FALSE(maps.ok());
  EXPECT_EQ(maps.status().message(),
            "open /proc/2147483647/maps: No such file or directory");
}

TEST(ProcTest, FindMappedLibrary) {
  Result<std::string> libc = find_mapped_library(getpid(), "libc.so.6");
  ASSERT_TRUE(libc.ok()) << libc.status().message();
  EXPECT_EQ(std::filesystem::path(*libc).filename(), "libc.so.6");

  // libstdc++.so.6.0.30 by its unversioned name.
  Result<std::string> cxx = find_mapped_library(getpid(), "libstdc++.so");
  ASSERT_TRUE(cxx.ok()) << cxx.status().message();
  EXPECT_TRUE(std::filesystem::path(*cxx).filename().string().starts_with(
      "libstdc++.so."));

  // The ld.so cache may spell the path differently (/lib vs /usr/lib); the
  // same file is still found.
  Result<std::string> cached = elf::find_library("libc.so.6");
  ASSERT_TRUE(cached.ok());
  Result<std::string> same = find_mapped_library(getpid(), *cached);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(*same, *libc);

  Result<std::string> none = find_mapped_library(getpid(), "libnotmapped.so");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "binary 'libnotmapped.so' is not mapped by pid " +
                std::to_string(getpid()));
  EXPECT_EQ(none.status().kind(), ErrorKind::kUsage);
}

}  // namespace
}  // namespace looptrace::proc
