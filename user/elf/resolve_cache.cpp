#include "elf/resolve_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/log.h"

namespace looptrace::elf {
namespace {

constexpr size_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxPatterns = 256;  // per file; beyond, it starts over

// A build-id as ElfFile gives it: lowercase hex. Anything else (a path
// separator, "..") never names a file.
bool valid_build_id(const std::string& id) {
  if (id.size() < 2 || id.size() > 128) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// mkdir that leaves an existing directory alone.
bool make_dir(const std::string& path) {
  return mkdir(path.c_str(), 0700) == 0 || errno == EEXIST;
}

// A directory of ours, not a link, that nobody else can write to.
bool owned_dir(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         st.st_uid == geteuid() && (st.st_mode & 022) == 0;
}

std::optional<nlohmann::json> read_json(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      static_cast<size_t>(st.st_size) <= kMaxFileBytes) {
    text.resize(static_cast<size_t>(st.st_size));
    ssize_t n = read(fd, text.data(), text.size());
    text.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  close(fd);
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

std::string default_resolve_cache_dir() {
  if (const char* d = std::getenv("LOOPTRACE_CACHE_DIR"))
    return std::string(d) == "off" ? "" : d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/')
    return std::string(x) + "/looptrace";
  if (const char* h = std::getenv("HOME"); h && *h == '/')
    return std::string(h) + "/.cache/looptrace";
  return "";
}

bool ResolveCache::usable(bool create) const {
  if (dir_.empty()) return false;
  if (create) {
    // The parent ($HOME/.cache) too, if missing; only the last one must
    // be ours.
    size_t slash = dir_.rfind('/');
    if (slash != std::string::npos && slash > 0)
      (void)make_dir(dir_.substr(0, slash));
    if (!make_dir(dir_)) return false;
  }
  if (owned_dir(dir_)) return true;
  log::debug("resolve",
             "cache {}: not used (not a directory of uid {} that "
             "only it can write)",
             dir_, geteuid());
  return false;
}

std::string ResolveCache::file_for(const std::string& build_id) const {
  return dir_ + "/" + build_id + ".json";
}

std::optional<std::vector<SymbolMatch>> ResolveCache::get(
    const std::string& build_id, const std::string& pattern) const {
  if (!valid_build_id(build_id) || !usable(false)) return std::nullopt;
  auto j = read_json(file_for(build_id));
  if (!j) return std::nullopt;
  auto pats = j->find("patterns");
  if (pats == j->end() || !pats->is_object()) return std::nullopt;
  auto it = pats->find(pattern);
  if (it == pats->end() || !it->is_array() || it->empty()) return std::nullopt;
  std::vector<SymbolMatch> out;
  for (const auto& m : *it) {
    if (!m.is_array() || m.size() != 5 || !m[0].is_string() ||
        !m[1].is_string() || !m[2].is_number_unsigned() ||
        !m[3].is_number_unsigned() || !m[4].is_number_unsigned())
      return std::nullopt;
    out.push_back(SymbolMatch{m[0].get<std::string>(), m[1].get<std::string>(),
                              m[2].get<uint64_t>(), m[3].get<uint64_t>(),
                              m[4].get<uint64_t>()});
  }
  return out;
}

void ResolveCache::put(const std::string& build_id, const std::string& pattern,
                       const std::vector<SymbolMatch>& matches) const {
  if (!valid_build_id(build_id) || matches.empty() || !usable(true)) return;
  const std::string path = file_for(build_id);
  nlohmann::json j = read_json(path).value_or(nlohmann::json::object());
  if (!j["patterns"].is_object() || j["patterns"].size() >= kMaxPatterns)
    j["patterns"] = nlohmann::json::object();
  nlohmann::json list = nlohmann::json::array();
  for (const SymbolMatch& m : matches)
    list.push_back({m.name, m.demangled, m.vaddr, m.size, m.file_offset});
  j["patterns"][pattern] = std::move(list);
  const std::string text = json_text(j);
  if (text.size() > kMaxFileBytes) return;
  std::string tmp = dir_ + "/." + build_id + ".XXXXXX";
  int fd = mkostemp(tmp.data(), O_CLOEXEC);  // 0600, O_EXCL
  if (fd < 0) return;
  bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace looptrace::elf
