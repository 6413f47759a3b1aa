// GTK 3 under Xvfb (Debian's python3-gi, tests/programs/gtk_keys.py), keys
// typed with xdotool: the built-in gtk3 profile chosen from the process's
// libraries, each GDK event one span named by its type, checked against
// the key handler's own CLOCK_MONOTONIC log.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;  // the 1 ms

bool have_gtk() {
  return access("/usr/bin/python3", X_OK) == 0 &&
         access("/usr/bin/Xvfb", X_OK) == 0 &&
         access("/usr/bin/xdotool", X_OK) == 0 &&
         std::system(
             "/usr/bin/python3 -c \"import gi; "
             "gi.require_version('Gtk', '3.0')\" >/dev/null 2>&1") == 0;
}

// A display of its own: Xvfb picks a free number and writes it.
class Display {
 public:
  explicit Display(const TempDir& dir)
      : out_(dir.file("xvfb.out")),
        xvfb_({"/usr/bin/Xvfb", "-displayfd", "1", "-nolisten", "tcp",
               "-screen", "0", "640x480x24"},
              out_, dir.file("xvfb.err")) {
    for (int i = 0; i < 500 && name_.empty(); ++i) {
      std::string n = read_file(out_);
      if (n.find('\n') != std::string::npos)
        name_ = ":" + n.substr(0, n.find('\n'));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // SIGTERM, not the harness's SIGKILL: Xvfb removes its lock file and
  // socket in /tmp.
  ~Display() {
    xvfb_.signal(SIGTERM);
    xvfb_.wait(5000);
  }
  const std::string& name() const { return name_; }
  // argv run with DISPLAY set to this display.
  std::vector<std::string> env(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"/usr/bin/env", "DISPLAY=" + name_});
    return argv;
  }

 private:
  std::string out_;
  Process xvfb_;
  std::string name_;
};

// -p PID and no probe option: libgtk-3.so.0 chooses the gtk3 profile. Keys
// typed into the window, two of them with a handler busy for 60 ms: both
// found, nothing else slow, each as long as its handler within 1 ms,
// named by the GDK event type.
TEST(GtkEvents, KeyPressesNamedByEventType) {
  LT_REQUIRE_BPF();
  if (!have_gtk()) {
    if (bpf_required())
      FAIL() << "Xvfb, xdotool or GTK 3 typelibs missing (scripts/setup.sh)";
    GTEST_SKIP() << "Xvfb, xdotool or GTK 3 typelibs missing";
  }
  TempDir dir;
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  const std::string log = dir.file("gtk.jsonl");
  const std::string json = dir.file("report.json");
  Process app(
      display.env({"/usr/bin/python3", tests_dir() + "/programs/gtk_keys.py",
                   "--stall-keys", "b", "--stall-ms", "60", "--log", log}),
      dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "gtk_keys: ready", 15000))
      << read_file(dir.file("app.err"));
  const std::string ready = read_file(dir.file("app.err"));
  const std::string window = ready.substr(
      ready.find("window=") + 7,
      ready.find('\n', ready.find("window=")) - ready.find("window=") - 7);
  const int64_t steal_before = steal_ns();
  Process lt({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
              "--slow", "20ms", "--json", json},
             dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 15000))
      << read_file(dir.file("lt.err"));
  RunResult focus =
      run(display.env({"/usr/bin/xdotool", "windowfocus", "--sync", window}));
  ASSERT_EQ(focus.exit_code, 0) << focus.err;
  RunResult keys = run(display.env({"/usr/bin/xdotool", "key", "--delay", "150",
                                    "a", "b", "a", "c", "b", "q"}));
  ASSERT_EQ(keys.exit_code, 0) << keys.err;
  ASSERT_EQ(app.wait(15000), 0) << read_file(dir.file("app.err"));
  ASSERT_EQ(lt.wait(15000), 0) << read_file(dir.file("lt.err"));
  const int64_t tol = kToleranceNs + (steal_ns() - steal_before);
  const std::string err = read_file(dir.file("lt.err"));
  EXPECT_NE(
      err.find(fmt::format("looptrace: profile gtk3: pid {} maps ", app.pid())),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("gtk_main_do_event at offset 0x"), std::string::npos)
      << err;
  auto presses = events(read_jsonl(log), "key");
  ASSERT_EQ(presses.size(), 6u) << read_file(log);
  nlohmann::json report = read_json(json);
  const auto& slow = report["slow_dispatches"];
  size_t stalled = 0;
  for (const auto& k : presses) {
    if (!k["stalled"].get<bool>()) continue;
    ++stalled;
    const nlohmann::json* m = nullptr;
    for (const auto& s : slow) {
      int64_t start = s["start_ns"].get<int64_t>();
      int64_t end = start + s["duration_ns"].get<int64_t>();
      if (s["tid"] == k["tid"] && start <= k["start_ns"].get<int64_t>() &&
          end >= k["end_ns"].get<int64_t>())
        m = &s;
    }
    ASSERT_NE(m, nullptr) << k.dump() << "\n" << slow.dump();
    EXPECT_EQ((*m)["target"], "GTK event GDK_KEY_PRESS") << m->dump();
    int64_t handler = k["end_ns"].get<int64_t>() - k["start_ns"].get<int64_t>();
    EXPECT_LE((*m)["duration_ns"].get<int64_t>() - handler, tol)
        << m->dump() << "\n"
        << k.dump();
  }
  EXPECT_EQ(stalled, 2u);
  EXPECT_EQ(slow.size(), stalled) << slow.dump();
}

}  // namespace
}  // namespace lt_test
