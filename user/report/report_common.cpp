#include "report/report_common.h"

#include <fmt/format.h>

#include <string_view>

#include "base/size.h"
#include "base/text.h"
#include "python/frames.h"
#include "symbolize/kernel_frames.h"
#include "symbolize/kernel_symbols.h"
#include "v8/frames.h"

namespace looptrace::report {

void put(std::ostream& os, std::string_view line) {
  constexpr size_t kColumns = 80;
  std::string safe = printable(line);
  if (safe.size() > kColumns) {
    safe = utf8_prefix(safe, kColumns - 3);
    safe += "...";
  }
  os << safe << '\n';
}

const ProbeDef* find_probe(const ReportContext& ctx, uint32_t id) {
  if (ctx.probes == nullptr) return nullptr;
  for (const ProbeDef& p : *ctx.probes)
    if (p.id == id) return &p;
  return nullptr;
}

SpanTarget describe_target(const SpanEvent& span, const ReportContext& ctx) {
  SpanTarget t;
  const ProbeDef* probe = find_probe(ctx, span.probe_id);
  if (probe == nullptr) {
    t.text = fmt::format("probe#{}", span.probe_id);
    return t;
  }
  t.keys = render_keys(span, *probe, ctx.symbolizer);
  t.text = format_target(t.keys, *probe);
  return t;
}

std::string ring_fill(const DispatchAnalysis& a, uint64_t duration_ns) {
  const auto& c = a.counters.bpf;
  if (duration_ns == 0 || c[LT_CNT_RB_FULL] == 0) return "";
  const double s = duration_ns / 1e9;
  auto rate = [](double per_s) {
    return per_s >= 1e6   ? fmt::format("{:.1f}M", per_s / 1e6)
           : per_s >= 1e3 ? fmt::format("{:.1f}k", per_s / 1e3)
                          : fmt::format("{:.0f}", per_s);
  };
  std::string out;
  if (c[LT_CNT_IO])
    out = fmt::format("{} input messages/s", rate(c[LT_CNT_IO] / s));
  if (c[LT_CNT_SAMPLES])
    out += fmt::format("{}{} samples/s", out.empty() ? "" : ", ",
                       rate(c[LT_CNT_SAMPLES] / s));
  return out;
}

std::vector<LostItem> lost_items(const DispatchAnalysis& a) {
  const auto& c = a.counters.bpf;
  // Each line says what was lost and, where a knob exists, which one to
  // turn. Kept under 80 columns with a 2-space indent and large counts.
  return {
      {"ringbuf_full", c[LT_CNT_RB_FULL],
       fmt::format("ring buffer full: {} records lost{} (raise "
                   "--ringbuf-size)",
                   c[LT_CNT_RB_FULL],
                   a.ringbuf_bytes
                       ? fmt::format(" in {}", format_size(a.ringbuf_bytes))
                       : "")},
      {"hist_full", c[LT_CNT_HIST_FULL],
       fmt::format("histogram table full: {} spans uncounted "
                   "(raise --max-threads)",
                   c[LT_CNT_HIST_FULL])},
      {"depth_overflow", c[LT_CNT_DEPTH_OVERFLOW],
       fmt::format("nested deeper than {}: {} spans not timed", LT_MAX_DEPTH,
                   c[LT_CNT_DEPTH_OVERFLOW])},
      {"unmatched_returns", c[LT_CNT_RET_UNMATCHED],
       fmt::format("returns without an entry: {} (spans open at attach)",
                   c[LT_CNT_RET_UNMATCHED])},
      {"abandoned", c[LT_CNT_ABANDONED],
       fmt::format("spans left without a return: {} (longjmp or an "
                   "exception; not timed)",
                   c[LT_CNT_ABANDONED])},
      {"storage_fail", c[LT_CNT_STORAGE_FAIL],
       fmt::format("task storage unavailable: {} spans not timed",
                   c[LT_CNT_STORAGE_FAIL])},
      {"key_faults", c[LT_CNT_KEY_FAULT],
       fmt::format("key reads faulted: {} (shown as '?'; check the profile)",
                   c[LT_CNT_KEY_FAULT])},
      {"stack_failures", c[LT_CNT_STACK_FAIL],
       fmt::format("stack samples failed: {}", c[LT_CNT_STACK_FAIL])},
      {"unseen_switches", c[LT_CNT_SCHED_UNSEEN],
       fmt::format("context switches unseen: {} (those spans' CPU split is "
                   "the kernel's, +-1 tick)",
                   c[LT_CNT_SCHED_UNSEEN])},
      {"blocks_capped", c[LT_CNT_OFFCPU_CAPPED],
       fmt::format("blocking points past {} in a span: {} not recorded "
                   "(their time stays unattributed)",
                   LT_MAX_BLOCKS, c[LT_CNT_OFFCPU_CAPPED])},
      {"delivery_unmatched", c[LT_CNT_DELIVERY_UNMATCHED],
       fmt::format("delivery lag unknown: {} dispatches (enqueue unseen; "
                   "raise --max-pending)",
                   c[LT_CNT_DELIVERY_UNMATCHED])},
      {"python_cut", c[LT_CNT_PY_CUT],
       fmt::format("Python stacks deeper than {} frames: {} (outermost "
                   "frames missing)",
                   LT_MAX_PYFRAMES, c[LT_CNT_PY_CUT])},
      {"python_names_cut", c[LT_CNT_PY_NAME_CUT],
       fmt::format("Python functions with names or line tables cut: {} "
                   "(past {}/{}/{} bytes)",
                   c[LT_CNT_PY_NAME_CUT], LT_PY_NAME_BYTES, LT_PY_FILE_BYTES,
                   LT_PY_TABLE_BYTES)},
      {"js_cut", c[LT_CNT_JS_CUT],
       fmt::format("JavaScript stacks deeper than {} frames: {} (outermost "
                   "JavaScript frames missing)",
                   LT_MAX_JSFRAMES, c[LT_CNT_JS_CUT])},
      {"watch_full", c[LT_CNT_WATCH_FULL],
       fmt::format("process/channel table full: {} not followed (raise "
                   "--max-processes)",
                   c[LT_CNT_WATCH_FULL])},
      {"hook_misses", a.counters.hook_misses,
       fmt::format("hook runs the kernel skipped: {} (a hook nested in "
                   "itself, as an interrupt's wakeup; their records are "
                   "missing)",
                   a.counters.hook_misses)},
      {"decode_errors", a.counters.decode_errors,
       fmt::format("malformed records: {} (damaged file or ABI mismatch)",
                   a.counters.decode_errors)},
      {"orphan_samples", a.orphan_samples,
       fmt::format("samples of unfinished spans: {} (running at exit?)",
                   a.orphan_samples)},
      {"sample_overflow", a.sample_overflow,
       fmt::format("samples dropped, too many pending: {}", a.sample_overflow)},
  };
}

namespace {

// A Python frame's function without its line, "on_timeout (x.py:22)" ->
// "on_timeout (x.py)": one function, wherever in it the samples fell.
std::string without_line(const std::string& function) {
  const size_t colon = function.rfind(':');
  if (colon == std::string::npos || function.back() != ')' ||
      colon + 2 >= function.size())
    return function;
  for (size_t i = colon + 1; i + 1 < function.size(); ++i)
    if (function[i] < '0' || function[i] > '9') return function;
  return function.substr(0, colon) + ")";
}

}  // namespace

const FrameNames::Names& FrameNames::names(uint32_t pid, uint64_t addr) {
  auto [it, added] = cache_.try_emplace({pid, addr});
  if (added) {
    Frame f;
    f.addr = addr;
    if (symbolizer_ != nullptr) f = symbolizer_->symbolize(pid, addr);
    if (f.addr == 0) f.addr = addr;
    it->second.name = f.to_string();
    it->second.frame = f;
    if (f.known() && (python::is_py_frame(addr) || v8::is_js_frame(addr))) {
      it->second.function = without_line(f.function);
    } else if (f.known()) {
      it->second.function = f.function;
    } else if (f.module.empty()) {
      it->second.function = "[unknown]";
    } else {
      // "[vdso]" as it is; "/usr/lib/libfoo.so" as "[libfoo.so]".
      std::string base = f.module.substr(f.module.rfind('/') + 1);
      if (base.empty()) base = f.module;
      it->second.function = base.front() == '[' ? base : "[" + base + "]";
    }
  }
  return it->second;
}

const std::string& FrameNames::name(uint32_t pid, uint64_t addr) {
  return names(pid, addr).name;
}

const std::string& FrameNames::function(uint32_t pid, uint64_t addr) {
  return names(pid, addr).function;
}

const Frame& FrameNames::frame(uint32_t pid, uint64_t addr) {
  return names(pid, addr).frame;
}

namespace {

KernelFunctionName kernel_functions(FrameNames& names) {
  return [&names](uint64_t addr) -> const std::string& {
    return names.function(kKernelPid, addr);
  };
}

}  // namespace

std::string kernel_wait(const std::vector<uint64_t>& kframes,
                        FrameNames& names) {
  return waiting_in(kframes, kernel_functions(names));
}

bool interrupt_wakeup(const Waker& w, FrameNames& names) {
  return w.from_irq || through_interrupt(w.kframes, kernel_functions(names));
}

std::string kernel_waker(const std::vector<uint64_t>& kframes,
                         FrameNames& names) {
  return woken_by(kframes, kernel_functions(names));
}

}  // namespace looptrace::report
