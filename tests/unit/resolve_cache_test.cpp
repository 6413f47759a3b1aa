// Resolutions kept by build-id across runs: what is kept is read back,
// only from a directory and files of the user's own, and a kept
// resolution is used only while it still fits the file.
#include "elf/resolve_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "profiles/profile.h"
#include "profiles/resolve.h"

namespace looptrace {
namespace {

namespace fs = std::filesystem;
using elf::ResolveCache;
using elf::SymbolMatch;

const std::string kPie = std::string(LT_TEST_PROGRAMS_DIR) + "/elf_target_pie";
const std::string kStripped =
    std::string(LT_TEST_PROGRAMS_DIR) + "/elf_target_stripped";
const std::string kId = "0123456789abcdef0123456789abcdef01234567";

class ResolveCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lt-resolve-cache.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  mode_t mode(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
  }
  std::string root_, dir_;
};

bool same(const std::vector<SymbolMatch>& a,
          const std::vector<SymbolMatch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].demangled != b[i].demangled ||
        a[i].vaddr != b[i].vaddr || a[i].size != b[i].size ||
        a[i].file_offset != b[i].file_offset)
      return false;
  return true;
}

TEST_F(ResolveCacheTest, KeepsWhatWasResolvedPrivately) {
  ResolveCache cache(dir_);
  EXPECT_FALSE(cache.get(kId, "f").has_value());
  std::vector<SymbolMatch> m{{"_Z1fi", "f(int)", 0x1100, 32, 0x100},
                             {"f2", "f2", 0x1200, 0, 0x200}};
  cache.put(kId, "f*", m);
  cache.put(kId, "g", {{"g", "g", 0x1300, 8, 0x300}});
  auto got = cache.get(kId, "f*");
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(same(*got, m));
  EXPECT_TRUE(cache.get(kId, "g").has_value());
  EXPECT_FALSE(cache.get(kId, "h").has_value());
  EXPECT_FALSE(cache.get("fedcba98", "f*").has_value());
  EXPECT_EQ(mode(dir_), 0700u);
  EXPECT_EQ(mode(dir_ + "/" + kId + ".json"), 0600u);
  // Nothing else left in the directory (no temporary file).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 1);
}

TEST_F(ResolveCacheTest, ADirectoryOthersCanWriteIsNotUsed) {
  ResolveCache cache(dir_);
  cache.put(kId, "f", {{"f", "f", 0x1100, 8, 0x100}});
  ASSERT_TRUE(cache.get(kId, "f").has_value());
  chmod(dir_.c_str(), 0777);
  EXPECT_FALSE(cache.get(kId, "f").has_value());
  cache.put(kId, "g", {{"g", "g", 0x1300, 8, 0x300}});
  chmod(dir_.c_str(), 0700);
  EXPECT_FALSE(cache.get(kId, "g").has_value()) << "written while unsafe";
}

TEST_F(ResolveCacheTest, ALinkIsNotFollowed) {
  // The directory itself a link: not used, nothing written where it points.
  ASSERT_EQ(mkdir((root_ + "/elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(symlink((root_ + "/elsewhere").c_str(), dir_.c_str()), 0);
  ResolveCache linked(dir_);
  linked.put(kId, "f", {{"f", "f", 0x1100, 8, 0x100}});
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ + "/elsewhere"), {}), 0);
  // A file that is a link: not read.
  const std::string real = root_ + "/real";
  ResolveCache cache(real);
  cache.put(kId, "f", {{"f", "f", 0x1100, 8, 0x100}});
  fs::rename(real + "/" + kId + ".json", root_ + "/target.json");
  ASSERT_EQ(symlink((root_ + "/target.json").c_str(),
                    (real + "/" + kId + ".json").c_str()),
            0);
  EXPECT_FALSE(cache.get(kId, "f").has_value());
}

TEST_F(ResolveCacheTest, DamagedFilesAndStrangeIdsAreMisses) {
  ResolveCache cache(dir_);
  cache.put(kId, "f", {{"f", "f", 0x1100, 8, 0x100}});
  const std::string file = dir_ + "/" + kId + ".json";
  for (const char* text :
       {"", "{", "[]", R"({"patterns": 5})", R"({"patterns": {"f": 5}})",
        R"({"patterns": {"f": [["f", "f", -1, 8, 256]]}})",
        R"({"patterns": {"f": [["f", "f", 4352, 8]]}})",
        R"({"patterns": {"f": []}})"}) {
    std::ofstream(file, std::ios::trunc) << text;
    EXPECT_FALSE(cache.get(kId, "f").has_value()) << text;
  }
  // Not lowercase hex: never a file name.
  cache.put("../escape", "f", {{"f", "f", 0x1100, 8, 0x100}});
  cache.put("ABCD", "f", {{"f", "f", 0x1100, 8, 0x100}});
  EXPECT_FALSE(fs::exists(root_ + "/escape.json"));
  EXPECT_FALSE(cache.get("../escape", "f").has_value());
  EXPECT_FALSE(fs::exists(dir_ + "/ABCD.json"));
}

ProbeDef probe(const std::string& symbol) {
  ProbeDef p;
  p.role = LT_ROLE_DISPATCH;
  p.binary = kPie;
  p.symbol = symbol;
  return p;
}

uint64_t resolve_one(const std::string& symbol) {
  std::vector<ProbeDef> probes{probe(symbol)};
  Status st = resolve_probes(&probes, ResolveContext{});
  EXPECT_TRUE(st.ok()) << st.message();
  return st.ok() && probes.size() == 1 ? probes[0].file_offset : 0;
}

// resolve_probes through LOOPTRACE_CACHE_DIR: the first run keeps the
// answer under the binary's build-id; a kept answer that no longer maps
// to executable code is ignored, one that does is used.
TEST_F(ResolveCacheTest, ResolveProbesUsesOnlyAnswersThatFitTheFile) {
  ASSERT_EQ(setenv("LOOPTRACE_CACHE_DIR", dir_.c_str(), 1), 0);
  const uint64_t plain = resolve_one("lt_plain_function");
  ASSERT_NE(plain, 0u);
  // One file, named by the binary's build-id and more.
  ASSERT_EQ(std::distance(fs::directory_iterator(dir_), {}), 1);
  const std::string name = fs::directory_iterator(dir_)->path().stem();
  auto file = elf::ElfFile::Open(kPie);
  ASSERT_TRUE(file.ok());
  ASSERT_FALSE(file->build_id().empty());
  EXPECT_EQ(name.rfind(file->build_id(), 0), 0u) << name;
  const std::string id = name;
  ResolveCache cache(dir_);
  auto kept = cache.get(id, "lt_plain_function");
  ASSERT_TRUE(kept.has_value());
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].name, "lt_plain_function");

  // Poisoned with an offset outside executable code: resolved afresh.
  SymbolMatch bad = (*kept)[0];
  bad.vaddr = bad.file_offset = 0;
  cache.put(id, "lt_plain_function", {bad});
  EXPECT_EQ(resolve_one("lt_plain_function"), plain);
  // With another function's place, which fits: taken from the cache.
  std::vector<ProbeDef> other{probe("lt_test::overloaded(int)")};
  ASSERT_TRUE(resolve_probes(&other, ResolveContext{}).ok());
  auto o = cache.get(id, "lt_test::overloaded(int)");
  ASSERT_TRUE(o.has_value());
  cache.put(id, "lt_plain_function", *o);
  EXPECT_EQ(resolve_one("lt_plain_function"), other[0].file_offset);
  unsetenv("LOOPTRACE_CACHE_DIR");
}

// A stripped copy keeps the build-id but not the names: what was resolved
// by name in the unstripped one is not an answer for it.
TEST_F(ResolveCacheTest, AStrippedCopyDoesNotShareTheAnswers) {
  ASSERT_EQ(setenv("LOOPTRACE_CACHE_DIR", dir_.c_str(), 1), 0);
  auto pie = elf::ElfFile::Open(kPie);
  auto stripped = elf::ElfFile::Open(kStripped);
  ASSERT_TRUE(pie.ok() && stripped.ok());
  ASSERT_EQ(pie->build_id(), stripped->build_id());
  ASSERT_NE(resolve_one("lt_plain_function"), 0u);
  std::vector<ProbeDef> probes{probe("lt_plain_function")};
  probes[0].binary = kStripped;
  Status st = resolve_probes(&probes, ResolveContext{});
  EXPECT_FALSE(st.ok()) << "resolved by name in a stripped binary";
  EXPECT_NE(st.message().find("stripped"), std::string::npos) << st.message();
  unsetenv("LOOPTRACE_CACHE_DIR");
}

TEST_F(ResolveCacheTest, OffMeansNone) {
  ASSERT_EQ(setenv("LOOPTRACE_CACHE_DIR", "off", 1), 0);
  EXPECT_EQ(elf::default_resolve_cache_dir(), "");
  EXPECT_NE(resolve_one("lt_plain_function"), 0u);
  unsetenv("LOOPTRACE_CACHE_DIR");
  ASSERT_EQ(setenv("XDG_CACHE_HOME", "/x", 1), 0);
  EXPECT_EQ(elf::default_resolve_cache_dir(), "/x/looptrace");
  unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace looptrace
