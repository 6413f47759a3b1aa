// Which runtime a process runs, from the libraries it maps: the built-in
// profile to trace it with when no probe was given.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string_view>

#include "plan/steps.h"
#include "proc/maps.h"
#include "profiles/profile.h"

namespace looptrace::plan {
namespace {

// Runtimes a built-in profile knows, by a library the process maps.
struct Detector {
  const char* profile;
  const char* library;  // as find_mapped_file matches it
};
// In order: GTK 3, GTK 4 and Qt run on GLib's loop (Qt by default), and
// their events and frames say more than GLib's sources do; Qt Quick is
// Qt's events and its scene graph's frames.
// The reference app's profile probes the refapp binary itself.
constexpr Detector kDetectors[] = {{"refapp", "refapp"},
                                   {"node", "node"},
                                   {"android", "libutils.so"},
                                   {"gtk3", "libgtk-3.so.0"},
                                   {"gtk4", "libgtk-4.so.1"},
                                   {"qtquick6", "libQt6Quick.so.6"},
                                   {"qtquick5", "libQt5Quick.so.5"},
                                   {"qt6", "libQt6Core.so.6"},
                                   {"qt5", "libQt5Core.so.5"},
                                   {"glib", "libglib-2.0.so"}};

}  // namespace

std::string profile_of_maps(const std::vector<MapEntry>& maps) {
  for (const Detector& d : kDetectors)
    if (proc::find_mapped_file(maps, d.library)) return d.profile;
  return "";
}

// With -p PID and no probe given: the profile of the runtime its libraries
// show, and a line saying so; "" when none is known.
Result<std::string> detect_profile(uint32_t pid, std::string* note) {
  auto maps = proc::read_maps(pid);
  if (!maps.ok()) return maps.status();
  for (const Detector& d : kDetectors) {
    const MapEntry* m = proc::find_mapped_file(*maps, d.library);
    if (m == nullptr) continue;
    *note = fmt::format("looptrace: profile {}: pid {} maps {}", d.profile, pid,
                        m->path);
    return std::string(d.profile);
  }
  return std::string();
}

// With -- COMMAND and no probe given: what the command will run is not
// mapped yet (a wrapper such as xvfb-run, an interpreter that loads GLib
// later), so every built-in runtime profile whose code is on this machine
// is probed, each probe once; node only when the command line names it
// (its 110 MB binary takes 0.5 s to read). The probes fire only in the
// command and what it starts (the kernel filters by process).
Status command_profiles(const RecordArgs& a, std::vector<ProbeDef>* probes,
                        std::string* note) {
  // A monitor of the whole system traces node too.
  bool names_node = a.every_runtime;
  for (const std::string& arg : a.command) {
    std::string base = arg.substr(arg.rfind('/') + 1);
    names_node = names_node || base == "node" || base == "nodejs";
  }
  std::vector<std::string> chosen;
  std::map<std::string, bool> installed;  // by binary: each looked up once
  for (const Detector& d : kDetectors) {
    if (std::string_view(d.profile) == "node" && !names_node) continue;
    if (std::string_view(d.profile) == "refapp") continue;  // not a runtime
    auto prof = load_profile(d.profile);
    if (!prof.ok()) return prof.status();
    bool here = true;
    for (const ProbeDef& p : prof->probes) {
      auto [it, added] = installed.try_emplace(p.binary, false);
      if (added) it->second = resolve_binary(p.binary, ResolveContext{}).ok();
      here = here && it->second;
    }
    if (!here) continue;
    chosen.push_back(d.profile);
    for (ProbeDef& p : prof->probes) {
      // (Two call probes in one function are two probes.)
      bool dup =
          std::any_of(probes->begin(), probes->end(), [&](const ProbeDef& q) {
            return q.binary == p.binary && q.symbol == p.symbol && !q.call &&
                   !p.call;
          });
      if (!dup) probes->push_back(std::move(p));
    }
  }
  if (chosen.empty())
    return Status::Error(
        fmt::format("nothing to trace: no runtime a built-in profile knows "
                    "({}) is installed here; give --profile FILE or "
                    "--dispatch BINARY:SYMBOL",
                    join_builtin_names()),
        ErrorKind::kUsage);
  *note = a.command.empty()
              ? fmt::format(
                    "looptrace: no probe given: every process of the runtimes "
                    "installed here: {}",
                    fmt::join(chosen, ", "))
              : fmt::format(
                    "looptrace: no probe given: the runtimes installed here, "
                    "in what {} starts: {}",
                    a.command[0], fmt::join(chosen, ", "));
  return Status::Ok();
}

}  // namespace looptrace::plan
