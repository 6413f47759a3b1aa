// The findings as a Chrome trace-event JSON file (the "JSON trace format"
// that ui.perfetto.dev and chrome://tracing open): a track per loop thread
// with its slow dispatches and idle handlers, their stack samples, sync
// barriers, slow deliveries and input events with their flows.
// docs/looptrace.md, "Perfetto and flame graphs", says what each event is.
#pragma once

#include <ostream>

#include "base/status.h"
#include "report/findings.h"
#include "report/report.h"

namespace looptrace {

// Writes the trace to `os`, one event a line, without holding the events
// in memory. Timestamps ("ts") are microseconds since ts_base_ns, a
// CLOCK_MONOTONIC time given in the trace's "metadata" (the start of
// tracing, or the earliest event if one came before it). Fails when `os`
// failed; the caller closes the file and reports its errno.
Status write_perfetto(std::ostream& os, const Findings& found,
                      const ReportContext& ctx);

}  // namespace looptrace
