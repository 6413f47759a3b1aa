#include "symbolize/perf_map.h"

#include <iterator>
#include <optional>
#include <utility>

#include "base/text.h"

namespace looptrace {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

// A hex number of 1..16 digits (an optional 0x, which some JITs write) at
// the front of s, which it consumes.
std::optional<uint64_t> take_hex(std::string_view* s) {
  if (s->size() > 2 && (*s)[0] == '0' && ((*s)[1] == 'x' || (*s)[1] == 'X'))
    s->remove_prefix(2);
  uint64_t v = 0;
  size_t n = 0;
  for (; n < s->size(); n++) {
    char c = (*s)[n];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) break;
    if (n == 16) return std::nullopt;  // more than 64 bits
    v = v << 4 | static_cast<uint64_t>(d);
  }
  if (n == 0) return std::nullopt;
  s->remove_prefix(n);
  return v;
}

// One line without its newline; nullopt when malformed. *cut: its name was
// longer than kMaxPerfMapName.
std::optional<PerfMapEntry> parse_line(std::string_view line, bool* cut) {
  std::optional<uint64_t> start = take_hex(&line);
  if (!start || line.empty() || !is_space(line.front())) return std::nullopt;
  while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
  std::optional<uint64_t> size = take_hex(&line);
  if (!size || *size == 0 || line.empty() || !is_space(line.front()))
    return std::nullopt;
  uint64_t end = 0;
  if (__builtin_add_overflow(*start, *size, &end)) return std::nullopt;
  while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
  while (!line.empty() && (is_space(line.back()) || line.back() == '\r'))
    line.remove_suffix(1);
  if (line.empty()) return std::nullopt;
  *cut = line.size() > kMaxPerfMapName;
  return PerfMapEntry{*start, *size, cut_name(line, kMaxPerfMapName)};
}

}  // namespace

PerfMapParse parse_perf_map(std::string_view text, size_t max_entries,
                            size_t max_bytes) {
  PerfMapParse out;
  size_t bytes = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    bool blank = true;
    for (char c : line) blank = blank && (is_space(c) || c == '\r');
    if (blank) continue;
    bool cut = false;
    std::optional<PerfMapEntry> e = parse_line(line, &cut);
    if (!e) {
      out.malformed++;
    } else if (out.entries.size() >= max_entries ||
               perf_map_cost(*e) > max_bytes - bytes) {
      out.dropped++;
    } else {
      out.cut += cut;
      bytes += perf_map_cost(*e);
      out.entries.push_back(std::move(*e));
    }
  }
  return out;
}

void PerfMap::add(PerfMapEntry entry) {
  const uint64_t start = entry.start;
  const uint64_t end = entry.start + entry.size;  // checked by the parser
  if (entry.size == 0 || end < start) return;
  // Cut what the new range covers out of the pieces held: a piece that
  // starts before it keeps its head, one that runs past it its tail.
  auto it = pieces_.lower_bound(start);
  if (it != pieces_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > start) {
      Piece head = prev->second;
      head.end = start;
      if (prev->second.end > end) {
        Piece tail = prev->second;
        pieces_.emplace(end, tail);
      }
      prev->second = head;
    }
  }
  while (it != pieces_.end() && it->first < end) {
    if (it->second.end > end) {
      Piece tail = it->second;
      pieces_.erase(it);
      pieces_.emplace(end, tail);
      break;
    }
    it = pieces_.erase(it);
  }
  bytes_ += perf_map_cost(entry);
  names_.push_back(std::move(entry.name));
  pieces_.emplace(start, Piece{end, start, names_.size() - 1});
}

PerfMap::Hit PerfMap::find(uint64_t addr) const {
  auto it = pieces_.upper_bound(addr);
  if (it == pieces_.begin()) return {};
  --it;
  if (addr >= it->second.end) return {};
  return {it->second.entry_start, names_[it->second.name]};
}

}  // namespace looptrace
