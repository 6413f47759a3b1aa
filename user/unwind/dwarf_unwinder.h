// Whole user stacks from a sample's registers and a copy of the top of its
// stack, unwound in userspace with the call frame information (.eh_frame,
// or .debug_frame from the file itself or its separate debug file) of the
// files the process maps: what perf does with --call-graph dwarf, with
// elfutils' libdwfl. See docs/unwinding.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace looptrace {

// x86-64 user registers as captured from pt_regs, in DWARF numbering order
// (the order libdw wants them in):
// 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8..15 r8..r15,
// 16 rip.
struct UserRegs {
  static constexpr size_t kRsp = 7;
  static constexpr size_t kRip = 16;
  std::array<uint64_t, 17> dwarf{};
};

// The top of the user stack: bytes[0] is the byte at user address addr
// (normally rsp). Reads the CFI asks for outside it fail.
struct StackCopy {
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
};

struct UnwindResult {
  // Innermost first. frames[0] is the exact instruction pointer; the others
  // are return addresses as read from the stack, NOT adjusted (no "- 1"):
  // the same values a frame-pointer stack (bpf_get_stack, perf) holds. To
  // find the caller's function or line, look up the address minus 1 (a call
  // that never returns may be the last instruction of its function).
  std::vector<uint64_t> frames;
  // Stopped before the outermost frame (_start, clone3 or a frame whose CFI
  // says there is no caller): ran off the stack copy, no CFI or no module
  // for a pc, max_frames reached, bad input. error then says why.
  bool truncated = false;
  std::string error;  // one line; empty when the whole stack was unwound
};

// Not thread-safe: one unwinder per thread. Processes are independent: each
// has its own libdwfl session (its modules, their ELF files and cached
// CFI), kept until forget() so that the samples after the first are fast.
class DwarfUnwinder {
 public:
  // debuginfo_path: where separate debug files are looked for, libdw's
  // syntax (dwfl_standard_find_debuginfo: "dir:dir", an empty element is
  // the main file's directory, a relative one is below it; build-id links
  // are looked for under the absolute ones, as DIR/.build-id/xx/yyyy.debug).
  // nullptr: libdw's default, ":.debug:/usr/lib/debug".
  explicit DwarfUnwinder(const char* debuginfo_path = nullptr);
  ~DwarfUnwinder();
  DwarfUnwinder(const DwarfUnwinder&) = delete;
  DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

  // The process's mappings, as the text of /proc/PID/maps (a recording's
  // copy of it works too). Files mapped executable are the modules; the
  // files are opened when first needed, as the process sees them
  // (/proc/PID/root) while it lives, else by path if the inode still
  // matches; a deleted file only through /proc/PID/map_files. [vdso] is
  // this process's own vDSO (the same kernel's) when the sizes agree.
  // Setting new text keeps the modules that did not change (and their
  // cached CFI). Malformed text makes unwind() fail for the pid.
  void set_maps(uint32_t pid, const std::string& maps_text);

  // Drops everything kept for pid (also its open files and mappings).
  void forget(uint32_t pid);

  // Unwinds one sample of pid. Never throws; garbage registers, an empty
  // stack or unknown maps give a truncated result with an error.
  UnwindResult unwind(uint32_t pid, const UserRegs& regs,
                      const StackCopy& stack, size_t max_frames = 127);

  // The name of the ELF symbol (.symtab, else .dynsym, of the module or
  // its separate debug file) containing addr in pid's modules; empty when
  // none does. Not demangled. For tests and diagnostics: looptrace's
  // symbolizer names frames.
  std::string symbol_name(uint32_t pid, uint64_t addr);

  // The number of processes with kept state (tests).
  size_t process_count() const { return procs_.size(); }

  struct Process;  // per-pid state, opaque (dwarf_unwinder.cpp)

 private:
  Process* process(uint32_t pid);

  std::string debuginfo_path_;
  bool has_debuginfo_path_ = false;
  char* debuginfo_path_ptr_ = nullptr;  // what Dwfl_Callbacks points at
  struct Callbacks;
  std::unique_ptr<Callbacks> callbacks_;
  std::unordered_map<uint32_t, std::unique_ptr<Process>> procs_;
};

}  // namespace looptrace
