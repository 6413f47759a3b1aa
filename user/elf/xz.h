// xz (LZMA2) streams in memory: MiniDebugInfo's .gnu_debugdata.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace looptrace::elf {

// Decompresses a whole .xz stream. Errors: a truncated or corrupt stream,
// or more than max_out bytes of output ("... more than N bytes").
Result<std::vector<char>> xz_decompress(std::string_view in, size_t max_out);

}  // namespace looptrace::elf
