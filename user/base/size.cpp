#include "base/size.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace looptrace {

Result<uint64_t> parse_size(const std::string& s) {
  if (s.empty()) return Status::Error("bad size ''", ErrorKind::kUsage);
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::string unit(end);
  if (errno || end == s.c_str() || s[0] < '0' || s[0] > '9' || v > (1ull << 40))
    return Status::Error(fmt::format("bad size '{}'", s), ErrorKind::kUsage);
  int shift = 0;
  if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (!unit.empty())
    return Status::Error(fmt::format("bad size '{}': use K, M or G", s),
                         ErrorKind::kUsage);
  if (v > (1ull << 40) >> shift)
    return Status::Error(fmt::format("bad size '{}': at most 1T", s),
                         ErrorKind::kUsage);
  return static_cast<uint64_t>(v) << shift;
}

Result<uint32_t> parse_ringbuf_size(const std::string& s) {
  auto parsed = parse_size(s);
  if (!parsed.ok()) return parsed.status();
  uint64_t v = *parsed;
  if (v < 4096 || v > (1ull << 30) || (v & (v - 1)))
    return Status::Error(
        fmt::format("bad ring buffer size '{}': a power of two from 4K to 1G",
                    s),
        ErrorKind::kUsage);
  return static_cast<uint32_t>(v);
}

std::string format_size(uint64_t bytes) {
  static constexpr struct {
    int shift;
    char unit;
  } kUnits[] = {{30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (auto [shift, unit] : kUnits)
    if (bytes != 0 && bytes % (1ull << shift) == 0)
      return fmt::format("{}{}", bytes >> shift, unit);
  return std::to_string(bytes);
}

}  // namespace looptrace
