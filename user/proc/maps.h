// /proc/PID/maps: which file (and which part of it) backs each address.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/mapping.h"

namespace looptrace::proc {

using MapEntry = looptrace::MapEntry;

// Parses the text of a maps file. A malformed line is an error naming its
// number: "line 3: malformed maps entry '...'".
Result<std::vector<MapEntry>> parse_maps(std::string_view text);

// Reads and parses /proc/PID/maps.
Result<std::vector<MapEntry>> read_maps(uint32_t pid);

// The path (as the process sees it) of a file it maps whose path equals
// name (or is the same file), whose basename equals name, or whose basename
// starts with name + "." or name + "-" ("libglib-2.0.so" finds
// libglib-2.0.so.0.7400.6). Error: "binary 'x' is not mapped by pid N".
Result<std::string> find_mapped_library(uint32_t pid, const std::string& name);

// The matching done by find_mapped_library, on a snapshot: the best mapping
// of the file, or nullptr.
const MapEntry* find_mapped_file(const std::vector<MapEntry>& maps,
                                 const std::string& name);

}  // namespace looptrace::proc
