// Symbolizes user addresses of live (or recently exited) processes from
// /proc/PID/maps and the ELF symbol tables of the mapped files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "elf/elf_file.h"
#include "proc/maps.h"
#include "symbolize/symbolizer.h"

namespace looptrace {

// Not thread-safe: one symbolizer per thread, or a lock around it.
class ProcSymbolizer : public Symbolizer {
 public:
  ProcSymbolizer() = default;
  ProcSymbolizer(const ProcSymbolizer&) = delete;
  ProcSymbolizer& operator=(const ProcSymbolizer&) = delete;

  // Captures pid's maps and opens the files they map now, so the process
  // can still be symbolized after it exits. Failures are logged ("symbolize"
  // debug area) and leave earlier state alone.
  void snapshot(uint32_t pid);

  // The same from mappings read by someone else (the live event source's
  // MappingsEvent).
  void add_mappings(uint32_t pid, std::vector<proc::MapEntry> maps);

  // module: the mapped path, "[vdso]", "[anon]"; empty when no mapping
  // contains addr. function: the demangled symbol; empty when unknown.
  Frame symbolize(uint32_t pid, uint64_t addr) override;

  // Drops what is cached for pid (its maps and results), e.g. when the pid
  // may have been reused.
  void forget(uint32_t pid);

 private:
  struct ResultKey {
    uint32_t pid;
    uint64_t addr;
    bool operator==(const ResultKey&) const = default;
  };
  struct ResultKeyHash {
    size_t operator()(const ResultKey& k) const {
      return std::hash<uint64_t>()(k.addr * 31 + k.pid);
    }
  };

  bool read_maps(uint32_t pid);
  bool store_maps(uint32_t pid, std::vector<proc::MapEntry> maps);
  void open_files(uint32_t pid);
  const proc::MapEntry* find_mapping(uint32_t pid, uint64_t addr) const;
  const elf::ElfFile* elf_for(uint32_t pid, const proc::MapEntry& map);
  Frame lookup(uint32_t pid, uint64_t addr);

  // Per pid, every different set of mappings read, oldest first, each
  // sorted by start: a process that execs keeps its old program's mappings
  // for the addresses recorded before (the newest set is searched first).
  using Mappings = std::vector<proc::MapEntry>;
  std::unordered_map<uint32_t, std::vector<Mappings>> maps_;
  // Keyed by "dev:inode" (or the path for inode 0). nullptr remembers a
  // file that could not be opened as ELF (locale archives, fonts, ...).
  std::map<std::string, std::unique_ptr<elf::ElfFile>> files_;
  std::unordered_map<ResultKey, Frame, ResultKeyHash> results_;
};

}  // namespace looptrace
