// Byte sizes as users type them ("8M", "512K") and as help and reports
// print them.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace looptrace {

// "<digits>[K|M|G]" (binary units, either case) into bytes, at most 1T.
// Errors are ErrorKind::kUsage and quote the input.
Result<uint64_t> parse_size(const std::string& s);

// The same, and a power of two
// from 4K to 1G, the sizes a BPF ring buffer can have. Errors are
// ErrorKind::kUsage and quote the input.
Result<uint32_t> parse_ringbuf_size(const std::string& s);

// The largest unit that divides the size: "8M", "512K", "1G", "1000"
// (bytes): what parse_ringbuf_size reads back.
std::string format_size(uint64_t bytes);

}  // namespace looptrace
