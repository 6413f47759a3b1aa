// Profiles: which functions of a runtime play which role, and what keys to
// read there. Built-in profiles are JSON text compiled in; a profile file has
// the same format (docs/profiles.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/probe.h"

namespace looptrace {

struct Profile {
  std::string name;
  std::string description;
  std::vector<ProbeDef> probes;  // unresolved: binary + symbol + keys
};

// A profile file larger than this is refused before it is read: real
// profiles are a few KiB, and the limit keeps a wrong path (a log, an
// image) from being read whole.
constexpr size_t kMaxProfileBytes = 1 << 20;

// A built-in name ("refapp") or a path to a JSON profile file: a regular
// file (not a FIFO, device or directory) of at most kMaxProfileBytes.
Result<Profile> load_profile(const std::string& name_or_file);
Result<Profile> parse_profile(std::string_view json_text,
                              const std::string& origin);
std::vector<std::string> builtin_profile_names();

// "BINARY:SYMBOL" as given to --dispatch/--idle. SYMBOL may contain "::".
Result<ProbeDef> parse_probe_arg(std::string_view arg, uint32_t role);

const char* role_name(uint32_t role);
Result<uint32_t> parse_role(std::string_view name);

}  // namespace looptrace
