// Symbol resolutions kept across runs, by build-id: a 100 MB binary
// (/usr/bin/node) takes a quarter of a second to read and demangle, the
// answer to "where is node::Environment::RunTimers" a few bytes. A file's
// build-id names its contents, so what was resolved in it once holds for
// every copy of it, anywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "elf/resolve.h"

namespace looptrace::elf {

// The cache directory: $LOOPTRACE_CACHE_DIR, else
// $XDG_CACHE_HOME/looptrace, else $HOME/.cache/looptrace; "" (off) when
// LOOPTRACE_CACHE_DIR is "off" or no home is known.
std::string default_resolve_cache_dir();

// One JSON file per key in `dir` (the caller's: a build-id, and what else
// the answers depend on; lowercase hex) ({"patterns": {PATTERN: [[name,
// demangled, vaddr, size, file_offset], ...]}}), created 0600 and replaced
// by rename, never written through a link. A directory that is a link, is
// not the user's own or is writable by others is not used; nor is a file
// that is not a regular file of the user's. Every failure is a miss: the
// cache only ever saves time.
class ResolveCache {
 public:
  explicit ResolveCache(std::string dir) : dir_(std::move(dir)) {}

  // The matches `pattern` had in the file with `build_id`, if kept.
  std::optional<std::vector<SymbolMatch>> get(const std::string& build_id,
                                              const std::string& pattern) const;
  // Keeps them (creating the directory, mode 0700, if need be).
  void put(const std::string& build_id, const std::string& pattern,
           const std::vector<SymbolMatch>& matches) const;

  const std::string& dir() const { return dir_; }

 private:
  // The directory, checked (and created when `create`); false: unusable.
  bool usable(bool create) const;
  std::string file_for(const std::string& build_id) const;

  std::string dir_;
};

}  // namespace looptrace::elf
