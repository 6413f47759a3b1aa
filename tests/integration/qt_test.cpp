// Qt 5 and Qt 6 through Debian's PyQt5 and PyQt6
// (tests/programs/qt_loop.py), offscreen: the built-in qt5 or qt6 profile
// chosen from the process's libraries, one span per outermost event, named
// by the event's type, checked against the handlers' own CLOCK_MONOTONIC
// log.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;  // the 1 ms

bool have_pyqt(int major) {
  return have_system_python() &&
         std::system(fmt::format("/usr/bin/python3 -c 'import PyQt{}.QtCore' "
                                 ">/dev/null 2>&1",
                                 major)
                         .c_str()) == 0;
}

#define LT_REQUIRE_PYQT(major) \
  LT_REQUIRE_INSTALLED(have_pyqt(major), "PyQt" << major)

// The Qt major version a test runs against.
class QtEvents : public ::testing::TestWithParam<int> {};

// The handler's slow span: same thread, the span that overlaps the
// handler's [start, end] most, and it holds it within the tolerance. (The
// tolerance grows with the machine's steal time, which can reach hundreds
// of milliseconds on a busy host: the overlap, not the tolerance, picks
// the span.)
const nlohmann::json* span_of(const nlohmann::json& slow,
                              const nlohmann::json& h, int64_t tol) {
  const nlohmann::json* best = nullptr;
  int64_t best_overlap = 0;
  const int64_t hs = h["start_ns"].get<int64_t>();
  const int64_t he = h["end_ns"].get<int64_t>();
  for (const auto& s : slow) {
    if (s["tid"] != h["tid"]) continue;
    int64_t start = s["start_ns"].get<int64_t>();
    int64_t end = start + s["duration_ns"].get<int64_t>();
    int64_t overlap = std::min(end, he) - std::max(start, hs);
    if (overlap > best_overlap) {
      best_overlap = overlap;
      best = &s;
    }
  }
  if (best == nullptr) return nullptr;
  int64_t start = (*best)["start_ns"].get<int64_t>();
  int64_t end = start + (*best)["duration_ns"].get<int64_t>();
  return start <= hs + tol && end >= he - tol ? best : nullptr;
}

// The app's three stalls (two timer events, one posted event of type
// 1001, each with a nested event inside) are the slow spans, each as long
// as its handler within `tol`, named by its event type; the nested
// notifications are part of them.
void expect_stalls_found(const std::vector<nlohmann::json>& lines,
                         const nlohmann::json& report, int64_t tol) {
  std::vector<nlohmann::json> stalls;
  for (const auto& h : events(lines, "handled"))
    if (h["stalled"].get<bool>()) stalls.push_back(h);
  ASSERT_EQ(stalls.size(), 3u);
  ASSERT_EQ(events(lines, "nested").size(), 3u);
  const auto& slow = report["slow_dispatches"];
  EXPECT_EQ(slow.size(), stalls.size()) << slow.dump();
  std::string receiver;
  for (const auto& h : stalls) {
    const nlohmann::json* m = span_of(slow, h, tol);
    ASSERT_NE(m, nullptr) << h.dump() << "\n" << slow.dump();
    int64_t app_ns = h["end_ns"].get<int64_t>() - h["start_ns"].get<int64_t>();
    EXPECT_LE(std::llabs((*m)["duration_ns"].get<int64_t>() - app_ns), tol)
        << m->dump() << "\n"
        << h.dump();
    const std::string target = (*m)["target"];
    const std::string type = h["kind"] == "timer" ? "Timer" : "1001";
    EXPECT_EQ(target.rfind("Qt event ", 0), 0u) << target;
    EXPECT_NE(target.find(" type=" + type), std::string::npos) << target;
    // The receiver: one Worker (qt_loop.py: a QObject subclass), so one
    // class for all three. PyQt's wrapper class has no symbol in Debian's
    // stripped module: named from its C++ RTTI, as sip names the wrapper
    // of a Python subclass of QObject.
    std::string cls = target.substr(9, target.find(" type=") - 9);
    EXPECT_EQ(cls, "sipQObject") << target;
    if (receiver.empty()) receiver = cls;
    EXPECT_EQ(cls, receiver) << target;
  }
  // The nested notifications' returns are part of their outer span, not
  // returns without an entry.
  EXPECT_EQ(report["lost"]["unmatched_returns"], 0) << report["lost"].dump();
}

// -p PID and no probe option: libQt5Core.so.5 chooses the qt5 profile,
// libQt6Core.so.6 qt6.
// Three handlers stall (two timer events, one posted event of type 1001),
// each sending a nested event from inside whose handler sleeps longer than
// the threshold: the nested notification is part of the outer span, never
// its own. Every stall is found, nothing else is slow, each duration is
// the handler's within 1 ms, and each is named by its event type.
TEST_P(QtEvents, OutermostEventsNamedByType) {
  const int qt = GetParam();
  LT_REQUIRE_BPF();
  LT_REQUIRE_PYQT(qt);
  TempDir dir;
  const std::string log = dir.file("qt.jsonl");
  const std::string json = dir.file("report.json");
  Process app({"/usr/bin/python3",
               tests_dir() + "/programs/qt_loop.py",
               "--start-delay",
               "2000",
               "--duration",
               "1200",
               "--interval",
               "40",
               "--stall-timers",
               "4,20",
               "--stall-posted",
               "12",
               "--stall-ms",
               "30",
               "--nested-ms",
               "50",
               "--log",
               log,
               "--qt",
               std::to_string(qt)},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "qt_loop: ready", 10000))
      << read_file(dir.file("app.err"));
  const int64_t steal_before = steal_ns();
  RunResult r = run({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
                     "--slow", "40ms", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(app.wait(10000), 0) << read_file(dir.file("app.err"));
  const int64_t tol = kToleranceNs + (steal_ns() - steal_before);
  EXPECT_NE(r.err.find(fmt::format("looptrace: profile qt{}: pid {} maps ", qt,
                                   app.pid())),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("QCoreApplication::notifyInternal2(QObject*, QEvent*) "
                       "at offset 0x"),
            std::string::npos)
      << r.err;
  expect_stalls_found(read_jsonl(log), read_json(json), tol);
}

// -- COMMAND and no probe option, through a shell that forks the app: the
// runtimes installed here are probed in what the command starts, and the
// Qt events of the shell's child are found as with -p.
TEST_P(QtEvents, CommandThroughAShellWithoutProbes) {
  const int qt = GetParam();
  LT_REQUIRE_BPF();
  LT_REQUIRE_PYQT(qt);
  TempDir dir;
  const std::string log = dir.file("qt.jsonl");
  const std::string json = dir.file("report.json");
  const int64_t steal_before = steal_ns();
  // "; true": the shell forks the app instead of exec'ing it.
  RunResult r = run({looptrace_bin(), "record", "--slow", "40ms", "--json",
                     json, "--", "/bin/sh", "-c",
                     "/usr/bin/python3 " + tests_dir() +
                         "/programs/qt_loop.py --start-delay 300 --duration "
                         "1200 --interval 40 --stall-timers 4,20 "
                         "--stall-posted 12 --stall-ms 30 --nested-ms 50 "
                         "--qt " +
                         std::to_string(qt) + " --log " + log + "; true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t tol = kToleranceNs + (steal_ns() - steal_before);
  EXPECT_NE(r.err.find("looptrace: no probe given: the runtimes installed "
                       "here, in what /bin/sh starts: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(fmt::format("qt{}", qt)), std::string::npos) << r.err;
  expect_stalls_found(read_jsonl(log), read_json(json), tol);
}

INSTANTIATE_TEST_SUITE_P(Qt, QtEvents, ::testing::Values(5, 6),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return fmt::format("Qt{}", i.param);
                         });

}  // namespace
}  // namespace lt_test
