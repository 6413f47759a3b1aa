// The outputs of the Findings (analysis/findings.h) that show all of them:
// the JSON report and the text reports.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "analysis/findings.h"
#include "base/status.h"
#include "report/report.h"

namespace looptrace {

class OutputFile;

// The JSON report's document without its streamed list (input_events):
// every summary, count and percentile; what budgets are evaluated against
// (budget/budget.h) and what the HTML page embeds.
nlohmann::json findings_to_json(const Findings& found,
                                const ReportContext& ctx);

// The JSON report (docs/json-schema.md); writes and closes `f`, returns the
// first write error.
Status write_json_report(OutputFile& f, const Findings& found,
                         const ReportContext& ctx);
// The same with a document from findings_to_json(), to which the caller
// may have added fields (the "budgets" array).
Status write_json_report(OutputFile& f, const Findings& found,
                         const ReportContext& ctx, nlohmann::json document);

// The text report: dispatches, then barriers, input and frames if the run
// had them.
void write_text_reports(std::ostream& os, const Findings& found,
                        const ReportContext& ctx);

}  // namespace looptrace
