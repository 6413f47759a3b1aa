#include "base/text.h"

#include <fmt/format.h>

namespace looptrace {
namespace {

bool is_cont(unsigned char c) { return (c & 0xc0) == 0x80; }

// The length of the valid UTF-8 character at s[i] (its code point in *cp),
// or 0 if the bytes there are not one (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
size_t utf8_char(std::string_view s, size_t i, uint32_t* cp) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = c >= 0xc2 && c <= 0xdf   ? 2
             : c >= 0xe0 && c <= 0xef ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4
                                      : 0;
  if (n == 0 || s.size() - i < n) return 0;
  // The second byte's range narrows for the leads that could otherwise
  // start an overlong form, a surrogate or a code point past U+10FFFF.
  const unsigned char c1 = at(1);
  unsigned char lo = 0x80, hi = 0xbf;
  if (c == 0xe0) lo = 0xa0;
  if (c == 0xed) hi = 0x9f;
  if (c == 0xf0) lo = 0x90;
  if (c == 0xf4) hi = 0x8f;
  if (c1 < lo || c1 > hi) return 0;
  uint32_t v = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if (!is_cont(at(k))) return 0;
    v = v << 6 | (at(k) & 0x3f);
  }
  *cp = v;
  return n;
}

// Code points a terminal acts on or that reorder what it shows: the C1
// controls (U+009B is a CSI) and the bidirectional embeddings, overrides
// and isolates.
bool is_format_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable(std::string_view s, size_t max_len) {
  const bool cut = s.size() > max_len;
  if (cut) s = utf8_prefix(s, max_len);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_char(s, i, &cp);
    const auto u = static_cast<unsigned char>(s[i]);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", u);  // not UTF-8
      ++i;
      continue;
    }
    if (n > 1 && is_format_control(cp))
      out += fmt::format("\\u{:04x}", cp);
    else if (n > 1 || (u >= 0x20 && u != 0x7f))
      out.append(s.substr(i, n));
    else if (u == '\0')
      out += "\\0";
    else if (u == '\n')
      out += "\\n";
    else if (u == '\t')
      out += "\\t";
    else
      out += fmt::format("\\x{:02x}", u);
    i += n;
  }
  if (cut) out += "...";
  return out;
}

std::string_view utf8_prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_char(s, i, &cp);
    const size_t next = i + (n == 0 ? 1 : n);
    if (next > max_bytes) break;
    end = i = next;
  }
  return s.substr(0, end);
}

std::string cut_name(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  std::string out(utf8_prefix(s, max_bytes - kCutMark.size()));
  out += kCutMark;
  return out;
}

}  // namespace looptrace
