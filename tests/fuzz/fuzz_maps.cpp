// /proc/PID/maps text -> MapEntry list: any text parses or is an error
// naming the line; every entry is a well-formed range, and looking a
// library up in the snapshot is safe.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "proc/maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto maps = looptrace::proc::parse_maps(text);
  if (!maps.ok()) {
    LT_FUZZ_CHECK(maps.status().message().rfind("line ", 0) == 0);
    return 0;
  }
  for (const looptrace::MapEntry& e : *maps) {
    LT_FUZZ_CHECK(e.start <= e.end);
    LT_FUZZ_CHECK(e.perms.size() == 4);
    LT_FUZZ_CHECK(!e.contains(e.end));
    (void)e.executable();
    (void)e.is_file();
  }
  // Names without '/', so the lookup never stats a path of this machine.
  for (const char* name : {"libc.so.6", "libglib-2.0.so", "python3", "x"})
    (void)looptrace::proc::find_mapped_file(*maps, name);
  if (!maps->empty() && maps->front().is_file()) {
    const std::string& path = maps->front().path;
    std::string base = path.substr(path.rfind('/') + 1);
    const auto* found = looptrace::proc::find_mapped_file(*maps, base);
    LT_FUZZ_CHECK(base.empty() || found != nullptr);
  }
  return 0;
}
