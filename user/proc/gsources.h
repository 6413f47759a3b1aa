// A GLib process's custom sources (a GSourceFuncs table of its own, not
// one of those GLib exports), found in its memory: the glib profile probes
// the dispatch function of each exported table; a program's own sources
// (PyGObject's GLib.Source subclasses, GDK's event source) dispatch
// through functions no symbol names, which this finds.
//
// A GSource is public API (gmain.h; the same for all of GLib 2):
//   { gpointer callback_data; GSourceCallbackFuncs *callback_funcs;
//     const GSourceFuncs *source_funcs @16; guint ref_count @24;
//     GMainContext *context @32; ... char *name @80; ... }
// and a GSourceFuncs { prepare, check, dispatch @16, finalize, ... }.
// The sources of GLib's own kinds give their contexts; a source of a
// context whose table is none of GLib's is a custom one. The table must
// lie in a file's mapping and its functions in executable ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "proc/maps.h"

namespace looptrace::proc {

struct CustomGSource {
  uint64_t funcs = 0;     // its GSourceFuncs
  uint64_t dispatch = 0;  // funcs->dispatch
  std::string path;       // the file the dispatch function is in
  uint64_t file_offset = 0;
};

// The GSourceFuncs tables GLib exports for its own kinds.
const std::vector<std::string>& glib_source_funcs_names();

// The custom sources' distinct tables in pid (at most max_bytes of its
// memory read). Error: libglib-2.0 is not mapped, or its memory cannot be
// read.
Result<std::vector<CustomGSource>> find_custom_gsources(
    uint32_t pid, uint64_t max_bytes = 1ull << 30);

// The same, given GLib's tables' addresses (`known`) in pid.
Result<std::vector<CustomGSource>> scan_custom_gsources(
    uint32_t pid, const std::vector<MapEntry>& maps,
    const std::vector<uint64_t>& known, uint64_t max_bytes = 1ull << 30);

}  // namespace looptrace::proc
