#include "elf/debug_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <libdeflate.h>
#include <unistd.h>

#include <optional>
#include <string_view>
#include <utility>

#include "base/log.h"
#include "elf/xz.h"

namespace looptrace::elf {
namespace {

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

std::string build_id_path(const std::string& debug_root,
                          const std::string& build_id) {
  if (build_id.size() < 4) return "";
  return fmt::format("{}/.build-id/{}/{}.debug", debug_root,
                     build_id.substr(0, 2), build_id.substr(2));
}

std::vector<std::string> debuglink_paths(const DebugLookup& where,
                                         const std::string& name) {
  std::vector<std::string> out;
  // A name with a '/' would leave the directories looked in.
  if (name.empty() || name.find('/') != std::string::npos || name == "." ||
      name == "..")
    return out;
  out.push_back(join(where.dir, name));
  out.push_back(join(where.dir, ".debug/" + name));
  if (!where.original_dir.empty() && where.original_dir.front() == '/')
    out.push_back(join(where.debug_root + where.original_dir, name));
  return out;
}

Result<uint32_t> file_crc32(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errno("open " + path, errno);
  uint32_t crc = 0;
  std::vector<char> buf(1 << 16);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Status::Errno("read " + path, err);
    }
    if (n == 0) break;
    crc = libdeflate_crc32(crc, buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  return crc;
}

Result<ElfFile> find_debug_file(const ElfFile& file, const DebugLookup& where) {
  std::vector<std::string> tried;
  if (!file.build_id().empty()) {
    std::string path = build_id_path(where.debug_root, file.build_id());
    if (!path.empty() && access(path.c_str(), F_OK) == 0) {
      Result<ElfFile> debug = ElfFile::Open(path);
      if (!debug.ok()) {
        tried.push_back(debug.status().message());
      } else if (debug->build_id() != file.build_id()) {
        tried.push_back(path + ": another build-id");
      } else {
        return debug;
      }
    } else if (!path.empty()) {
      tried.push_back(path + ": absent");
    }
  }
  for (const std::string& path : debuglink_paths(where, file.debuglink())) {
    if (access(path.c_str(), F_OK) != 0) {
      tried.push_back(path + ": absent");
      continue;
    }
    Result<uint32_t> crc = file_crc32(path);
    if (!crc.ok()) {
      tried.push_back(crc.status().message());
      continue;
    }
    if (*crc != file.debuglink_crc()) {
      tried.push_back(fmt::format("{}: CRC {:08x}, the debuglink says {:08x}",
                                  path, *crc, file.debuglink_crc()));
      continue;
    }
    Result<ElfFile> debug = ElfFile::Open(path);
    if (debug.ok()) return debug;
    tried.push_back(debug.status().message());
  }
  std::string all;
  for (const std::string& t : tried) all += (all.empty() ? "" : "; ") + t;
  return Status::Error(
      fmt::format("{}: no debug file ({})", file.path(),
                  all.empty() ? "no build-id, no debuglink" : all));
}

Result<ElfFile> open_minidebuginfo(const ElfFile& file) {
  std::optional<std::string_view> xz = file.section_bytes(".gnu_debugdata");
  if (!xz) return Status::Error(file.path() + ": no .gnu_debugdata section");
  Result<std::vector<char>> image = xz_decompress(*xz, kMaxMiniDebugInfoBytes);
  if (!image.ok())
    return Status::Error(fmt::format("{}: bad .gnu_debugdata: {}", file.path(),
                                     image.status().message()));
  return ElfFile::FromMemory(file.path() + " (.gnu_debugdata)",
                             std::move(image).value());
}

}  // namespace looptrace::elf
