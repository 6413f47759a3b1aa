#include "proc/wayland_objects.h"

#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "elf/elf_file.h"

namespace looptrace::proc {
namespace {

constexpr const char* kInterfaces[5] = {
    "wl_registry_interface", "wl_seat_interface", "wl_keyboard_interface",
    "wl_pointer_interface", "wl_touch_interface"};

// The first id a server creates (WL_SERVER_ID_START).
constexpr uint32_t kServerIdStart = 0xff000000;

std::vector<uint32_t>* field(WaylandObjects* o, int i) {
  std::vector<uint32_t>* f[5] = {&o->registry, &o->seat, &o->keyboard,
                                 &o->pointer, &o->touch};
  return f[i];
}

// Where `path`'s vaddr 0 is in the process: from its first mapping and the
// load segment that maps that file offset.
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

Result<WaylandInterfaces> wayland_interfaces(
    uint32_t pid, const std::vector<MapEntry>& maps) {
  const MapEntry* lib = find_mapped_file(maps, "libwayland-client.so");
  if (!lib)
    return Status::Error(
        fmt::format("pid {} does not map libwayland-client", pid));
  // The dynamic linker's answer: the executable first (a copy relocation
  // puts the interfaces it names in its own .bss, and the library then
  // uses that copy), then the library.
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
  WaylandInterfaces out;
  for (const MapEntry* o : objects) {
    // The file as the process sees it (its mount namespace).
    auto elf = elf::ElfFile::Open(fmt::format("/proc/{}/root{}", pid, o->path));
    if (!elf.ok()) {
      if (o == lib) return elf.status();
      continue;
    }
    const std::optional<uint64_t> bias = load_bias(*elf, maps, *o);
    if (!bias) continue;
    for (int i = 0; i < 5; ++i) {
      if (out.addr[i]) continue;
      const elf::Symbol* s = elf->find_object(kInterfaces[i]);
      if (s) out.addr[i] = *bias + s->vaddr;
    }
  }
  for (int i = 0; i < 5; ++i)
    if (!out.addr[i])
      return Status::Error(
          fmt::format("{} does not export {}", lib->path, kInterfaces[i]));
  return out;
}

Result<WaylandObjects> scan_wayland_objects(uint32_t pid,
                                            const std::vector<MapEntry>& maps,
                                            const WaylandInterfaces& ifaces,
                                            uint64_t max_bytes) {
  WaylandObjects out;
  std::vector<uint64_t> buf(1 << 17);  // 1 MiB
  const size_t buf_bytes = buf.size() * sizeof(uint64_t);
  uint64_t scanned = 0;
  for (const MapEntry& m : maps) {
    const bool anon = m.path.empty() || m.path == "[heap]";
    if (!anon || m.perms.size() < 2 || m.perms[0] != 'r' || m.perms[1] != 'w')
      continue;
    // Chunks overlap by the 24 bytes of a wl_object head, so that one cut
    // by a chunk's end is whole in the next.
    for (uint64_t at = m.start; at < m.end && scanned < max_bytes;) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(buf_bytes, m.end - at));
      iovec local{buf.data(), n}, remote{reinterpret_cast<void*>(at), n};
      ssize_t got =
          process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
      if (got < 0) {
        if (errno == ESRCH) return Status::Errno("reading pid memory", errno);
        at += 4096;  // a hole (guard page): go on past it
        continue;
      }
      scanned += static_cast<uint64_t>(got);
      const size_t words = static_cast<size_t>(got) / 8;
      for (size_t w = 0; w + 2 < words; ++w) {
        for (int i = 0; i < 5; ++i) {
          if (buf[w] != ifaces.addr[i]) continue;
          const uint32_t id = static_cast<uint32_t>(buf[w + 2]);
          std::vector<uint32_t>* f = field(&out, i);
          if (id != 0 && id < kServerIdStart &&
              std::find(f->begin(), f->end(), id) == f->end())
            f->push_back(id);
        }
      }
      if (static_cast<size_t>(got) < 24) break;
      at += static_cast<uint64_t>(got) -
            (got == static_cast<ssize_t>(n) && at + n < m.end ? 16 : 0);
    }
  }
  return out;
}

Result<WaylandObjects> find_wayland_objects(uint32_t pid) {
  auto maps = read_maps(pid);
  if (!maps.ok()) return maps.status();
  auto ifaces = wayland_interfaces(pid, *maps);
  if (!ifaces.ok()) return ifaces.status();
  return scan_wayland_objects(pid, *maps, *ifaces);
}

}  // namespace looptrace::proc
