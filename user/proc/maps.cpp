#include "proc/maps.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <charconv>

#include "proc/process.h"

namespace looptrace::proc {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

// Splits off the next space-separated field.
std::string_view next_field(std::string_view& rest) {
  size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(start);
  size_t end = rest.find(' ');
  std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  return field;
}

bool parse_num(std::string_view s, uint64_t& out, int base) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool valid_perms(std::string_view p) {
  return p.size() == 4 && (p[0] == 'r' || p[0] == '-') &&
         (p[1] == 'w' || p[1] == '-') && (p[2] == 'x' || p[2] == '-') &&
         (p[3] == 'p' || p[3] == 's');
}

// "start-end perms pgoff dev inode [path]"; the path is everything after
// the padding that follows the inode, spaces included.
bool parse_line(std::string_view line, MapEntry& e) {
  std::string_view rest = line;
  std::string_view range = next_field(rest);
  std::string_view perms = next_field(rest);
  std::string_view pgoff = next_field(rest);
  std::string_view dev = next_field(rest);
  std::string_view inode = next_field(rest);
  size_t dash = range.find('-');
  if (dash == std::string_view::npos ||
      !parse_num(range.substr(0, dash), e.start, 16) ||
      !parse_num(range.substr(dash + 1), e.end, 16) || e.end < e.start ||
      !valid_perms(perms) || !parse_num(pgoff, e.pgoff, 16) ||
      dev.find(':') == std::string_view::npos || !parse_num(inode, e.inode, 10))
    return false;
  e.perms = perms;
  e.dev = dev;
  size_t path_start = rest.find_first_not_of(' ');
  std::string_view path =
      path_start == std::string_view::npos ? "" : rest.substr(path_start);
  if (path.ends_with(kDeleted)) {
    path.remove_suffix(kDeleted.size());
    e.deleted = true;
  }
  e.path = path;
  return true;
}

// "fe:01" -> dev_t, to compare a mapping with stat() of a path.
bool parse_dev(const std::string& dev, dev_t& out) {
  size_t colon = dev.find(':');
  uint64_t major_num = 0;
  uint64_t minor_num = 0;
  if (colon == std::string::npos ||
      !parse_num(std::string_view(dev).substr(0, colon), major_num, 16) ||
      !parse_num(std::string_view(dev).substr(colon + 1), minor_num, 16))
    return false;
  out = makedev(major_num, minor_num);
  return true;
}

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<std::vector<MapEntry>> parse_maps(std::string_view text) {
  std::vector<MapEntry> out;
  size_t line_no = 0;
  while (!text.empty()) {
    line_no++;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    MapEntry e;
    if (!parse_line(line, e))
      return Status::Error(fmt::format("line {}: malformed maps entry '{}'",
                                       line_no, line.substr(0, 120)));
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<MapEntry>> read_maps(uint32_t pid) {
  // A main thread that exited has no mm: its maps file is empty while the
  // process runs on in its other threads.
  std::string path = live_proc_dir(pid) + "/maps";
  Result<std::string> text = read_text_file(path);
  if (!text.ok()) return text.status();
  Result<std::vector<MapEntry>> maps = parse_maps(*text);
  if (!maps.ok())
    return Status::Error(fmt::format("{} {}", path, maps.status().message()));
  return maps;
}

const MapEntry* find_mapped_file(const std::vector<MapEntry>& maps,
                                 const std::string& name) {
  // A path given by the user may be spelled differently from the one the
  // loader used (/lib vs /usr/lib on merged-/usr systems): compare inodes.
  struct stat st;
  bool have_stat =
      name.find('/') != std::string::npos && stat(name.c_str(), &st) == 0;

  // Best kind of match wins: 0 same file, 1 same basename, 2 name prefix.
  const MapEntry* best = nullptr;
  int best_rank = 3;
  for (const MapEntry& e : maps) {
    if (!e.is_file() || name.empty()) continue;
    int rank = 3;
    std::string_view base = basename_of(e.path);
    dev_t dev;
    if (e.path == name || (have_stat && e.inode == st.st_ino &&
                           parse_dev(e.dev, dev) && dev == st.st_dev))
      rank = 0;
    else if (base == name)
      rank = 1;
    else if (base.size() > name.size() && base.starts_with(name) &&
             (base[name.size()] == '.' || base[name.size()] == '-'))
      rank = 2;
    if (rank < best_rank) {
      best = &e;
      best_rank = rank;
    }
  }
  return best;
}

Result<std::string> find_mapped_library(uint32_t pid, const std::string& name) {
  Result<std::vector<MapEntry>> maps = read_maps(pid);
  if (!maps.ok()) return maps.status();
  const MapEntry* found = find_mapped_file(*maps, name);
  if (!found)
    return Status::Error(
        fmt::format("binary '{}' is not mapped by pid {}", name, pid),
        ErrorKind::kUsage);
  return found->path;
}

}  // namespace looptrace::proc
