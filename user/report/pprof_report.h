// pprof's profile format (profile.proto, gzipped): what `go tool pprof`,
// Pyroscope and Parca read. `--pprof FILE` of `record` and `report`.
#pragma once

#include <ostream>
#include <string>

#include "base/status.h"
#include "report/findings.h"
#include "report/report.h"

namespace looptrace {

// Writes the slow spans' stacks as one profile with three sample types:
// `samples` (count) and `cpu` (nanoseconds: samples times the sampling
// period) for the stacks sampled while they ran on a CPU, `blocked`
// (nanoseconds) for the places they blocked, whose innermost frame is the
// kernel function they waited in ("[do_nanosleep]"). `cpu` is the default
// type. Each sample is labelled with its span's `role` (dispatch, idle),
// `target` (as the text report names it), `comm`, and `pid`/`tid` as
// numbers. Native frames carry their module as a mapping and their address;
// Python frames their qualname, file and line. Names a traced process
// supplied are made printable (base/text.h). Fails when `os` failed.
Status write_pprof(std::ostream& os, const Findings& found,
                   const ReportContext& ctx);

}  // namespace looptrace
