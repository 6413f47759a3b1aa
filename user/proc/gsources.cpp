#include "proc/gsources.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

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
    uint32_t pid, const std::vector<MapEntry>& maps,
    const std::vector<uint64_t>& known, uint64_t max_bytes) {
  const std::set<uint64_t> known_set(known.begin(), known.end());
  // A plausible source's reference count.
  auto live = [](uint64_t word) {
    const uint32_t refs = static_cast<uint32_t>(word);
    return refs > 0 && refs < (1u << 20);
  };
  // File mappings, sorted by start (maps are), for a quick "in a file" test
  // of a word before anything is read for it.
  std::vector<const MapEntry*> files;
  for (const MapEntry& m : maps)
    if (m.is_file()) files.push_back(&m);
  auto in_file = [&](uint64_t a) {
    auto it = std::upper_bound(
        files.begin(), files.end(), a,
        [](uint64_t v, const MapEntry* m) { return v < m->start; });
    return it != files.begin() && (*std::prev(it))->contains(a);
  };
  // A custom table: in a file (static data), its dispatch and the other
  // functions set in code. Decided once per address.
  std::unordered_map<uint64_t, std::optional<CustomGSource>> tables;
  auto table_at = [&](uint64_t t) -> const std::optional<CustomGSource>& {
    auto [it, fresh] = tables.try_emplace(t);
    if (!fresh) return it->second;
    uint64_t f[4];
    if (!read_memory(pid, t, f, sizeof f)) return it->second;
    const MapEntry* code = file_mapping_of(maps, f[2], true);
    if (!code) return it->second;
    for (int i : {0, 1, 3})
      if (f[i] != 0 && !file_mapping_of(maps, f[i], true)) return it->second;
    CustomGSource c;
    c.funcs = t;
    c.dispatch = f[2];
    c.path = code->path;
    c.file_offset = f[2] - code->start + code->pgoff;
    it->second = std::move(c);
    return it->second;
  };
  // One pass over the memory, each word read as a GSource's source_funcs
  // (w[0]), ref_count (w[1]) and context (w[2]): GLib's own kinds give the
  // contexts; the others, with a table that passes, are kept with their
  // context until the contexts are known.
  std::set<uint64_t> contexts;
  std::set<std::pair<uint64_t, uint64_t>> custom;  // (table, context)
  Status st =
      scan_anon_words(pid, maps, max_bytes, [&](const uint64_t* w, uint64_t) {
        if (!w[0] || (w[0] & 7) || !live(w[1]) || !w[2] || (w[2] & 7)) return;
        if (known_set.count(w[0])) {
          contexts.insert(w[2]);
          return;
        }
        if (in_file(w[0]) && table_at(w[0])) custom.emplace(w[0], w[2]);
      });
  if (!st.ok()) return st;
  std::vector<CustomGSource> out;
  for (const auto& [t, ctx] : custom) {
    if (!contexts.count(ctx)) continue;
    const CustomGSource& c = *tables.at(t);
    if (std::any_of(out.begin(), out.end(), [&](const CustomGSource& o) {
          return o.dispatch == c.dispatch;
        }))
      continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace looptrace::proc
