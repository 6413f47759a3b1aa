// Kernel addresses -> function names, from /proc/kallsyms, and a
// symbolizer for everything a live run sees: kernel frames come as pid
// kKernelPid, user frames go to the process symbolizer.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "symbolize/symbolizer.h"

namespace looptrace {

// The pid kernel stack frames are symbolized under (no process has it).
constexpr uint32_t kKernelPid = 0;

class KernelSymbols {
 public:
  // Reads /proc/kallsyms (or `text`, for tests) the first time it is asked;
  // with kptr_restrict hiding the addresses every frame is unknown.
  Frame symbolize(uint64_t addr);
  void load_text(std::string_view text);
  size_t size() const { return syms_.size(); }
  // The addresses of `names` (0 for one not found or hidden), read from
  // the kallsyms text `in` line by line until all are found: no table is
  // built (the whole one takes 0.1 s to read and sort).
  static std::vector<uint64_t> scan_for(std::istream& in,
                                        const std::vector<std::string>& names);
  static std::vector<uint64_t> find(const std::vector<std::string>& names);

 private:
  struct Sym {
    uint64_t addr;
    std::string name;
    std::string module;  // "[kernel]" or "[mod]"
  };
  void load();
  bool loaded_ = false;
  std::vector<Sym> syms_;  // sorted by addr
};

// The live symbolizer: kKernelPid to the kernel's symbols, every other pid
// to `procs`.
class SystemSymbolizer : public Symbolizer {
 public:
  explicit SystemSymbolizer(Symbolizer* procs) : procs_(procs) {}
  Frame symbolize(uint32_t pid, uint64_t addr) override;

 private:
  Symbolizer* procs_;
  KernelSymbols kernel_;
};

}  // namespace looptrace
