// One event <-> its bytes in a recording (docs/recording.md). Hot events
// (spans, samples, socket calls) are fixed little-endian fields; rare ones
// (the session header, mappings, symbols, the end) are CBOR, so that they
// can grow fields without a new format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/events.h"

namespace looptrace::rec {

// Record types in a block; never renumbered (a recording outlives a build).
enum RecordType : uint8_t {
  kSpan = 1,
  kSample = 2,
  kSpanDrop = 3,
  kPoint = 4,
  kIo = 5,
  kExec = 6,
  kSession = 7,
  kMappings = 8,
  kSymbol = 9,
  kQueue = 10,
  kTick = 11,
  kEnd = 12,
  kHang = 13,
  kBlock = 14,
  kWake = 15,
  kWoken = 16,
  kStop = 17,
  kLastType = kStop,  // newer types are skipped by this build
};

// Appends [type u8][length u32][payload] to *out.
void encode_event(const Event& ev, std::string* out);

// Decodes one payload of `type`; false if it is malformed or of a type this
// build does not know (*out is then unspecified).
bool decode_event(uint8_t type, const uint8_t* data, size_t size, Event* out);

}  // namespace looptrace::rec
