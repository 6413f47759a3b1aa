// The sync-barrier part of the reports: text section, JSON array, and the
// live stall announcement.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "analysis/barrier.h"
#include "report/report.h"

namespace looptrace {

void write_barrier_report(std::ostream& os, const BarrierAnalysis& a,
                          const ReportContext& ctx);
namespace report {
class FrameNames;
}  // namespace report

// One element of the JSON report's "barriers" (docs/json-schema.md).
nlohmann::json barrier_json(const Barrier& b, report::FrameNames& names);
// {"summary": {...}, "barriers": [...]}
nlohmann::json barriers_to_json(const BarrierAnalysis& a,
                                const ReportContext& ctx);
// One line for stderr while tracing, and one JSON object for --events.
std::string barrier_stall_line(const Barrier& b, uint64_t stall_ns,
                               const ReportContext& ctx);
nlohmann::json barrier_stall_event(const Barrier& b, uint64_t stall_ns,
                                   const ReportContext& ctx);

}  // namespace looptrace
