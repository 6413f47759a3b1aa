// A real PyGObject application from Debian: meld (GTK 3, Python), under
// Xvfb, scrolled with keys from xdotool, traced with -p PID and no option
// beyond a low threshold. Its slow spans' stacks name meld's own Python
// functions; each one is checked against meld's installed source: the
// file exists in meld's package and the function is defined there, at or
// before the line named; the handlers meld connected to GTK's signals
// are spans named by their function, at its def.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "harness.h"
#include "xvfb.h"

namespace lt_test {
namespace {

const char* const kMeldPackage = "/usr/lib/python3/dist-packages/meld/";

bool have_meld() {
  return access("/usr/bin/meld", X_OK) == 0 && have_xvfb_and_xdotool();
}

// Whether `def NAME(` (or `class NAME`) starts a line at or before `line`
// of `path`: the function a Python frame names, in the source it ran.
bool defined_by(const std::string& path, const std::string& name, int line) {
  const std::vector<std::string> lines = source_lines(path);
  if (line <= 0 || static_cast<size_t>(line) >= lines.size()) return false;
  // Comprehensions, lambdas and module code have no def of their own.
  if (name.starts_with("<")) return true;
  const std::regex def("^\\s*(async\\s+)?def\\s+" + name + "\\s*\\(");
  for (int i = line; i > 0; --i)
    if (std::regex_search(lines[i], def)) return true;
  return false;
}

// Whether `line` of `path` starts the code object of function NAME: its
// def, or the first of the decorators above it (co_firstlineno).
bool def_at(const std::string& path, const std::string& name, int line) {
  const std::vector<std::string> lines = source_lines(path);
  const std::regex def("^\\s*(async\\s+)?def\\s+" + name + "\\s*\\(");
  const std::regex decorator("^\\s*@");
  for (int i = line; i > 0 && static_cast<size_t>(i) < lines.size(); ++i) {
    if (std::regex_search(lines[i], def)) return true;
    if (!std::regex_search(lines[i], decorator)) return false;
  }
  return false;
}

// The window meld opened (titled "Meld"), "" after 30 s without one.
std::string wait_for_window(const Display& display) {
  for (int i = 0; i < 300; ++i) {
    RunResult r = run(display.env(
        {"/usr/bin/xdotool", "search", "--onlyvisible", "--name", "^Meld$"}));
    if (r.exit_code == 0 && !r.out.empty())
      return r.out.substr(0, r.out.find('\n'));
    usleep(100'000);
  }
  return "";
}

TEST(Meld, SlowSpansNameMeldsOwnPythonFunctions) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_INSTALLED(have_meld(), "meld, Xvfb or xdotool");
  TempDir dir;
  {
    std::ofstream a(dir.file("left.txt")), b(dir.file("right.txt"));
    for (int i = 0; i < 3000; ++i) {
      a << "line " << i << " of the left file\n";
      b << "line " << i << (i % 7 ? " of the left file\n" : " changed\n");
    }
  }
  Display display(dir);
  ASSERT_FALSE(display.name().empty());
  Process meld(
      display.env({"/usr/bin/env", "HOME=" + dir.path(), "/usr/bin/meld",
                   dir.file("left.txt"), dir.file("right.txt")}),
      dir.file("meld.out"), dir.file("meld.err"));
  const std::string window = wait_for_window(display);
  ASSERT_FALSE(window.empty()) << read_file(dir.file("meld.err"));
  const std::string json = dir.file("report.json");
  Process lt({looptrace_bin(), "record", "-p", std::to_string(meld.pid()),
              "--slow", "2ms", "--duration", "6s", "--json", json},
             dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 20000))
      << read_file(dir.file("lt.err"));
  run(display.env({"/usr/bin/xdotool", "windowfocus", "--sync", window}));
  for (int i = 0; i < 4; ++i)
    run(display.env({"/usr/bin/xdotool", "key", "--delay", "120", "Page_Down",
                     "Page_Down", "Down", "Down", "ctrl+d", "Page_Up"}));
  ASSERT_EQ(lt.wait(30000), 0) << read_file(dir.file("lt.err"));
  const auto report = read_json(json);
  // "qualname (file.py:line)"
  const std::regex py_frame("^(.*) \\(([^():]+\\.py):([0-9]+)\\)$");
  std::set<std::string> named;
  size_t spans_with_meld = 0, key_in_meld = 0;
  for (const auto& s : report["slow_dispatches"]) {
    bool any = false;
    for (const auto& st : s["stacks"]) {
      // The key line, by default, is the innermost frame of meld's
      // package (the program's own code, though installed in
      // dist-packages), not the script's run_application.
      const auto& frames = st["frames_detail"];
      std::optional<size_t> innermost;
      for (size_t i = 0; i < frames.size() && !innermost; ++i)
        if (frames[i]["module"].is_string() &&
            frames[i]["module"].get<std::string>().starts_with(kMeldPackage))
          innermost = i;
      if (innermost) {
        EXPECT_EQ(st["key_frame"], *innermost)
            << frames[*innermost]["function"] << " is not the key frame";
        key_in_meld += st["key_frame"] == *innermost;
      }
      for (const auto& f : frames) {
        if (!f["module"].is_string()) continue;
        const std::string module = f["module"];
        if (!module.starts_with(kMeldPackage)) continue;
        const std::string fn = f["function"];
        std::smatch m;
        ASSERT_TRUE(std::regex_match(fn, m, py_frame)) << fn;
        EXPECT_EQ(module.substr(module.rfind('/') + 1), m[2].str()) << fn;
        const std::string qual = m[1];
        const std::string name = qual.substr(qual.rfind('.') + 1);
        EXPECT_TRUE(defined_by(module, name, std::stoi(m[3])))
            << fn << " is not defined in " << module;
        named.insert(fn);
        any = true;
      }
    }
    spans_with_meld += any;
  }
  EXPECT_GT(key_in_meld, 0u);
  EXPECT_GT(spans_with_meld, 0u)
      << "no slow span's stack names meld's code; "
      << report["slow_dispatches"].size() << " slow spans";
  // Handlers meld connected to GTK's signals are spans of their own, named
  // by the function at its def: ctrl+d is FileDiff.action_next_change.
  const std::regex handler(
      "^GObject signal handler (.*) \\(([^():]+\\.py):([0-9]+)\\)$");
  std::set<std::string> handlers;
  for (const auto& s : report["slow_dispatches"]) {
    const std::string target = s["target"];
    if (!target.starts_with("GObject signal handler ")) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(target, m, handler)) << target;
    const std::string qual = m[1];
    // By its name: meld's modules are in the package and its subpackages.
    std::string file;
    for (const auto& e :
         std::filesystem::recursive_directory_iterator(kMeldPackage))
      if (file.empty() && e.path().filename() == m[2].str()) file = e.path();
    EXPECT_TRUE(def_at(file, qual.substr(qual.rfind('.') + 1), std::stoi(m[3])))
        << target << ": no such def at that line of " << file;
    handlers.insert(qual);
  }
  EXPECT_EQ(handlers.count("FileDiff.action_next_change"), 1u)
      << fmt::format("{}", fmt::join(handlers, "\n"));
  // Drawing the diff is meld's own code: its views' do_draw.
  bool draws = false;
  for (const std::string& fn : named)
    draws = draws || fn.find("do_draw") != std::string::npos;
  EXPECT_TRUE(draws) << fmt::format("{}", fmt::join(named, "\n"));
}

}  // namespace
}  // namespace lt_test
