#include "proc/wayland_objects.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "proc/memory_scan.h"

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

}  // namespace

Result<WaylandInterfaces> wayland_interfaces(
    uint32_t pid, const std::vector<MapEntry>& maps) {
  auto addrs = symbol_addresses(
      pid, maps, "libwayland-client.so",
      std::vector<std::string>(std::begin(kInterfaces), std::end(kInterfaces)));
  if (!addrs.ok()) return addrs.status();
  WaylandInterfaces out;
  std::copy(addrs->begin(), addrs->end(), out.addr);
  return out;
}

Result<WaylandObjects> scan_wayland_objects(uint32_t pid,
                                            const std::vector<MapEntry>& maps,
                                            const WaylandInterfaces& ifaces,
                                            uint64_t max_bytes) {
  WaylandObjects out;
  Status st =
      scan_anon_words(pid, maps, max_bytes, [&](const uint64_t* w, uint64_t) {
        for (int i = 0; i < 5; ++i) {
          if (w[0] != ifaces.addr[i]) continue;
          const uint32_t id = static_cast<uint32_t>(w[2]);
          std::vector<uint32_t>* f = field(&out, i);
          if (id != 0 && id < kServerIdStart &&
              std::find(f->begin(), f->end(), id) == f->end())
            f->push_back(id);
        }
      });
  if (!st.ok()) return st;
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
