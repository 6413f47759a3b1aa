// The HTML report: one self-contained page (inline CSS and JS, nothing
// fetched when it is viewed) with the timeline of each loop thread, the
// per-thread distributions, the slow spans with their stacks, a flame graph
// of their samples, the input stages and the sync barriers. The data is the
// JSON report's document plus what only the page draws, embedded as one
// JSON blob; the page's script (report/html/page.html) draws it.
#pragma once

#include <ostream>

#include "base/status.h"
#include "report/findings.h"
#include "report/report.h"

namespace looptrace {

// Writes the page to `os`; an error if the stream failed (the caller's
// OutputFile::close() names the path and errno).
Status write_html(std::ostream& os, const Findings& found,
                  const ReportContext& ctx);

}  // namespace looptrace
