// Durations ("16ms", "1.5s"): any text parses or is one usage line; a
// parsed value prints back in at most 6 characters below 99999.5 s
// (duration.h), what is printed parses again, and its nanoseconds parse
// back to the same value.
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/duration.h"
#include "fuzz_check.h"

namespace {

void check_value(uint64_t ns) {
  std::string shown = looptrace::format_duration(ns);
  LT_FUZZ_CHECK(!shown.empty());
  if (ns < 99'999'500'000'000ull) LT_FUZZ_CHECK(shown.size() <= 6);
  // What format_duration prints is itself a valid duration, except within
  // half a second of 2^64 ns, which rounds to a whole second past it.
  if (ns <= UINT64_MAX - 500'000'000)
    LT_FUZZ_CHECK(looptrace::parse_duration(shown).ok());
  auto exact = looptrace::parse_duration(fmt::format("{}ns", ns));
  LT_FUZZ_CHECK(exact.ok() && *exact == ns);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = looptrace::parse_duration(text);
  if (d.ok())
    check_value(*d);
  else
    LT_FUZZ_CHECK(d.status().kind() == looptrace::ErrorKind::kUsage);
  // The first 8 bytes as a raw value: format_duration over the whole range.
  if (size >= sizeof(uint64_t)) {
    uint64_t raw = 0;
    std::memcpy(&raw, data, sizeof raw);
    check_value(raw);
  }
  return 0;
}
