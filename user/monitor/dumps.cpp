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

bool is_dump_name(std::string_view n) {
  return n.size() > kPrefix.size() + kSuffix.size() &&
         n.substr(0, kPrefix.size()) == kPrefix &&
         n.substr(n.size() - kSuffix.size()) == kSuffix;
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
  return fmt::format("{}/{}{}.{:03}Z-{}-{}{}", o_.dir, kPrefix, when,
                     realtime_ns / 1'000'000 % 1000, pid, dump_name_comm(comm),
                     kSuffix);
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
    if (!is_dump_name(e->d_name)) continue;
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
  for (size_t i = 0; i + 1 < dumps.size() && total > o_.max_bytes; ++i) {
    if (unlinkat(dirfd(d), dumps[i].name.c_str(), 0) != 0) continue;
    total -= dumps[i].bytes;
    removed++;
  }
  closedir(d);
  return removed;
}

}  // namespace looptrace
