// Ring-buffer record -> typed event. Shared by the live tracer and anything
// that reads raw records (recordings, fuzzers, tests).
#pragma once

#include <cstddef>

#include "looptrace/abi.h"
#include "trace/events.h"

namespace looptrace {

// False if the record is malformed (short, unknown type, size mismatch,
// frame count out of range); *out is untouched then.
bool decode_record(const void* data, size_t size, Event* out);

// The kernel's structs as events, field by field; the one place each is
// filled, for the ring buffer's records and for what the loader reads from
// the maps. Unchecked: decode_record checks a record before.
SpanEvent span_event(const lt_span_rec& r);
ThreadHistogram thread_histogram(const lt_hist& h);

}  // namespace looptrace
