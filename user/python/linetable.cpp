#include "python/linetable.h"

namespace looptrace::python {
namespace {

// Entry kinds: the 4-bit code in bits 3-6 of an entry's first byte.
constexpr int kNoLocation = 15;  // no line
constexpr int kLong = 14;        // line delta, end line, columns: varints
constexpr int kNoColumns = 13;   // line delta (signed varint)
constexpr int kOneLine0 = 10;    // 10, 11, 12: line delta 0, 1, 2

// A varint of 6-bit chunks, least significant first, bit 6 set on all but
// the last. *at moves past it; false at the table's end.
bool varint(std::string_view t, size_t* at, uint64_t* out) {
  uint64_t v = 0;
  for (unsigned shift = 0; *at < t.size() && shift < 64; shift += 6) {
    uint8_t b = static_cast<uint8_t>(t[(*at)++]);
    v |= static_cast<uint64_t>(b & 63) << shift;
    if ((b & 64) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

// The line delta of the entry starting at `at` (its first byte).
bool line_delta(std::string_view t, size_t at, int64_t* delta) {
  const int code = (static_cast<uint8_t>(t[at]) >> 3) & 15;
  *delta = 0;
  if (code == kLong || code == kNoColumns) {
    size_t p = at + 1;
    uint64_t u = 0;
    if (!varint(t, &p, &u)) return false;
    *delta =
        (u & 1) ? -static_cast<int64_t>(u >> 1) : static_cast<int64_t>(u >> 1);
  } else if (code >= kOneLine0 && code < kNoColumns) {
    *delta = code - kOneLine0;
  }
  return true;
}

}  // namespace

int line_at(std::string_view t, int firstlineno, uint64_t offset) {
  int64_t line = firstlineno;
  uint64_t end = 0;  // byte offset the entries so far cover
  size_t at = 0;
  while (at < t.size()) {
    const uint8_t first = static_cast<uint8_t>(t[at]);
    if ((first & 128) == 0) return -1;  // not an entry's first byte
    int64_t delta = 0;
    if (!line_delta(t, at, &delta)) return -1;
    line += delta;
    // Code units of 2 bytes: (bits 0-2) + 1 of them.
    end += 2 * ((first & 7) + 1);
    if (offset < end)
      return ((first >> 3) & 15) == kNoLocation ? -1 : static_cast<int>(line);
    do {
      ++at;
    } while (at < t.size() && (static_cast<uint8_t>(t[at]) & 128) == 0);
  }
  return -1;
}

}  // namespace looptrace::python
