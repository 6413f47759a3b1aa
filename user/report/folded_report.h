// Folded stacks, the format of Brendan Gregg's flamegraph.pl (and of
// speedscope, inferno): one line per distinct stack, its frames from the
// outermost to the innermost joined by ';', a space, its sample count.
#pragma once

#include <ostream>
#include <string>

#include "base/status.h"
#include "report/findings.h"
#include "report/report.h"

namespace looptrace {

// Writes the stacks sampled in slow spans (dispatches and idle handlers),
// each line rooted at the thread's comm, then the span's target (what
// report::describe_target names, so that the graph splits by handler),
// then the functions; counts are samples. Lines are sorted. Fails when
// `os` failed; the caller closes the file and reports its errno.
Status write_folded(std::ostream& os, const Findings& found,
                    const ReportContext& ctx);

// Off-CPU: where slow spans blocked (docs/looptrace.md), in the same form:
// comm, target, the user frames from the outermost, then the kernel
// function it waited in as "[do_nanosleep]" ("[blocked]" when unknown);
// the weight is the time blocked there in microseconds, as bcc's
// offcputime -f gives it.
Status write_folded_blocked(std::ostream& os, const Findings& found,
                            const ReportContext& ctx);

// `name` as one frame of a folded line: ';' (the separator) becomes ':',
// line breaks and other control characters become spaces, and an empty
// name becomes "[unknown]".
std::string folded_frame(std::string name);

}  // namespace looptrace
