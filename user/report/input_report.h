// Reports of an InputAnalysis: per channel, the stage distributions, then
// the worst events with what they waited behind (text); every event and
// channel (JSON, docs/json-schema.md).
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>

#include "analysis/dispatch.h"
#include "analysis/input.h"
#include "report/report.h"

namespace looptrace {

// `dispatch` supplies the stacks of blamed dispatches.
void write_input_report(std::ostream& os, const InputAnalysis& a,
                        const DispatchAnalysis& dispatch,
                        const ReportContext& ctx);

// The JSON report's input part in two: {"input_summary": {...},
// "input_channels": [...]}, and the elements of "input_events" one at a
// time, so that a large report is written without holding every event's
// JSON at once (report/json_stream.h).
nlohmann::json input_summary_to_json(const InputAnalysis& a,
                                     const DispatchAnalysis& dispatch,
                                     const ReportContext& ctx);
void for_each_input_event_json(
    const InputAnalysis& a, const DispatchAnalysis& dispatch,
    const ReportContext& ctx,
    const std::function<void(const nlohmann::json&)>& emit);

// The events the JSON report lists (InputAnalysis::events), in order, each
// with its "input_events" element; and how many it leaves out.
void for_each_listed_input_event(
    const InputAnalysis& a, const DispatchAnalysis& dispatch,
    const ReportContext& ctx,
    const std::function<void(const InputEventInfo&, const nlohmann::json&)>&
        fn);
size_t input_events_not_listed(const InputAnalysis& a);

}  // namespace looptrace
