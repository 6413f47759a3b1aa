// Logging: fmt-formatted lines on stderr, with levels and per-area debug
// switches (--debug=elf,loader). libbpf's messages go through here too.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/text.h"

namespace looptrace::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_level(Level level);
Level level();
// Comma-separated areas ("elf,loader" or "all"); enables debug for them.
void enable_debug_areas(std::string_view areas);
bool debug_enabled(std::string_view area);
// Writes one line; control bytes in it (a NUL or a newline inside a name
// read from a file) are escaped so the line stays whole and one line.
// Debug lines are written as they are (libbpf's verifier log has many).
void write(Level level, std::string_view area, const std::string& line);

// For quoting untrusted names in messages: base/text.h.
using looptrace::printable;

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::kError, "", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kWarn)
    write(Level::kWarn, "", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kInfo)
    write(Level::kInfo, "", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(std::string_view area, fmt::format_string<Args...> f,
           Args&&... args) {
  if (debug_enabled(area))
    write(Level::kDebug, area, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace looptrace::log
