#include "symbolize/kernel_symbols.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>

namespace looptrace {
namespace {

// One line of /proc/kallsyms, "ffffffff813a4380 t finish_task_switch\t[mod]";
// false for a line that is not one or an address of 0 (hidden by
// kptr_restrict). `module` is empty for the kernel's own symbols.
struct KallsymsLine {
  uint64_t addr = 0;
  char type = 0;
  std::string_view name;
  std::string_view module;
};
bool parse_line(std::string_view line, KallsymsLine* out) {
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 + 3 > line.size() ||
      line[sp1 + 2] != ' ')
    return false;
  auto [p, ec] = std::from_chars(line.data(), line.data() + sp1, out->addr, 16);
  if (ec != std::errc() || p != line.data() + sp1 || out->addr == 0)
    return false;
  out->type = line[sp1 + 1];
  std::string_view rest = line.substr(sp1 + 3);
  size_t tab = rest.find('\t');
  out->name = rest.substr(0, tab);
  out->module =
      tab == std::string_view::npos ? std::string_view() : rest.substr(tab + 1);
  return !out->name.empty();
}

}  // namespace

void KernelSymbols::load_text(std::string_view text) {
  loaded_ = true;
  syms_.clear();
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text =
        nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    KallsymsLine l;
    // Text symbols only: code is what a stack holds.
    if (!parse_line(line, &l) ||
        (l.type != 't' && l.type != 'T' && l.type != 'w' && l.type != 'W'))
      continue;
    syms_.push_back({l.addr, std::string(l.name),
                     l.module.empty() ? "[kernel]" : std::string(l.module)});
  }
  std::stable_sort(syms_.begin(), syms_.end(),
                   [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
}

void KernelSymbols::load() {
  if (loaded_) return;
  std::ifstream in("/proc/kallsyms");
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  load_text(text);
}

std::vector<uint64_t> KernelSymbols::scan_for(
    std::istream& in, const std::vector<std::string>& names) {
  std::vector<uint64_t> out(names.size(), 0);
  size_t left = names.size();
  std::string line;
  while (left > 0 && std::getline(in, line)) {
    KallsymsLine l;
    if (!parse_line(line, &l)) continue;
    for (size_t i = 0; i < names.size(); ++i) {
      if (out[i] != 0 || l.name != names[i]) continue;
      out[i] = l.addr;
      --left;
    }
  }
  return out;
}

std::vector<uint64_t> KernelSymbols::find(
    const std::vector<std::string>& names) {
  std::ifstream in("/proc/kallsyms");
  return scan_for(in, names);
}

Frame KernelSymbols::symbolize(uint64_t addr) {
  load();
  Frame f;
  f.addr = addr;
  f.module = "[kernel]";
  auto next =
      std::upper_bound(syms_.begin(), syms_.end(), addr,
                       [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (next == syms_.begin()) return f;
  const Sym& s = *std::prev(next);
  // Far past the nearest symbol: not a function we know.
  if (addr - s.addr > (1u << 20)) return f;
  f.function = s.name;
  f.module = s.module;
  f.offset = addr - s.addr;
  return f;
}

Frame SystemSymbolizer::symbolize(uint32_t pid, uint64_t addr) {
  if (pid == kKernelPid) return kernel_.symbolize(addr);
  return procs_->symbolize(pid, addr);
}

}  // namespace looptrace
