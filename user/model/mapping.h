// One mapping of a process's address space, as /proc/PID/maps lists it
// (proc/maps.h reads them): what its addresses mean.
#pragma once

#include <cstdint>
#include <string>

namespace looptrace {

struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;    // exclusive
  uint64_t pgoff = 0;  // file offset mapped at start
  std::string perms;   // "r-xp"
  std::string dev;     // "fe:01" (major:minor, hex)
  uint64_t inode = 0;
  // "/usr/lib/libc.so.6" (may contain spaces), "[vdso]", "[heap]", or empty
  // for an anonymous mapping. A " (deleted)" suffix is removed and noted.
  std::string path;
  bool deleted = false;

  bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
  // Backed by a file (not anonymous, not a [pseudo] mapping).
  bool is_file() const { return !path.empty() && path[0] == '/'; }
  bool contains(uint64_t addr) const { return addr >= start && addr < end; }
};

}  // namespace looptrace
