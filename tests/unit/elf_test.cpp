// ElfFile and resolve_symbol on the test programs. Expected offsets come
// from nm and readelf, never from the code under test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "elf/resolve.h"
#include "stripped_program.h"

namespace looptrace::elf {
namespace {

using test::nm_address;
using test::shell_output;

const std::string kProgramsDir = LT_TEST_PROGRAMS_DIR;
const std::string kPie = kProgramsDir + "/elf_target_pie";
const std::string kNoPie = kProgramsDir + "/elf_target_nopie";
const std::string kStripped = kProgramsDir + "/elf_target_stripped";

struct Load {
  uint64_t offset, vaddr, filesz;
  bool exec;
};

// "  LOAD 0x001000 0x0000000000001000 0x...1000 0x000441 0x000441 R E 0x1000"
std::vector<Load> readelf_loads(const std::string& path) {
  std::vector<Load> out;
  std::istringstream in(shell_output("readelf -lW " + path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string type, off, vaddr, paddr, filesz, memsz, flag;
    if (!(fields >> type) || type != "LOAD") continue;
    fields >> off >> vaddr >> paddr >> filesz >> memsz;
    bool exec = false;
    while (fields >> flag) exec = exec || flag.find('E') != std::string::npos;
    out.push_back({std::stoull(off, nullptr, 16),
                   std::stoull(vaddr, nullptr, 16),
                   std::stoull(filesz, nullptr, 16), exec});
  }
  return out;
}

// The uprobe offset of a symbol: vaddr - p_vaddr + p_offset of the
// executable PT_LOAD containing it.
uint64_t expected_offset(const std::string& path, const std::string& name) {
  std::optional<uint64_t> addr = nm_address(path, name);
  EXPECT_TRUE(addr.has_value()) << name << " not in nm " << path;
  if (!addr) return 0;
  for (const Load& l : readelf_loads(path))
    if (l.exec && *addr >= l.vaddr && *addr < l.vaddr + l.filesz)
      return *addr - l.vaddr + l.offset;
  ADD_FAILURE() << name << " not in an executable PT_LOAD of " << path;
  return 0;
}

std::string build_id_from_readelf(const std::string& path) {
  std::istringstream in(shell_output("readelf -n " + path));
  std::string line;
  const std::string key = "Build ID: ";
  while (std::getline(in, line))
    if (size_t pos = line.find(key); pos != std::string::npos)
      return line.substr(pos + key.size());
  return "";
}

TEST(ElfFileTest, OpensPieAndNonPie) {
  Result<ElfFile> pie = ElfFile::Open(kPie);
  ASSERT_TRUE(pie.ok()) << pie.status().message();
  EXPECT_TRUE(pie->is_dyn());
  EXPECT_TRUE(pie->has_symtab());
  EXPECT_EQ(pie->path(), kPie);

  Result<ElfFile> nopie = ElfFile::Open(kNoPie);
  ASSERT_TRUE(nopie.ok()) << nopie.status().message();
  EXPECT_FALSE(nopie->is_dyn());
  EXPECT_TRUE(nopie->has_symtab());
}

TEST(ElfFileTest, BuildIdMatchesReadelf) {
  Result<ElfFile> pie = ElfFile::Open(kPie);
  ASSERT_TRUE(pie.ok());
  std::string expected = build_id_from_readelf(kPie);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(pie->build_id(), expected);
}

TEST(ElfFileTest, SymbolsAreSortedUniqueAndDemangled) {
  Result<ElfFile> pie = ElfFile::Open(kPie);
  ASSERT_TRUE(pie.ok());
  const std::vector<Symbol>& syms = pie->symbols();
  ASSERT_FALSE(syms.empty());
  for (size_t i = 1; i < syms.size(); i++) {
    EXPECT_LE(syms[i - 1].vaddr, syms[i].vaddr);
    if (syms[i - 1].vaddr == syms[i].vaddr) {
      EXPECT_NE(syms[i - 1].name, syms[i].name);
    }
  }
  int draw = 0;
  bool vtable = false;
  for (const Symbol& s : syms) {
    if (s.name == "_ZN7lt_test6Widget4drawEi") {
      draw++;
      EXPECT_EQ(s.demangled, "lt_test::Widget::draw(int)");
      EXPECT_TRUE(s.is_func);
      EXPECT_EQ(s.vaddr, nm_address(kPie, s.name));
      EXPECT_GT(s.size, 0u);
    }
    if (s.name == "_ZTVN7lt_test6WidgetE") {
      vtable = true;
      EXPECT_EQ(s.demangled, "vtable for lt_test::Widget");
      EXPECT_FALSE(s.is_func);
    }
    if (s.name == "lt_plain_function") {
      EXPECT_EQ(s.demangled, s.name);
    }
  }
  EXPECT_EQ(draw, 1);
  EXPECT_TRUE(vtable);
}

TEST(ElfFileTest, MissingFile) {
  Result<ElfFile> f = ElfFile::Open("/nonexistent/elf_target");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            "open /nonexistent/elf_target: No such file or directory");
  EXPECT_EQ(f.status().kind(), ErrorKind::kUsage);
}

TEST(ElfFileTest, NotAnElfFile) {
  std::string path = std::string(LT_TEST_DATA_DIR) + "/maps/pie_program.maps";
  Result<ElfFile> f = ElfFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), path + ": not an ELF file");
}

TEST(ElfFileTest, StrippedHasNoSymtab) {
  Result<ElfFile> f = ElfFile::Open(kStripped);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(f->has_symtab());
  for (const Symbol& s : f->symbols()) {
    EXPECT_FALSE(s.is_func) << s.name;
  }
  EXPECT_EQ(f->build_id(), build_id_from_readelf(kPie));  // strip keeps it
}

TEST(ElfFileTest, MoveKeepsState) {
  Result<ElfFile> f = ElfFile::Open(kPie);
  ASSERT_TRUE(f.ok());
  size_t count = f->symbols().size();
  ElfFile a = std::move(f).value();
  ElfFile b = ElfFile::Open(kNoPie).value();
  b = std::move(a);
  EXPECT_EQ(b.symbols().size(), count);
  EXPECT_EQ(b.path(), kPie);
  EXPECT_GE(b.fd(), 0);
}

class ElfBuildTest : public testing::TestWithParam<std::string> {
 protected:
  std::string path() const { return kProgramsDir + "/" + GetParam(); }
};

TEST_P(ElfBuildTest, OffsetAndVaddrFollowReadelf) {
  Result<ElfFile> f = ElfFile::Open(path());
  ASSERT_TRUE(f.ok());
  std::string name = "_ZN7lt_test6Widget4drawEi";
  uint64_t vaddr = *nm_address(path(), name);
  uint64_t offset = expected_offset(path(), name);
  Result<uint64_t> got_offset = f->vaddr_to_offset(vaddr);
  ASSERT_TRUE(got_offset.ok()) << got_offset.status().message();
  EXPECT_EQ(*got_offset, offset);
  Result<uint64_t> got_vaddr = f->offset_to_vaddr(offset);
  ASSERT_TRUE(got_vaddr.ok());
  EXPECT_EQ(*got_vaddr, vaddr);
  EXPECT_TRUE(f->offset_is_executable(offset));
  EXPECT_FALSE(f->offset_is_executable(0));  // the ELF header
  EXPECT_FALSE(f->offset_to_vaddr(uint64_t{1} << 40).ok());
}

TEST_P(ElfBuildTest, FindSymbolByVaddr) {
  Result<ElfFile> f = ElfFile::Open(path());
  ASSERT_TRUE(f.ok());
  uint64_t draw = *nm_address(path(), "_ZN7lt_test6Widget4drawEi");
  const Symbol* s = f->find_symbol_by_vaddr(draw);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->demangled, "lt_test::Widget::draw(int)");
  s = f->find_symbol_by_vaddr(draw + s->size - 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->demangled, "lt_test::Widget::draw(int)");

  // A vtable pointer points 16 bytes into the vtable object.
  uint64_t vtable = *nm_address(path(), "_ZTVN7lt_test6WidgetE");
  s = f->find_symbol_by_vaddr(vtable + 16);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->demangled, "vtable for lt_test::Widget");

  // C1 and C2 constructors are aliases: either name, same function.
  uint64_t ctor = *nm_address(path(), "_ZN7lt_test6WidgetC2Ei");
  s = f->find_symbol_by_vaddr(ctor);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->demangled, "lt_test::Widget::Widget(int)");

  EXPECT_EQ(f->find_symbol_by_vaddr(1), nullptr);
}

TEST_P(ElfBuildTest, ResolveMangledName) {
  Result<SymbolMatch> m = resolve_symbol(path(), "_ZN7lt_test6Widget4drawEi");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "_ZN7lt_test6Widget4drawEi");
  EXPECT_EQ(m->demangled, "lt_test::Widget::draw(int)");
  EXPECT_EQ(m->vaddr, nm_address(path(), "_ZN7lt_test6Widget4drawEi"));
  EXPECT_EQ(m->file_offset,
            expected_offset(path(), "_ZN7lt_test6Widget4drawEi"));
  EXPECT_GT(m->size, 0u);
}

TEST_P(ElfBuildTest, ResolveDemangledWithAndWithoutParams) {
  uint64_t want = expected_offset(path(), "_ZN7lt_test6Widget4drawEi");
  for (const char* pattern :
       {"lt_test::Widget::draw(int)", "lt_test::Widget::draw"}) {
    Result<SymbolMatch> m = resolve_symbol(path(), pattern);
    ASSERT_TRUE(m.ok()) << pattern << ": " << m.status().message();
    EXPECT_EQ(m->file_offset, want) << pattern;
    EXPECT_EQ(m->demangled, "lt_test::Widget::draw(int)");
  }
}

TEST_P(ElfBuildTest, ResolveCFunction) {
  Result<SymbolMatch> m = resolve_symbol(path(), "lt_plain_function");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->file_offset, expected_offset(path(), "lt_plain_function"));
}

TEST_P(ElfBuildTest, ResolveGlob) {
  Result<SymbolMatch> m = resolve_symbol(path(), "lt_test::Widget::dr*");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->file_offset,
            expected_offset(path(), "_ZN7lt_test6Widget4drawEi"));
  m = resolve_symbol(path(), "*plain_func?ion");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "lt_plain_function");
}

TEST_P(ElfBuildTest, ResolveOneOverloadByParams) {
  Result<SymbolMatch> m = resolve_symbol(path(), "lt_test::overloaded(double)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->file_offset,
            expected_offset(path(), "_ZN7lt_test10overloadedEd"));
}

TEST_P(ElfBuildTest, AmbiguousOverloadListsBoth) {
  for (const char* pattern : {"lt_test::overloaded", "lt_test::overload*"}) {
    Result<SymbolMatch> m = resolve_symbol(path(), pattern);
    ASSERT_FALSE(m.ok()) << pattern;
    const std::string& msg = m.status().message();
    EXPECT_EQ(msg.find('\n'), std::string::npos);
    EXPECT_NE(msg.find(std::string("symbol '") + pattern +
                       "' is ambiguous in " + path() + ": 2 matches: "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("lt_test::overloaded(int)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lt_test::overloaded(double)"), std::string::npos)
        << msg;
    EXPECT_EQ(m.status().kind(), ErrorKind::kUsage);
  }
}

TEST_P(ElfBuildTest, AliasesAreOneMatch) {
  // C1 and C2 share an address; both demangle to Widget::Widget(int).
  Result<SymbolMatch> m = resolve_symbol(path(), "lt_test::Widget::Widget");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->file_offset, expected_offset(path(), "_ZN7lt_test6WidgetC2Ei"));
}

TEST_P(ElfBuildTest, MissingSymbolSuggestsCloseNames) {
  Result<SymbolMatch> m = resolve_symbol(path(), "lt_test::Widget::drow");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "symbol 'lt_test::Widget::drow' not found in " + path());
  EXPECT_EQ(m.status().kind(), ErrorKind::kUsage);
  EXPECT_NE(m.status().hint().find("did you mean: "), std::string::npos);
  EXPECT_NE(m.status().hint().find("lt_test::Widget::draw"), std::string::npos)
      << m.status().hint();

  m = resolve_symbol(path(), "plain_function");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().hint(), "did you mean: lt_plain_function");
}

// "*(table+N)": the function a table of pointers holds (GLib's
// g_idle_funcs -> its static g_idle_dispatch), by the slot's relocation in
// the PIE and the file's bytes in the non-PIE build; nm is the oracle.
TEST_P(ElfBuildTest, PointerInADataSymbolNamesItsFunction) {
  Result<SymbolMatch> m = resolve_symbol(path(), "*(lt_test_funcs+16)");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->vaddr, nm_address(path(), "_ZL17lt_table_dispatchi"));
  EXPECT_EQ(m->demangled, "lt_table_dispatch(int)");
  Result<ElfFile> f = ElfFile::Open(path());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(m->file_offset, *f->vaddr_to_offset(m->vaddr));
  Result<SymbolMatch> first = resolve_symbol(path(), "*(lt_test_funcs)");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->vaddr, nm_address(path(), "lt_plain_function"));
  // Hex offsets and blanks; the glob form takes it as one function.
  Result<std::vector<SymbolMatch>> hex =
      resolve_symbols(path(), "*( lt_test_funcs + 0x10 )", 8);
  ASSERT_TRUE(hex.ok()) << hex.status().message();
  ASSERT_EQ(hex->size(), 1u);
  EXPECT_EQ((*hex)[0].vaddr, m->vaddr);
}

// ld also writes the value into the PIE's slot, which the loader
// overwrites: with those bytes zeroed in a copy, the relocation alone
// must give the address (and the non-PIE, without one, reads zero: null).
TEST_P(ElfBuildTest, PointerComesFromTheRelocationWhereThereIsOne) {
  Result<ElfFile> f = ElfFile::Open(path());
  ASSERT_TRUE(f.ok());
  std::optional<uint64_t> table = nm_address(path(), "lt_test_funcs");
  ASSERT_TRUE(table.has_value());
  Result<uint64_t> slot = f->vaddr_to_offset(*table + 16);
  ASSERT_TRUE(slot.ok());
  std::ifstream in(path(), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), *slot + 8);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(*slot), 8, '\0');
  Result<ElfFile> copy = ElfFile::FromMemory("zeroed", std::move(bytes));
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  Result<SymbolMatch> m = resolve_symbol(*copy, "*(lt_test_funcs+16)");
  if (f->is_dyn()) {
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->vaddr, nm_address(path(), "_ZL17lt_table_dispatchi"));
  } else {
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("null pointer"), std::string::npos);
  }
}

TEST_P(ElfBuildTest, PointerErrorsSayWhy) {
  auto error = [&](const std::string& pattern) {
    Result<SymbolMatch> m = resolve_symbol(path(), pattern);
    EXPECT_FALSE(m.ok()) << pattern;
    EXPECT_EQ(m.status().kind(), ErrorKind::kUsage) << pattern;
    return m.ok() ? std::string() : m.status().message();
  };
  EXPECT_NE(error("*(lt_test_funcs+8)").find("null pointer"),
            std::string::npos);
  EXPECT_NE(error("*(lt_test_funcs+24)").find("past the end of lt_test_funcs"),
            std::string::npos);
  EXPECT_NE(error("*(no_such_table+16)").find("no data symbol 'no_such_table'"),
            std::string::npos);
  // A function is not a table.
  EXPECT_NE(error("*(lt_plain_function+0)").find("no data symbol"),
            std::string::npos);
  EXPECT_NE(error("*(lt_test_funcs+x)").find("expected *(SYMBOL+OFFSET)"),
            std::string::npos);
  EXPECT_NE(error("*(+16)").find("expected *(SYMBOL+OFFSET)"),
            std::string::npos);
}

TEST_P(ElfBuildTest, HexFileOffset) {
  uint64_t off = expected_offset(path(), "lt_plain_function");
  char pattern[32];
  std::snprintf(pattern, sizeof pattern, "0x%llx",
                static_cast<unsigned long long>(off));
  Result<SymbolMatch> m = resolve_symbol(path(), pattern);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->file_offset, off);
  EXPECT_EQ(m->vaddr, nm_address(path(), "lt_plain_function"));
  EXPECT_EQ(m->demangled, "lt_plain_function");

  m = resolve_symbol(path(), "0x0");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "offset 0x0 is not in an executable segment of " + path());
  m = resolve_symbol(path(), "0xzz");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "invalid file offset '0xzz'");
}

INSTANTIATE_TEST_SUITE_P(Elf, ElfBuildTest,
                         testing::Values("elf_target_pie", "elf_target_nopie"));

TEST(ElfStrippedTest, NamesNeedASymbolTable) {
  Result<SymbolMatch> m = resolve_symbol(kStripped, "lt_plain_function");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(
      m.status().message(),
      kStripped + " has no symbol table (stripped); give a 0x file offset");
  EXPECT_EQ(m.status().kind(), ErrorKind::kUsage);
}

TEST(ElfStrippedTest, HexOffsetStillWorks) {
  // strip leaves the loadable layout alone, so the PIE's offsets hold.
  uint64_t off = expected_offset(kPie, "_ZN7lt_test6Widget4drawEi");
  char pattern[32];
  std::snprintf(pattern, sizeof pattern, "0x%llx",
                static_cast<unsigned long long>(off));
  Result<SymbolMatch> m = resolve_symbol(kStripped, pattern);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->file_offset, off);
  EXPECT_EQ(m->demangled, pattern);  // no symbol to name it by
}

TEST(ElfResolveTest, MissingFileAndNotElf) {
  Result<SymbolMatch> m = resolve_symbol("/nonexistent/x", "main");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "open /nonexistent/x: No such file or directory");
  std::string text = std::string(LT_TEST_DATA_DIR) + "/maps/pie_program.maps";
  m = resolve_symbol(text, "main");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), text + ": not an ELF file");
}

TEST(ElfResolveTest, StripParams) {
  EXPECT_EQ(strip_params("ns::Foo::bar(int)"), "ns::Foo::bar");
  EXPECT_EQ(strip_params("ns::Foo::bar(int) const"), "ns::Foo::bar");
  EXPECT_EQ(strip_params("(anonymous namespace)::f(char const*)"),
            "(anonymous namespace)::f");
  EXPECT_EQ(strip_params("void ns::f<int>(int)"), "ns::f<int>");
  EXPECT_EQ(strip_params("ns::Foo::operator()(int)"), "ns::Foo::operator()");
  EXPECT_EQ(strip_params("lt_plain_function"), "lt_plain_function");
  EXPECT_EQ(strip_params("vtable for ns::Foo"), "vtable for ns::Foo");
}

TEST(ElfResolveTest, DefaultSymbolVersionWins) {
  // glibc keeps pthread_cond_wait@GLIBC_2.2.5 for old binaries next to the
  // default pthread_cond_wait@@GLIBC_2.3.2; a bare name means the default.
  Result<std::string> libc = find_library("libc.so.6");
  ASSERT_TRUE(libc.ok());
  std::istringstream in(shell_output("readelf -sW --dyn-syms " + *libc));
  std::string line;
  std::optional<uint64_t> want;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (fields >> num >> value >> size >> type >> bind >> vis >> ndx >> name &&
        name.starts_with("pthread_cond_wait@@"))
      want = std::stoull(value, nullptr, 16);
  }
  if (!want) GTEST_SKIP() << "no versioned pthread_cond_wait in " << *libc;
  Result<SymbolMatch> m = resolve_symbol(*libc, "pthread_cond_wait");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->vaddr, *want);
}

// Sets an environment variable for one test and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ElfFindLibraryTest, FindsLibcLikeTheLinker) {
  Result<std::string> p = find_library("libc.so.6");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(std::filesystem::path(*p).filename(), "libc.so.6");
  // The host's libc, not a 32-bit one from the same cache.
  Result<ElfFile> f = ElfFile::Open(*p);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->is_dyn());
  EXPECT_NE(shell_output("readelf -h " + *p)
                .find(sizeof(void*) == 8 ? "ELF64" : "ELF32"),
            std::string::npos);
}

TEST(ElfFindLibraryTest, UnversionedNameFindsVersionedFile) {
  Result<std::string> p = find_library("libstdc++.so");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(
      std::filesystem::path(*p).filename().string().starts_with("libstdc++.so"))
      << *p;
}

TEST(ElfFindLibraryTest, PathsAreCheckedNotSearched) {
  Result<std::string> p = find_library(kPie);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, kPie);
  p = find_library("/nonexistent/libx.so");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "binary '/nonexistent/libx.so': No such file or directory");
}

TEST(ElfFindLibraryTest, ProgramOnPath) {
  ScopedEnv path("PATH", "/nonexistent:" + kProgramsDir);
  Result<std::string> p = find_library("elf_target_nopie");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, kProgramsDir + "/elf_target_nopie");
}

TEST(ElfFindLibraryTest, LdLibraryPath) {
  ScopedEnv path("PATH", "/nonexistent");
  ScopedEnv lib("LD_LIBRARY_PATH", kProgramsDir);
  Result<std::string> p = find_library("elf_target_pie");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, kProgramsDir + "/elf_target_pie");
}

TEST(ElfFindLibraryTest, NotFoundSaysWhereItLooked) {
  Result<std::string> p = find_library("libdoesnotexist_lt.so");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(p.status().message().starts_with(
      "binary 'libdoesnotexist_lt.so' not found (searched LD_LIBRARY_PATH, "
      "ld.so cache, "))
      << p.status().message();
  EXPECT_EQ(p.status().kind(), ErrorKind::kUsage);
}

}  // namespace
}  // namespace looptrace::elf

namespace looptrace::elf {
namespace {

// A glob names every function it matches (one probe each); a plain name
// that matches several is still an error.
TEST(ElfResolveSymbols, GlobNamesEveryMatch) {
  auto both = resolve_symbols(kPie, "lt_test::overloaded*", 32);
  ASSERT_TRUE(both.ok()) << both.status().message();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_NE((*both)[0].file_offset, (*both)[1].file_offset);
  for (const SymbolMatch& m : *both) {
    auto one = resolve_symbol(kPie, m.demangled);
    ASSERT_TRUE(one.ok()) << m.demangled;
    EXPECT_EQ(one->file_offset, m.file_offset);
  }
  auto capped = resolve_symbols(kPie, "lt_test::overloaded*", 1);
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("matches 2 functions"),
            std::string::npos);
  EXPECT_FALSE(resolve_symbols(kPie, "lt_test::overloaded", 32).ok());
  auto none = resolve_symbols(kPie, "lt_test::nothing*", 32);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("not found"), std::string::npos);
}

}  // namespace
}  // namespace looptrace::elf

namespace looptrace::elf {
namespace {

// The first `n` bytes of `src` in a temporary file, removed afterwards.
class TruncatedCopy {
 public:
  TruncatedCopy(const std::string& src, size_t n)
      : path_(std::filesystem::temp_directory_path() /
              ("lt_trunc_" + std::to_string(getpid()) + "_" +
               std::to_string(n))) {
    std::ifstream in(src, std::ios::binary);
    std::string bytes(n, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(n));
    std::ofstream(path_, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(n));
  }
  ~TruncatedCopy() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A file cut short (a failed copy, a full disk) lost its section headers,
// which sit at its end: it was called "stripped".
TEST(ElfTruncated, IsCalledTruncatedNotStripped) {
  const auto size = static_cast<size_t>(std::filesystem::file_size(kPie));
  for (size_t n : {size_t{100}, size_t{1000}, size / 2, size - 1}) {
    TruncatedCopy copy(kPie, n);
    Result<ElfFile> f = ElfFile::Open(copy.path());
    ASSERT_FALSE(f.ok()) << n;
    EXPECT_NE(f.status().message().find("truncated ELF file"),
              std::string::npos)
        << f.status().message();
    EXPECT_NE(f.status().message().find("the file has " + std::to_string(n)),
              std::string::npos)
        << f.status().message();
    EXPECT_EQ(f.status().kind(), ErrorKind::kUsage);
    Result<SymbolMatch> m = resolve_symbol(copy.path(), "lt_plain_function");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message().find("stripped"), std::string::npos)
        << m.status().message();
  }
  // The whole file still opens.
  EXPECT_TRUE(ElfFile::Open(kPie).ok());
}

TEST(ElfResolveTest, NulInAPatternIsRefusedEscaped) {
  Result<SymbolMatch> m =
      resolve_symbol(kPie, std::string("lt_plain_function\0x", 19));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "symbol 'lt_plain_function\\0x' contains a NUL byte");
  auto g = resolve_symbols(kPie, std::string("lt_*\0x", 6), 32);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("contains a NUL byte"),
            std::string::npos);
}

TEST(ElfResolveSymbols, OneMatchIsSingular) {
  auto capped = resolve_symbols(kPie, "lt_plain_func*", 0);
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("matches 1 function in"),
            std::string::npos)
      << capped.status().message();
}

// A 32-bit or a big-endian ELF file is refused in one line saying so: it
// was read as if 64-bit little-endian ("truncated ... byte
// 4611686018478768128"), or accepted.
TEST(ElfFileTest, OnlySixtyFourBitLittleEndian) {
  const std::string base =
      ::testing::TempDir() + "/lt_elf_" + std::to_string(getpid());
  std::ifstream in(kPie, std::ios::binary);
  std::vector<char> pie((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
  ASSERT_GT(pie.size(), 64u);
  // The PIE with its byte order flipped (EI_DATA, byte 5), and a minimal
  // 32-bit header (52 bytes, ELFCLASS32, ET_EXEC, EM_386, no tables).
  std::vector<char> msb = pie;
  msb[5] = 2;  // ELFDATA2MSB
  std::vector<char> elf32(52, 0);
  const char ident[] = {0x7f, 'E', 'L', 'F', 1, 1, 1};
  std::copy(std::begin(ident), std::end(ident), elf32.begin());
  elf32[16] = 2;   // e_type ET_EXEC
  elf32[18] = 3;   // e_machine EM_386
  elf32[20] = 1;   // e_version
  elf32[40] = 52;  // e_ehsize
  struct Case {
    std::vector<char> bytes;
    std::string what;
  } cases[] = {{msb, "a 64-bit big-endian ELF file"},
               {elf32, "a 32-bit little-endian ELF file"}};
  for (const Case& c : cases) {
    const std::string path = base + ".elf";
    std::ofstream(path, std::ios::binary)
        .write(c.bytes.data(), static_cast<std::streamsize>(c.bytes.size()));
    Result<ElfFile> f = ElfFile::Open(path);
    ASSERT_FALSE(f.ok()) << c.what;
    EXPECT_EQ(f.status().message(),
              path + ": " + c.what +
                  "; looptrace reads 64-bit little-endian ones only");
    EXPECT_EQ(f.status().kind(), ErrorKind::kUsage);
    Result<ElfFile> m = ElfFile::FromMemory("mem", c.bytes);
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_EQ(
        m.status().message(),
        "mem: " + c.what + "; looptrace reads 64-bit little-endian ones only");
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace looptrace::elf
