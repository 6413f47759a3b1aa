// resolve_symbol: the user's spelling of a function -> one uprobe offset.
#include "elf/resolve.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "base/log.h"
#include "elf/elf_file.h"

namespace looptrace::elf {
namespace {

constexpr size_t kMaxListed = 5;

bool is_glob(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

// GCC clones ("foo.cold", "_Z3fooi.constprop.0", "foo.part.1") are pieces
// or specialised copies of a function, not its entry point: only an exact
// name selects them, never a glob or a name without parameters.
bool is_clone(const Symbol& s) { return s.name.find('.') != std::string::npos; }

// A template function's demangled name starts with its return type
// ("void ns::f<int>(int)"); the name proper follows the last space outside
// brackets. Operators ("operator new", "operator<") are left alone.
std::string drop_return_type(const std::string& s) {
  if (s.find("operator") != std::string::npos) return s;
  int depth = 0;
  size_t last_space = std::string::npos;
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c == '<' || c == '(' || c == '[')
      depth++;
    else if (c == '>' || c == ')' || c == ']')
      depth--;
    else if (c == ' ' && depth == 0)
      last_space = i;
  }
  return last_space == std::string::npos ? s : s.substr(last_space + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<int>(c)));
  return s;
}

// The part after the last "::" ("ns::Foo::bar" -> "bar").
std::string tail(const std::string& s) {
  size_t pos = s.rfind("::");
  return pos == std::string::npos ? s : s.substr(pos + 2);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1);
  std::vector<size_t> cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) prev[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The edit distance is at least the length difference; skipping those
// keeps suggestions cheap in libraries with tens of thousands of symbols.
size_t bounded_distance(const std::string& a, const std::string& b,
                        size_t limit) {
  size_t diff = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  return diff > limit ? diff : edit_distance(a, b);
}

std::string join_listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxListed; i++) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > kMaxListed) out += ", ...";
  return out;
}

// Up to kMaxListed names (without parameters) close to what was asked for:
// those containing it first, then those within a small edit distance.
std::vector<std::string> suggestions(const ElfFile& file,
                                     const std::string& pattern) {
  std::string needle = pattern;
  if (is_glob(needle)) {
    std::erase_if(needle, [](char c) {
      return c == '*' || c == '?' || c == '[' || c == ']';
    });
  } else {
    needle = strip_params(needle);
  }
  std::string needle_lower = lower(needle);
  std::string needle_tail = tail(needle);
  size_t max_distance = std::max<size_t>(1, needle_tail.size() / 3);

  std::set<std::string> pool;
  for (const Symbol& s : file.symbols())
    if (s.is_func && !is_clone(s) && !s.hidden_version)
      pool.insert(strip_params(s.demangled));

  std::vector<std::pair<size_t, std::string>> contains;
  std::vector<std::pair<size_t, std::string>> close;
  for (const std::string& cand : pool) {
    if (!needle.empty() &&
        lower(cand).find(needle_lower) != std::string::npos) {
      contains.emplace_back(cand.size(), cand);
      continue;
    }
    size_t d =
        std::min(bounded_distance(needle, cand, max_distance),
                 bounded_distance(needle_tail, tail(cand), max_distance));
    if (d <= max_distance) close.emplace_back(d, cand);
  }
  std::sort(contains.begin(), contains.end());
  std::sort(close.begin(), close.end());
  std::vector<std::string> out;
  for (auto* list : {&contains, &close})
    for (auto& [rank, name] : *list)
      if (out.size() < kMaxListed) out.push_back(name);
  return out;
}

Result<SymbolMatch> resolve_offset(const ElfFile& file,
                                   const std::string& pattern) {
  char* end = nullptr;
  errno = 0;
  uint64_t offset = std::strtoull(pattern.c_str() + 2, &end, 16);
  if (pattern.size() == 2 || errno != 0 || *end != '\0')
    return Status::Error(fmt::format("invalid file offset '{}'", pattern),
                         ErrorKind::kUsage);
  if (!file.offset_is_executable(offset))
    return Status::Error(
        fmt::format("offset {:#x} is not in an executable segment of {}",
                    offset, file.path()),
        ErrorKind::kUsage);
  SymbolMatch m;
  m.name = pattern;
  m.demangled = pattern;
  m.file_offset = offset;
  Result<uint64_t> vaddr = file.offset_to_vaddr(offset);
  if (vaddr.ok()) {
    m.vaddr = *vaddr;
    if (const Symbol* s = file.find_symbol_by_vaddr(m.vaddr); s && s->is_func)
      m.demangled = m.vaddr == s->vaddr ? s->demangled
                                        : fmt::format("{}+{:#x}", s->demangled,
                                                      m.vaddr - s->vaddr);
  }
  return m;
}

// The FUNC symbols the pattern names, one per address (aliases collapse).
std::map<uint64_t, const Symbol*> match(const ElfFile& file,
                                        const std::string& pattern) {
  std::map<uint64_t, const Symbol*> by_name, by_demangled, by_bare, by_glob;
  bool glob = is_glob(pattern);
  // Symbols are sorted best alias first, so emplace keeps the best one.
  for (const Symbol& s : file.symbols()) {
    if (!s.is_func || s.vaddr == 0 || s.hidden_version) continue;
    if (s.name == pattern) by_name.emplace(s.vaddr, &s);
    if (s.demangled == pattern) by_demangled.emplace(s.vaddr, &s);
    if (is_clone(s)) continue;
    if (glob) {
      if (fnmatch(pattern.c_str(), s.demangled.c_str(), 0) == 0 ||
          fnmatch(pattern.c_str(), s.name.c_str(), 0) == 0 ||
          fnmatch(pattern.c_str(), strip_params(s.demangled).c_str(), 0) == 0)
        by_glob.emplace(s.vaddr, &s);
    } else if (s.demangled.find(pattern) != std::string::npos &&
               strip_params(s.demangled) == pattern) {
      // The bare name is a substring of the demangled one: most symbols
      // are ruled out without building it.
      by_bare.emplace(s.vaddr, &s);
    }
  }
  // The most exact spelling wins: "foo(int)" is not ambiguous just because
  // "foo" would be.
  for (auto* m : {&by_name, &by_demangled, &by_bare, &by_glob})
    if (!m->empty()) return *m;
  return {};
}

// No ELF symbol name holds a NUL (the string table is NUL-separated), and
// fnmatch() would stop at one and match a shorter pattern.
bool is_pointer_pattern(const std::string& p) {
  return p.size() > 3 && p[0] == '*' && p[1] == '(' && p.back() == ')';
}

// "*(TABLE+OFF)": the function whose address the data symbol TABLE holds
// OFF bytes in (a function pointer in an exported table: GLib's
// g_idle_funcs holds its static g_idle_dispatch at +16), read from the
// slot's relocation as the dynamic linker would.
Result<SymbolMatch> resolve_pointer(const ElfFile& file,
                                    const std::string& pattern) {
  std::string inner = pattern.substr(2, pattern.size() - 3);
  std::string name = inner;
  uint64_t add = 0;
  auto bad = [&](const std::string& why) {
    return Status::Error(fmt::format("'{}': {}", pattern, why),
                         ErrorKind::kUsage);
  };
  auto trim = [](std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    while (!s.empty() && s.front() == ' ') s.erase(0, 1);
    return s;
  };
  if (size_t plus = inner.find('+'); plus != std::string::npos) {
    name = inner.substr(0, plus);
    std::string num = trim(inner.substr(plus + 1));
    char* end = nullptr;
    errno = 0;
    add = std::strtoull(num.c_str(), &end, 0);
    if (num.empty() || !std::isdigit(static_cast<unsigned char>(num[0])) ||
        errno != 0 || *end != '\0')
      return bad("expected *(SYMBOL+OFFSET), an offset in bytes");
  }
  name = trim(name);
  if (name.empty()) return bad("expected *(SYMBOL+OFFSET)");
  const Symbol* table = file.find_object(name);
  if (table == nullptr)
    return bad(fmt::format("no data symbol '{}' in {}", name, file.path()));
  if (table->size != 0 && (add > table->size || table->size - add < 8))
    return bad(fmt::format("offset {} is past the end of {} ({} bytes)", add,
                           name, table->size));
  Result<uint64_t> target = file.pointer_at(table->vaddr + add);
  if (!target.ok()) return target.status();
  if (*target == 0) return bad("the slot holds a null pointer");
  Result<uint64_t> offset = file.vaddr_to_offset(*target);
  if (!offset.ok() || !file.offset_is_executable(*offset))
    return bad(
        fmt::format("the slot holds {:#x}, not an address of code", *target));
  SymbolMatch m;
  m.name = pattern;
  m.demangled = pattern;
  m.vaddr = *target;
  m.file_offset = *offset;
  if (const Symbol* s = file.find_symbol_by_vaddr(*target);
      s && s->is_func && s->vaddr == *target) {
    m.demangled = s->demangled;
    m.size = s->size;
  }
  return m;
}

Status check_pattern(const std::string& pattern) {
  if (pattern.empty())
    return Status::Error("empty symbol name", ErrorKind::kUsage);
  if (pattern.find('\0') != std::string::npos)
    return Status::Error(
        fmt::format("symbol '{}' contains a NUL byte", log::printable(pattern)),
        ErrorKind::kUsage);
  return Status::Ok();
}

}  // namespace

std::string strip_params(const std::string& demangled) {
  size_t close = demangled.rfind(')');
  if (close == std::string::npos) return demangled;
  int depth = 0;
  size_t i = close + 1;
  while (i > 0) {
    i--;
    if (demangled[i] == ')') depth++;
    if (demangled[i] == '(' && --depth == 0) break;
  }
  if (depth != 0 || i == 0) return demangled;
  return drop_return_type(demangled.substr(0, i));
}

Result<SymbolMatch> resolve_symbol(const std::string& path,
                                   const std::string& pattern) {
  LT_RETURN_IF_ERROR(check_pattern(pattern));
  Result<ElfFile> file = ElfFile::Open(path);
  if (!file.ok()) return file.status();
  return resolve_symbol(*file, pattern);
}

Result<SymbolMatch> resolve_symbol(const ElfFile& file,
                                   const std::string& pattern) {
  const std::string& path = file.path();
  LT_RETURN_IF_ERROR(check_pattern(pattern));
  if (is_pointer_pattern(pattern)) return resolve_pointer(file, pattern);
  if (pattern.size() >= 2 && pattern[0] == '0' &&
      (pattern[1] == 'x' || pattern[1] == 'X'))
    return resolve_offset(file, pattern);

  bool any_func = std::any_of(file.symbols().begin(), file.symbols().end(),
                              [](const Symbol& s) { return s.is_func; });
  if (!file.has_symtab() && !any_func)
    return Status::Error(
        fmt::format("{} has no symbol table (stripped); give a 0x file offset",
                    path),
        ErrorKind::kUsage);

  std::map<uint64_t, const Symbol*> found = match(file, pattern);
  if (found.empty()) {
    Status st =
        Status::Error(fmt::format("symbol '{}' not found in {}", pattern, path),
                      ErrorKind::kUsage);
    std::vector<std::string> close = suggestions(file, pattern);
    if (!close.empty()) st.with_hint("did you mean: " + join_listed(close));
    return st;
  }
  if (found.size() > 1) {
    // Same-named matches (static functions of different files, unaliased
    // constructor variants) are told apart by address.
    std::map<std::string, int> seen;
    for (auto& [vaddr, s] : found) seen[s->demangled]++;
    std::vector<std::string> names;
    for (auto& [vaddr, s] : found) {
      Result<uint64_t> off = file.vaddr_to_offset(vaddr);
      names.push_back(seen[s->demangled] > 1 && off.ok()
                          ? fmt::format("{} at {:#x}", s->demangled, *off)
                          : s->demangled);
    }
    Status st = Status::Error(
        fmt::format("symbol '{}' is ambiguous in {}: {} matches: {}", pattern,
                    path, found.size(), join_listed(names)),
        ErrorKind::kUsage);
    st.with_hint(
        "give the full name with parameters, the mangled name or a 0x file "
        "offset");
    return st;
  }

  const Symbol& s = *found.begin()->second;
  Result<uint64_t> offset = file.vaddr_to_offset(s.vaddr);
  if (!offset.ok() || !file.offset_is_executable(*offset))
    return Status::Error(
        fmt::format(
            "symbol '{}' at {:#x} is not in an executable segment of {}",
            s.demangled, s.vaddr, path),
        ErrorKind::kUsage);
  return SymbolMatch{s.name, s.demangled, s.vaddr, s.size, *offset};
}

Result<std::vector<SymbolMatch>> resolve_symbols(const std::string& path,
                                                 const std::string& pattern,
                                                 size_t max_matches) {
  LT_RETURN_IF_ERROR(check_pattern(pattern));
  Result<ElfFile> file = ElfFile::Open(path);
  if (!file.ok()) return file.status();
  return resolve_symbols(*file, pattern, max_matches);
}

Result<std::vector<SymbolMatch>> resolve_symbols(const ElfFile& f,
                                                 const std::string& pattern,
                                                 size_t max_matches) {
  LT_RETURN_IF_ERROR(check_pattern(pattern));
  const ElfFile* file = &f;
  const std::string& path = f.path();
  if (!is_glob(pattern) || is_pointer_pattern(pattern)) {
    Result<SymbolMatch> one = resolve_symbol(*file, pattern);
    if (!one.ok()) return one.status();
    return std::vector<SymbolMatch>{*one};
  }
  std::map<uint64_t, const Symbol*> found = match(*file, pattern);
  if (found.empty()) return resolve_symbol(*file, pattern).status();
  if (found.size() > max_matches)
    return Status::Error(
        fmt::format("glob '{}' matches {} function{} in {}; at most {} can "
                    "be probed here",
                    pattern, found.size(), found.size() == 1 ? "" : "s", path,
                    max_matches),
        ErrorKind::kUsage);
  std::vector<SymbolMatch> out;
  for (auto& [vaddr, s] : found) {
    Result<uint64_t> offset = file->vaddr_to_offset(vaddr);
    if (!offset.ok() || !file->offset_is_executable(*offset)) continue;
    out.push_back(
        SymbolMatch{s->name, s->demangled, s->vaddr, s->size, *offset});
  }
  if (out.empty())
    return Status::Error(
        fmt::format("glob '{}' matches no executable function in {}", pattern,
                    path),
        ErrorKind::kUsage);
  return out;
}

}  // namespace looptrace::elf
