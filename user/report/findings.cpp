#include "report/findings.h"

#include <map>
#include <string>

#include "base/output_file.h"
#include "report/barrier_report.h"
#include "report/frames_report.h"
#include "report/input_report.h"
#include "report/json_stream.h"

namespace looptrace {

nlohmann::json findings_to_json(const Findings& found,
                                const ReportContext& ctx) {
  nlohmann::json j = to_json(found.analysis, ctx);
  if (found.has_barriers) {
    nlohmann::json bj = barriers_to_json(found.barriers, ctx);
    j["barrier_summary"] = std::move(bj["summary"]);
    j["barriers"] = std::move(bj["barriers"]);
  }
  if (found.has_input) {
    nlohmann::json ij = input_summary_to_json(found.input, found.analysis, ctx);
    for (auto& [k, v] : ij.items()) j[k] = std::move(v);
  }
  if (found.has_frames) {
    nlohmann::json fj = frames_to_json(found.frames, ctx);
    for (auto& [k, v] : fj.items()) j[k] = std::move(v);
  }
  return j;
}

Status write_json_report(OutputFile& f, const Findings& found,
                         const ReportContext& ctx) {
  return write_json_report(f, found, ctx, findings_to_json(found, ctx));
}

Status write_json_report(OutputFile& f, const Findings& found,
                         const ReportContext& ctx, nlohmann::json document) {
  // Input events are written one at a time: a long trace can list a
  // hundred thousand of them.
  std::map<std::string, JsonElements> streamed;
  if (found.has_input) {
    streamed["input_events"] = [&](const auto& emit) {
      for_each_input_event_json(found.input, found.analysis, ctx, emit);
    };
  }
  write_json_object(f.stream(), document, streamed);
  f.stream() << '\n';
  return f.close();
}

void write_text_reports(std::ostream& os, const Findings& found,
                        const ReportContext& ctx) {
  write_text_report(os, found.analysis, ctx);
  if (found.has_barriers) write_barrier_report(os, found.barriers, ctx);
  if (found.has_input) write_input_report(os, found.input, found.analysis, ctx);
  if (found.has_frames) write_frames_report(os, found.frames, ctx);
}

}  // namespace looptrace
