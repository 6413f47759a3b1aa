// The text report: what a person reads after a run. Every line fits 80
// columns; anything longer (deep C++ names) is cut with "...", the JSON
// report has it whole.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "base/duration.h"
#include "profiles/profile.h"
#include "report/report.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

// Frames of the stuck stack shown; the rest are usually the loop's own
// frames (main -> Looper::loop -> dispatch) that every stack shares.
constexpr size_t kMaxFrames = 12;
constexpr size_t kCommWidth = LT_COMM_LEN - 1;

using report::put;
constexpr size_t kColumns = 80;

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

const char* thread_title(uint32_t role) {
  if (role == LT_ROLE_DELIVERY) return "DELIVERY LAG BY THREAD";
  return role == LT_ROLE_IDLE ? "IDLE HANDLERS BY THREAD"
                              : "DISPATCHES BY THREAD";
}

const char* slow_title(uint32_t role) {
  if (role == LT_ROLE_DELIVERY) return "SLOW DELIVERIES";
  return role == LT_ROLE_IDLE ? "SLOW IDLE HANDLERS" : "SLOW DISPATCHES";
}

void write_header(std::ostream& os, const ReportContext& ctx) {
  std::string line = "looptrace:";
  if (ctx.duration_ns != 0)
    line += fmt::format(" traced {};", format_duration(ctx.duration_ns));
  bool first = true;
  bool any_probe = ctx.probes == nullptr || !ctx.probes->empty();
  if (any_probe) line += " slow";
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r) {
    // Only the roles this run has probes for (all of them when unknown).
    bool used = ctx.probes == nullptr;
    if (ctx.probes != nullptr) {
      for (const ProbeDef& p : *ctx.probes)
        used = used || p.role == r ||
               (r == LT_ROLE_DELIVERY && p.role == LT_ROLE_ENQUEUE);
    }
    if (!used) continue;
    line +=
        fmt::format("{} {} >= {}", first ? "" : ",", looptrace::role_name(r),
                    format_duration(ctx.slow_ns[r]));
    first = false;
  }
  put(os, line);
  if (!ctx.command_line.empty()) put(os, "command: " + ctx.command_line);
}

void write_threads(std::ostream& os, const DispatchAnalysis& a, uint32_t role) {
  std::vector<const ThreadSummary*> rows;
  size_t id_width = 7;  // "PID/TID"
  for (const ThreadSummary& t : a.threads) {
    if (t.role != role) continue;
    rows.push_back(&t);
    id_width = std::max(id_width, fmt::format("{}/{}", t.pid, t.tid).size());
  }
  if (rows.empty()) return;

  // id, 2 spaces, comm, count(9), 4 x duration(8), slow(7): 80 columns with
  // the longest pid/tid (4194304/4194304) and comm.
  constexpr size_t kFixed = 2 + 9 + 4 * 8 + 7;
  size_t comm_width = std::min(kCommWidth, kColumns - kFixed - id_width);
  auto row = [&](std::string id, std::string comm, std::string count,
                 std::string p50, std::string p90, std::string p99,
                 std::string max, std::string slow) {
    if (comm.size() > comm_width) comm.resize(comm_width);
    put(os, fmt::format("{:<{}}  {:<{}}{:>9}{:>8}{:>8}{:>8}{:>8}{:>7}", id,
                        id_width, comm, comm_width, count, p50, p90, p99, max,
                        slow));
  };
  os << '\n';
  put(os, thread_title(role));
  row("PID/TID", "COMM", "COUNT", "P50", "P90", "P99", "MAX", "SLOW");
  for (const ThreadSummary* t : rows) {
    row(fmt::format("{}/{}", t->pid, t->tid), t->comm,
        fmt::format("{}", t->count), format_duration(t->pct.p50),
        format_duration(t->pct.p90), format_duration(t->pct.p99),
        format_duration(t->pct.max), fmt::format("{}", t->slow_count));
  }
}

void write_stacks(std::ostream& os, const SlowSpan& s,
                  report::FrameNames& names) {
  if (s.stacks.empty()) {
    put(os, "    no stack samples");
    return;
  }
  const StackGroup& top = s.stacks[0];
  put(os, fmt::format("    stuck here: {} of {}", top.count,
                      plural(s.nsamples, "sample", "samples")));
  if (top.frames.empty()) put(os, "      (no frames: the stack read failed)");
  size_t shown = std::min(top.frames.size(), kMaxFrames);
  for (size_t i = 0; i < shown; ++i)
    put(os, "      " + names.name(s.span.pid, top.frames[i]));
  if (top.frames.size() > shown)
    put(os, fmt::format("      ... {} more {}", top.frames.size() - shown,
                        top.frames.size() - shown == 1 ? "frame" : "frames"));
  if (s.stacks.size() > 1) {
    uint64_t rest = s.nsamples - top.count;
    put(os,
        fmt::format("    + {} ({})",
                    plural(s.stacks.size() - 1, "other stack", "other stacks"),
                    plural(rest, "sample", "samples")));
  }
}

void write_slow(std::ostream& os, const DispatchAnalysis& a,
                const ReportContext& ctx, uint32_t role,
                report::FrameNames& names) {
  std::vector<const SlowSpan*> spans;
  for (const SlowSpan& s : a.slow)
    if (s.span.role == role) spans.push_back(&s);
  bool has_threads =
      std::any_of(a.threads.begin(), a.threads.end(),
                  [role](const ThreadSummary& t) { return t.role == role; });
  if (spans.empty() && !has_threads) return;

  os << '\n';
  std::string threshold = format_duration(ctx.slow_ns[role]);
  if (spans.empty()) {
    put(os, fmt::format("{}: none (>= {})", slow_title(role), threshold));
    return;
  }
  put(os,
      fmt::format("{}: {} (>= {})", slow_title(role), spans.size(), threshold));
  uint64_t base = ctx.start_ns != 0 ? ctx.start_ns : a.first_event_ns;
  for (size_t i = 0; i < spans.size(); ++i) {
    const SpanEvent& e = spans[i]->span;
    if (i != 0) os << '\n';
    if (role == LT_ROLE_DELIVERY) {
      // A delivery "span" runs from the message's due time to the start of
      // its dispatch; what ran meanwhile on the thread is the answer.
      double due = e.start_ns >= base ? (e.start_ns - base) / 1e9 : 0.0;
      put(os,
          fmt::format("{:<4} due +{:.3f}s  lag {}  {}/{} {}",
                      fmt::format("#{}", i + 1), due,
                      format_duration(e.duration_ns), e.pid, e.tid, e.comm));
      put(os, "    " + report::describe_target(e, ctx).text);
      for (const SlowSpan* b : report::running_instead(a, e))
        put(os,
            fmt::format(
                "    behind {} {} at +{:.3f}s",
                format_duration(b->span.duration_ns),
                report::describe_target(b->span, ctx).text,
                (b->span.start_ns - std::min(base, b->span.start_ns)) / 1e9));
      continue;
    }
    double rel = e.start_ns >= base ? (e.start_ns - base) / 1e9 : 0.0;
    std::string line = fmt::format(
        "{:<4} +{:.3f}s  wall {}  {}/{} {}", fmt::format("#{}", i + 1), rel,
        format_duration(e.duration_ns), e.pid, e.tid, e.comm);
    if (e.depth != 0) line += fmt::format("  depth {}", e.depth);
    if (e.in_flight) line += "  STILL RUNNING";
    put(os, line);
    put(os, "    " + report::describe_target(e, ctx).text);
    // Where the wall time went: on a CPU, waiting for one, or blocked.
    auto share = [&e](uint64_t ns) {
      return e.duration_ns ? ns * 100 / e.duration_ns : 0;
    };
    std::string times =
        fmt::format("    cpu {} ({}%)  runq {} ({}%)  blocked {} ({}%)",
                    format_duration(e.cpu_ns), share(e.cpu_ns),
                    format_duration(e.runq_ns), share(e.runq_ns),
                    format_duration(e.blocked_ns()), share(e.blocked_ns()));
    if (e.steal_ns)
      times += fmt::format("  steal {}", format_duration(e.steal_ns));
    put(os, times);
    write_stacks(os, *spans[i], names);
  }
}

void write_lost(std::ostream& os, const DispatchAnalysis& a) {
  os << '\n';
  std::vector<report::LostItem> items = report::lost_items(a);
  bool any = std::any_of(items.begin(), items.end(),
                         [](const report::LostItem& l) { return l.value; });
  if (!any) {
    put(os, "lost: none");
    return;
  }
  put(os, "lost:");
  for (const report::LostItem& l : items)
    if (l.value != 0) put(os, "  " + l.text);
}

}  // namespace

void write_text_report(std::ostream& os, const DispatchAnalysis& analysis,
                       const ReportContext& ctx) {
  write_header(os, ctx);
  bool any_probe = ctx.probes == nullptr || !ctx.probes->empty();
  if (any_probe && analysis.threads.empty() && analysis.slow.empty()) {
    os << '\n';
    put(os, "no spans: no probed function returned while tracing");
  }
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r) write_threads(os, analysis, r);
  report::FrameNames names(ctx.symbolizer);
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r)
    write_slow(os, analysis, ctx, r, names);
  write_lost(os, analysis);
}

}  // namespace looptrace
