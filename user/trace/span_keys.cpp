#include "trace/span_keys.h"

namespace looptrace {

uint64_t key_bits(uint64_t raw, uint8_t size) {
  if (size == 0 || size >= 8) return raw;
  return raw & ((1ULL << (size * 8)) - 1);
}

int64_t key_int(uint64_t raw, uint8_t size) {
  if (size == 0 || size >= 8) return static_cast<int64_t>(raw);
  unsigned shift = 64 - size * 8;
  return static_cast<int64_t>(raw << shift) >> shift;
}

std::vector<uint64_t> code_keys(const SpanEvent& span, const ProbeDef& probe) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < probe.keys.size() && i < LT_MAX_KEYS; ++i) {
    const KeyDef& def = probe.keys[i];
    if (def.format != KeyFormat::kSymbol && def.format != KeyFormat::kVtable &&
        def.format != KeyFormat::kPyFunc)
      continue;
    if (span.key_fault_mask & (1u << i)) continue;
    uint64_t v = key_bits(span.keys[i], def.spec.size);
    if (v != 0) out.push_back(v);
  }
  return out;
}

}  // namespace looptrace
