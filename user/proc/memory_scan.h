// Reading a traced process's memory to find a runtime's objects in it (a
// Wayland client's proxies, a GLib context's sources): data symbols' run
// time addresses as the dynamic linker bound them, and a scan of its
// writable anonymous memory and heap, word by word.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "proc/maps.h"

namespace looptrace::proc {

// The addresses of data symbols `names` in pid, as its dynamic linker
// bound them: the executable's own copy first (a copy relocation puts the
// objects a program names in its .bss, and the library uses that copy),
// then `library`'s (as find_mapped_file matches it). Error: the library is
// not mapped, or defines none of a name.
Result<std::vector<uint64_t>> symbol_addresses(
    uint32_t pid, const std::vector<MapEntry>& maps, const std::string& library,
    const std::vector<std::string>& names);

// n bytes of pid's memory at addr; false if any of them cannot be read.
bool read_memory(uint32_t pid, uint64_t addr, void* out, size_t n);

// Whether addr is in a mapping of a file (executable: with x), and which.
const MapEntry* file_mapping_of(const std::vector<MapEntry>& maps,
                                uint64_t addr, bool executable);

// Calls fn(w, addr) for each aligned 8-byte word of pid's writable
// anonymous memory and heap (at most max_bytes read), w pointing at it with
// two words readable on each side, addr its address in pid.
template <typename F>
Status scan_anon_words(uint32_t pid, const std::vector<MapEntry>& maps,
                       uint64_t max_bytes, F&& fn) {
  std::vector<uint64_t> buf(1 << 17);  // 1 MiB
  const size_t buf_bytes = buf.size() * sizeof(uint64_t);
  uint64_t scanned = 0;
  // The heap first (malloc's objects), then the other anonymous memory
  // (malloc's large blocks and arenas, and anything else) while the budget
  // lasts.
  std::vector<const MapEntry*> order;
  for (const MapEntry& m : maps)
    if (m.path == "[heap]") order.push_back(&m);
  for (const MapEntry& m : maps)
    if (m.path.empty()) order.push_back(&m);
  for (const MapEntry* e : order) {
    const MapEntry& m = *e;
    if (m.perms.size() < 2 || m.perms[0] != 'r' || m.perms[1] != 'w') continue;
    for (uint64_t at = m.start; at < m.end && scanned < max_bytes;) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(buf_bytes, m.end - at));
      iovec local{buf.data(), n}, remote{reinterpret_cast<void*>(at), n};
      const ssize_t got =
          process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
      if (got < 0) {
        if (errno == ESRCH) return Status::Errno("reading pid memory", errno);
        at += 4096;  // a hole (a guard page): past it
        continue;
      }
      scanned += static_cast<uint64_t>(got);
      const size_t words = static_cast<size_t>(got) / 8;
      if (words < 5) break;
      for (size_t w = 2; w + 2 < words; ++w) fn(&buf[w], at + 8 * w);
      // The next chunk begins 4 words back: the words whose neighbours were
      // cut off here are whole there.
      const bool more = got == static_cast<ssize_t>(n) && at + n < m.end;
      at += static_cast<uint64_t>(got) - (more ? 32 : 0);
    }
  }
  return Status::Ok();
}

}  // namespace looptrace::proc
