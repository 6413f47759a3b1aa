// Durations as users type them on the command line ("16ms", "1.5s") and as
// reports print them ("16.0ms").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace looptrace {

// Parses "<number><unit>" into nanoseconds. The number is decimal with an
// optional fraction ("1.5s"); the unit is one of ns, us, ms, s, m (minutes)
// and is required: a bare "16" is ambiguous, so it is a usage error with a
// hint. Errors are ErrorKind::kUsage and quote the input.
Result<uint64_t> parse_duration(std::string_view s);

// Compact human form with three significant digits: "850ns", "12.3us",
// "16.0ms", "1.25s", "125s"; whole seconds from 1000s on ("3600s"). At most
// 6 characters below 99999.5s (from there it rounds to "100000s").
std::string format_duration(uint64_t ns);

}  // namespace looptrace
