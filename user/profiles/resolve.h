// Probe resolution: BINARY (path or library name) -> ELF path, SYMBOL ->
// file offset, given where the traced code lives (a pid, a command, or the
// whole system).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/probe.h"

namespace looptrace {

struct ResolveContext {
  pid_t pid = -1;            // -p: look BINARY up in this process's mappings
  std::string command_path;  // -- COMMAND: the program about to run
  std::string self_dir;      // where looptrace lives (finds the bundled refapp)
};

// Finds the ELF file a probe's BINARY names.
Result<std::string> resolve_binary(const std::string& binary,
                                   const ResolveContext& ctx);

// Bytes at the start of a function (x86-64) a uprobe should skip so that it
// lands on an instruction the kernel emulates instead of single-stepping it
// out of line (~6x the cost): glibc's socket wrappers open with
// `cmpb $0,__libc_single_threaded(%rip)` [`mov %ecx,%r10d`] `je ...`, and
// the probe goes on the `je`. Only instructions that leave the arguments,
// the stack and the return address alone are skipped; 0 if the code does
// not match that pattern.
size_t single_threaded_check_skip(const uint8_t* code, size_t n);

// The offset a uprobe for the function at `offset` of `path` attaches at:
// past endbr64, and past glibc's single-threaded check.
uint64_t uprobe_offset(const std::string& path, uint64_t offset);

// Resolves every probe in place and numbers them (id = index).
Status resolve_probes(std::vector<ProbeDef>* probes, const ResolveContext& ctx);

}  // namespace looptrace
