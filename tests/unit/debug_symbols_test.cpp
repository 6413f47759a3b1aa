// Symbols of stripped files from where distributions put them: a separate
// debug file found by build-id or .gnu_debuglink, MiniDebugInfo
// (.gnu_debugdata), and the [vdso] of this process. The programs are built
// here with cc and binutils; the expected names and addresses come from nm
// and readelf, never from the code under test.
#include <gtest/gtest.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "elf/debug_file.h"
#include "elf/elf_file.h"
#include "elf/xz.h"
#include "proc/maps.h"
#include "stripped_program.h"
#include "symbolize/proc_symbolizer.h"

namespace looptrace {
namespace {

using test::have_tool;
using test::shell_ok;
using test::shell_output;

constexpr char kSource[] = R"(
#include <stdio.h>
#define NOINLINE __attribute__((noinline, noclone))
volatile int sink;
NOINLINE static int lt_debug_static_fn(int x) {
  for (int i = 0; i < x; i++) sink += i * x;
  return sink;
}
NOINLINE static int lt_debug_other_fn(int x) { return lt_debug_static_fn(x) + 1; }
int main(int argc, char** argv) {
  (void)argv;
  printf("%d\n", lt_debug_other_fn(argc));
  return 0;
}
)";

// A pid no process can have (above pid_max's ceiling of 2^22).
constexpr uint32_t kFakePid = (1u << 22) + 4343;
constexpr uint64_t kBase = 0x555500000000;

class DebugSymbolsTest : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"cc", "objcopy", "strip", "nm", "readelf", "xz"})
      if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
    ASSERT_NO_FATAL_FAILURE(
        p_.build("lt-debugsyms-", kSource, "lt_debug_static_fn", "bin/prog"));
    dir_ = p_.dir;
    full_ = p_.full;
    prog_ = p_.prog;
    build_id_ = p_.build_id;
    std::filesystem::create_directories(dir_ + "/root");
  }

  // prog_ as if a process mapped it whole at kBase (the mapping's inode is
  // the file's, as /proc/PID/maps would say).
  Frame symbolize(const std::string& debug_root) {
    ProcSymbolizerOptions opts;
    opts.debug_root = debug_root;
    opts.perf_map_dir = dir_ + "/no-perf-maps";
    ProcSymbolizer sym(opts);
    sym.add_mappings(kFakePid, {p_.mapping(kBase)});
    return sym.symbolize(kFakePid, kBase + p_.offset + 1);
  }

  test::StrippedProgram p_;
  std::string dir_, full_, prog_, build_id_;
};

TEST_F(DebugSymbolsTest, StrippedWithoutDebugFileHasNoName) {
  Frame f = symbolize(dir_ + "/root");
  EXPECT_FALSE(f.known());
  EXPECT_EQ(f.module, prog_);
}

TEST_F(DebugSymbolsTest, FoundByBuildId) {
  std::string link_dir = dir_ + "/root/.build-id/" + build_id_.substr(0, 2);
  std::filesystem::create_directories(link_dir);
  std::filesystem::rename(dir_ + "/prog.debug",
                          link_dir + "/" + build_id_.substr(2) + ".debug");
  Frame f = symbolize(dir_ + "/root");
  EXPECT_EQ(f.function, "lt_debug_static_fn");
  EXPECT_EQ(f.offset, 1u);
  EXPECT_EQ(f.module, prog_);
  // Another root: no name, so the name came from the debug file.
  EXPECT_FALSE(symbolize(dir_ + "/elsewhere").known());
}

TEST_F(DebugSymbolsTest, FoundByBuildIdThroughTheEnvironment) {
  std::string link_dir = dir_ + "/root/.build-id/" + build_id_.substr(0, 2);
  std::filesystem::create_directories(link_dir);
  std::filesystem::rename(dir_ + "/prog.debug",
                          link_dir + "/" + build_id_.substr(2) + ".debug");
  setenv("LOOPTRACE_DEBUG_ROOT", (dir_ + "/root").c_str(), 1);
  Frame f = symbolize("");
  unsetenv("LOOPTRACE_DEBUG_ROOT");
  EXPECT_EQ(f.function, "lt_debug_static_fn");
}

TEST_F(DebugSymbolsTest, ABuildIdPathWithAnotherBuildIsIgnored) {
  // Another program's debug file where this build-id's should be.
  std::string other = dir_ + "/other";
  ASSERT_TRUE(shell_ok("cc -g -O1 -DX=1 -o " + other + " " + dir_ + "/prog.c"));
  std::string link_dir = dir_ + "/root/.build-id/" + build_id_.substr(0, 2);
  std::filesystem::create_directories(link_dir);
  ASSERT_TRUE(shell_ok(
      "objcopy --only-keep-debug --remove-section .note.gnu.build-id " + other +
      " " + link_dir + "/" + build_id_.substr(2) + ".debug"));
  EXPECT_FALSE(symbolize(dir_ + "/root").known());
}

TEST_F(DebugSymbolsTest, FoundByDebuglinkInEachPlace) {
  ASSERT_TRUE(shell_ok("cd " + dir_ +
                       " && objcopy --add-gnu-debuglink=prog.debug " + prog_));
  std::string root = dir_ + "/root";  // no .build-id in it
  const std::vector<std::string> places = {dir_ + "/bin/prog.debug",
                                           dir_ + "/bin/.debug/prog.debug",
                                           root + dir_ + "/bin/prog.debug"};
  std::string at = dir_ + "/prog.debug";
  for (const std::string& place : places) {
    std::filesystem::create_directories(
        std::filesystem::path(place).parent_path());
    std::filesystem::rename(at, place);
    at = place;
    Frame f = symbolize(root);
    EXPECT_EQ(f.function, "lt_debug_static_fn") << place;
  }
}

TEST_F(DebugSymbolsTest, DebuglinkWithAWrongCrcIsIgnored) {
  ASSERT_TRUE(shell_ok("cd " + dir_ +
                       " && objcopy --add-gnu-debuglink=prog.debug " + prog_));
  // Another build's debug file under the name the link gives.
  ASSERT_TRUE(
      shell_ok("cc -g -O1 -DX=1 -o " + dir_ + "/other " + dir_ + "/prog.c"));
  ASSERT_TRUE(shell_ok("objcopy --only-keep-debug " + dir_ + "/other " + dir_ +
                       "/bin/prog.debug"));
  EXPECT_FALSE(symbolize(dir_ + "/root").known());
}

// gdb's recipe (gdb manual, "MiniDebugInfo"): the function symbols that
// .dynsym lacks, in an xz-compressed ELF in .gnu_debugdata.
TEST_F(DebugSymbolsTest, MiniDebugInfo) {
  std::string d = dir_ + "/";
  ASSERT_TRUE(shell_ok("nm -D " + full_ +
                       " --format=posix --defined-only | awk "
                       "'{ print $1 }' | sort > " +
                       d + "dynsyms"));
  ASSERT_TRUE(
      shell_ok("nm " + full_ +
               " --format=posix --defined-only | awk "
               "'{ if ($2 == \"T\" || $2 == \"t\" || $2 == \"D\") print $1 "
               "}' | sort > " +
               d + "funcsyms"));
  ASSERT_TRUE(shell_ok("comm -13 " + d + "dynsyms " + d + "funcsyms > " + d +
                       "keep_symbols"));
  ASSERT_TRUE(
      shell_ok("objcopy -S --remove-section .gdb_index --remove-section "
               ".comment --keep-symbols=" +
               d + "keep_symbols " + d + "prog.debug " + d + "mini"));
  ASSERT_TRUE(shell_ok("xz -k " + d + "mini"));
  ASSERT_TRUE(shell_ok("objcopy --add-section .gnu_debugdata=" + d +
                       "mini.xz " + prog_));
  Frame f = symbolize(dir_ + "/root");
  EXPECT_EQ(f.function, "lt_debug_static_fn");
  EXPECT_EQ(f.offset, 1u);

  // The same cut short: no name, no crash.
  ASSERT_TRUE(shell_ok("head -c 200 " + d + "mini.xz > " + d + "cut.xz"));
  ASSERT_TRUE(shell_ok("strip --strip-all -o " + prog_ + " " + full_));
  ASSERT_TRUE(shell_ok("objcopy --add-section .gnu_debugdata=" + d + "cut.xz " +
                       prog_));
  EXPECT_FALSE(symbolize(dir_ + "/root").known());
}

TEST(Xz, BadStreamsAreErrors) {
  EXPECT_FALSE(elf::xz_decompress("", 100).ok());
  EXPECT_FALSE(elf::xz_decompress("not xz at all", 100).ok());
  // xz's magic, then nothing.
  EXPECT_FALSE(elf::xz_decompress(std::string("\xfd"
                                              "7zXZ\0",
                                              6),
                                  100)
                   .ok());
}

TEST(Xz, OutputIsCapped) {
  if (!have_tool("xz")) GTEST_SKIP() << "xz is not installed";
  std::string stream = shell_output("head -c 100000 /dev/zero | xz -c");
  ASSERT_FALSE(stream.empty());
  Result<std::vector<char>> all = elf::xz_decompress(stream, 100000);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->size(), 100000u);
  Result<std::vector<char>> capped = elf::xz_decompress(stream, 99999);
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("more than 99999"),
            std::string::npos);
  EXPECT_FALSE(
      elf::xz_decompress(stream.substr(0, stream.size() - 5), 200000).ok());
}

TEST(ElfFromMemory, GarbageAndTruncatedImagesAreErrors) {
  EXPECT_FALSE(elf::ElfFile::FromMemory("empty", {}).ok());
  EXPECT_FALSE(elf::ElfFile::FromMemory("junk", {'a', 'b', 'c'}).ok());
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  for (size_t cut : {size_t{16}, size_t{64}, size_t{1000}, bytes.size() / 2}) {
    std::vector<char> part(bytes.begin(),
                           bytes.begin() + static_cast<long>(cut));
    EXPECT_FALSE(elf::ElfFile::FromMemory("cut", part).ok()) << cut;
  }
  Result<elf::ElfFile> whole = elf::ElfFile::FromMemory("whole", bytes);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->fd(), -1);
  EXPECT_FALSE(whole->symbols().empty());
}

// The address of __vdso_clock_gettime in this process's [vdso], from
// readelf on a dump of the image; ProcSymbolizer reads it from
// /proc/self/mem on its own.
TEST(VdsoSymbols, ClockGettimeIsNamed) {
  if (!have_tool("readelf")) GTEST_SKIP() << "readelf is not installed";
  uint64_t ehdr = getauxval(AT_SYSINFO_EHDR);
  Result<std::vector<MapEntry>> maps =
      proc::read_maps(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(maps.ok());
  const MapEntry* vdso = nullptr;
  for (const MapEntry& m : *maps)
    if (m.path == "[vdso]") vdso = &m;
  if (!vdso || ehdr == 0) GTEST_SKIP() << "no vDSO here";
  ASSERT_EQ(vdso->start, ehdr);

  char tmpl[] = "/tmp/lt-vdso-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  std::string dump = tmpl;
  size_t size = vdso->end - vdso->start;
  ASSERT_EQ(write(fd, reinterpret_cast<const void*>(ehdr), size),
            static_cast<ssize_t>(size));
  close(fd);
  // "    5: 0000000000000c10   145 FUNC    WEAK   DEFAULT   12
  //  clock_gettime@@LINUX_2.6"
  std::istringstream in(shell_output("readelf -W --dyn-syms " + dump));
  std::filesystem::remove(dump);
  std::string line;
  uint64_t value = 0;
  std::vector<std::string> names_there;
  std::vector<std::pair<uint64_t, std::string>> funcs;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, val, sz, type, bind, vis, ndx, name;
    if (!(f >> num >> val >> sz >> type >> bind >> vis >> ndx >> name) ||
        type != "FUNC")
      continue;
    name = name.substr(0, name.find('@'));
    funcs.emplace_back(std::stoull(val, nullptr, 16), name);
    if (name == "__vdso_clock_gettime") value = funcs.back().first;
  }
  ASSERT_NE(value, 0u) << "readelf found no __vdso_clock_gettime";
  for (const auto& [v, n] : funcs)
    if (v == value) names_there.push_back(n);

  ProcSymbolizer sym;
  Frame f = sym.symbolize(static_cast<uint32_t>(getpid()), vdso->start + value);
  EXPECT_EQ(f.module, "[vdso]");
  EXPECT_NE(std::find(names_there.begin(), names_there.end(), f.function),
            names_there.end())
      << f.function;
  EXPECT_EQ(f.offset, 0u);
}

}  // namespace
}  // namespace looptrace
