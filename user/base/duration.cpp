#include "base/duration.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <limits>

namespace looptrace {
namespace {

struct Unit {
  std::string_view name;
  uint64_t ns;
};

constexpr std::array<Unit, 5> kUnits{{
    {"ns", 1},
    {"us", 1'000},
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
}};

// Fraction digits beyond this are finer than a nanosecond for every unit
// ("1.0000000001s") and would overflow the intermediate product.
constexpr size_t kMaxFractionDigits = 12;

Status bad(std::string_view s) {
  return Status::Error(
      fmt::format("bad duration '{}': expected a number with a unit "
                  "(ns, us, ms, s, m)",
                  s),
      ErrorKind::kUsage);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<uint64_t> parse_duration(std::string_view s) {
  if (!s.empty() && s[0] == '-')
    return Status::Error(
        fmt::format("bad duration '{}': must not be negative", s),
        ErrorKind::kUsage);

  size_t i = 0;
  // unsigned __int128 so that "integer * unit" can be checked for overflow
  // after the multiplication instead of before every digit.
  unsigned __int128 whole = 0;
  size_t nwhole = 0;
  for (; i < s.size() && is_digit(s[i]); ++i, ++nwhole) {
    whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
    if (whole > std::numeric_limits<uint64_t>::max())
      return Status::Error(fmt::format("bad duration '{}': too large", s),
                           ErrorKind::kUsage);
  }
  unsigned __int128 frac = 0;
  unsigned __int128 frac_scale = 1;
  size_t nfrac = 0;
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && is_digit(s[i]); ++i, ++nfrac) {
      if (nfrac >= kMaxFractionDigits) return bad(s);
      frac = frac * 10 + static_cast<unsigned>(s[i] - '0');
      frac_scale *= 10;
    }
    if (nfrac == 0) return bad(s);  // "1.ms"
  }
  if (nwhole == 0 && nfrac == 0) return bad(s);

  std::string_view unit = s.substr(i);
  if (unit.empty()) {
    return bad(s).with_hint(fmt::format("add a unit: {}ms", s.substr(0, i)));
  }
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    unsigned __int128 frac_ns = frac * u.ns;
    if (frac_ns % frac_scale != 0)
      return Status::Error(
          fmt::format("bad duration '{}': finer than a nanosecond", s),
          ErrorKind::kUsage);
    unsigned __int128 total = whole * u.ns + frac_ns / frac_scale;
    if (total > std::numeric_limits<uint64_t>::max())
      return Status::Error(fmt::format("bad duration '{}': too large", s),
                           ErrorKind::kUsage);
    return static_cast<uint64_t>(total);
  }
  return bad(s);
}

std::string format_duration(uint64_t ns) {
  if (ns < 1000) return fmt::format("{}ns", ns);
  // Whole seconds from 1000s on: "1234s" reads better than "1230s".
  constexpr uint64_t kSec = 1'000'000'000;
  if (ns >= 1000 * kSec - kSec / 2)
    return fmt::format("{}s", ns / kSec + (ns % kSec >= kSec / 2 ? 1 : 0));

  // Round to three significant digits first, then pick the unit from the
  // rounded value, so 999999ns becomes "1.00ms" rather than "1000us".
  int digits = 0;
  for (uint64_t t = ns; t; t /= 10) ++digits;
  uint64_t scale = 1;
  for (int d = 3; d < digits; ++d) scale *= 10;
  uint64_t r = ns / scale;
  if ((ns % scale) >= scale - scale / 2) ++r;  // half up, no overflow
  if (r == 1000) {
    r = 100;
    scale *= 10;
    ++digits;
  }
  // digits 4-6 -> us, 7-9 -> ms, 10+ -> s. `places` is how many of r's three
  // digits fall after the decimal point in that unit.
  int unit_exp = digits <= 6 ? 3 : digits <= 9 ? 6 : 9;
  const char* unit = digits <= 6 ? "us" : digits <= 9 ? "ms" : "s";
  int places = unit_exp - (digits - 3);
  if (places == 0) return fmt::format("{}{}", r, unit);
  uint64_t div = places == 1 ? 10 : 100;
  return fmt::format("{}.{:0{}}{}", r / div, r % div, places, unit);
}

}  // namespace looptrace
