// Symbols a stripped file leaves elsewhere: its separate debug file (found
// by build-id or .gnu_debuglink, as gdb and perf find it) and the
// MiniDebugInfo in its .gnu_debugdata section (Fedora).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "elf/elf_file.h"

namespace looptrace::elf {

// Where to look for the debug file of one file.
struct DebugLookup {
  // Debian's /usr/lib/debug (debug packages, debuginfod caches laid out
  // the same way).
  std::string debug_root = "/usr/lib/debug";
  // The directory the file was opened from (e.g. /proc/PID/root/usr/lib),
  // where a debuglink's file sits next to it or in .debug/.
  std::string dir;
  // The file's directory as the process names it (/usr/lib): under
  // debug_root for the third debuglink place.
  std::string original_dir;
};

// DEBUG_ROOT/.build-id/xx/yyyy.debug for the hex build-id xxyyyy; empty for
// a build-id too short to split.
std::string build_id_path(const std::string& debug_root,
                          const std::string& build_id);

// The places a debuglink name is looked for, in order: dir/NAME,
// dir/.debug/NAME, DEBUG_ROOT/original_dir/NAME.
std::vector<std::string> debuglink_paths(const DebugLookup& where,
                                         const std::string& name);

// The CRC-32 (gzip's, as .gnu_debuglink carries it) of a file's contents.
Result<uint32_t> file_crc32(const std::string& path);

// The separate debug file of `file`: by build-id (its build-id must match),
// then by debuglink (its CRC must match). Errors say what was tried.
Result<ElfFile> find_debug_file(const ElfFile& file, const DebugLookup& where);

// MiniDebugInfo holds a few MiB of symbols at most; a stream decompressing
// to more is not one.
constexpr size_t kMaxMiniDebugInfoBytes = 64u << 20;

// The ELF image inside file's .gnu_debugdata (xz), parsed. Errors: no such
// section, a bad xz stream, an image that is not ELF.
Result<ElfFile> open_minidebuginfo(const ElfFile& file);

}  // namespace looptrace::elf
