#include "report/key_frames.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include "base/log.h"
#include "python/frames.h"
#include "v8/frames.h"

namespace looptrace::report {
namespace {

// Bounds of --app-code: a few patterns of a path's length are all anyone
// needs, and each is matched against every module of the report.
constexpr size_t kMaxPatterns = 64;
constexpr size_t kMaxPatternBytes = 4096;

// The distribution's code, never the program's own: system libraries
// (native and Python's standard library under /usr/lib/python3.11) and
// what package managers install.
bool system_path(std::string_view path) {
  static constexpr std::array<std::string_view, 8> kPrefixes = {
      "/usr/lib/", "/usr/lib32/", "/usr/lib64/",           "/lib/",
      "/lib32/",   "/lib64/",     "/usr/local/lib/python", "/usr/libx32/"};
  for (std::string_view p : kPrefixes)
    if (path.substr(0, p.size()) == p) return true;
  return path.find("/site-packages/") != std::string_view::npos ||
         path.find("/dist-packages/") != std::string_view::npos;
}

// An interpreter's own binary: its native frames run every program alike.
bool interpreter(std::string_view path) {
  const std::string base(path.substr(path.rfind('/') + 1));
  for (const char* glob :
       {"python*", "pypy*", "node", "nodejs", "gjs*", "perl*", "ruby*", "lua*"})
    if (fnmatch(glob, base.c_str(), 0) == 0) return true;
  return false;
}

// Whether `module` is in the installed package `package`
// (".../dist-packages/meld/meldwindow.py" is in "meld").
bool in_package(std::string_view module, std::string_view package) {
  if (package.empty()) return false;
  for (std::string_view dir : {"/dist-packages/", "/site-packages/"}) {
    size_t at = module.find(dir);
    if (at == std::string_view::npos) continue;
    std::string_view rest = module.substr(at + dir.size());
    if (rest.size() > package.size() &&
        rest.substr(0, package.size()) == package &&
        rest[package.size()] == '/')
      return true;
  }
  return false;
}

bool owned_by_default(const std::string& module, bool py,
                      std::string_view package) {
  // [vdso], [anon], [python] (an unreadable code object), <frozen ...>,
  // <string>, an unknown module.
  if (module.empty() || module[0] == '[' || module[0] == '<') return false;
  // Node's own scripts (node:internal/timers) and a program's
  // dependencies (node_modules/express/...) are not the program's code.
  if (module.rfind("node:", 0) == 0 ||
      module.find("/node_modules/") != std::string::npos)
    return false;
  if (py && in_package(module, package)) return true;
  if (system_path(module)) return false;
  if (py) return true;
  // A native frame: a mapped file, not a memfd or a device.
  if (module[0] != '/' || module.rfind("/memfd:", 0) == 0 ||
      module.rfind("/dev/", 0) == 0)
    return false;
  return !interpreter(module);
}

// `pattern` against the whole path, or (without a leading '/') against any
// tail of it after a '/'.
bool glob_matches(const std::string& pattern, const std::string& path) {
  if (fnmatch(pattern.c_str(), path.c_str(), 0) == 0) return true;
  if (pattern.empty() || pattern[0] == '/') return false;
  for (size_t at = path.find('/'); at != std::string::npos;
       at = path.find('/', at + 1))
    if (fnmatch(pattern.c_str(), path.c_str() + at + 1, 0) == 0) return true;
  return false;
}

std::vector<std::string> split_patterns(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const std::string& item : in) {
    size_t pos = 0;
    while (pos <= item.size()) {
      size_t comma = std::min(item.find(',', pos), item.size());
      out.push_back(item.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return out;
}

}  // namespace

AppCode::AppCode(const std::vector<std::string>& patterns) {
  for (std::string& p : split_patterns(patterns))
    if (!p.empty()) patterns_.push_back(std::move(p));
}

bool AppCode::owns(const Frame& f, bool py, std::string* by,
                   const std::string& package) {
  auto [it, fresh] = cache_.try_emplace({py, f.module, package}, -2);
  if (fresh) {
    if (patterns_.empty()) {
      if (owned_by_default(f.module, py, package)) it->second = -1;
    } else if (!f.module.empty()) {
      for (size_t i = 0; i < patterns_.size(); ++i)
        if (glob_matches(patterns_[i], f.module)) {
          it->second = static_cast<int>(i);
          break;
        }
    }
  }
  if (it->second == -2) return false;
  if (by != nullptr)
    *by =
        it->second < 0 ? "default" : patterns_[static_cast<size_t>(it->second)];
  return true;
}

Status check_app_code(const std::vector<std::string>& patterns) {
  std::vector<std::string> all = split_patterns(patterns);
  if (all.size() > kMaxPatterns)
    return Status::Error(
        fmt::format("--app-code: at most {} patterns", kMaxPatterns),
        ErrorKind::kUsage);
  for (const std::string& p : all) {
    if (p.empty())
      return Status::Error(
          "--app-code: an empty pattern (PATTERN[,PATTERN...], e.g. "
          "'myapp/*')",
          ErrorKind::kUsage);
    if (p.size() > kMaxPatternBytes)
      return Status::Error(fmt::format("--app-code '{}': longer than {} bytes",
                                       log::printable(p, 40), kMaxPatternBytes),
                           ErrorKind::kUsage);
  }
  return Status::Ok();
}

namespace {

// The installed package named after the main script ("" when none).
std::string main_script_package(uint32_t pid,
                                const std::vector<uint64_t>& frames,
                                FrameNames& names) {
  // The outermost Python frame is the main script's (or runpy's, for
  // `python3 -m`: then there is no script, and no package).
  for (size_t i = frames.size(); i-- > 0;) {
    if (!python::is_py_frame(frames[i])) continue;
    const std::string& file = names.frame(pid, frames[i]).module;
    if (file.empty() || file[0] != '/' || system_path(file)) return "";
    std::string stem = file.substr(file.rfind('/') + 1);
    if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".py") == 0)
      stem.resize(stem.size() - 3);
    std::replace(stem.begin(), stem.end(), '-', '_');
    return stem;
  }
  return "";
}

}  // namespace

std::optional<KeyFrame> key_frame(uint32_t pid,
                                  const std::vector<uint64_t>& frames,
                                  AppCode& app, FrameNames& names) {
  KeyFrame k;
  // An application the distribution installed: /usr/bin/meld runs the
  // package in dist-packages/meld/, which is its own code.
  const std::string package =
      app.patterns().empty() ? main_script_package(pid, frames, names) : "";
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = names.frame(pid, frames[i]);
    const bool script =
        python::is_py_frame(frames[i]) || v8::is_js_frame(frames[i]);
    if (!app.owns(f, script, &k.by, package)) continue;
    k.index = i;
    return k;
  }
  return std::nullopt;
}

std::vector<JsCallback> js_callbacks(const SlowSpan& s, AppCode& app,
                                     FrameNames& names) {
  std::map<std::string, uint32_t> by_function;
  const uint32_t pid = s.span.pid;
  for (const StackGroup& g : s.stacks)
    for (size_t i = g.frames.size(); i-- > 0;) {
      if (!v8::is_js_frame(g.frames[i])) continue;
      if (!app.owns(names.frame(pid, g.frames[i]), true)) continue;
      by_function[names.function(pid, g.frames[i])] += g.count;
      break;
    }
  std::vector<JsCallback> out;
  for (auto& [function, samples] : by_function)
    out.push_back({function, samples});
  std::stable_sort(out.begin(), out.end(),
                   [](const JsCallback& a, const JsCallback& b) {
                     return a.samples > b.samples;
                   });
  return out;
}

std::vector<FunctionStack> function_stacks(const SlowSpan& s,
                                           FrameNames& names) {
  std::vector<FunctionStack> out;
  std::map<std::vector<std::string>, size_t> index;  // functions -> out[i]
  // s.stacks is most samples first: a group's first stack is its commonest.
  for (const StackGroup& g : s.stacks) {
    std::vector<std::string> functions;
    functions.reserve(g.frames.size());
    for (uint64_t addr : g.frames)
      functions.push_back(names.function(s.span.pid, addr));
    auto [it, fresh] = index.try_emplace(std::move(functions), out.size());
    if (fresh) out.push_back({&g, 0, 0});
    FunctionStack& f = out[it->second];
    f.samples += g.count;
    ++f.stacks;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FunctionStack& x, const FunctionStack& y) {
                     return x.samples > y.samples;
                   });
  return out;
}

StuckHere stuck_here(const SlowSpan& s, AppCode& app, FrameNames& names) {
  StuckHere out;
  std::vector<FunctionStack> groups = function_stacks(s, names);
  if (groups.empty()) return out;
  out.stack = groups[0].shown;
  out.samples = groups[0].samples;
  out.stacks = groups[0].stacks;
  out.other_stacks = groups.size() - 1;
  out.key = key_frame(s.span.pid, out.stack->frames, app, names);
  if (!out.key) return out;
  const uint32_t pid = s.span.pid;
  const std::string function =
      names.function(pid, out.stack->frames[out.key->index]);
  for (const StackGroup& g : s.stacks) {
    std::optional<KeyFrame> k = key_frame(pid, g.frames, app, names);
    if (k && names.function(pid, g.frames[k->index]) == function)
      out.key_samples += g.count;
  }
  return out;
}

}  // namespace looptrace::report
