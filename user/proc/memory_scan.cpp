#include "proc/memory_scan.h"

#include <fmt/format.h>
#include <unistd.h>

#include <optional>

#include "elf/elf_file.h"

namespace looptrace::proc {
namespace {

// Where the file of mapping `any` has its vaddr 0 in the process: from its
// first mapping and the load segment that maps that file offset.
std::optional<uint64_t> load_bias(const elf::ElfFile& elf,
                                  const std::vector<MapEntry>& maps,
                                  const MapEntry& any) {
  const MapEntry* first = nullptr;
  for (const MapEntry& m : maps)
    if (m.path == any.path && m.inode == any.inode &&
        (!first || m.pgoff < first->pgoff))
      first = &m;
  if (!first) return std::nullopt;
  for (const elf::Segment& seg : elf.segments()) {
    const uint64_t page_off = seg.offset & ~4095ull;
    if (first->pgoff >= page_off && first->pgoff < seg.offset + seg.filesz)
      return first->start - (seg.vaddr - seg.offset + first->pgoff);
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<uint64_t>> symbol_addresses(
    uint32_t pid, const std::vector<MapEntry>& maps, const std::string& library,
    const std::vector<std::string>& names) {
  const MapEntry* lib = find_mapped_file(maps, library);
  if (!lib)
    return Status::Error(fmt::format("pid {} does not map {}", pid, library));
  std::vector<const MapEntry*> objects;
  char exe[4096];
  const ssize_t n =
      readlink(fmt::format("/proc/{}/exe", pid).c_str(), exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string path(exe, static_cast<size_t>(n));
    for (const MapEntry& m : maps)
      if (m.path == path) {
        objects.push_back(&m);
        break;
      }
  }
  objects.push_back(lib);
  std::vector<uint64_t> out(names.size(), 0);
  for (const MapEntry* o : objects) {
    // The file as the process sees it (its mount namespace).
    auto elf = elf::ElfFile::Open(fmt::format("/proc/{}/root{}", pid, o->path));
    if (!elf.ok()) {
      if (o == lib) return elf.status();
      continue;
    }
    const std::optional<uint64_t> bias = load_bias(*elf, maps, *o);
    if (!bias) continue;
    for (size_t i = 0; i < names.size(); ++i) {
      if (out[i]) continue;
      const elf::Symbol* s = elf->find_object(names[i]);
      if (s) out[i] = *bias + s->vaddr;
    }
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (!out[i])
      return Status::Error(
          fmt::format("{} does not export {}", lib->path, names[i]));
  return out;
}

bool read_memory(uint32_t pid, uint64_t addr, void* out, size_t n) {
  iovec local{out, n}, remote{reinterpret_cast<void*>(addr), n};
  return process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(n);
}

const MapEntry* file_mapping_of(const std::vector<MapEntry>& maps,
                                uint64_t addr, bool executable) {
  for (const MapEntry& m : maps)
    if (m.contains(addr))
      return m.is_file() && (!executable || m.executable()) ? &m : nullptr;
  return nullptr;
}

}  // namespace looptrace::proc
