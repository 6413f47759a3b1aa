// Key lines on a real Python program: a python3-gi GLib loop whose timeout
// callbacks busy-loop, attached with -p and no option. The frame the
// report marks is the program's own busy function, at a line of it, as
// the program's source says; and the exact stacks stay in the JSON.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;

// The lines of the function `def_text` starts in `path` (1-based): from its
// def to the line before the next top-level def or class.
struct Lines {
  int first = 0, last = 0;
  bool holds(int line) const { return line >= first && line <= last; }
};

Lines function_lines(const std::string& path, const std::string& def_text) {
  std::ifstream in(path);
  std::string line;
  Lines l;
  for (int n = 1; std::getline(in, line); ++n) {
    if (l.first == 0) {
      if (line.rfind(def_text, 0) == 0) l.first = n;
    } else if (line.rfind("def ", 0) == 0 || line.rfind("class ", 0) == 0) {
      break;
    } else {
      l.last = n;
    }
  }
  return l;
}

// Whether `frame` is "NAME (glib_loop.py:LINE)" with LINE in `lines`.
bool frame_in(const std::string& frame, const std::string& name,
              const Lines& lines) {
  for (int l = lines.first; l <= lines.last; ++l)
    if (frame == fmt::format("{} (glib_loop.py:{})", name, l)) return true;
  return false;
}

// The busy callback's own code: busy_for, or now_ns that it calls in its
// loop.
struct BusyCode {
  Lines busy_for, now_ns;
  bool holds(const std::string& frame) const {
    return frame_in(frame, "busy_for", busy_for) ||
           frame_in(frame, "now_ns", now_ns);
  }
};

// The slow dispatch of `report` holding the stall python logged.
const nlohmann::json* span_of(const nlohmann::json& report,
                              const nlohmann::json& stall) {
  const uint64_t st_start = stall["start_ns"], st_end = stall["end_ns"];
  const nlohmann::json* found = nullptr;
  for (const auto& s : report["slow_dispatches"]) {
    uint64_t start = s["start_ns"], dur = s["duration_ns"];
    if (start <= st_start + kToleranceNs &&
        start + dur + kToleranceNs >= st_end)
      found = &s;
  }
  return found;
}

TEST(KeyLines, ABusyPythonCallbacksKeyLineIsItsOwnBusyFunction) {
  LT_REQUIRE_BPF();
  if (access("/usr/bin/python3", X_OK) != 0) {
    if (bpf_required()) FAIL() << "/usr/bin/python3 missing (scripts/setup.sh)";
    GTEST_SKIP() << "/usr/bin/python3 missing";
  }
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  const BusyCode code{function_lines(src, "def busy_for("),
                      function_lines(src, "def now_ns(")};
  ASSERT_GT(code.busy_for.last, code.busy_for.first);
  ASSERT_GT(code.now_ns.last, code.now_ns.first);

  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  Process app({"/usr/bin/python3", src, "--start-delay", "2000", "--kind",
               "busy", "--stall", "200@300", "--stall", "150@700", "--duration",
               "1100", "--log", log},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "glib_loop: ready", 10000));
  RunResult r = run({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
                     "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(app.wait(10000), 0);
  const nlohmann::json report = read_json(json);
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);

  for (const nlohmann::json& stall : stalls) {
    const nlohmann::json* s = span_of(report, stall);
    ASSERT_NE(s, nullptr) << report["slow_dispatches"].dump();
    const nlohmann::json& stuck = (*s)["stuck_here"];
    ASSERT_TRUE(stuck.is_object()) << s->dump();
    // Where the report says the span was stuck: in the busy code.
    ASSERT_TRUE(stuck["key_line"].is_string()) << stuck.dump();
    EXPECT_TRUE(code.holds(stuck["key_line"])) << stuck.dump();
    EXPECT_EQ(stuck["frames"][stuck["key_frame"].get<size_t>()],
              stuck["key_line"]);
    // The text report marks it.
    EXPECT_NE(r.out.find("    > " + stuck["key_line"].get<std::string>()),
              std::string::npos)
        << r.out;
    // Each exact stack: its key frame is the innermost frame of the
    // program's file, frames inside it are not (the vDSO, libc, the
    // interpreter).
    for (const auto& st : (*s)["stacks"]) {
      const auto& frames = st["frames"];
      const auto& detail = st["frames_detail"];
      size_t own = frames.size();
      for (size_t i = 0; i < detail.size() && own == frames.size(); ++i)
        if (detail[i]["module"] == src) own = i;
      if (own == frames.size()) {
        EXPECT_TRUE(st["key_frame"].is_null()) << st.dump();
        continue;
      }
      EXPECT_EQ(st["key_frame"], own) << st.dump();
      EXPECT_EQ(st["key_frame_by"], "default");
    }
  }
  // Both spans grouped by their key lines, which name the busy code.
  const size_t section = r.out.find("SLOW DISPATCHES BY KEY LINE");
  ASSERT_NE(section, std::string::npos) << r.out;
  const std::string rows =
      r.out.substr(section, r.out.find("\n\n", section) - section);
  EXPECT_TRUE(rows.find("busy_for (glib_loop.py:") != std::string::npos ||
              rows.find("now_ns (glib_loop.py:") != std::string::npos)
      << rows;
}

}  // namespace
}  // namespace lt_test
