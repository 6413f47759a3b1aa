// Programs built and stripped here, as distributions ship them, for the
// tests of debug-file lookup: cc and binutils do the work, and the
// expected names and addresses come from nm and readelf, never from the
// code under test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/mapping.h"

namespace looptrace::test {

// What `cmd` (run by /bin/sh) printed on stdout.
std::string shell_output(const std::string& cmd);
// Whether `cmd` exited 0 (its output is dropped).
bool shell_ok(const std::string& cmd);
bool have_tool(const std::string& tool);

// Address of a symbol as nm prints it.
std::optional<uint64_t> nm_address(const std::string& path,
                                   const std::string& name);
// The file offset of vaddr, through readelf's PT_LOAD headers.
std::optional<uint64_t> file_offset(const std::string& path, uint64_t vaddr);
// The GNU build-id readelf -n prints, in hex ("" if none).
std::string readelf_build_id(const std::string& path);

// A C program built from `source` (cc -g -O1, PIE, with a build-id) in a
// scratch directory, then split: its debug file (objcopy --only-keep-debug)
// and a stripped copy (strip --strip-all) in which nm finds no `function`.
class StrippedProgram {
 public:
  StrippedProgram() = default;
  StrippedProgram(const StrippedProgram&) = delete;
  StrippedProgram& operator=(const StrippedProgram&) = delete;
  ~StrippedProgram();  // removes the directory

  // Builds it in a new /tmp/<prefix>XXXXXX: prog.c, full (unstripped),
  // `prog_name` (stripped) and prog.debug. Failures are gtest failures
  // (callers check HasFatalFailure).
  void build(const std::string& prefix, const char* source,
             const std::string& function, const std::string& prog_name);

  // The stripped program as a process would map it whole at `base`
  // (r-xp, its inode, as /proc/PID/maps would say).
  MapEntry mapping(uint64_t base) const;

  std::string dir, full, prog, debug, build_id;
  uint64_t vaddr = 0;   // of `function` in full, from nm
  uint64_t offset = 0;  // its file offset, from readelf
};

}  // namespace looptrace::test
