#include "profiles/inspect.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/exit.h"
#include "base/log.h"
#include "elf/elf_file.h"
#include "elf/resolve.h"
#include "proc/maps.h"
#include "proc/pid.h"
#include "profiles/profile.h"
#include "profiles/resolve.h"

namespace looptrace {
namespace {

int flushed() {
  std::fflush(stdout);
  return std::ferror(stdout) ? 1 : 0;
}

// Where the built-in profiles' probes attach in `path`: function offset
// (before any endbr64 skip) -> "glib dispatch GLib timeout", and the probe
// names of those no symbol covers ("*(g_timeout_funcs+16)").
struct Roles {
  std::map<uint64_t, std::vector<std::string>> at;
  std::map<uint64_t, std::string> unnamed;
};

Roles builtin_roles(const elf::ElfFile& file, const ResolveContext& ctx) {
  Roles roles;
  // A probe one built-in takes from another (gtk3 has glib's) is named
  // once, by the first.
  std::set<std::pair<std::string, std::string>> seen;
  for (const std::string& name : builtin_profile_names()) {
    auto prof = load_profile(name);
    if (!prof.ok()) continue;
    for (const ProbeDef& p : prof->probes) {
      if (!seen.insert({p.binary, p.symbol}).second) continue;
      auto bin = resolve_binary(p.binary, ctx);
      std::error_code ec;
      if (!bin.ok() || !std::filesystem::equivalent(*bin, file.path(), ec))
        continue;
      auto m = elf::resolve_symbol(file, p.symbol);
      if (!m.ok()) continue;
      std::string what = fmt::format("{} {}", name, role_name(p.role));
      if (!p.label.empty()) what += " (" + p.label + ")";
      roles.at[m->file_offset].push_back(what);
      if (p.symbol.rfind("*(", 0) == 0 && m->demangled == p.symbol)
        roles.unnamed[m->file_offset] = p.symbol;
    }
  }
  return roles;
}

// A call probe's sites, after its function: ", its virtual calls through
// vtable+0x10 passing a pointer"; nothing for any other probe.
std::string call_text(const ProbeDef& p) {
  if (!p.call) return {};
  if (!p.call->to.empty())
    return fmt::format(", its calls to {}", log::printable(p.call->to, 80));
  std::string out = ", its virtual calls";
  if (p.call->slot >= 0)
    out += fmt::format(" through vtable+{:#x}", p.call->slot);
  if (p.call->arg1_bits != 0)
    out += p.call->arg1_bits == 64 ? " passing a pointer" : " passing an int";
  if (p.call->at >= 0) out += fmt::format(" at +{:#x}", p.call->at);
  return out;
}

bool matches(const std::string& glob, const elf::Symbol& s) {
  return glob.empty() || fnmatch(glob.c_str(), s.demangled.c_str(), 0) == 0 ||
         fnmatch(glob.c_str(), s.name.c_str(), 0) == 0;
}

// One binary's functions, one per address, by name.
Status list_file(const std::string& path, const std::string& shown,
                 const std::string& glob, const ResolveContext& ctx,
                 size_t* listed) {
  auto file = elf::ElfFile::Open(path);
  if (!file.ok()) return file.status();
  Roles roles = builtin_roles(*file, ctx);
  std::map<std::string, uint64_t> lines;  // name -> function file offset
  std::set<uint64_t> seen;
  for (const elf::Symbol& s : file->symbols()) {
    if (!s.is_func || s.hidden_version || !matches(glob, s)) continue;
    auto off = file->vaddr_to_offset(s.vaddr);
    if (!off.ok() || !file->offset_is_executable(*off)) continue;
    if (!seen.insert(s.vaddr).second) continue;  // an alias
    lines.emplace(s.demangled, *off);
  }
  // Attach points with no symbol (a static function reached through a
  // table): listed by the form that probes them.
  for (const auto& [off, name] : roles.unnamed)
    if (glob.empty() || fnmatch(glob.c_str(), name.c_str(), 0) == 0)
      lines.emplace(name, off);
  for (const auto& [name, off] : lines) {
    std::string line = shown + ":" + name;
    if (auto r = roles.at.find(off); r != roles.at.end())
      for (const std::string& what : r->second) line += "  [" + what + "]";
    // Symbol names and paths are the binary's bytes: escaped.
    std::printf("%s\n", printable(line).c_str());
  }
  *listed += lines.size();
  return Status::Ok();
}

}  // namespace

bool names_mapped_file(pid_t pid, const std::string& name) {
  if (name.find_first_of("*?[") != std::string::npos) return false;
  auto maps = proc::read_maps(static_cast<uint32_t>(pid));
  return maps.ok() && proc::find_mapped_file(*maps, name) != nullptr;
}

int run_list(const InspectArgs& a) {
  ResolveContext ctx;
  ctx.pid = a.pid;
  ctx.self_dir = a.self_dir;
  size_t listed = 0;
  if (a.pid > 0)
    if (Status st = proc::check_pid_target(a.pid); !st.ok()) return fail(st);
  if (a.pid > 0 && a.binary.empty()) {
    auto maps = proc::read_maps(static_cast<uint32_t>(a.pid));
    if (!maps.ok()) return fail(maps.status());
    std::set<std::string> files;
    for (const MapEntry& m : *maps)
      if (m.is_file() && m.executable() && !m.deleted) files.insert(m.path);
    for (const std::string& f : files) {
      auto path = resolve_binary(f, ctx);  // through the process's root
      if (!path.ok()) continue;
      Status st = list_file(*path, f, a.glob, ctx, &listed);
      if (!st.ok()) log::info("{}", st.message());  // a non-ELF mapping
    }
  } else {
    auto path = resolve_binary(a.binary, ctx);
    if (!path.ok()) return fail(path.status());
    // With -p: named as the process maps it, not through its root.
    auto shown = a.pid > 0 ? proc::find_mapped_library(
                                 static_cast<uint32_t>(a.pid), a.binary)
                           : path;
    if (!shown.ok()) return fail(shown.status());
    if (Status st = list_file(*path, *shown, a.glob, ctx, &listed); !st.ok())
      return fail(st);
  }
  if (listed == 0 && !a.glob.empty())
    std::fprintf(stderr, "looptrace: no function matches '%s'\n",
                 printable(a.glob).c_str());
  return flushed();
}

int run_check(const InspectArgs& a) {
  auto prof = load_profile(a.profile);
  if (!prof.ok()) return fail(prof.status());
  ResolveContext ctx;
  ctx.pid = a.pid;
  ctx.self_dir = a.self_dir;
  if (a.pid > 0)
    if (Status st = proc::check_pid_target(a.pid); !st.ok()) return fail(st);
  std::string binary;
  if (!a.binary.empty()) {
    auto path = resolve_binary(a.binary, ctx);
    if (!path.ok()) return fail(path.status());
    binary = *path;
  }
  size_t ok = 0;
  std::vector<std::string> lines;
  for (const ProbeDef& p : prof->probes) {
    std::vector<ProbeDef> one{p};
    if (!binary.empty()) one[0].binary = binary;
    std::string what = fmt::format("{:<14} {}:{}{}", role_name(p.role),
                                   one[0].binary, p.symbol, call_text(p));
    if (!p.label.empty()) what += " (" + p.label + ")";
    Status st = resolve_probes(&one, ctx);
    if (!st.ok()) {
      lines.push_back(fmt::format("  missing  {}: {}", what, st.message()));
      continue;
    }
    ++ok;
    for (const ProbeDef& r : one)
      lines.push_back(
          fmt::format("  ok       {} -> {} {} at offset {:#x}{}", what, r.path,
                      r.resolved_symbol, r.file_offset,
                      r.version.empty() ? "" : " (" + r.version + ")"));
  }
  std::string where = a.pid > 0 ? fmt::format(" in pid {}", a.pid) : "";
  std::printf("%s: %zu of %zu probes resolve%s\n",
              printable(prof->name).c_str(), ok, prof->probes.size(),
              where.c_str());
  // Paths and symbols of the process's files: escaped.
  for (const std::string& l : lines) std::printf("%s\n", printable(l).c_str());
  int rc = flushed();
  if (rc != 0) return rc;
  return ok == prof->probes.size() ? 0 : 1;
}

int run_profiles() {
  for (const std::string& name : builtin_profile_names()) {
    auto p = load_profile(name);
    if (!p.ok()) return fail(p.status());
    std::printf("%-8s %s\n", p->name.c_str(), p->description.c_str());
    for (const ProbeDef& d : p->probes)
      std::printf("         %-14s %s:%s%s%s%s\n", role_name(d.role),
                  d.binary.c_str(), d.symbol.c_str(), call_text(d).c_str(),
                  d.label.empty() ? "" : "  ", d.label.c_str());
  }
  std::fflush(stdout);
  return std::ferror(stdout) ? 1 : 0;
}

}  // namespace looptrace
