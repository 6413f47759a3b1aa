#include "profiles/resolve.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "base/log.h"
#include "elf/call_sites.h"
#include "elf/elf_file.h"
#include "elf/resolve.h"
#include "elf/resolve_cache.h"
#include "proc/maps.h"
#include "proc/process.h"
#include "profiles/profile.h"

namespace looptrace {
namespace {

std::string basename_of(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// x86 CET builds (Ubuntu, Fedora) start every function with endbr64, an
// instruction the kernel's uprobe code cannot emulate: it would single-step
// it out of line on every call, about 6x the cost of an emulated one
// (docs/benchmarks.md). The probe goes on the next instruction instead;
// the function still runs from its start.
uint64_t skip_endbr64(const std::string& path, uint64_t offset) {
  static constexpr unsigned char kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return offset;
  unsigned char buf[sizeof(kEndbr64)] = {};
  ssize_t n = pread(fd, buf, sizeof(buf), static_cast<off_t>(offset));
  close(fd);
  if (n == static_cast<ssize_t>(sizeof(buf)) &&
      std::memcmp(buf, kEndbr64, sizeof(buf)) == 0)
    return offset + sizeof(kEndbr64);
  return offset;
}

bool is_offset(const std::string& symbol) {
  return symbol.size() > 2 && symbol[0] == '0' &&
         (symbol[1] == 'x' || symbol[1] == 'X');
}

}  // namespace

size_t single_threaded_check_skip(const uint8_t* code, size_t n) {
  size_t at = 0;
  // cmpb $imm8, disp32(%rip): 80 3d d32 imm8
  if (n < 7 || code[0] != 0x80 || code[1] != 0x3d) return 0;
  at = 7;
  // mov %ecx,%r10d (the syscall's 4th argument register): 41 89 ca
  if (n >= at + 3 && code[at] == 0x41 && code[at + 1] == 0x89 &&
      code[at + 2] == 0xca)
    at += 3;
  // A short conditional jump, which the kernel emulates.
  if (n >= at + 2 && code[at] >= 0x70 && code[at] <= 0x7f) return at;
  return 0;
}

uint64_t uprobe_offset(const std::string& path, uint64_t offset) {
  offset = skip_endbr64(path, offset);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return offset;
  uint8_t buf[16] = {};
  ssize_t n = pread(fd, buf, sizeof(buf), static_cast<off_t>(offset));
  close(fd);
  if (n <= 0) return offset;
  return offset + single_threaded_check_skip(buf, static_cast<size_t>(n));
}

Result<std::string> resolve_binary(const std::string& binary,
                                   const ResolveContext& ctx) {
  if (ctx.pid > 0) {
    auto mapped =
        proc::find_mapped_library(static_cast<uint32_t>(ctx.pid), binary);
    if (mapped.ok()) {
      // Through the process's root, so a binary inside a container resolves.
      std::string via_root =
          proc::live_proc_dir(static_cast<uint32_t>(ctx.pid)) + "/root" +
          *mapped;
      if (access(via_root.c_str(), R_OK) == 0) return via_root;
      return mapped;
    }
    return mapped.status();
  }
  if (!ctx.command_path.empty() &&
      (binary == ctx.command_path || binary == basename_of(ctx.command_path)))
    return ctx.command_path;
  auto found = elf::find_library(binary);
  if (found.ok()) return found;
  // The bundled reference app sits beside looptrace in a build tree, and
  // in libexec/looptrace/ of an installed one (cmake/Install.cmake).
  if (!ctx.self_dir.empty() && binary.find('/') == std::string::npos) {
    for (const std::string& cand :
         {ctx.self_dir + "/" + binary,
          ctx.self_dir + "/" + binary + "/" + binary,
          ctx.self_dir + "/" LOOPTRACE_LIBEXEC_FROM_BIN "/" + binary}) {
      if (access(cand.c_str(), X_OK) == 0 &&
          std::filesystem::is_regular_file(cand))
        return cand;
    }
  }
  return found.status();
}

namespace {

// ELF files opened for resolution, kept for the process's life: the probes
// of a profile in one binary (node: 110 MB, 100 k symbols to demangle)
// load its symbol table once, and so do `check`'s one-by-one resolutions.
// Keyed by path and the file's identity: a rebuilt file is read again.
// The library's version from its exported version variables, if it is one
// the gate was checked against ("GLib 2.74"); an error naming both
// otherwise: a structure read on another version might be wrong, and a
// wrong read is worse than none.
Result<std::string> gated_version(const elf::ElfFile& file,
                                  const VersionGate& gate) {
  auto read = [&](const std::string& name) -> Result<uint32_t> {
    if (const elf::Symbol* s = file.find_object(name))
      return file.u32_at(s->vaddr);
    return Status::Error(
        fmt::format("{} has no {} symbol: not a {} whose version can be "
                    "read",
                    file.path(), name, gate.name),
        ErrorKind::kUsage);
  };
  auto major = read(gate.major);
  if (!major.ok()) return major.status();
  auto minor = read(gate.minor);
  if (!minor.ok()) return minor.status();
  std::string found = fmt::format("{}.{}", *major, *minor);
  if (std::find(gate.checked.begin(), gate.checked.end(), found) !=
      gate.checked.end())
    return fmt::format("{} {}", gate.name, found);
  return Status::Error(
             fmt::format("{} is {} {}; the profile was checked against {} "
                         "{} only, and reads structures that may differ",
                         file.path(), gate.name, found, gate.name,
                         fmt::join(gate.checked, ", ")),
             ErrorKind::kUsage)
      .with_hint(
          "probe without structure reads (--dispatch BINARY:SYMBOL), or "
          "copy the profile to a file and add the version once checked");
}

Result<const elf::ElfFile*> open_cached(const std::string& path) {
  using Key = std::tuple<std::string, dev_t, ino_t, off_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<elf::ElfFile>> cache;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    Result<elf::ElfFile> f = elf::ElfFile::Open(path);  // says why
    if (!f.ok()) return f.status();
    return Status::Error(fmt::format("stat {}: {}", path, strerror(errno)));
  }
  Key key{path,       st.st_dev,         st.st_ino,
          st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  Result<elf::ElfFile> f = elf::ElfFile::Open(path);
  if (!f.ok()) return f.status();
  auto owned = std::make_unique<elf::ElfFile>(std::move(*f));
  const elf::ElfFile* raw = owned.get();
  cache.emplace(std::move(key), std::move(owned));
  return raw;
}

// What a kept resolution is valid for: the file's code (its build-id) and
// the symbol tables a name can be resolved from, by their sizes (a
// stripped copy keeps the build-id, not the names); "" without a
// build-id. Lowercase hex, as the cache wants its keys.
std::string cache_key(const elf::ElfFile& f) {
  if (f.build_id().empty()) return "";
  auto size = [&f](const char* name) -> uint64_t {
    auto b = f.section_bytes(name);
    return b ? b->size() : 0;
  };
  return fmt::format("{}{:012x}{:012x}{:012x}", f.build_id(), size(".symtab"),
                     size(".dynsym"), size(".gnu_debugdata"));
}

// The functions `p.symbol` names in the file at `path` (and the version
// its gate reads). A binary's resolutions are kept by its build-id across
// runs (elf/resolve_cache.h), with its symbol tables' sizes
// (cache_key): a hit reads the file's headers only. A hit is
// taken only if each match still maps through the file's segments to its
// offset, in executable code; a gated probe reads the file whole anyway.
Result<std::vector<elf::SymbolMatch>> find_matches(const std::string& path,
                                                   const ProbeDef& p,
                                                   std::string* version) {
  const elf::ResolveCache cache(elf::default_resolve_cache_dir());
  std::string key;
  if (!p.gate && !is_offset(p.symbol)) {
    auto head = elf::ElfFile::Open(path, elf::ElfFile::Read::kHeaders);
    if (head.ok()) key = cache_key(*head);
    if (auto hit = head.ok() ? cache.get(key, p.symbol) : std::nullopt) {
      bool valid =
          std::all_of(hit->begin(), hit->end(), [&](const elf::SymbolMatch& m) {
            auto off = head->vaddr_to_offset(m.vaddr);
            return off.ok() && *off == m.file_offset &&
                   head->offset_is_executable(m.file_offset);
          });
      if (valid) {
        log::debug("resolve", "{}: {} from the cache ({})", path, p.symbol,
                   key);
        return *hit;
      }
    }
  }
  auto file = open_cached(path);
  if (!file.ok()) return file.status();
  if (p.gate) {
    auto v = gated_version(**file, *p.gate);
    if (!v.ok()) return v.status();
    *version = *v;
  }
  auto matches = elf::resolve_symbols(**file, p.symbol, SIZE_MAX);
  if (matches.ok() && !key.empty()) cache.put(key, p.symbol, *matches);
  return matches;
}

// A call probe's sites in each function it names (elf/call_sites.h): one
// match per virtual call through its slot, at the call instruction, each
// one's return address in `returns`. A function with none is a build the
// probe does not match: an error naming it.
Result<std::vector<elf::SymbolMatch>> call_sites(
    const std::string& path, const ProbeDef& p,
    const std::vector<elf::SymbolMatch>& funcs,
    std::vector<uint64_t>* returns) {
  auto file = open_cached(path);
  if (!file.ok()) return file.status();
  std::vector<elf::SymbolMatch> out;
  for (const elf::SymbolMatch& m : funcs) {
    const std::string name = m.demangled.empty() ? m.name : m.demangled;
    // Site s, as the match of a probe "name+OFFSET (what)".
    auto add = [&](const elf::CallSite& s, const std::string& what) -> Status {
      auto at = (*file)->vaddr_to_offset(s.vaddr);
      if (!at.ok()) return at.status();
      auto back = (*file)->vaddr_to_offset(s.vaddr + s.length);
      if (!back.ok()) return back.status();
      elf::SymbolMatch c = m;
      c.file_offset = *at;
      c.demangled = fmt::format("{}+{:#x} ({})", name, s.vaddr - m.vaddr, what);
      out.push_back(std::move(c));
      returns->push_back(*back);
      return Status::Ok();
    };
    if (!p.call->to.empty()) {
      auto sites = elf::calls_to(**file, m, p.call->to);
      if (!sites.ok()) return sites.status();
      if (sites->empty())
        return Status::Error(
            fmt::format("{}: {} makes no call to {}: this build does not "
                        "match the probe",
                        log::printable(path, 120), log::printable(name, 120),
                        log::printable(p.call->to, 120)),
            ErrorKind::kUsage);
      for (const elf::CallSite& s : *sites)
        LT_RETURN_IF_ERROR(add(s, "call " + log::printable(p.call->to, 120)));
      continue;
    }
    auto sites = elf::virtual_calls(**file, m);
    if (!sites.ok()) return sites.status();
    size_t n = 0;
    for (const elf::CallSite& s : *sites) {
      if ((p.call->slot >= 0 && s.slot != p.call->slot) ||
          (p.call->arg1_bits != 0 && s.arg1_bits != p.call->arg1_bits) ||
          (p.call->at >= 0 &&
           s.vaddr - m.vaddr != static_cast<uint64_t>(p.call->at)))
        continue;
      LT_RETURN_IF_ERROR(add(s, s.text));
      ++n;
    }
    if (n == 0 && p.call->at >= 0) {
      std::string offsets;
      for (const elf::CallSite& s : *sites)
        offsets += fmt::format("{}+{:#x}", offsets.empty() ? "" : ", ",
                               s.vaddr - m.vaddr);
      return Status::Error(
          fmt::format("{}: {}+{:#x} is no virtual call ({})",
                      log::printable(path, 120), log::printable(name, 120),
                      p.call->at,
                      offsets.empty() ? "it makes none"
                                      : "its virtual calls: " + offsets),
          ErrorKind::kUsage);
    }
    if (n == 0)
      return Status::Error(
          fmt::format(
              "{}: {} makes no virtual call{}: this build does not "
              "match the probe ({} virtual calls in it)",
              log::printable(path, 120), log::printable(name, 120),
              p.call->slot >= 0
                  ? fmt::format(" through vtable offset {:#x}", p.call->slot)
                  : std::string(),
              sites->size()),
          ErrorKind::kUsage);
  }
  return out;
}

std::string probe_name(const ProbeDef& p) {
  return fmt::format("{} {}:{}", role_name(p.role),
                     log::printable(p.binary, 80),
                     log::printable(p.symbol, 120));
}

bool same_keys(const ProbeDef& a, const ProbeDef& b) {
  return std::equal(a.keys.begin(), a.keys.end(), b.keys.begin(), b.keys.end(),
                    [](const KeyDef& x, const KeyDef& y) {
                      return x.name == y.name && x.expr == y.expr &&
                             x.format == y.format;
                    });
}

// Two probes at one instruction (a name given twice, a profile's function
// given again with --dispatch, overlapping globs) would each see every
// call: every span twice, every call "lost" once per copy. The same probe
// twice is kept once; two that differ (role, keys) are refused.
Status drop_duplicates(std::vector<ProbeDef>* probes) {
  std::map<std::tuple<dev_t, ino_t, uint64_t>, size_t> at;  // -> index kept
  std::vector<ProbeDef> kept;
  for (ProbeDef& p : *probes) {
    struct stat st {};
    if (p.role == LT_ROLE_INPUT_RECV || p.role == LT_ROLE_INPUT_SEND ||
        stat(p.path.c_str(), &st) != 0) {
      kept.push_back(std::move(p));
      continue;
    }
    auto [it, added] =
        at.try_emplace({st.st_dev, st.st_ino, p.file_offset}, kept.size());
    if (added) {
      kept.push_back(std::move(p));
      continue;
    }
    const ProbeDef& first = kept[it->second];
    const std::string where =
        fmt::format("{} at offset {:#x} ({})", log::printable(p.path, 120),
                    p.file_offset, log::printable(p.resolved_symbol, 120));
    if (first.role != p.role || !same_keys(first, p))
      return Status::Error(
          fmt::format("{} and {} attach at the same function, {}: each call "
                      "would be counted twice; give it once",
                      probe_name(first), probe_name(p), where),
          ErrorKind::kUsage);
    log::warn("{} and {} are the same function, {}: probed once",
              probe_name(first), probe_name(p), where);
  }
  for (size_t i = 0; i < kept.size(); ++i)
    kept[i].id = static_cast<uint32_t>(i);
  *probes = std::move(kept);
  return Status::Ok();
}

}  // namespace

Status resolve_probes(std::vector<ProbeDef>* probes,
                      const ResolveContext& ctx) {
  // Input roles are socket-call probes: they take no entry in the kernel's
  // probe table, the others one each (a glob one per function).
  auto takes_slot = [](const ProbeDef& p) {
    return p.role != LT_ROLE_INPUT_RECV && p.role != LT_ROLE_INPUT_SEND;
  };
  size_t given = static_cast<size_t>(
      std::count_if(probes->begin(), probes->end(), takes_slot));
  if (given > LT_MAX_PROBES)
    return Status::Error(fmt::format("{} probes given; at most {} can be "
                                     "attached in one run",
                                     given, LT_MAX_PROBES),
                         ErrorKind::kUsage);
  std::vector<ProbeDef> out;
  size_t slots = 0;        // taken by the probes resolved so far
  size_t pending = given;  // probes not yet resolved that need one
  for (const ProbeDef& p : *probes) {
    auto path = resolve_binary(p.binary, ctx);
    if (!path.ok()) return path.status();
    std::string version;
    auto matches = find_matches(*path, p, &version);
    if (!matches.ok()) return matches.status();
    // A call probe is a probe per call site of the functions it names.
    std::vector<uint64_t> returns;
    if (p.call) {
      matches = call_sites(*path, p, *matches, &returns);
      if (!matches.ok()) return matches.status();
    }
    if (takes_slot(p)) {
      --pending;
      if (slots + matches->size() + pending > LT_MAX_PROBES)
        return Status::Error(
                   fmt::format("glob '{}' matches {} function{} in {}; with "
                               "the {} other probe{} that is {}, and at most "
                               "{} can be attached in one run",
                               p.symbol, matches->size(),
                               matches->size() == 1 ? "" : "s", *path,
                               slots + pending, slots + pending == 1 ? "" : "s",
                               slots + pending + matches->size(),
                               LT_MAX_PROBES),
                   ErrorKind::kUsage)
            .with_hint("narrow the glob, or name the functions one by one");
      slots += matches->size();
    }
    // A glob becomes one probe per function it matches.
    for (size_t i = 0; i < matches->size(); ++i) {
      const elf::SymbolMatch& m = (*matches)[i];
      ProbeDef r = p;
      r.id = static_cast<uint32_t>(out.size());
      r.path = *path;
      // An explicit 0x offset is taken as given; so is a call site (no
      // endbr64 or single-thread check to skip in the middle of code).
      r.file_offset = is_offset(p.symbol) || p.call
                          ? m.file_offset
                          : uprobe_offset(*path, m.file_offset);
      if (p.call) r.return_offset = returns[i];
      r.resolved_symbol = m.demangled.empty() ? m.name : m.demangled;
      r.version = version;
      log::debug("resolve", "{}:{} -> {} offset {:#x} ({})", r.binary, r.symbol,
                 r.path, r.file_offset, r.resolved_symbol);
      out.push_back(std::move(r));
    }
  }
  *probes = std::move(out);
  return drop_duplicates(probes);
}

}  // namespace looptrace
