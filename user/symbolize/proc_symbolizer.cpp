#include "symbolize/proc_symbolizer.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/log.h"
#include "proc/process.h"

namespace looptrace {
namespace {

// Results are cheap to recompute; the cap only stops a long session that
// sees many distinct addresses (garbage key pointers) from growing forever.
constexpr size_t kMaxCachedResults = 1 << 20;
// Mapping sets kept per pid: a process that execs again and again keeps the
// programs of its last few.
constexpr size_t kMaxMappingSets = 8;

std::string file_key(const proc::MapEntry& m) {
  return m.inode ? fmt::format("{}:{}", m.dev, m.inode) : m.path;
}

}  // namespace

bool ProcSymbolizer::read_maps(uint32_t pid) {
  Result<std::vector<proc::MapEntry>> maps = proc::read_maps(pid);
  if (!maps.ok()) {
    log::debug("symbolize", "{}", maps.status().message());
    return false;
  }
  return store_maps(pid, std::move(*maps));
}

bool ProcSymbolizer::store_maps(uint32_t pid,
                                std::vector<proc::MapEntry> maps_in) {
  auto* maps = &maps_in;
  // A zombie's maps are empty; keep the last good snapshot instead.
  if (maps->empty()) return false;
  std::sort(maps->begin(), maps->end(),
            [](const proc::MapEntry& a, const proc::MapEntry& b) {
              return a.start < b.start;
            });
  std::vector<Mappings>& sets = maps_[pid];
  auto same = [](const proc::MapEntry& a, const proc::MapEntry& b) {
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

void ProcSymbolizer::add_mappings(uint32_t pid,
                                  std::vector<proc::MapEntry> maps) {
  if (!store_maps(pid, std::move(maps))) return;
  open_files(pid);
}

void ProcSymbolizer::open_files(uint32_t pid) {
  // Open every mapped file while /proc/PID/root and map_files still lead to
  // it: data mappings matter too (vtables live in read-only data).
  for (const proc::MapEntry& m : maps_[pid].back())
    if (m.is_file()) elf_for(pid, m);
}

void ProcSymbolizer::forget(uint32_t pid) {
  maps_.erase(pid);
  std::erase_if(results_,
                [pid](const auto& kv) { return kv.first.pid == pid; });
}

const proc::MapEntry* ProcSymbolizer::find_mapping(uint32_t pid,
                                                   uint64_t addr) const {
  auto it = maps_.find(pid);
  if (it == maps_.end()) return nullptr;
  for (auto set = it->second.rbegin(); set != it->second.rend(); ++set) {
    const Mappings& maps = *set;
    auto next = std::upper_bound(
        maps.begin(), maps.end(), addr,
        [](uint64_t a, const proc::MapEntry& m) { return a < m.start; });
    if (next == maps.begin()) continue;
    const proc::MapEntry& m = *std::prev(next);
    if (m.contains(addr)) return &m;
  }
  return nullptr;
}

const elf::ElfFile* ProcSymbolizer::elf_for(uint32_t pid,
                                            const proc::MapEntry& m) {
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
    break;
  }
  const elf::ElfFile* out = file.get();
  files_.emplace(std::move(key), std::move(file));
  return out;
}

Frame ProcSymbolizer::lookup(uint32_t pid, uint64_t addr) {
  Frame f;
  f.addr = addr;
  const proc::MapEntry* m = find_mapping(pid, addr);
  // A miss may be a library loaded after the snapshot.
  if (!m && proc::pid_exists(pid) && read_maps(pid))
    m = find_mapping(pid, addr);
  if (!m) return f;

  f.module = m->path.empty() ? "[anon]" : m->path;
  if (!m->is_file()) return f;
  const elf::ElfFile* file = elf_for(pid, *m);
  if (!file) return f;
  Result<uint64_t> vaddr = file->offset_to_vaddr(addr - m->start + m->pgoff);
  if (!vaddr.ok()) return f;
  const elf::Symbol* sym = file->find_symbol_by_vaddr(*vaddr);
  if (!sym) return f;
  f.function = sym->demangled;
  f.offset = *vaddr - sym->vaddr;
  return f;
}

Frame ProcSymbolizer::symbolize(uint32_t pid, uint64_t addr) {
  ResultKey key{pid, addr};
  if (auto it = results_.find(key); it != results_.end()) return it->second;
  Frame f = lookup(pid, addr);
  if (results_.size() >= kMaxCachedResults) results_.clear();
  results_.emplace(key, f);
  return f;
}

}  // namespace looptrace
