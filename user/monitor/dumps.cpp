#include "monitor/dumps.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>
#include <vector>

namespace looptrace {

namespace {

constexpr std::string_view kPrefix = "looptrace-";
constexpr std::string_view kSuffix = ".lt";
// What a dump may have beside it (--dump-pprof).
constexpr std::string_view kPprofSuffix = ".pb.gz";

// The dump a file of ours belongs to (its name without the suffix), or
// "" for a file that is not ours.
std::string_view dump_stem(std::string_view n) {
  if (n.substr(0, kPrefix.size()) != kPrefix) return "";
  for (std::string_view suffix : {kSuffix, kPprofSuffix})
    if (n.size() > kPrefix.size() + suffix.size() &&
        n.substr(n.size() - suffix.size()) == suffix)
      return n.substr(0, n.size() - suffix.size());
  return "";
}

}  // namespace

std::string dump_name_comm(const std::string& comm) {
  std::string out;
  for (char c : comm) {
    if (out.size() >= 15) break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    out += ok ? c : '_';
  }
  // Never a name that starts a path component oddly ("." or "..").
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

Result<DumpDir> DumpDir::Open(DumpOptions o) {
  struct stat st {};
  if (lstat(o.dir.c_str(), &st) != 0)
    return Status::Error(
        fmt::format("--dump-dir {}: {}", o.dir, std::strerror(errno)),
        ErrorKind::kUsage);
  if (!S_ISDIR(st.st_mode))
    return Status::Error(
        fmt::format("--dump-dir {}: not a directory{}", o.dir,
                    S_ISLNK(st.st_mode) ? " (a symbolic link)" : ""),
        ErrorKind::kUsage);
  if (access(o.dir.c_str(), W_OK | X_OK) != 0)
    return Status::Error(
        fmt::format("--dump-dir {}: {}", o.dir, std::strerror(errno)),
        ErrorKind::kUsage);
  return DumpDir(std::move(o));
}

bool DumpDir::allow(uint32_t pid, uint64_t now_ns) {
  auto it = last_.find(pid);
  if (it == last_.end() || now_ns >= it->second + o_.every_ns) return true;
  suppressed_++;
  return false;
}

std::string DumpDir::path_for(uint32_t pid, const std::string& comm,
                              uint64_t realtime_ns) const {
  time_t secs = static_cast<time_t>(realtime_ns / 1'000'000'000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char when[32];
  strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
  const std::string stem =
      fmt::format("{}/{}{}.{:03}Z-{}-{}", o_.dir, kPrefix, when,
                  realtime_ns / 1'000'000 % 1000, pid, dump_name_comm(comm));
  // Two dumps of a process in one millisecond (--dump-every 0): the second
  // is NAME_2 (sorted after the first), never written over it.
  std::string path = stem + std::string(kSuffix);
  for (int n = 2; n < 1000 && access(path.c_str(), F_OK) == 0; ++n)
    path = fmt::format("{}_{}{}", stem, n, kSuffix);
  return path;
}

size_t DumpDir::trim() const {
  struct Dump {
    std::string name;
    uint64_t bytes;
  };
  std::vector<Dump> dumps;
  DIR* d = opendir(o_.dir.c_str());
  if (!d) return 0;
  uint64_t total = 0;
  while (dirent* e = readdir(d)) {
    if (dump_stem(e->d_name).empty()) continue;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    dumps.push_back({e->d_name, static_cast<uint64_t>(st.st_size)});
    total += static_cast<uint64_t>(st.st_size);
  }
  // Names sort by time (UTC, fixed width): the oldest first.
  std::sort(dumps.begin(), dumps.end(),
            [](const Dump& a, const Dump& b) { return a.name < b.name; });
  size_t removed = 0;
  const std::string newest =
      dumps.empty() ? "" : std::string(dump_stem(dumps.back().name));
  for (size_t i = 0; i < dumps.size() && total > o_.max_bytes; ++i) {
    if (dump_stem(dumps[i].name) == newest) break;
    if (unlinkat(dirfd(d), dumps[i].name.c_str(), 0) != 0) continue;
    total -= dumps[i].bytes;
    removed++;
  }
  closedir(d);
  return removed;
}

}  // namespace looptrace
