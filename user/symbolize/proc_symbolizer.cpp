#include "symbolize/proc_symbolizer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "elf/debug_file.h"
#include "elf/rtti.h"
#include "proc/process.h"

namespace looptrace {
namespace {

// Results are cheap to recompute; the cap only stops a long session that
// sees many distinct addresses (garbage key pointers) from growing forever.
constexpr size_t kMaxCachedResults = 1 << 20;
// Mapping sets kept per pid: a process that execs again and again keeps the
// programs of its last few.
constexpr size_t kMaxMappingSets = 8;

// A JIT's map of a long run reaches tens of MB; a file of more than this
// (garbage, most likely: kMaxPerfMapEntries and kMaxPerfMapMemory cap what
// is kept) is read up to here.
constexpr off_t kMaxPerfMapBytes = off_t{512} << 20;
// Perf maps are read this much at a time.
constexpr size_t kPerfMapChunk = 4 << 20;
// A [vdso] is two pages on x86-64; anything much larger is not one.
constexpr uint64_t kMaxVdsoBytes = 1 << 20;
// libdebuginfod's MAX_BUILD_ID_BYTES, in hex digits.
constexpr size_t kMaxBuildIdHex = 128;

std::string file_key(const MapEntry& m) {
  return m.inode ? fmt::format("{}:{}", m.dev, m.inode) : m.path;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

uint64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 +
         static_cast<uint64_t>(ts.tv_nsec);
}

// Reads [off, off + len) of fd; fewer bytes at the end of the file.
bool pread_all(int fd, uint64_t off, size_t len, std::vector<char>* out) {
  out->resize(len);
  size_t got = 0;
  while (got < len) {
    ssize_t n =
        pread(fd, out->data() + got, len - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return true;
}

// The bytes of [start, end) in pid's memory, through /proc/PID/mem.
bool read_process_memory(uint32_t pid, uint64_t start, uint64_t end,
                         std::vector<char>* out) {
  if (end <= start || end - start > kMaxVdsoBytes) return false;
  std::string path = fmt::format("/proc/{}/mem", pid);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok =
      pread_all(fd, start, end - start, out) && out->size() == end - start;
  close(fd);
  return ok;
}

// Our own [vdso]: the same image as any other 64-bit process's of this
// kernel, for processes whose memory can no longer be read.
const std::vector<char>& own_vdso() {
  static const std::vector<char> bytes = [] {
    std::vector<char> b;
    Result<std::vector<MapEntry>> maps =
        proc::read_maps(static_cast<uint32_t>(getpid()));
    if (!maps.ok()) return b;
    for (const MapEntry& m : *maps)
      if (m.path == "[vdso]" &&
          !read_process_memory(static_cast<uint32_t>(getpid()), m.start, m.end,
                               &b))
        b.clear();
    return b;
  }();
  return bytes;
}

// pid as the process's own PID namespace numbers it (the last field of
// NSpid in /proc/PID/status); pid itself when it is not in a child
// namespace or the file cannot be read.
uint32_t namespaced_pid(uint32_t pid) {
  FILE* f = std::fopen(fmt::format("/proc/{}/status", pid).c_str(), "re");
  if (!f) return pid;
  char line[256];
  uint32_t out = pid;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "NSpid:", 6) != 0) continue;
    char* p = line + 6;
    while (true) {
      char* end = nullptr;
      unsigned long v = std::strtoul(p, &end, 10);
      if (end == p) break;
      out = static_cast<uint32_t>(v);
      p = end;
    }
    break;
  }
  std::fclose(f);
  return out;
}

}  // namespace

ProcSymbolizer::ProcSymbolizer(ProcSymbolizerOptions options)
    : options_(std::move(options)) {
  if (options_.debug_root.empty()) {
    const char* env = std::getenv("LOOPTRACE_DEBUG_ROOT");
    options_.debug_root = env && *env ? env : "/usr/lib/debug";
  }
}

void ProcSymbolizer::note_owner(uint32_t pid) {
  struct stat st;
  if (stat(fmt::format("/proc/{}", pid).c_str(), &st) == 0)
    owners_[pid] = st.st_uid;
}

bool ProcSymbolizer::read_maps(uint32_t pid) {
  Result<std::vector<MapEntry>> maps = proc::read_maps(pid);
  if (!maps.ok()) {
    log::debug("symbolize", "{}", maps.status().message());
    return false;
  }
  note_owner(pid);
  return store_maps(pid, std::move(*maps));
}

bool ProcSymbolizer::store_maps(uint32_t pid, std::vector<MapEntry> maps_in) {
  auto* maps = &maps_in;
  // A zombie's maps are empty; keep the last good snapshot instead.
  if (maps->empty()) return false;
  std::sort(
      maps->begin(), maps->end(),
      [](const MapEntry& a, const MapEntry& b) { return a.start < b.start; });
  std::vector<Mappings>& sets = maps_[pid];
  auto same = [](const MapEntry& a, const MapEntry& b) {
    return a.start == b.start && a.end == b.end && a.pgoff == b.pgoff &&
           a.inode == b.inode && a.path == b.path;
  };
  if (!sets.empty() && std::equal(maps->begin(), maps->end(),
                                  sets.back().begin(), sets.back().end(), same))
    return true;
  // A library loaded since, or an exec, makes a new set; the old ones stay
  // for the addresses recorded before (an exec'd program is gone from /proc,
  // not from the stream).
  if (sets.size() >= kMaxMappingSets) sets.erase(sets.begin());
  sets.push_back(std::move(*maps));
  return true;
}

void ProcSymbolizer::snapshot(uint32_t pid) {
  if (!read_maps(pid)) return;
  open_files(pid);
}

void ProcSymbolizer::add_mappings(uint32_t pid, std::vector<MapEntry> maps) {
  if (!store_maps(pid, std::move(maps))) return;
  note_owner(pid);
  open_files(pid);
}

void ProcSymbolizer::open_files(uint32_t pid) {
  // Open every mapped file while /proc/PID/root and map_files still lead to
  // it: data mappings matter too (vtables live in read-only data).
  for (const MapEntry& m : maps_[pid].back()) {
    if (m.is_file()) elf_for(pid, m);
    if (m.path == "[vdso]") vdso_for(pid, m);
  }
}

void ProcSymbolizer::forget(uint32_t pid) {
  maps_.erase(pid);
  owners_.erase(pid);
  perf_maps_.erase(pid);
  vdso_of_pid_.erase(pid);
  std::erase_if(results_,
                [pid](const auto& kv) { return kv.first.pid == pid; });
}

const MapEntry* ProcSymbolizer::find_mapping(uint32_t pid,
                                             uint64_t addr) const {
  auto it = maps_.find(pid);
  if (it == maps_.end()) return nullptr;
  for (auto set = it->second.rbegin(); set != it->second.rend(); ++set) {
    const Mappings& maps = *set;
    auto next = std::upper_bound(
        maps.begin(), maps.end(), addr,
        [](uint64_t a, const MapEntry& m) { return a < m.start; });
    if (next == maps.begin()) continue;
    const MapEntry& m = *std::prev(next);
    if (m.contains(addr)) return &m;
  }
  return nullptr;
}

const elf::ElfFile* ProcSymbolizer::elf_for(uint32_t pid, const MapEntry& m) {
  std::string key = file_key(m);
  auto it = files_.find(key);
  if (it != files_.end()) return it->second.get();

  // Candidates, most trustworthy first. /proc/PID/root/<path> is the file
  // as the process sees it (containers); a deleted file is only reachable
  // through map_files. The plain path is a guess once the process is gone
  // (the file may have been replaced by an upgrade), so its inode must
  // match the mapping's.
  struct Candidate {
    std::string path;
    bool check_inode;
  };
  std::vector<Candidate> candidates;
  if (!m.deleted) {
    candidates.push_back({proc::live_proc_dir(pid) + "/root" + m.path, false});
    candidates.push_back({m.path, m.inode != 0});
  }
  candidates.push_back(
      {fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end),
       false});

  std::unique_ptr<elf::ElfFile> file;
  std::string opened_path;
  for (const Candidate& c : candidates) {
    Result<elf::ElfFile> opened = elf::ElfFile::Open(c.path);
    if (!opened.ok()) {
      log::debug("symbolize", "{}", opened.status().message());
      continue;
    }
    struct stat st;
    if (c.check_inode &&
        (fstat(opened->fd(), &st) != 0 || st.st_ino != m.inode)) {
      log::debug("symbolize", "{}: inode differs from the mapping's", c.path);
      continue;
    }
    file = std::make_unique<elf::ElfFile>(std::move(opened).value());
    opened_path = c.path;
    break;
  }
  if (file && !file->has_symtab() &&
      !add_debug_symbols(file.get(), opened_path, m))
    await_debuginfod(file.get(), m);
  const elf::ElfFile* out = file.get();
  files_.emplace(std::move(key), std::move(file));
  return out;
}

bool ProcSymbolizer::add_debug_symbols(elf::ElfFile* file,
                                       const std::string& opened_path,
                                       const MapEntry& m) {
  // A deleted file opened through map_files has no directory of its own.
  bool by_map_files = opened_path.find("/map_files/") != std::string::npos;
  elf::DebugLookup where{options_.debug_root,
                         by_map_files ? dir_of(m.path) : dir_of(opened_path),
                         dir_of(m.path)};
  Result<elf::ElfFile> debug = elf::find_debug_file(*file, where);
  if (debug.ok()) {
    log::debug("symbolize", "{}: symbols from {}", file->path(), debug->path());
    file->merge_symbols(debug->symbols());
    return true;
  }
  log::debug("symbolize", "{}", debug.status().message());
  // Fedora's MiniDebugInfo: the local functions .symtab would have had.
  if (!file->section_bytes(".gnu_debugdata")) return false;
  Result<elf::ElfFile> mini = elf::open_minidebuginfo(*file);
  if (!mini.ok()) {
    log::debug("symbolize", "{}", mini.status().message());
    return false;
  }
  log::debug("symbolize", "{}: {} symbols from .gnu_debugdata", file->path(),
             mini->symbols().size());
  file->merge_symbols(mini->symbols());
  return false;
}

void ProcSymbolizer::await_debuginfod(elf::ElfFile* file, const MapEntry& m) {
  // A build-id is 20 bytes (GNU ld's sha1) or 16 (md5, uuid); servers
  // take at most 64 (a longer note is the file's own garbage).
  if (!options_.debuginfod || file->build_id().empty() ||
      file->build_id().size() > kMaxBuildIdHex)
    return;
  // Answered already (another copy of the file): the answer holds.
  if (auto done = answered_.find(file->build_id()); done != answered_.end()) {
    if (done->second) file->merge_symbols(done->second->symbols());
    return;
  }
  awaiting_[file] = file->build_id();
  by_build_id_[file->build_id()].emplace_back(file, m.path);
}

bool ProcSymbolizer::debuginfod_pending(const elf::ElfFile* file) {
  auto it = awaiting_.find(file);
  if (it == awaiting_.end()) return false;
  const std::string build_id = it->second;
  const std::string& path = by_build_id_[build_id].front().second;
  if (requested_.insert(build_id).second)
    options_.debuginfod->request(build_id, path.substr(path.rfind('/') + 1));
  if (!debuginfod_blocking_) return true;
  options_.debuginfod->wait(build_id);
  poll_debuginfod();
  return false;
}

void ProcSymbolizer::poll_debuginfod() {
  if (requested_.size() == answered_.size()) return;
  bool merged = false;
  for (DebuginfodFetcher::Answer& a : options_.debuginfod->take_answers()) {
    auto files = by_build_id_.find(a.build_id);
    if (files != by_build_id_.end()) {
      for (auto& [file, module] : files->second) {
        awaiting_.erase(file);
        if (!a.debug) continue;
        log::debug("symbolize", "{}: symbols from {}", file->path(),
                   a.debug->path());
        file->merge_symbols(a.debug->symbols());
        improved_.push_back(module);
        merged = true;
      }
      by_build_id_.erase(files);
    }
    answered_[a.build_id] = std::move(a.debug);
  }
  // Names given before may be of the wrong function (the nearest exported
  // one of a stripped file).
  if (merged) results_.clear();
}

void ProcSymbolizer::settle_debuginfod() {
  if (!options_.debuginfod) return;
  debuginfod_blocking_ = true;
  options_.debuginfod->wait_all();
  poll_debuginfod();
}

std::vector<std::string> ProcSymbolizer::take_improved_modules() {
  std::vector<std::string> out;
  out.swap(improved_);
  return out;
}

const elf::ElfFile* ProcSymbolizer::vdso_for(uint32_t pid, const MapEntry& m) {
  if (auto it = vdso_of_pid_.find(pid); it != vdso_of_pid_.end())
    return it->second;
  std::vector<char> bytes;
  if (!read_process_memory(pid, m.start, m.end, &bytes)) {
    // Gone, or its memory is not ours to read: a 64-bit process's vdso is
    // ours, which a different size rules out (a 32-bit process).
    bytes = own_vdso();
    if (bytes.size() != m.end - m.start) {
      log::debug("symbolize", "pid {}: [vdso] unreadable", pid);
      vdso_of_pid_[pid] = nullptr;
      return nullptr;
    }
  }
  const elf::ElfFile* out = nullptr;
  for (size_t i = 0; i < vdso_bytes_.size() && !out; i++)
    if (vdso_bytes_[i] == bytes) out = vdsos_[i].get();
  if (!out) {
    Result<elf::ElfFile> parsed = elf::ElfFile::FromMemory("[vdso]", bytes);
    if (!parsed.ok()) {
      log::debug("symbolize", "pid {}: {}", pid, parsed.status().message());
    } else {
      vdsos_.push_back(
          std::make_unique<elf::ElfFile>(std::move(parsed).value()));
      vdso_bytes_.push_back(std::move(bytes));
      out = vdsos_.back().get();
    }
  }
  vdso_of_pid_[pid] = out;
  return out;
}

void ProcSymbolizer::read_perf_map(uint32_t pid, PerfMapState* state) {
  std::vector<std::string> paths;
  if (!options_.perf_map_dir.empty()) {
    paths.push_back(fmt::format("{}/perf-{}.map", options_.perf_map_dir, pid));
  } else {
    // In the process's own mount namespace first, named by its pid in its
    // own PID namespace (a container's JIT writes /tmp/perf-1.map), as
    // perf looks for it; then the host's /tmp.
    std::string root = proc::live_proc_dir(pid) + "/root";
    uint32_t ns_pid = namespaced_pid(pid);
    paths.push_back(fmt::format("{}/tmp/perf-{}.map", root, ns_pid));
    if (ns_pid != pid)
      paths.push_back(fmt::format("{}/tmp/perf-{}.map", root, pid));
    paths.push_back(fmt::format("/tmp/perf-{}.map", pid));
  }
  for (const std::string& path : paths) {
    // O_NOFOLLOW: a symlink planted in /tmp is not followed (to a file the
    // traced user could not read); O_NONBLOCK: nor does a FIFO hang us.
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ELOOP)
        log::debug("symbolize", "{}: a symbolic link, ignored", path);
      continue;
    }
    struct stat st;
    bool usable = fstat(fd, &st) == 0;
    if (usable && !S_ISREG(st.st_mode)) {
      log::debug("symbolize", "{}: not a regular file, ignored", path);
      usable = false;
    }
    // As perf: the map must belong to the process's user or root, or
    // anyone could name code in someone else's process.
    auto owner = owners_.find(pid);
    if (usable && st.st_uid != 0 && st.st_uid != geteuid() &&
        (owner == owners_.end() || owner->second != st.st_uid)) {
      log::debug("symbolize",
                 "{}: owned by uid {}, not by the process's "
                 "user or root, ignored",
                 path, st.st_uid);
      usable = false;
    }
    if (!usable) {
      close(fd);
      continue;
    }
    int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                    st.st_mtim.tv_nsec;
    bool same_file = state->mtime_ns >= 0 && state->dev == st.st_dev &&
                     state->ino == st.st_ino;
    if (same_file && st.st_size == state->size && mtime == state->mtime_ns) {
      close(fd);
      return;  // unchanged
    }
    // JITs append: read on from the last complete line. A file that shrank
    // or was replaced is read again from the start.
    if (!same_file || st.st_size < state->size) {
      uint64_t checked = state->checked_ns;
      *state = PerfMapState{};
      state->checked_ns = checked;
      state->dev = st.st_dev;
      state->ino = st.st_ino;
    }
    off_t end = std::min(st.st_size, kMaxPerfMapBytes);
    size_t added = parse_perf_map_file(fd, end, state);
    close(fd);
    state->size = st.st_size;
    state->mtime_ns = mtime;
    log::debug(
        "symbolize",
        "{}: {} entries ({} read now), {} malformed lines skipped, {} "
        "dropped over the cap of {} entries or {} MiB, {} names cut to {} "
        "bytes{}",
        path, state->map.entries(), added, state->malformed, state->dropped,
        kMaxPerfMapEntries, kMaxPerfMapMemory >> 20, state->cut,
        kMaxPerfMapName,
        st.st_size > end ? ", the file read up to its first 512 MiB" : "");
    // Names cached for this pid may be of code the JIT has replaced.
    std::erase_if(results_,
                  [pid](const auto& kv) { return kv.first.pid == pid; });
    return;
  }
}

size_t ProcSymbolizer::parse_perf_map_file(int fd, off_t end,
                                           PerfMapState* state) {
  size_t added = 0;
  std::vector<char> buf;
  off_t pos = state->parsed_to;
  while (pos < end && state->map.entries() < kMaxPerfMapEntries &&
         state->map.bytes() < kMaxPerfMapMemory) {
    size_t want = std::min(kPerfMapChunk, static_cast<size_t>(end - pos));
    if (!pread_all(fd, static_cast<uint64_t>(pos), want, &buf) || buf.empty())
      break;
    std::string_view view(buf.data(), buf.size());
    bool last = pos + static_cast<off_t>(buf.size()) >= end;
    size_t nl = view.rfind('\n');
    // Complete lines only, but for a final line still being written and a
    // line longer than a chunk (garbage).
    size_t complete = nl != std::string_view::npos ? nl + 1
                      : last                       ? 0
                                                   : buf.size();
    PerfMapParse parsed =
        parse_perf_map(last ? view : view.substr(0, complete),
                       kMaxPerfMapEntries - state->map.entries(),
                       kMaxPerfMapMemory - state->map.bytes());
    added += parsed.entries.size();
    for (PerfMapEntry& e : parsed.entries) state->map.add(std::move(e));
    state->malformed += parsed.malformed;
    state->dropped += parsed.dropped;
    state->cut += parsed.cut;
    state->parsed_to = pos + static_cast<off_t>(complete);
    if (last) break;
    pos += static_cast<off_t>(complete);
  }
  return added;
}

const PerfMap* ProcSymbolizer::perf_map_for(uint32_t pid) {
  PerfMapState& state = perf_maps_[pid];
  uint64_t now = now_ns();
  if (state.checked_ns == 0 ||
      now - state.checked_ns >= options_.perf_map_recheck_ns) {
    state.checked_ns = now;
    read_perf_map(pid, &state);
  }
  return state.map.entries() ? &state.map : nullptr;
}

const std::string& ProcSymbolizer::class_of_vtable(const elf::ElfFile* file,
                                                   uint64_t vaddr) {
  auto key = std::make_pair(file, vaddr);
  if (auto it = rtti_.find(key); it != rtti_.end()) return it->second;
  if (rtti_.size() >= kMaxCachedResults) rtti_.clear();
  return rtti_.emplace(key, elf::class_of_vtable(*file, vaddr)).first->second;
}

Frame ProcSymbolizer::lookup(uint32_t pid, uint64_t addr, bool* retry) {
  Frame f;
  f.addr = addr;
  const MapEntry* m = find_mapping(pid, addr);
  // A miss may be a library loaded after the snapshot.
  if (!m && proc::pid_exists(pid) && read_maps(pid))
    m = find_mapping(pid, addr);
  if (m) {
    f.module = m->path.empty() ? "[anon]" : m->path;
    const elf::ElfFile* file = nullptr;
    if (m->is_file())
      file = elf_for(pid, *m);
    else if (m->path == "[vdso]")
      file = vdso_for(pid, *m);
    if (file) {
      // Named from what is here for now; asked again when the debug file
      // came.
      if (debuginfod_pending(file)) *retry = true;
      Result<uint64_t> vaddr =
          file->offset_to_vaddr(addr - m->start + m->pgoff);
      const elf::Symbol* sym =
          vaddr.ok() ? file->find_symbol_by_vaddr(*vaddr) : nullptr;
      if (sym) {
        f.function = sym->demangled;
        f.offset = *vaddr - sym->vaddr;
        return f;
      }
      // Data without a symbol: a vtable key's class, named by its RTTI
      // (a stripped program's classes), as its symbol would name it.
      if (vaddr.ok() && !m->executable()) {
        const std::string& cls = class_of_vtable(file, *vaddr);
        if (!cls.empty()) {
          f.function = "vtable for " + cls;
          return f;
        }
      }
    }
  }
  // JIT code: anonymous memory, or anything the files do not explain.
  const PerfMap* jit = perf_map_for(pid);
  PerfMap::Hit hit = jit ? jit->find(addr) : PerfMap::Hit{};
  if (hit.name.empty()) {
    *retry = true;
    return f;
  }
  f.function = std::string(hit.name);
  f.offset = addr - hit.start;
  return f;
}

Frame ProcSymbolizer::symbolize(uint32_t pid, uint64_t addr) {
  poll_debuginfod();
  ResultKey key{pid, addr};
  if (auto it = results_.find(key); it != results_.end()) return it->second;
  bool retry = false;
  Frame f = lookup(pid, addr, &retry);
  if (retry) return f;
  if (results_.size() >= kMaxCachedResults) results_.clear();
  results_.emplace(key, f);
  return f;
}

}  // namespace looptrace
