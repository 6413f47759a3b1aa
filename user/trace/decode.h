// Ring-buffer record -> typed event. Shared by the live tracer and anything
// that reads raw records (recordings, fuzzers, tests).
#pragma once

#include <cstddef>

#include "trace/events.h"

namespace looptrace {

// False if the record is malformed (short, unknown type, size mismatch,
// frame count out of range); *out is untouched then.
bool decode_record(const void* data, size_t size, Event* out);

}  // namespace looptrace
