// Reading a Wayland client's input objects from its memory
// (proc/wayland_objects.h), on this process: wl_object heads put in its
// heap, with made-up interface addresses.
#include "proc/wayland_objects.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace looptrace::proc {
namespace {

// struct wl_object as libwayland lays it out.
struct Head {
  const void* interface;
  const void* implementation;
  uint32_t id;
  uint32_t pad;
};

TEST(WaylandObjects, HeadsInTheHeapNameTheirIds) {
  // Five interfaces; their addresses only need to be unlike anything else.
  static const char ifaces[5][64] = {};
  WaylandInterfaces w;
  for (int i = 0; i < 5; ++i) w.addr[i] = reinterpret_cast<uint64_t>(ifaces[i]);
  // Heap memory, as proxies are: a keyboard, two pointers, a seat, a
  // server-made id (not the client's), and a head with id 0.
  auto heads = std::make_unique<Head[]>(6);
  heads[0] = {ifaces[2], nullptr, 7, 0};
  heads[1] = {ifaces[3], nullptr, 8, 0};
  heads[2] = {ifaces[3], nullptr, 12, 0};
  heads[3] = {ifaces[1], nullptr, 3, 0};
  heads[4] = {ifaces[4], nullptr, 0xff000001u, 0};
  heads[5] = {ifaces[4], nullptr, 0, 0};
  auto all = read_maps(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(all.ok()) << all.status().message();
  // The heads' own mapping only: under AddressSanitizer the anonymous
  // memory is terabytes of shadow, scanned first.
  std::vector<MapEntry> maps;
  for (const MapEntry& m : *all)
    if (m.contains(reinterpret_cast<uint64_t>(heads.get()))) maps.push_back(m);
  ASSERT_EQ(maps.size(), 1u);
  auto got = scan_wayland_objects(static_cast<uint32_t>(getpid()), maps, w);
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto has = [](const std::vector<uint32_t>& v, uint32_t id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  EXPECT_TRUE(has(got->keyboard, 7));
  EXPECT_TRUE(has(got->pointer, 8));
  EXPECT_TRUE(has(got->pointer, 12));
  EXPECT_TRUE(has(got->seat, 3));
  EXPECT_TRUE(got->touch.empty());
  EXPECT_TRUE(got->registry.empty());
}

TEST(WaylandObjects, AProcessWithoutLibwaylandIsAnError) {
  auto maps = read_maps(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(maps.ok());
  auto w = wayland_interfaces(static_cast<uint32_t>(getpid()), *maps);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("does not map libwayland-client"),
            std::string::npos)
      << w.status().message();
}

}  // namespace
}  // namespace looptrace::proc
