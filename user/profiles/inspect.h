// Looking before tracing: which functions a binary offers probes
// (`looptrace list`), and what a profile's probes resolve to on this
// machine or in a process (`looptrace check`).
#pragma once

#include <sys/types.h>

#include <string>

namespace looptrace {

struct InspectArgs {
  std::string profile;  // check: a built-in name or a file
  std::string binary;   // list/check: a path or library name ("" with -p)
  std::string glob;     // list: functions to show ("" = all)
  pid_t pid = -1;       // -p: the process's mappings
  std::string self_dir;
};

// Whether `name` (no glob characters) is a file `pid` maps: `list NAME -p
// PID` lists that binary rather than taking NAME as a glob.
bool names_mapped_file(pid_t pid, const std::string& name);

// Prints BINARY:FUNCTION per function matching the glob (of the binary, or
// of every executable file the process maps), with the built-in profile
// roles that attach there. Exit 0, or 2 for a bad binary or pid.
int run_list(const InspectArgs& args);

// Prints, per probe of the profile, where it resolves or why it does not.
// Exit 0 when every probe resolves, 1 when one does not, 2 for a bad
// profile, binary or pid.
int run_check(const InspectArgs& args);

// Lists the built-in profiles (name, description, probes) on stdout.
int run_profiles();

}  // namespace looptrace
