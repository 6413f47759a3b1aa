// Symbol name -> uprobe file offset, and library name -> path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace::elf {

struct SymbolMatch {
  std::string name;       // mangled; the pattern itself for a 0x offset
  std::string demangled;  // for a 0x offset: "func+0x4" when known
  uint64_t vaddr = 0;
  uint64_t size = 0;
  uint64_t file_offset = 0;  // what a uprobe attaches at
};

// Resolves one function in the ELF file at `path`. Pattern forms:
//   "0x1234"              a file offset (stripped code); must be executable
//   "_ZN2ns3Foo3barEi"    exact mangled (or C) name
//   "ns::Foo::bar(int)"   exact demangled name with its parameter list
//   "ns::Foo::bar"        demangled name without parameters
//   "ns::Foo::*"          a glob (* ? [...]) over demangled and mangled names
//   "*(table+16)"         the function whose address the data symbol
//                         `table` holds 16 bytes in (ElfFile::pointer_at):
//                         static functions reached through an exported
//                         table (GLib's g_idle_funcs -> g_idle_dispatch)
// Only FUNC symbols count; aliases at one address are one match. Errors are
// kUsage: not found (with a "did you mean" hint), ambiguous, stripped.
Result<SymbolMatch> resolve_symbol(const std::string& path,
                                   const std::string& pattern);

class ElfFile;
// The same on a file already open (several probes in one binary).
Result<SymbolMatch> resolve_symbol(const ElfFile& file,
                                   const std::string& pattern);

// Like resolve_symbol, but a glob names every function it matches (as in
// bpftrace and perf probe), up to max_matches; other patterns must still
// name exactly one.
Result<std::vector<SymbolMatch>> resolve_symbols(const std::string& path,
                                                 const std::string& pattern,
                                                 size_t max_matches);
// The same on a file already open.
Result<std::vector<SymbolMatch>> resolve_symbols(const ElfFile& file,
                                                 const std::string& pattern,
                                                 size_t max_matches);

// The demangled name without its parameter list and trailing qualifiers:
// "ns::Foo::bar(int) const" -> "ns::Foo::bar". Unchanged when there is none.
std::string strip_params(const std::string& demangled);

// Finds a binary by name the way the dynamic linker (for libraries) or the
// shell (for programs) would: a name with '/' must exist; otherwise the
// ld.so cache (via ldconfig -p), LD_LIBRARY_PATH, the standard library
// directories and PATH are searched. "libfoo.so" also finds "libfoo.so.1".
Result<std::string> find_library(const std::string& name);

}  // namespace looptrace::elf
