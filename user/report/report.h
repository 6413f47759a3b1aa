// Reports of a DispatchAnalysis: an 80-column text report for people and a
// JSON document for scripts (docs/json-schema.md).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "analysis/dispatch.h"
#include "analysis/findings.h"

namespace looptrace {

void write_text_report(std::ostream& os, const DispatchAnalysis& analysis,
                       const ReportContext& ctx);

nlohmann::json to_json(const DispatchAnalysis& analysis,
                       const ReportContext& ctx);

namespace report {
class FrameNames;
}  // namespace report

// One element of the JSON report's slow_dispatches or slow_idle_handlers
// (docs/json-schema.md); other outputs carry the same fields.
nlohmann::json slow_span_json(const SlowSpan& s, const ReportContext& ctx,
                              report::FrameNames& names);
// One element of its slow_deliveries: the delivery `why` is about, and
// why (the sync barriers from ctx.barriers).
nlohmann::json slow_delivery_json(const DeliveryBlame& why,
                                  const DispatchAnalysis& a,
                                  const ReportContext& ctx);

}  // namespace looptrace
