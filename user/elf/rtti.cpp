#include "elf/rtti.h"

#include <string_view>

#include "base/demangle.h"
#include "elf/elf_file.h"

namespace looptrace::elf {
namespace {

// Longer mangled names are cut by nothing a program would use; a bound on
// what is read from a file that may lie.
constexpr size_t kMaxName = 512;

bool mangled_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string class_of_vtable(const ElfFile& file, uint64_t vaddr) {
  if (vaddr < 8) return {};
  auto type_info = file.pointer_at(vaddr - 8);
  if (!type_info.ok() || *type_info == 0) return {};
  auto name_at = file.pointer_at(*type_info + 8);
  if (!name_at.ok() || *name_at == 0) return {};
  std::string name;
  for (size_t i = 0; i < kMaxName; ++i) {
    char c = 0;
    if (!file.read_bytes(*name_at + i, &c, 1).ok()) return {};
    if (c == '\0') break;
    name += c;
  }
  // GCC marks the name of a type local to its file with a leading '*'
  // (compared by address, not by name).
  if (!name.empty() && name[0] == '*') name.erase(0, 1);
  if (name.empty() || name.size() >= kMaxName) return {};
  for (char c : name)
    if (!mangled_char(c)) return {};
  // As the name of the type_info's name string: "typeinfo name for X".
  constexpr std::string_view kPrefix = "typeinfo name for ";
  std::string d = demangle("_ZTS" + name);
  if (d.rfind(kPrefix, 0) != 0) return {};
  return d.substr(kPrefix.size());
}

}  // namespace looptrace::elf
