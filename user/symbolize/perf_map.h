// perf maps: the symbol files JITs write for perf (/tmp/perf-PID.map;
// Node's --perf-basic-prof, V8, the JVM's perf-map-agent, .NET, LuaJIT).
// One line per piece of generated code, "START SIZE NAME", START and SIZE in
// hex without 0x; NAME is the rest of the line and may contain spaces:
//
//   3c2a8e0c0e0 4a JS:~onTimer /tmp/x.js:3:17
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace looptrace {

struct PerfMapEntry {
  uint64_t start = 0;
  uint64_t size = 0;  // > 0
  std::string name;   // never empty
};

struct PerfMapParse {
  std::vector<PerfMapEntry> entries;  // in file order
  size_t malformed = 0;  // lines skipped: not "START SIZE NAME", size 0, ...
  size_t dropped = 0;    // good lines past max_entries or max_bytes
  size_t cut = 0;        // names cut to kMaxPerfMapName
};

// A JIT can write a line per compiled function for as long as it runs, and
// the map is the traced process's to write: both how many entries and how
// many bytes one process's map may cost us are capped.
constexpr size_t kMaxPerfMapEntries = 1'000'000;
// Bytes of a name kept (JS, Java and .NET names are well under this); a
// longer one is cut and ends in "…" (kCutMark).
constexpr size_t kMaxPerfMapName = 1024;
// What one entry costs besides its name: its piece, its string, the
// allocator's headers (an estimate, for the cap below).
constexpr size_t kPerfMapEntryCost = 128;
// Memory one process's map may take, names and entries (perf_map_cost).
constexpr size_t kMaxPerfMapMemory = size_t{128} << 20;

// What an entry of this name costs in a PerfMap.
inline size_t perf_map_cost(const PerfMapEntry& e) {
  return e.name.size() + kPerfMapEntryCost;
}

// Any text parses; blank lines are ignored, malformed ones counted; good
// ones are kept while they number at most max_entries and cost at most
// max_bytes, names cut to kMaxPerfMapName.
PerfMapParse parse_perf_map(std::string_view text,
                            size_t max_entries = kMaxPerfMapEntries,
                            size_t max_bytes = kMaxPerfMapMemory);

// Address -> the entry that covers it. JITs reuse the memory of code they
// freed, so ranges overlap; a later entry wins over an earlier one for the
// addresses they share (the earlier one keeps the rest of its range).
class PerfMap {
 public:
  struct Hit {
    uint64_t start = 0;  // of the entry that was added
    std::string_view name;
  };

  void add(PerfMapEntry entry);
  // nullptr-like (empty name) when no entry covers addr.
  Hit find(uint64_t addr) const;
  // Non-overlapping pieces held (>= entries added while none overlap).
  size_t pieces() const { return pieces_.size(); }
  size_t entries() const { return names_.size(); }
  // What the entries added cost (perf_map_cost), overlapped ones included.
  size_t bytes() const { return bytes_; }

 private:
  struct Piece {
    uint64_t end = 0;  // exclusive
    uint64_t entry_start = 0;
    size_t name = 0;  // index into names_
  };
  // Keyed by the piece's start; pieces never overlap.
  std::map<uint64_t, Piece> pieces_;
  std::vector<std::string> names_;
  size_t bytes_ = 0;
};

}  // namespace looptrace
