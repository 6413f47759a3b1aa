#include "report/hang_report.h"

#include <fmt/format.h>

#include "base/duration.h"
#include "profiles/profile.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

constexpr size_t kLineFrames = 4;  // the rest are in the JSON line

}  // namespace

std::string hang_line(const HangAlert& h, const ReportContext& ctx) {
  const SpanEvent& s = h.span;
  std::string target = report::describe_target(s, ctx).text;
  if (h.ended)
    return fmt::format(
        "looptrace: hang over: {} {} after {} pid {} tid {} ({})",
        role_name(s.role), target, format_duration(s.duration_ns), s.pid, s.tid,
        s.comm);
  std::string line =
      fmt::format("looptrace: HANG {} {} running {} pid {} tid {} ({}), cpu {}",
                  role_name(s.role), target, format_duration(s.duration_ns),
                  s.pid, s.tid, s.comm, format_duration(s.cpu_ns));
  report::FrameNames names(ctx.symbolizer);
  for (size_t i = 0; i < h.frames.size() && i < kLineFrames; ++i)
    line += fmt::format("{}{}", i == 0 ? ", at " : " < ",
                        names.name(s.pid, h.frames[i]));
  if (h.frames.size() > kLineFrames) line += " < ...";
  return line;
}

nlohmann::json hang_event(const HangAlert& h, const ReportContext& ctx) {
  const SpanEvent& s = h.span;
  report::FrameNames names(ctx.symbolizer);
  nlohmann::json stack = nlohmann::json::array();
  for (uint64_t addr : h.frames) stack.push_back(names.name(s.pid, addr));
  return {{"event", h.ended ? "hang_end" : "hang"},
          {"pid", s.pid},
          {"tid", s.tid},
          {"comm", s.comm},
          {"role", role_name(s.role)},
          {"target", report::describe_target(s, ctx).text},
          {"span_id", s.span_id},
          {"start_ns", s.start_ns},
          {h.ended ? "duration_ns" : "age_ns", s.duration_ns},
          {"cpu_ns", s.cpu_ns},
          {"runq_ns", s.runq_ns},
          {"blocked_ns", s.blocked_ns()},
          {"stack", std::move(stack)}};
}

}  // namespace looptrace
