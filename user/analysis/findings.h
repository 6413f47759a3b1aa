// What every output shows, computed once at the end of a run (live or
// replayed): the analyses, and the context to read them in. Outputs
// (report/) only format them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/barrier.h"
#include "analysis/dispatch.h"
#include "analysis/frames.h"
#include "analysis/input.h"
#include "model/probe.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"

namespace looptrace {

struct Findings {
  DispatchAnalysis analysis;
  BarrierAnalysis barriers;
  InputAnalysis input;
  FrameAnalysis frames;
  bool has_barriers = false;
  bool has_input = false;
  bool has_frames = false;  // a probe had the frame role
};

// What the findings are read with: the run's probes, thresholds and
// symbols. The analysis fills it from the session header.
struct ReportContext {
  const std::vector<ProbeDef>* probes = nullptr;  // looked up by ProbeDef::id
  Symbolizer* symbolizer = nullptr;  // null: addresses shown in hex
  std::array<uint64_t, LT_ROLE_MAX> slow_ns{};
  uint64_t duration_ns = 0;  // how long the trace ran
  std::string command_line;
  // A monitor's dump: what fired ("monitor dump: dispatch 152ms > 100ms");
  // empty for a run.
  std::string dump_reason;
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
  // --app-code: what is the program's own code in stacks (report/
  // key_frames.h); empty: the default rule.
  std::vector<std::string> app_code;
};

}  // namespace looptrace
