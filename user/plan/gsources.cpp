// GLib sources of a program's own kinds: found in a running process's
// memory, traced as GLib's own kinds are.
#include "proc/gsources.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"
#include "plan/steps.h"

namespace looptrace::plan {

// The glib profile's GIOWatch dispatch probe, the model of a custom
// source's probe (the same keys); null when no such probe is resolved.
const ProbeDef* custom_gsource_model(const std::vector<ProbeDef>& probes) {
  auto model =
      std::find_if(probes.begin(), probes.end(), [](const ProbeDef& d) {
        return d.symbol == "*(g_io_watch_funcs+16)" && !d.path.empty();
      });
  return model == probes.end() ? nullptr : &*model;
}

// GLib sources of a program's own kinds (-p with the glib profile): a
// probe at each one's dispatch function, found in the process's memory
// (proc/gsources.h), keyed as GLib's own kinds are.
void add_custom_gsources(pid_t pid, std::vector<ProbeDef>* probes) {
  const ProbeDef* model = custom_gsource_model(*probes);
  if (!model) return;
  const ProbeDef base = *model;
  auto found = proc::find_custom_gsources(static_cast<uint32_t>(pid));
  if (!found.ok()) {
    log::info("glib: pid {}: its own source kinds are not known ({})", pid,
              found.status().message());
    return;
  }
  for (const proc::CustomGSource& c : *found) {
    // The file as the process sees it (its mount namespace), as the
    // profile's other probes are resolved.
    const std::string path = fmt::format("/proc/{}/root{}", pid, c.path);
    const bool have =
        std::any_of(probes->begin(), probes->end(), [&](const ProbeDef& d) {
          return (d.path == path || d.path == c.path) &&
                 d.file_offset == c.file_offset;
        });
    if (have) continue;
    if (probes->size() >= LT_MAX_PROBES) {
      log::info(
          "glib: pid {}: more source kinds than the {} probes the "
          "kernel's table holds: {} not traced",
          pid, LT_MAX_PROBES, c.path);
      continue;
    }
    ProbeDef d = base;
    d.binary = c.path;
    d.symbol = fmt::format("{:#x}", c.file_offset);
    d.label = "GLib custom";
    d.path = path;
    d.file_offset = c.file_offset;
    d.resolved_symbol =
        fmt::format("dispatch of the GSourceFuncs at {:#x}", c.funcs);
    d.gate.reset();
    d.version.clear();
    probes->push_back(std::move(d));
  }
}

}  // namespace looptrace::plan
