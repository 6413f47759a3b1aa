// Symbolizes user addresses of live (or recently exited) processes from
// /proc/PID/maps and the ELF symbol tables of the mapped files, their
// separate debug files (here, or fetched from debuginfod servers) and
// MiniDebugInfo, the [vdso] image and the perf maps JITs write
// (docs/looptrace.md, SYMBOLS).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "elf/elf_file.h"
#include "proc/maps.h"
#include "symbolize/debuginfod.h"
#include "symbolize/perf_map.h"
#include "symbolize/symbolizer.h"

namespace looptrace {

struct ProcSymbolizerOptions {
  // Where separate debug files are looked up by build-id and debuglink;
  // empty: $LOOPTRACE_DEBUG_ROOT, else /usr/lib/debug.
  std::string debug_root;
  // The directory holding perf-PID.map files; empty: /proc/PID/root/tmp,
  // then /tmp. Tests point it elsewhere.
  std::string perf_map_dir;
  // A perf map is checked for growth at most this often (a stat per
  // unknown address otherwise).
  uint64_t perf_map_recheck_ns = 100'000'000;
  // Fetches, by build-id, the debug file of a stripped file that has none
  // here, when an address first falls in it; nullptr: none fetched.
  std::shared_ptr<DebuginfodFetcher> debuginfod;
};

// Not thread-safe: one symbolizer per thread, or a lock around it.
class ProcSymbolizer : public Symbolizer {
 public:
  explicit ProcSymbolizer(ProcSymbolizerOptions options = {});
  ProcSymbolizer(const ProcSymbolizer&) = delete;
  ProcSymbolizer& operator=(const ProcSymbolizer&) = delete;

  // Captures pid's maps and opens the files they map now, so the process
  // can still be symbolized after it exits. Failures are logged ("symbolize"
  // debug area) and leave earlier state alone.
  void snapshot(uint32_t pid);

  // The same from mappings read by someone else (the live event source's
  // MappingsEvent).
  void add_mappings(uint32_t pid, std::vector<MapEntry> maps);

  // module: the mapped path, "[vdso]", "[anon]"; empty when no mapping
  // contains addr. function: the demangled symbol, or the name a JIT gave
  // the code in its perf map; empty when unknown.
  Frame symbolize(uint32_t pid, uint64_t addr) override;

  // Drops what is cached for pid (its maps and results), e.g. when the pid
  // may have been reused.
  void forget(uint32_t pid);

  // Until this is called, an address in a file whose debug file is being
  // fetched is answered from what is here, and asked again later (not
  // cached). From then on (report time), such an address waits for its
  // fetch; and every fetch asked for is waited for now.
  void settle_debuginfod();
  // The modules (mapped paths) that gained symbols from fetched debug
  // files since the last call: what was answered before for their
  // addresses may have changed.
  std::vector<std::string> take_improved_modules();

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

  // One pid's perf map as far as it was read.
  struct PerfMapState {
    PerfMap map;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;         // bytes of the file seen
    off_t parsed_to = 0;    // end of the last complete line parsed
    int64_t mtime_ns = -1;  // -1: never read
    uint64_t checked_ns = 0;
    size_t malformed = 0;
    size_t dropped = 0;
    size_t cut = 0;
  };

  bool read_maps(uint32_t pid);
  void note_owner(uint32_t pid);
  bool store_maps(uint32_t pid, std::vector<MapEntry> maps);
  void open_files(uint32_t pid);
  const MapEntry* find_mapping(uint32_t pid, uint64_t addr) const;
  const elf::ElfFile* elf_for(uint32_t pid, const MapEntry& map);
  // True when a separate debug file was found.
  bool add_debug_symbols(elf::ElfFile* file, const std::string& opened_path,
                         const MapEntry& map);
  const elf::ElfFile* vdso_for(uint32_t pid, const MapEntry& map);
  const PerfMap* perf_map_for(uint32_t pid);
  void read_perf_map(uint32_t pid, PerfMapState* state);
  // Parses the file from state->parsed_to up to end, a chunk at a time,
  // into state; returns the entries added.
  static size_t parse_perf_map_file(int fd, off_t end, PerfMapState* state);
  // *retry: the answer may change, so it is not cached: the perf map was
  // asked and did not know addr (the JIT may write it later), or the
  // file's debug file is being fetched.
  Frame lookup(uint32_t pid, uint64_t addr, bool* retry);
  // Notes a file without symbols of its own or a debug file here as one
  // debuginfod may name.
  void await_debuginfod(elf::ElfFile* file, const MapEntry& map);
  // For a lookup in `file`: asks for its debug file the first time; true
  // while the answer is outstanding (after settle_debuginfod(), waits).
  bool debuginfod_pending(const elf::ElfFile* file);
  // Merges the debug files fetched since the last call.
  void poll_debuginfod();

  // Per pid, every different set of mappings read, oldest first, each
  // sorted by start: a process that execs keeps its old program's mappings
  // for the addresses recorded before (the newest set is searched first).
  using Mappings = std::vector<MapEntry>;
  std::unordered_map<uint32_t, std::vector<Mappings>> maps_;
  // Keyed by "dev:inode" (or the path for inode 0). nullptr remembers a
  // file that could not be opened as ELF (locale archives, fonts, ...).
  std::map<std::string, std::unique_ptr<elf::ElfFile>> files_;
  std::unordered_map<ResultKey, Frame, ResultKeyHash> results_;
  // RTTI class names by file and vaddr, "" for none: an address that
  // names nothing is asked again at every lookup (a JIT may map it
  // later), and reading RTTI scans the file's relocations.
  std::map<std::pair<const elf::ElfFile*, uint64_t>, std::string> rtti_;
  // The RTTI class of the vtable at vaddr of file, remembered.
  const std::string& class_of_vtable(const elf::ElfFile* file, uint64_t vaddr);

  ProcSymbolizerOptions options_;
  // The uid owning /proc/PID when last seen; a perf map must belong to it
  // or to root.
  std::unordered_map<uint32_t, uid_t> owners_;
  std::unordered_map<uint32_t, PerfMapState> perf_maps_;
  // [vdso] images, one per distinct content (all processes of one kernel
  // and ABI share one), and which one each pid maps (nullptr: unreadable).
  std::vector<std::unique_ptr<elf::ElfFile>> vdsos_;
  std::vector<std::vector<char>> vdso_bytes_;
  std::unordered_map<uint32_t, const elf::ElfFile*> vdso_of_pid_;

  // Files awaiting debuginfod's answer, and their build-ids; per build-id,
  // its files (one file may be mapped under several dev:inode keys) and
  // their mapped paths.
  std::unordered_map<const elf::ElfFile*, std::string> awaiting_;
  std::unordered_map<std::string,
                     std::vector<std::pair<elf::ElfFile*, std::string>>>
      by_build_id_;
  std::unordered_set<std::string> requested_;
  // Every answer, by build-id (nullptr: no debug file), for files mapped
  // after it came.
  std::unordered_map<std::string, std::shared_ptr<elf::ElfFile>> answered_;
  bool debuginfod_blocking_ = false;
  std::vector<std::string> improved_;
};

}  // namespace looptrace
