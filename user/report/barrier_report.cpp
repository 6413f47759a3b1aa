#include "report/barrier_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/histogram.h"
#include "base/duration.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

constexpr size_t kMaxListed = 20;  // stalled/leaked barriers in the text
constexpr size_t kMaxFrames = 8;

std::vector<std::string> stack_names(const Barrier& b,
                                     report::FrameNames& names) {
  std::vector<std::string> out;
  for (uint64_t addr : b.post_stack) out.push_back(names.name(b.pid, addr));
  return out;
}

// "refapp::Foo::bar() <- refapp::Baz::run()": the poster and its caller.
std::string short_stack(const Barrier& b, report::FrameNames& names) {
  std::string s;
  for (size_t i = 0; i < b.post_stack.size() && i < 2; ++i) {
    if (i) s += " <- ";
    s += names.name(b.pid, b.post_stack[i]);
  }
  return s.empty() ? "(no stack)" : s;
}

}  // namespace

void write_barrier_report(std::ostream& os, const BarrierAnalysis& a,
                          const ReportContext& ctx) {
  os << '\n';
  std::vector<uint64_t> lifetimes;
  for (const Barrier& b : a.barriers)
    if (b.removed()) lifetimes.push_back(b.lifetime_ns());
  std::string line =
      fmt::format("SYNC BARRIERS: {} posted, {} removed", a.posted, a.removed);
  if (!lifetimes.empty()) {
    Percentiles p = exact_percentiles(std::move(lifetimes));
    line +=
        fmt::format("; lifetime p50 {} p99 {} max {}", format_duration(p.p50),
                    format_duration(p.p99), format_duration(p.max));
  }
  report::put(os, line);
  report::put(os, fmt::format("  stalled (held >= {}): {}   leaked: {}",
                              format_duration(ctx.barrier_stall_ns), a.stalled,
                              a.leaked));
  if (a.unknown_removes)
    report::put(
        os, fmt::format("  removals of unknown tokens: {}", a.unknown_removes));
  report::FrameNames names(ctx.symbolizer);
  size_t listed = 0;
  for (const Barrier& b : a.barriers) {
    if (!b.stalled && b.removed()) continue;
    if (++listed > kMaxListed) break;
    uint64_t base =
        ctx.start_ns && b.posted_ns >= ctx.start_ns ? ctx.start_ns : 0;
    std::string state =
        b.removed() ? fmt::format("held {}", format_duration(b.lifetime_ns()))
                    : "never removed";
    if (b.waiting_sync >= 0)
      state += fmt::format(", {} sync waiting", b.waiting_sync);
    report::put(os, fmt::format("  token {}  queue {:#x}  {}/{}  +{:.3f}s  {}",
                                b.token, b.queue, b.pid, b.tid,
                                (b.posted_ns - base) / 1e9, state));
    std::vector<std::string> frames = stack_names(b, names);
    for (size_t i = 0; i < frames.size() && i < kMaxFrames; ++i)
      report::put(os, "      " + frames[i]);
  }
}

nlohmann::json barrier_json(const Barrier& b, report::FrameNames& names) {
  return {
      {"pid", b.pid},
      {"tid", b.tid},
      {"queue", fmt::format("{:#x}", b.queue)},
      {"token", b.token},
      {"posted_ns", b.posted_ns},
      {"removed_ns",
       b.removed() ? nlohmann::json(b.removed_ns) : nlohmann::json(nullptr)},
      {"lifetime_ns",
       b.removed() ? nlohmann::json(b.lifetime_ns()) : nlohmann::json(nullptr)},
      {"stalled", b.stalled},
      {"stalled_ns",
       b.stalled ? nlohmann::json(b.stalled_ns) : nlohmann::json(nullptr)},
      {"post_stack", stack_names(b, names)},
      {"waiting_sync_messages", b.waiting_sync >= 0
                                    ? nlohmann::json(b.waiting_sync)
                                    : nlohmann::json(nullptr)},
      {"oldest_sync_due_ns", b.waiting_sync > 0
                                 ? nlohmann::json(b.oldest_sync_due_ns)
                                 : nlohmann::json(nullptr)},
  };
}

nlohmann::json barriers_to_json(const BarrierAnalysis& a,
                                const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  nlohmann::json list = nlohmann::json::array();
  for (const Barrier& b : a.barriers) list.push_back(barrier_json(b, names));
  return {{"summary",
           {{"posted", a.posted},
            {"removed", a.removed},
            {"stalled", a.stalled},
            {"leaked", a.leaked},
            {"unknown_removes", a.unknown_removes},
            {"duplicate_posts", a.duplicate_posts},
            {"not_listed", a.dropped},
            {"stall_threshold_ns", ctx.barrier_stall_ns}}},
          {"barriers", std::move(list)}};
}

std::string barrier_stall_line(const Barrier& b, uint64_t stall_ns,
                               const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  std::string waiting =
      b.waiting_sync < 0
          ? ""
          : fmt::format("; {} sync messages waiting", b.waiting_sync);
  if (b.waiting_sync > 0 && b.stalled_ns > b.oldest_sync_due_ns)
    waiting +=
        fmt::format(", oldest due {} ago",
                    format_duration(b.stalled_ns - b.oldest_sync_due_ns));
  return fmt::format(
      "looptrace: STALL: sync barrier token {} on queue {:#x} (pid {} tid {}) "
      "held {} and not removed{}; posted by {}",
      b.token, b.queue, b.pid, b.tid, format_duration(stall_ns), waiting,
      short_stack(b, names));
}

nlohmann::json barrier_stall_event(const Barrier& b, uint64_t stall_ns,
                                   const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  return {{"event", "barrier_stall"},
          {"pid", b.pid},
          {"tid", b.tid},
          {"queue", fmt::format("{:#x}", b.queue)},
          {"token", b.token},
          {"posted_ns", b.posted_ns},
          {"detected_ns", b.stalled_ns},
          {"held_ns", stall_ns},
          {"waiting_sync_messages", b.waiting_sync >= 0
                                        ? nlohmann::json(b.waiting_sync)
                                        : nlohmann::json(nullptr)},
          {"oldest_sync_due_ns", b.waiting_sync > 0
                                     ? nlohmann::json(b.oldest_sync_due_ns)
                                     : nlohmann::json(nullptr)},
          {"post_stack", stack_names(b, names)}};
}

}  // namespace looptrace
