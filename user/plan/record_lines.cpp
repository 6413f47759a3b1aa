#include "plan/record_lines.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "base/log.h"
#include "base/text.h"
#include "proc/command.h"
#include "profiles/profile.h"

namespace looptrace {
namespace {

// A note of one or more lines, each escaped for the terminal: notes quote
// the traced process's paths and socket names.
void print_note(const std::string& note) {
  for (size_t from = 0; from <= note.size();) {
    size_t nl = std::min(note.find('\n', from), note.size());
    std::fprintf(
        stderr, "%s\n",
        printable(std::string_view(note).substr(from, nl - from)).c_str());
    from = nl + 1;
  }
}

}  // namespace

void print_banner(const Plan& plan, const SessionEvent& session,
                  const std::string& what, const std::string& recording) {
  std::string input;
  if (session.has_input)
    input = fmt::format(" and input channels ({})", session.input_hook);
  std::string to =
      recording.empty() ? "" : fmt::format(", recording to {}", recording);
  if (!plan.profile_note.empty()) {
    // Found, not asked for: say where each probe went.
    print_note(plan.profile_note);
    for (const ProbeDef& p : plan.probes)
      std::fprintf(
          stderr, "looptrace:   %s %s: %s %s at offset %#llx%s\n",
          role_name(p.role),
          printable(p.label.empty() ? p.resolved_symbol : p.label).c_str(),
          printable(p.path).c_str(), printable(p.symbol).c_str(),
          static_cast<unsigned long long>(p.file_offset),
          p.version.empty() ? "" : (" (" + p.version + ")").c_str());
  }
  // Display connections a profile brought along: which, and how decoded.
  if (!plan.input_note.empty()) print_note(plan.input_note);
  if (!plan.gsource_note.empty()) print_note(plan.gsource_note);
  std::fprintf(stderr,
               "looptrace: tracing %zu probe%s%s in %s%s; Ctrl-C to stop\n",
               plan.probes.size(), plan.probes.size() == 1 ? "" : "s",
               input.c_str(), printable(what).c_str(), printable(to).c_str());
}

void report_stop(bool quiet, const std::string& reason, int command_status) {
  if (command_status == -1) {
    if (!quiet)
      std::fprintf(stderr, "looptrace: stopped: %s\n", reason.c_str());
    return;
  }
  std::string end = "command " + describe_end(command_status);
  bool show = !quiet || shell_status(command_status) != 0;
  if (reason == kCommandExited) {
    if (show) std::fprintf(stderr, "looptrace: stopped: %s\n", end.c_str());
    return;
  }
  // It ended on its own just as looptrace stopped for another reason.
  if (!quiet) std::fprintf(stderr, "looptrace: stopped: %s\n", reason.c_str());
  if (show) std::fprintf(stderr, "looptrace: %s\n", end.c_str());
}

bool stop_command(Child* child, bool quiet, const std::string& reason) {
  const Child::End ending =
      child ? child->terminate() : Child::End::kTerminated;
  const bool on_its_own = ending == Child::End::kOnItsOwn;
  report_stop(quiet, reason, on_its_own ? child->status() : -1);
  // Untraced since the stop, and perhaps holding what a script waits for.
  if (ending == Child::End::kKilled)
    log::warn(
        "command pid {} went on {:.1f}s after SIGTERM, untraced: killed "
        "it (SIGKILL)",
        child->pid(), Child::kGraceMs / 1000.0);
  return on_its_own;
}

}  // namespace looptrace
