// Key lines: in a stack, the innermost frame of the program's own code
// (not the interpreter, not a system library, not the Python standard
// library or an installed package), the line a person can act on; and a
// span's stacks merged by function, so that a Python loop whose samples
// fall on a few lines of one function is one stack, not forty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/dispatch.h"
#include "base/status.h"
#include "model/frame.h"
#include "report/report_common.h"

namespace looptrace::report {

// What counts as the program's own code. By default (no pattern): a Python
// frame whose file is not under /usr/lib, /lib (and their 32/64 kin), the
// interpreter's standard library or a site-packages/dist-packages
// directory, nor <frozen ...> or <string>, or one in the installed package
// named after the main script (/usr/bin/meld: dist-packages/meld/); a
// JavaScript frame (as a Python one) whose script is not Node's own
// (node:internal/...) nor under a node_modules directory; a native
// frame whose module is a file outside those directories that is not an
// interpreter (python*, node...). With patterns (--app-code), only the frames
// whose module path (a native frame's mapped file, a Python frame's source
// file) matches one of them: a glob, '*' matching '/' too; one without a
// leading '/' matches the path or any tail of it after a '/' ("glib_loop.py",
// "meld/*", "src/*.py").
class AppCode {
 public:
  // Patterns as typed: each may be a comma list; empty items are skipped
  // (check_app_code refuses them on the command line).
  explicit AppCode(const std::vector<std::string>& patterns = {});

  // Whether f (a Python or JavaScript frame when py) is the program's own
  // code; *by is
  // "default" or the pattern that matched. `package`: by default, Python
  // files of the installed package of that name (dist-packages/NAME/)
  // are the program's own too (key_frame: the main script's name).
  bool owns(const Frame& f, bool py, std::string* by = nullptr,
            const std::string& package = "");
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
  // (py, module, package) -> index of the pattern that matched, -1 the
  // default rule, -2 not owned: a module recurs in every stack.
  std::map<std::tuple<bool, std::string, std::string>, int> cache_;
};

// --app-code as typed: one line naming what is wrong (an empty pattern,
// too many, too long), exit 2.
Status check_app_code(const std::vector<std::string>& patterns);

// The index of the innermost of `frames` that is the program's own code,
// and why (AppCode::owns); nullopt when none is.
struct KeyFrame {
  size_t index = 0;
  std::string by;
};
std::optional<KeyFrame> key_frame(uint32_t pid,
                                  const std::vector<uint64_t>& frames,
                                  AppCode& app, FrameNames& names);

// A span's exact stacks that are the same functions (FrameNames::function:
// no native offsets, no Python line numbers).
struct FunctionStack {
  const StackGroup* shown = nullptr;  // its commonest exact stack
  uint32_t samples = 0;               // of all its exact stacks
  size_t stacks = 0;                  // how many exact stacks
};
// Most samples first (ties: the order of s.stacks).
std::vector<FunctionStack> function_stacks(const SlowSpan& s,
                                           FrameNames& names);

// Where a span was stuck, as every report says it: the function stack
// with the most samples, shown by its commonest exact stack, and that
// stack's key frame.
struct StuckHere {
  const StackGroup* stack = nullptr;  // null: no samples
  uint32_t samples = 0;
  size_t stacks = 0;        // exact stacks merged into it
  size_t other_stacks = 0;  // other function stacks
  std::optional<KeyFrame> key;
  // Samples, of all the span's stacks, whose key frame is in the same
  // function as `key`'s (0 without one).
  uint32_t key_samples = 0;
};
StuckHere stuck_here(const SlowSpan& s, AppCode& app, FrameNames& names);

// The JavaScript identity of a span (a Node timer batch, a callback): per
// sample, its outermost JavaScript frame of the program's own code (the
// callback the program gave Node: onTimer, the HTTP handler), merged by
// function; most samples first. Empty when no sample has one.
struct JsCallback {
  std::string function;  // "onTimer (app.js)"
  uint32_t samples = 0;
};
std::vector<JsCallback> js_callbacks(const SlowSpan& s, AppCode& app,
                                     FrameNames& names);

}  // namespace looptrace::report
