// Class names from RTTI (elf/rtti.h), on files installed here: libstdc++'s
// exported vtables, checked against the names their symbols give.
#include "elf/rtti.h"

#include <gtest/gtest.h>

#include <string>

#include "elf/elf_file.h"

namespace looptrace::elf {
namespace {

const char* kLibstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";

// An object's vtable pointer: two words past the "vtable for X" symbol
// (offset-to-top, then the type_info).
uint64_t vptr_of(const ElfFile& f, const std::string& vtable_symbol) {
  const Symbol* s = f.find_object(vtable_symbol);
  return s ? s->vaddr + 16 : 0;
}

TEST(Rtti, VtablesOfLibstdcxxNameTheirClasses) {
  auto f = ElfFile::Open(kLibstdcxx);
  ASSERT_TRUE(f.ok()) << f.status().message();
  for (const auto& [sym, name] :
       {std::pair<std::string, std::string>{"_ZTVSt13runtime_error",
                                            "std::runtime_error"},
        {"_ZTVSt12out_of_range", "std::out_of_range"},
        {"_ZTVNSt6locale5facetE", "std::locale::facet"}}) {
    const uint64_t vptr = vptr_of(*f, sym);
    ASSERT_NE(vptr, 0u) << sym;
    EXPECT_EQ(class_of_vtable(*f, vptr), name) << sym;
  }
}

TEST(Rtti, WordsThatAreNoVtableNameNothing) {
  auto f = ElfFile::Open(kLibstdcxx);
  ASSERT_TRUE(f.ok()) << f.status().message();
  // The vtable symbol itself: the word before it is no type_info pointer.
  const Symbol* s = f->find_object("_ZTVSt13runtime_error");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(class_of_vtable(*f, s->vaddr), "");
  // A type_info's name string (no relocation before it), and nothing.
  const Symbol* name = f->find_object("_ZTSSt13runtime_error");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(class_of_vtable(*f, name->vaddr), "");
  EXPECT_EQ(class_of_vtable(*f, 0), "");
  EXPECT_EQ(class_of_vtable(*f, ~0ull), "");
}

}  // namespace
}  // namespace looptrace::elf
