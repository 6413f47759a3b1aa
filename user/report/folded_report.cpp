#include "report/folded_report.h"

#include <cstdint>
#include <map>

#include "report/report_common.h"

namespace looptrace {

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
    const std::string prefix =
        folded_frame(e.comm) + ';' +
        folded_frame(report::describe_target(e, ctx).text);
    for (const StackGroup& g : s.stacks) {
      std::string line = prefix;
      for (auto it = g.frames.rbegin(); it != g.frames.rend(); ++it)
        line += ';' + folded_frame(names.function(e.pid, *it));
      counts[line] += g.count;
    }
  }
  for (const auto& [stack, count] : counts) {
    if (!os) break;
    os << stack << ' ' << count << '\n';
  }
  os.flush();
  if (!os) return Status::Error("writing the folded stacks failed");
  return Status::Ok();
}

}  // namespace looptrace
