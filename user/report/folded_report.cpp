#include "report/folded_report.h"

#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <map>

#include "report/report_common.h"

namespace looptrace {

namespace {

// "comm;target": the root of a span's lines.
std::string span_prefix(const SpanEvent& e, const ReportContext& ctx) {
  return folded_frame(e.comm) + ';' +
         folded_frame(report::describe_target(e, ctx).text);
}

// Lines to the stream, sorted; fails when the stream did.
Status put_lines(std::ostream& os, const std::map<std::string, uint64_t>& m,
                 const char* what) {
  for (const auto& [stack, weight] : m) {
    if (!os) break;
    os << stack << ' ' << weight << '\n';
  }
  os.flush();
  if (!os) return Status::Error(fmt::format("writing the {} failed", what));
  return Status::Ok();
}

}  // namespace

std::string folded_frame(std::string name) {
  for (char& c : name) {
    if (c == ';')
      c = ':';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = ' ';
  }
  return name.empty() ? "[unknown]" : name;
}

Status write_folded(std::ostream& os, const Findings& found,
                    const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  // Frames are functions without offsets: samples anywhere in a function
  // are one frame, as stackcollapse-perf makes them.
  std::map<std::string, uint64_t> counts;
  for (const SlowSpan& s : found.analysis.slow) {
    if (s.stacks.empty()) continue;
    const SpanEvent& e = s.span;
    const std::string prefix = span_prefix(e, ctx);
    for (const StackGroup& g : s.stacks) {
      std::string line = prefix;
      for (auto it = g.frames.rbegin(); it != g.frames.rend(); ++it)
        line += ';' + folded_frame(names.function(e.pid, *it));
      counts[line] += g.count;
    }
  }
  return put_lines(os, counts, "folded stacks");
}

Status write_folded_blocked(std::ostream& os, const Findings& found,
                            const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  std::map<std::string, uint64_t> us;
  for (const SlowSpan& s : found.analysis.slow) {
    const SpanEvent& e = s.span;
    if (s.blocked.empty()) continue;
    const std::string prefix = span_prefix(e, ctx);
    for (const BlockGroup& g : s.blocked) {
      std::string line = prefix;
      for (auto it = g.frames.rbegin(); it != g.frames.rend(); ++it)
        line += ';' + folded_frame(names.function(e.pid, *it));
      std::string wait = report::kernel_wait(g.kframes, names);
      line += ";[" + folded_frame(wait.empty() ? "blocked" : wait) + "]";
      us[line] += g.blocked_ns / 1000;
    }
  }
  // A place blocked for less than a microsecond in all has nothing to show.
  for (auto it = us.begin(); it != us.end();)
    it = it->second == 0 ? us.erase(it) : std::next(it);
  return put_lines(os, us, "blocked stacks");
}

}  // namespace looptrace
