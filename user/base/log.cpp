#include "base/log.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

namespace looptrace::log {
namespace {

Level g_level = Level::kWarn;
std::set<std::string, std::less<>> g_areas;
bool g_all_areas = false;
std::mutex g_mu;

}  // namespace

void set_level(Level l) { g_level = l; }
Level level() { return g_level; }

void enable_debug_areas(std::string_view areas) {
  size_t pos = 0;
  while (pos <= areas.size()) {
    size_t comma = areas.find(',', pos);
    if (comma == std::string_view::npos) comma = areas.size();
    std::string_view a = areas.substr(pos, comma - pos);
    if (a == "all")
      g_all_areas = true;
    else if (!a.empty())
      g_areas.emplace(a);
    pos = comma + 1;
  }
}

bool debug_enabled(std::string_view area) {
  return g_all_areas || g_areas.find(area) != g_areas.end();
}

void write(Level l, std::string_view area, const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* prefix = "";
  switch (l) {
    case Level::kError:
      prefix = "looptrace: error: ";
      break;
    case Level::kWarn:
      prefix = "looptrace: warning: ";
      break;
    case Level::kInfo:
      prefix = "looptrace: ";
      break;
    case Level::kDebug:
      prefix = "looptrace: debug: ";
      break;
  }
  if (!area.empty())
    std::fprintf(stderr, "%s[%.*s] %s\n", prefix, static_cast<int>(area.size()),
                 area.data(), line.c_str());
  else
    std::fprintf(stderr, "%s%s\n", prefix, line.c_str());
}

}  // namespace looptrace::log
