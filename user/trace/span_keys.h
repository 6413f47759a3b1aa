// A span's keys as its probe declares them: each value cut to the size it
// was read with, and which of them are code addresses. Naming a span's
// target (report/target.h) reads them so; a recording resolves beforehand
// the addresses that naming will ask about (pipeline/symbols.h).
#pragma once

#include <cstdint>
#include <vector>

#include "model/probe.h"
#include "trace/events.h"

namespace looptrace {

// A key read with a size (1, 2 or 4 bytes) holds only that many bytes;
// registers holding an `int` carry garbage above bit 31, so cut there too.
// Size 0 or 8: the whole value.
uint64_t key_bits(uint64_t raw, uint8_t size);
// The same, sign-extended from the key's size.
int64_t key_int(uint64_t raw, uint8_t size);

// The code (KeyFormat::kSymbol) and vtable (kVtable) pointers among the keys
// of `span`, in key order: those that were read and are not null, which are
// what naming the span symbolizes.
std::vector<uint64_t> code_keys(const SpanEvent& span, const ProbeDef& probe);

}  // namespace looptrace
