#include "report/target.h"

#include <fmt/format.h>

#include <string_view>

#include "base/log.h"
#include "trace/span_keys.h"

namespace looptrace {
namespace {

constexpr std::string_view kVtablePrefix = "vtable for ";

std::string hex(uint64_t v) { return fmt::format("{:#x}", v); }

std::string strip_offset(std::string s) {
  size_t plus = s.rfind("+0x");
  if (plus != std::string::npos) s.resize(plus);
  return s;
}

std::string code_name(const SpanEvent& span, uint64_t addr, Symbolizer* sym) {
  if (sym == nullptr) return hex(addr);
  Frame f = sym->symbolize(span.pid, addr);
  return f.known() ? f.to_string() : hex(addr);
}

// A vtable pointer points a little past the "vtable for X" symbol (at the
// first virtual function slot), so the offset is expected and dropped.
std::string class_name(const SpanEvent& span, uint64_t addr, Symbolizer* sym) {
  if (sym == nullptr) return hex(addr);
  Frame f = sym->symbolize(span.pid, addr);
  // A class whose vtable has no symbol (a stripped module's own, as
  // PyQt's generated sipQObject): at least which module defines it.
  if (!f.known() && !f.module.empty())
    return fmt::format("{:#x} ({})", addr,
                       f.module.substr(f.module.rfind('/') + 1));
  if (!f.known()) return hex(addr);
  std::string name = strip_offset(f.function);
  if (std::string_view(name).starts_with(kVtablePrefix))
    name.erase(0, kVtablePrefix.size());
  return name;
}

}  // namespace

std::vector<RenderedKey> render_keys(const SpanEvent& span,
                                     const ProbeDef& probe,
                                     Symbolizer* symbolizer) {
  std::vector<RenderedKey> out;
  for (size_t i = 0; i < probe.keys.size() && i < LT_MAX_KEYS; ++i) {
    const KeyDef& def = probe.keys[i];
    RenderedKey k;
    k.name = def.name;
    k.role = def.role;
    k.format = def.format;
    k.raw = span.keys[i];
    uint64_t v = key_bits(k.raw, def.spec.size);
    k.int_value = key_int(v, def.spec.size);
    if (span.key_fault_mask & (1u << i)) {
      k.fault = true;
      // Not `= "?"`: GCC 12 reports a bogus -Wrestrict on that assignment.
      k.text = std::string(1, '?');
      out.push_back(std::move(k));
      continue;
    }
    switch (def.format) {
      case KeyFormat::kInt:
        k.text = fmt::format("{}", k.int_value);
        break;
      case KeyFormat::kHex:
      case KeyFormat::kPointer:
        k.text = hex(v);
        break;
      case KeyFormat::kSymbol:
      case KeyFormat::kPyFunc:
        // A message without a callback has a null one, a callback that is
        // no Python function a null code: say nothing.
        if (v == 0)
          k.omitted = true;
        else
          k.text = code_name(span, v, symbolizer);
        break;
      case KeyFormat::kVtable:
        k.text = v == 0 ? hex(v) : class_name(span, v, symbolizer);
        break;
      case KeyFormat::kString:
        // Read only for the record of a span (slow ones); an unnamed
        // object has none. Bytes of the traced process, escaped here for
        // every output; one longer than the record holds ends in "…".
        if (span.key_str.empty()) {
          k.omitted = true;
        } else {
          k.text = printable(span.key_str, LT_KEY_STR_LEN);
          if (span.flags & LT_SPAN_KEY_STR_CUT) k.text += kCutMark;
        }
        break;
      case KeyFormat::kEnum: {
        // As read (a u16 QEvent::Type of 65535), else sign-extended (a C
        // enum's -1 read as u32).
        auto it = def.names.find(static_cast<int64_t>(v));
        if (it == def.names.end()) it = def.names.find(k.int_value);
        k.text =
            it != def.names.end() ? it->second : fmt::format("{}", k.int_value);
        break;
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::string format_target(const std::vector<RenderedKey>& keys,
                          const ProbeDef& probe) {
  std::string out = probe.label;
  // A Python callable names what ran better than the native callback that
  // calls it (PyGObject's closure): it takes the callback's place.
  const RenderedKey* py = nullptr;
  for (const RenderedKey& k : keys)
    if (k.format == KeyFormat::kPyFunc && !k.omitted && !k.fault) py = &k;
  const bool py_first =
      py != nullptr && !keys.empty() && keys[0].format == KeyFormat::kSymbol;
  for (size_t i = 0; i < keys.size(); ++i) {
    const RenderedKey& k = py_first && i == 0 ? *py : keys[i];
    // An input event's time matches it to its event; it names nothing.
    const bool input_time = probe.input && probe.input->time_key == i + 1;
    // Keys that pair a dispatch with its enqueue say nothing more.
    if (k.omitted || k.format == KeyFormat::kPointer || due_scale(k.role) ||
        k.role == KeyRole::kMsgTag || k.role == KeyRole::kRefreshNs ||
        input_time || (k.format == KeyFormat::kPyFunc && &k != py) ||
        (py_first && i != 0 && &k == py))
      continue;
    if (!out.empty()) out += ' ';
    if (i == 0 || &k == py)
      out += k.text;
    else
      out += fmt::format("{}={}", k.name, k.text);
  }
  if (!out.empty()) return out;
  if (!probe.resolved_symbol.empty()) return probe.resolved_symbol;
  return probe.symbol;
}

std::string format_target(const SpanEvent& span, const ProbeDef& probe,
                          Symbolizer& symbolizer) {
  return format_target(render_keys(span, probe, &symbolizer), probe);
}

}  // namespace looptrace
