// find_library: "libglib-2.0.so" or "python3" -> an absolute path.
#include <dirent.h>
#include <elf.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "elf/resolve.h"

namespace looptrace::elf {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#define LT_MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#define LT_MULTIARCH "aarch64-linux-gnu"
#else
constexpr uint16_t kHostMachine = EM_NONE;  // no machine check
#define LT_MULTIARCH "unknown-linux-gnu"
#endif

// Where ld.so looks when neither the cache nor LD_LIBRARY_PATH has it,
// and a private directory of Debian's.
const char* const kDefaultLibDirs[] = {
#if defined(__ANDROID__)
    "/system/lib64",
    "/vendor/lib64",
    "/system/lib",
    "/vendor/lib",
#endif
    "/lib/" LT_MULTIARCH,
    "/usr/lib/" LT_MULTIARCH,
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    // Not ld.so's: Debian's AOSP libraries (android-libutils, ...), which
    // their programs reach by RUNPATH (the android profile's libutils.so).
    "/usr/lib/" LT_MULTIARCH "/android",
};

enum class Fit { kNone, kOtherMachine, kHost };

// Reads the ELF header: directories, scripts (pyenv shims) and static
// archives are not binaries a uprobe can use; a 32-bit libc from the ld.so
// cache is a worse fit than the 64-bit one.
Fit elf_fit(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return Fit::kNone;
  std::ifstream in(path, std::ios::binary);
  unsigned char hdr[EI_NIDENT + 4] = {};
  if (!in.read(reinterpret_cast<char*>(hdr), sizeof hdr) ||
      std::memcmp(hdr, ELFMAG, SELFMAG) != 0)
    return Fit::kNone;
  uint16_t machine = 0;
  std::memcpy(&machine, hdr + EI_NIDENT + 2, sizeof machine);  // e_machine
  bool host_class =
      hdr[EI_CLASS] == (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32);
  if (kHostMachine == EM_NONE || (host_class && machine == kHostMachine))
    return Fit::kHost;
  return Fit::kOtherMachine;
}

std::vector<std::string> split(const char* s, char sep) {
  std::vector<std::string> out;
  if (!s) return out;
  std::string cur;
  for (const char* p = s;; p++) {
    if (*p == sep || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

struct CacheEntry {
  std::string soname;
  std::string path;
};

// "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6". Parsing
// ldconfig's text is simpler and sturdier than its binary cache format.
std::vector<CacheEntry> ld_so_cache() {
  std::vector<CacheEntry> out;
  const char* ldconfig = "/sbin/ldconfig";
  if (access(ldconfig, X_OK) != 0) return out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      popen("/sbin/ldconfig -p 2>/dev/null", "re"), &pclose);
  if (!pipe) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe.get())) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    size_t arrow = s.find(" => ");
    size_t start = s.find_first_not_of(" \t");
    if (arrow == std::string::npos || start == std::string::npos) continue;
    size_t name_end = s.find_first_of(" \t", start);
    out.push_back({s.substr(start, name_end - start), s.substr(arrow + 4)});
  }
  return out;
}

bool is_prefix_match(const std::string& file, const std::string& name) {
  return file.size() > name.size() + 1 &&
         file.compare(0, name.size(), name) == 0 && file[name.size()] == '.';
}

// Files in dir named name + ".<something>", sorted.
std::vector<std::string> prefix_matches(const std::string& dir,
                                        const std::string& name) {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), &closedir);
  if (!d) return out;
  while (dirent* e = readdir(d.get()))
    if (is_prefix_match(e->d_name, name)) out.push_back(dir + "/" + e->d_name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<std::string> find_library(const std::string& name) {
  if (name.empty())
    return Status::Error("empty binary name", ErrorKind::kUsage);
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (stat(name.c_str(), &st) != 0)
      return Status::Errno(fmt::format("binary '{}'", name), errno,
                           ErrorKind::kUsage);
    if (!S_ISREG(st.st_mode))
      return Status::Error(
          fmt::format("binary '{}' is not a regular file", name),
          ErrorKind::kUsage);
    return name;
  }

  std::vector<std::string> lib_dirs =
      split(std::getenv("LD_LIBRARY_PATH"), ':');
  size_t env_dirs = lib_dirs.size();
  for (const char* d : kDefaultLibDirs) lib_dirs.emplace_back(d);
  std::vector<CacheEntry> cache = ld_so_cache();

  // Libraries in ld.so's order (LD_LIBRARY_PATH, cache, default dirs), exact
  // names first, then versioned ones ("libfoo.so" -> "libfoo.so.1").
  std::vector<std::string> libs;
  for (size_t i = 0; i < env_dirs; i++)
    libs.push_back(lib_dirs[i] + "/" + name);
  for (const CacheEntry& e : cache)
    if (e.soname == name) libs.push_back(e.path);
  for (size_t i = env_dirs; i < lib_dirs.size(); i++)
    libs.push_back(lib_dirs[i] + "/" + name);
  for (size_t i = 0; i < env_dirs; i++)
    for (std::string& p : prefix_matches(lib_dirs[i], name))
      libs.push_back(std::move(p));
  for (const CacheEntry& e : cache)
    if (is_prefix_match(e.soname, name)) libs.push_back(e.path);
  for (size_t i = env_dirs; i < lib_dirs.size(); i++)
    for (std::string& p : prefix_matches(lib_dirs[i], name))
      libs.push_back(std::move(p));

  // Programs the way the shell finds them.
  std::vector<std::string> programs;
  for (const std::string& dir : split(std::getenv("PATH"), ':')) {
    std::string p = dir + "/" + name;
    if (access(p.c_str(), X_OK) == 0) programs.push_back(p);
  }

  // "refapp" and "python3" are programs first; "libfoo.so" a library first.
  bool looks_like_lib =
      name.compare(0, 3, "lib") == 0 || name.find(".so") != std::string::npos;
  std::vector<std::string> order = looks_like_lib ? libs : programs;
  const std::vector<std::string>& rest = looks_like_lib ? programs : libs;
  order.insert(order.end(), rest.begin(), rest.end());

  const std::string* other_machine = nullptr;
  for (const std::string& p : order) {
    Fit fit = elf_fit(p);
    if (fit == Fit::kHost) return p;
    if (fit == Fit::kOtherMachine && !other_machine) other_machine = &p;
  }
  if (other_machine) return *other_machine;

  std::string searched = "LD_LIBRARY_PATH, ld.so cache";
  for (const char* d : kDefaultLibDirs) searched += fmt::format(", {}", d);
  searched = looks_like_lib ? searched + ", PATH" : "PATH, " + searched;
  return Status::Error(
      fmt::format("binary '{}' not found (searched {})", name, searched),
      ErrorKind::kUsage);
}

}  // namespace looptrace::elf
