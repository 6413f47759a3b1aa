// perf map text (/tmp/perf-PID.map, written by JITs) -> entries and the
// count of malformed lines; every line is an entry, malformed or dropped,
// and the lookup built from the entries finds the last one written over
// any address.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "symbolize/perf_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Small caps, so that dropping is reached too.
  constexpr size_t kCap = 64;
  constexpr size_t kByteCap = 32 * 1024;
  looptrace::PerfMapParse p = looptrace::parse_perf_map(text, kCap, kByteCap);
  size_t bytes = 0;
  for (const looptrace::PerfMapEntry& e : p.entries)
    bytes += looptrace::perf_map_cost(e);
  LT_FUZZ_CHECK(bytes <= kByteCap);
  LT_FUZZ_CHECK(p.cut <= p.entries.size());
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (!text.empty() && text.back() != '\n') lines++;
  LT_FUZZ_CHECK(p.entries.size() <= kCap);
  LT_FUZZ_CHECK(p.entries.size() + p.malformed + p.dropped <= lines);
  // Dropped only when full: by count, or one more name might not fit.
  LT_FUZZ_CHECK(p.dropped == 0 || p.entries.size() == kCap ||
                bytes + looptrace::kMaxPerfMapName +
                        looptrace::kPerfMapEntryCost >
                    kByteCap);

  looptrace::PerfMap map;
  for (const looptrace::PerfMapEntry& e : p.entries) {
    LT_FUZZ_CHECK(e.size > 0);
    LT_FUZZ_CHECK(e.start + e.size > e.start);  // no wrap past 2^64
    LT_FUZZ_CHECK(!e.name.empty());
    LT_FUZZ_CHECK(e.name.size() <= looptrace::kMaxPerfMapName);
    LT_FUZZ_CHECK(e.name.find('\n') == std::string_view::npos);
    LT_FUZZ_CHECK(e.name.front() != ' ' && e.name.back() != ' ');
    map.add(e);
    // The entry just added owns its whole range.
    for (uint64_t addr :
         {e.start, e.start + e.size / 2, e.start + e.size - 1}) {
      looptrace::PerfMap::Hit hit = map.find(addr);
      LT_FUZZ_CHECK(hit.name == e.name && hit.start == e.start);
    }
  }
  LT_FUZZ_CHECK(map.entries() == p.entries.size());
  LT_FUZZ_CHECK(map.bytes() == bytes);
  LT_FUZZ_CHECK(map.pieces() <= 2 * p.entries.size() + 1);
  if (!p.entries.empty()) {
    const looptrace::PerfMapEntry& last = p.entries.back();
    LT_FUZZ_CHECK(map.find(last.start).name == last.name);
  }
  for (const looptrace::PerfMapEntry& e : p.entries) {
    // Covered by this entry or by one written later: always some name.
    LT_FUZZ_CHECK(!map.find(e.start).name.empty());
    LT_FUZZ_CHECK(map.find(e.start).start <= e.start);
  }
  return 0;
}
