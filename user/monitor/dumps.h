// Where `monitor` writes its dumps (--dump-dir): one recording per
// incident, named by time, pid and comm; at most one per process per
// --dump-every (the rest counted); the directory's dumps kept under
// --dump-max-bytes, the oldest removed first.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"

namespace looptrace {

struct DumpOptions {
  std::string dir;                         // empty: no dumps
  uint64_t every_ns = 60'000'000'000;      // --dump-every
  uint64_t max_bytes = uint64_t{1} << 30;  // --dump-max-bytes
};

class DumpDir {
 public:
  // Checks that the directory exists, is one (not a link to one) and can
  // be written; a usage error naming the option otherwise.
  static Result<DumpDir> Open(DumpOptions o);

  // Whether pid may dump at now_ns; a refusal is counted.
  bool allow(uint32_t pid, uint64_t now_ns);
  void dumped(uint32_t pid, uint64_t now_ns) { last_[pid] = now_ns; }
  void forget(uint32_t pid) { last_.erase(pid); }

  // DIR/looptrace-20261127T101502.123-4242-gedit.lt: the wall time, the
  // pid and the comm (only [A-Za-z0-9_.-] of it, 15 bytes at most).
  std::string path_for(uint32_t pid, const std::string& comm,
                       uint64_t realtime_ns) const;
  // Removes the oldest of this directory's dumps until the rest fit
  // max_bytes (the newest always stays); how many went.
  size_t trim() const;

  const DumpOptions& options() const { return o_; }
  uint64_t suppressed() const { return suppressed_; }

 private:
  explicit DumpDir(DumpOptions o) : o_(std::move(o)) {}
  DumpOptions o_;
  std::map<uint32_t, uint64_t> last_;  // pid -> its last dump
  uint64_t suppressed_ = 0;
};

// The part of a dump's file name a comm gives: hostile bytes left out.
std::string dump_name_comm(const std::string& comm);

}  // namespace looptrace
