// Probe resolution: BINARY (path or library name) -> ELF path, SYMBOL ->
// file offset, given where the traced code lives (a pid, a command, or the
// whole system).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "profiles/probe.h"

namespace looptrace {

struct ResolveContext {
  pid_t pid = -1;            // -p: look BINARY up in this process's mappings
  std::string command_path;  // -- COMMAND: the program about to run
  std::string self_dir;      // where looptrace lives (finds the bundled refapp)
};

// Finds the ELF file a probe's BINARY names.
Result<std::string> resolve_binary(const std::string& binary,
                                   const ResolveContext& ctx);

// Resolves every probe in place and numbers them (id = index).
Status resolve_probes(std::vector<ProbeDef>* probes, const ResolveContext& ctx);

}  // namespace looptrace
