// What a span ran, in words: its keys rendered the way Android's Looper
// printer shows a message ("refapp::WorkHandler callback=refapp::onTick()
// what=3").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/probe.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"

namespace looptrace {

// One key of one span, ready to print.
struct RenderedKey {
  std::string name;
  KeyRole role = KeyRole::kShown;
  KeyFormat format = KeyFormat::kHex;
  uint64_t raw = 0;       // as read, before any size truncation
  bool fault = false;     // the read faulted (key_fault_mask): text is "?"
  bool omitted = false;   // a null code pointer (kSymbol 0): nothing to show
  int64_t int_value = 0;  // kInt: sign-extended from the key's size
  std::string text;       // "what=7" shows "7"; "?" on fault
};

// Renders each key of `probe` for `span`. `symbolizer` may be null: code
// and vtable pointers are then shown in hex.
std::vector<RenderedKey> render_keys(const SpanEvent& span,
                                     const ProbeDef& probe,
                                     Symbolizer* symbolizer);

// First key bare (usually the target), the others as name=value; omitted
// keys are skipped. With no keys (or nothing to show) the probe's resolved
// symbol names the span.
std::string format_target(const std::vector<RenderedKey>& keys,
                          const ProbeDef& probe);
std::string format_target(const SpanEvent& span, const ProbeDef& probe,
                          Symbolizer& symbolizer);

}  // namespace looptrace
