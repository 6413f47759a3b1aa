// Reports of a DispatchAnalysis: an 80-column text report for people and a
// JSON document for scripts (docs/json-schema.md).
#pragma once

#include <cstddef>
#include <map>
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
// The slow spans the JSON report's slow deliveries and backlogs name, each
// once, in its "blamed_spans"; the lists name them by index into it (a
// backlog of 10 000 late messages names the same few spans 10 000 times).
class BlamedSpans {
 public:
  explicit BlamedSpans(const DispatchAnalysis& a);
  // The index of a.slow[slow] in the list; it must be one a delivery's
  // running_instead or a listed backlog's behind names.
  size_t at(size_t slow) const { return index_.at(slow); }
  nlohmann::json to_json(const DispatchAnalysis& a,
                         const ReportContext& ctx) const;

 private:
  std::map<size_t, size_t> index_;  // into a.slow -> into the list
};

// One element of its slow_deliveries: the delivery `why` is about, and
// why (the sync barriers from ctx.barriers). With `blamed`,
// running_instead holds indices into it; without, the few longest spans
// themselves (a Perfetto slice's args).
nlohmann::json slow_delivery_json(const DeliveryBlame& why,
                                  const DispatchAnalysis& a,
                                  const ReportContext& ctx,
                                  const BlamedSpans* blamed = nullptr);

}  // namespace looptrace
