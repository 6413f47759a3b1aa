// Key lines on a real Python program: a python3-gi GLib loop whose timeout
// callbacks busy-loop, attached with -p and no option. The frame the
// report marks is the program's own busy function, at a line of it, as
// the program's source says; and the exact stacks stay in the JSON.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;

// Whether `frame` is "NAME (glib_loop.py:LINE)" with LINE in `lines`.
bool frame_in(const std::string& frame, const std::string& name,
              const LineRange& lines) {
  for (int l = lines.first; l <= lines.last; ++l)
    if (frame == fmt::format("{} (glib_loop.py:{})", name, l)) return true;
  return false;
}

// The busy callback's own code: busy_for, or now_ns that it calls in its
// loop.
struct BusyCode {
  LineRange busy_for, now_ns;
  bool holds(const std::string& frame) const {
    return frame_in(frame, "busy_for", busy_for) ||
           frame_in(frame, "now_ns", now_ns);
  }
};

TEST(KeyLines, ABusyPythonCallbacksKeyLineIsItsOwnBusyFunction) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  const std::string src = tests_dir() + "/programs/glib_loop.py";
  const BusyCode code{function_lines(src, "def busy_for("),
                      function_lines(src, "def now_ns(")};
  ASSERT_GT(code.busy_for.last, code.busy_for.first);
  ASSERT_GT(code.now_ns.last, code.now_ns.first);

  TempDir dir;
  const std::string log = dir.file("glib.jsonl");
  const std::string json = dir.file("report.json");
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(
      trace_glib_loop(dir,
                      {"--kind", "busy", "--stall", "200@300", "--stall",
                       "150@700", "--duration", "1100"},
                      {"--json", json}, &r));
  const nlohmann::json report = read_json(json);
  auto stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), 2u);

  for (const nlohmann::json& stall : stalls) {
    const nlohmann::json* s =
        span_holding(report["slow_dispatches"], stall, kToleranceNs);
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
