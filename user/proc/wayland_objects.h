// A Wayland client's input objects, read from its memory: for a client
// that set up its connection before tracing began, whose requests naming
// them (wl_seat.get_keyboard...) the kernel's framing never saw.
//
// libwayland-client keeps each object as a wl_proxy, which begins with
// struct wl_object { const struct wl_interface *interface; const void
// *implementation; uint32_t id; } (wayland-private.h, unchanged since
// libwayland 1.0): a proxy is 8-byte aligned heap memory holding the
// address of the library's exported wl_keyboard_interface (or
// wl_pointer_interface...) with an id 16 bytes on.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "proc/maps.h"

namespace looptrace::proc {

struct WaylandObjects {
  std::vector<uint32_t> registry, seat, keyboard, pointer, touch;
  bool empty() const {
    return registry.empty() && seat.empty() && keyboard.empty() &&
           pointer.empty() && touch.empty();
  }
};

// The interfaces' addresses in a process, in the order of WaylandObjects'
// fields.
struct WaylandInterfaces {
  uint64_t addr[5] = {};
};

// Where libwayland-client's wl_registry_interface, wl_seat_interface,
// wl_keyboard_interface, wl_pointer_interface and wl_touch_interface are
// in pid. Error: the library is not mapped, or does not export them.
Result<WaylandInterfaces> wayland_interfaces(uint32_t pid,
                                             const std::vector<MapEntry>& maps);

// The objects whose wl_object heads are in pid's writable anonymous
// memory and the heap (at most max_bytes of it read), for those
// interfaces. Server-created ids (0xff000000 and up) are not a client's.
Result<WaylandObjects> scan_wayland_objects(uint32_t pid,
                                            const std::vector<MapEntry>& maps,
                                            const WaylandInterfaces& ifaces,
                                            uint64_t max_bytes = 1ull << 30);

// Both, for pid.
Result<WaylandObjects> find_wayland_objects(uint32_t pid);

}  // namespace looptrace::proc
