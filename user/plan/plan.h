// What `looptrace record` will trace, from its arguments: the probes, the
// kernel's options and thresholds, the input channels. Built in two steps:
// parse_plan checks the arguments before anything touches the system;
// resolve_plan finds the probes in the binaries and the target's channels.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "budget/budget.h"
#include "model/probe.h"
#include "plan/request.h"
#include "profiles/resolve.h"
#include "trace/events.h"
#include "trace/options.h"

namespace looptrace {

struct Plan {
  // Span and point probes; after resolve_plan, ids are their indices.
  std::vector<ProbeDef> probes;
  std::vector<ProbeDef> input_probes;  // a profile's input.recv/input.send
  TraceOptions opts;                   // opts.limits: every threshold
  uint64_t duration_ns = 0;            // 0: until stopped
  uint64_t hang_ns = 0;                // --hang; 0: no live hang alerts
  std::vector<Budget> budgets;         // --fail-if
  // "looptrace: profile glib: pid N maps /usr/lib/..." when the profile
  // was found from -p's libraries; empty otherwise.
  std::string profile_note;
  // Input channels found, not asked for (a GTK process's X11 connections):
  // a line each, printed after the probes.
  std::string input_note;
  // With the glib profile and no running process to search (-- COMMAND,
  // --system-wide): a line saying its custom sources are not traced.
  std::string gsource_note;
};

// --fail-if expressions, parsed (a bad one is a usage error, before
// anything is traced).
Result<std::vector<Budget>> parse_budgets(
    const std::vector<std::string>& exprs);

// Usage errors (exit 2) for bad values, unknown keys, an empty probe set.
Status parse_plan(const RecordArgs& a, Plan* p);

// Resolves the probes (binaries, symbols); numbers the span and point
// probes.
Status resolve_plan(const ResolveContext& rctx, Plan* p);

// The input channels of `target` (-p, the command; -1 system-wide), once
// it exists.
Status plan_input(const RecordArgs& a, const ResolveContext& rctx, pid_t target,
                  Plan* p);

// The stream's first event: what is traced, how, where. `input_hook`:
// how the tracer probes input calls (Tracer::input_hook()).
SessionEvent session_header(const RecordArgs& a, const Plan& plan,
                            const std::string& input_hook, pid_t target);

namespace plan {
// The built-in profile whose runtime `maps` show ("" if none).
std::string profile_of_maps(const std::vector<MapEntry>& maps);
}  // namespace plan

// "a b c": the command line as the report shows it.
std::string join_command(const std::vector<std::string>& argv);

}  // namespace looptrace
