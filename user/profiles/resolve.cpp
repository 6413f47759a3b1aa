#include "profiles/resolve.h"

#include <unistd.h>

#include <filesystem>

#include "base/log.h"
#include "elf/resolve.h"
#include "proc/maps.h"
#include "proc/process.h"

namespace looptrace {
namespace {

std::string basename_of(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace

Result<std::string> resolve_binary(const std::string& binary,
                                   const ResolveContext& ctx) {
  if (ctx.pid > 0) {
    auto mapped =
        proc::find_mapped_library(static_cast<uint32_t>(ctx.pid), binary);
    if (mapped.ok()) {
      // Through the process's root, so a binary inside a container resolves.
      std::string via_root = fmt::format("/proc/{}/root{}", ctx.pid, *mapped);
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
  // The bundled reference app sits beside looptrace in a build tree.
  if (!ctx.self_dir.empty() && binary.find('/') == std::string::npos) {
    for (const std::string& cand :
         {ctx.self_dir + "/" + binary,
          ctx.self_dir + "/" + binary + "/" + binary}) {
      if (access(cand.c_str(), X_OK) == 0 &&
          std::filesystem::is_regular_file(cand))
        return cand;
    }
  }
  return found.status();
}

Status resolve_probes(std::vector<ProbeDef>* probes,
                      const ResolveContext& ctx) {
  std::vector<ProbeDef> out;
  for (const ProbeDef& p : *probes) {
    auto path = resolve_binary(p.binary, ctx);
    if (!path.ok()) return path.status();
    size_t room = out.size() < LT_MAX_PROBES ? LT_MAX_PROBES - out.size() : 0;
    auto matches = elf::resolve_symbols(*path, p.symbol, room);
    if (!matches.ok()) return matches.status();
    // A glob becomes one probe per function it matches.
    for (const elf::SymbolMatch& m : *matches) {
      ProbeDef r = p;
      r.id = static_cast<uint32_t>(out.size());
      r.path = *path;
      r.file_offset = m.file_offset;
      r.resolved_symbol = m.demangled.empty() ? m.name : m.demangled;
      log::debug("resolve", "{}:{} -> {} offset {:#x} ({})", r.binary, r.symbol,
                 r.path, r.file_offset, r.resolved_symbol);
      out.push_back(std::move(r));
    }
  }
  *probes = std::move(out);
  return Status::Ok();
}

}  // namespace looptrace
