// Reports of a DispatchAnalysis: an 80-column text report for people and a
// JSON document for scripts (docs/json-schema.md).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/dispatch.h"
#include "profiles/probe.h"
#include "symbolize/symbolizer.h"

namespace looptrace {

struct BarrierAnalysis;

struct ReportContext {
  const std::vector<ProbeDef>* probes = nullptr;  // looked up by ProbeDef::id
  Symbolizer* symbolizer = nullptr;  // null: addresses shown in hex
  std::array<uint64_t, LT_ROLE_MAX> slow_ns{};
  uint64_t duration_ns = 0;  // how long the trace ran
  std::string command_line;
  // CLOCK_MONOTONIC when tracing began; the text report shows span starts
  // relative to it. 0: relative to the first event in the stream.
  uint64_t start_ns = 0;
  uint64_t barrier_stall_ns = Thresholds::kBarrierStallNs;
  // Stack samples per second per CPU: one sample stands for 1/sample_hz s
  // of CPU time (0: no sampling).
  uint32_t sample_hz = 0;
  // Sync barriers, if the run had barrier probes: a backlog of late
  // messages names the barriers that were up meanwhile.
  const BarrierAnalysis* barriers = nullptr;
};

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
