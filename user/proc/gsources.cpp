#include "proc/gsources.h"

#include <algorithm>
#include <set>
#include <string>

#include "proc/memory_scan.h"

namespace looptrace::proc {

const std::vector<std::string>& glib_source_funcs_names() {
  static const std::vector<std::string> names = {
      "g_timeout_funcs",        "g_idle_funcs",        "g_io_watch_funcs",
      "g_unix_fd_source_funcs", "g_child_watch_funcs", "g_unix_signal_funcs"};
  return names;
}

Result<std::vector<CustomGSource>> find_custom_gsources(uint32_t pid,
                                                        uint64_t max_bytes) {
  auto maps = read_maps(pid);
  if (!maps.ok()) return maps.status();
  auto known =
      symbol_addresses(pid, *maps, "libglib-2.0.so", glib_source_funcs_names());
  if (!known.ok()) return known.status();
  return scan_custom_gsources(pid, *maps, *known, max_bytes);
}

Result<std::vector<CustomGSource>> scan_custom_gsources(
    uint32_t pid, const std::vector<MapEntry>& maps_in,
    const std::vector<uint64_t>& known, uint64_t max_bytes) {
  const std::vector<MapEntry>* maps = &maps_in;
  const std::set<uint64_t> known_set(known.begin(), known.end());
  // A plausible source's reference count.
  auto live = [](uint64_t word) {
    const uint32_t refs = static_cast<uint32_t>(word);
    return refs > 0 && refs < (1u << 20);
  };
  // The contexts GLib's own sources are attached to: w = source_funcs.
  std::set<uint64_t> contexts;
  Status st =
      scan_anon_words(pid, *maps, max_bytes, [&](const uint64_t* w, uint64_t) {
        if (known_set.count(w[0]) && live(w[1]) && w[2] && !(w[2] & 7))
          contexts.insert(w[2]);
      });
  if (!st.ok()) return st;
  if (contexts.empty()) return std::vector<CustomGSource>{};
  // Sources of those contexts: w = context, w[-2] = source_funcs.
  std::set<uint64_t> tables;
  st = scan_anon_words(pid, *maps, max_bytes, [&](const uint64_t* w, uint64_t) {
    if (contexts.count(w[0]) && live(w[-1]) && w[-2] && !(w[-2] & 7) &&
        !known_set.count(w[-2]))
      tables.insert(w[-2]);
  });
  if (!st.ok()) return st;
  std::vector<CustomGSource> out;
  for (uint64_t t : tables) {
    // A table in a file (static data), its functions in code.
    if (!file_mapping_of(*maps, t, false)) continue;
    uint64_t f[4];
    if (!read_memory(pid, t, f, sizeof f)) continue;
    const MapEntry* code = file_mapping_of(*maps, f[2], true);
    if (!code) continue;
    bool ok = true;
    for (int i : {0, 1, 3})
      ok = ok && (f[i] == 0 || file_mapping_of(*maps, f[i], true));
    if (!ok) continue;
    if (std::any_of(out.begin(), out.end(),
                    [&](const CustomGSource& c) { return c.dispatch == f[2]; }))
      continue;
    CustomGSource c;
    c.funcs = t;
    c.dispatch = f[2];
    c.path = code->path;
    c.file_offset = f[2] - code->start + code->pgoff;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace looptrace::proc
