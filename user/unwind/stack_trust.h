// Which frames of a user stack can be trusted, and how the two walks of a
// sample (the kernel's frame pointers, the CFI's in userspace) make one
// stack (--call-graph auto). See docs/unwinding.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "unwind/dwarf_unwinder.h"

namespace looptrace {

// The executable mappings of a process, from the text of /proc/PID/maps.
// Default-constructed: unknown (the maps could not be read), which
// contains every address.
class ExecRanges {
 public:
  ExecRanges() = default;
  explicit ExecRanges(const std::string& maps_text);
  bool contains(uint64_t addr) const;

 private:
  bool known_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // [lo, hi), sorted
};

// Ends the stack at its first frame in no executable mapping (a return
// address that frame pointers read from a function without them, a
// pointer into the heap): true if it did.
bool cut_untrusted(const ExecRanges& exec, std::vector<uint64_t>* frames);

// A sample's user stack as --call-graph auto makes it.
struct MergedStack {
  std::vector<uint64_t> frames;
  bool truncated = false;
  bool dwarf = false;  // the CFI's frames (continued by frame pointers)
};

// fp: the kernel's frame-pointer frames (fp_full: it filled its buffer);
// cfi: the CFI's stack of the same sample. Both are cut at their first
// untrusted frame. A whole CFI stack is the stack. One that stopped short
// (ran off the stack copy) continues with the frame-pointer frames above
// its last frame, where that return address is one of them (the two walks
// agree there); else the longer of the two is the stack.
MergedStack merge_stacks(std::vector<uint64_t> fp, bool fp_full,
                         UnwindResult cfi, const ExecRanges& exec);

}  // namespace looptrace
