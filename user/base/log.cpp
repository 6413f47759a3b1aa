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

void write(Level l, std::string_view area, const std::string& raw) {
  // Debug lines keep their newlines: libbpf's verifier log is many lines.
  std::string line = l == Level::kDebug ? raw : printable(raw);
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
  std::string out = prefix;
  if (!area.empty()) out += fmt::format("[{}] ", area);
  out += line;
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace looptrace::log
