// Live hang alerts (--hang): a span still running past the threshold, and
// its end, as a line on stderr and a JSON line for --events.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "analysis/dispatch.h"
#include "report/report.h"

namespace looptrace {

// "looptrace: HANG dispatch Loop::dispatch what=3 running 2.00s pid 5 tid
// 5 (app), cpu 1.99s, at busyStall+0x57 < handleMessage+0xc9 < ..." or
// "looptrace: hang over: dispatch ... after 3.00s pid 5 tid 5 (app)".
std::string hang_line(const HangAlert& h, const ReportContext& ctx);
// {"event": "hang" | "hang_end", pid, tid, comm, role, target, span_id,
// start_ns, age_ns | duration_ns, cpu_ns, runq_ns, blocked_ns, stack}
nlohmann::json hang_event(const HangAlert& h, const ReportContext& ctx);

}  // namespace looptrace
