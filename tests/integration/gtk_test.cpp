// GTK 3 under Xvfb (Debian's python3-gi, tests/programs/gtk_keys.py), keys
// typed with xdotool: the built-in gtk3 profile chosen from the process's
// libraries, each GDK event one span named by its type, checked against
// the key handler's own CLOCK_MONOTONIC log.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness.h"
#include "xvfb.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 1'000'000;  // the 1 ms

bool have_gtk() {
  return have_system_python() && have_xvfb_and_xdotool() &&
         std::system(
             "/usr/bin/python3 -c \"import gi; "
             "gi.require_version('Gtk', '3.0')\" >/dev/null 2>&1") == 0;
}

// What the report calls gtk_keys.py's key handler: the span of the
// GObject closure GTK runs it from, named by the function and the line of
// its def in the program's source.
std::string key_handler_target() {
  const int line =
      line_of(tests_dir() + "/programs/gtk_keys.py", "def on_key(");
  return fmt::format("GObject signal handler on_key (gtk_keys.py:{})", line);
}

// Skips (fails when BPF tests are required) without GTK under Xvfb.
#define LT_REQUIRE_GTK() \
  LT_REQUIRE_INSTALLED(have_gtk(), "python3, Xvfb, xdotool or GTK 3 typelibs")

// One run of tests/programs/gtk_keys.py on `display` (after `app_env`,
// VAR=VALUE settings), its key handler busy for `stall_ms` on b, traced by
// `looptrace record -p PID --slow 20ms --json JSON` plus `lt_args`: `keys`
// (a b a c b q) typed `delay_ms` (150) apart once tracing (xdotool
// releases each half way), then both waited for.
struct KeysRun {
  std::string log, json, err;  // the app's log, the report, looptrace's stderr
  int pid = 0;
  int64_t steal = 0;  // ns the host stole meanwhile
};

void type_keys(const TempDir& dir, const Display& display,
               std::vector<std::string> app_env, const std::string& stall_ms,
               const std::vector<std::string>& lt_args, KeysRun* out,
               std::vector<std::string> keys = {"a", "b", "a", "c", "b", "q"},
               int delay_ms = 150,
               const std::vector<std::string>& app_args = {}) {
  out->log = dir.file("gtk.jsonl");
  out->json = dir.file("report.json");
  std::vector<std::string> argv = std::move(app_env);
  argv.insert(argv.end(),
              {"/usr/bin/python3", tests_dir() + "/programs/gtk_keys.py",
               "--stall-keys", "b", "--stall-ms", stall_ms, "--log", out->log});
  argv.insert(argv.end(), app_args.begin(), app_args.end());
  Process app(display.env(argv), dir.file("app.out"), dir.file("app.err"));
  out->pid = app.pid();
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "gtk_keys: ready", 15000))
      << read_file(dir.file("app.err"));
  const std::string ready = read_file(dir.file("app.err"));
  const std::string window = ready.substr(
      ready.find("window=") + 7,
      ready.find('\n', ready.find("window=")) - ready.find("window=") - 7);
  const int64_t steal_before = steal_ns();
  std::vector<std::string> lt_argv = {
      looptrace_bin(), "record", "-p",     std::to_string(app.pid()),
      "--slow",        "20ms",   "--json", out->json};
  lt_argv.insert(lt_argv.end(), lt_args.begin(), lt_args.end());
  Process lt(lt_argv, dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 15000))
      << read_file(dir.file("lt.err"));
  RunResult focus =
      run(display.env({"/usr/bin/xdotool", "windowfocus", "--sync", window}));
  ASSERT_EQ(focus.exit_code, 0) << focus.err;
  keys.insert(keys.begin(),
              {"/usr/bin/xdotool", "key", "--delay", std::to_string(delay_ms)});
  RunResult typed = run(display.env(keys));
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  ASSERT_EQ(app.wait(15000), 0) << read_file(dir.file("app.err"));
  ASSERT_EQ(lt.wait(15000), 0) << read_file(dir.file("lt.err"));
  out->steal = steal_ns() - steal_before;
  out->err = read_file(dir.file("lt.err"));
}

// -p PID and no probe option: libgtk-3.so.0 chooses the gtk3 profile. Keys
// typed into the window, two of them with a handler busy for 60 ms: both
// found, nothing else slow, each as long as its handler within 1 ms,
// named by the GDK event type, and in it the Python handler connect()
// gave GTK, named by its function and the line of its def.
TEST(GtkEvents, KeyPressesNamedByEventType) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GTK();
  TempDir dir;
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  KeysRun r;
  ASSERT_NO_FATAL_FAILURE(type_keys(dir, display, {}, "60", {}, &r));
  const int64_t tol = kToleranceNs + r.steal;
  const std::string& err = r.err;
  const std::string& log = r.log;
  EXPECT_NE(
      err.find(fmt::format("looptrace: profile gtk3: pid {} maps ", r.pid)),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("gtk_main_do_event at offset 0x"), std::string::npos)
      << err;
  auto presses = events(read_jsonl(log), "key");
  ASSERT_EQ(presses.size(), 6u) << read_file(log);
  nlohmann::json report = read_json(r.json);
  const auto& slow = report["slow_dispatches"];
  const std::string handler = key_handler_target();
  // The slow span named `target` around key k's handler, or null.
  auto around = [&](const nlohmann::json& k, const std::string& target) {
    const nlohmann::json* m = nullptr;
    for (const auto& s : slow) {
      int64_t start = s["start_ns"].get<int64_t>();
      int64_t end = start + s["duration_ns"].get<int64_t>();
      if (s["tid"] == k["tid"] && s["target"] == target &&
          start <= k["start_ns"].get<int64_t>() &&
          end >= k["end_ns"].get<int64_t>())
        m = &s;
    }
    return m;
  };
  size_t stalled = 0;
  for (const auto& k : presses) {
    if (!k["stalled"].get<bool>()) continue;
    ++stalled;
    int64_t handled = k["end_ns"].get<int64_t>() - k["start_ns"].get<int64_t>();
    // The GDK event, and in it the Python handler connect() gave GTK.
    const nlohmann::json* e = around(k, "GTK event GDK_KEY_PRESS");
    ASSERT_NE(e, nullptr) << k.dump() << "\n" << slow.dump();
    EXPECT_LE((*e)["duration_ns"].get<int64_t>() - handled, tol)
        << e->dump() << "\n"
        << k.dump();
    const nlohmann::json* h = around(k, handler);
    ASSERT_NE(h, nullptr) << handler << "\n" << k.dump() << "\n" << slow.dump();
    EXPECT_GT((*h)["depth"].get<int>(), (*e)["depth"].get<int>()) << h->dump();
    EXPECT_LE((*h)["duration_ns"].get<int64_t>() - handled, tol)
        << h->dump() << "\n"
        << k.dump();
  }
  EXPECT_EQ(stalled, 2u);
  // Nothing else slow, but GDK's event source (a source kind of its own,
  // found in the process's memory) around each stalled handler.
  size_t events = 0, handlers = 0;
  for (const auto& s : slow) {
    const std::string target = s["target"];
    if (target.rfind("GTK event ", 0) == 0) {
      ++events;
      continue;
    }
    if (target == handler) {
      ++handlers;
      continue;
    }
    EXPECT_EQ(target.rfind("GLib custom name=GDK X11 Event source", 0), 0u)
        << s.dump();
    bool wraps = false;
    for (const auto& k : presses)
      wraps = wraps ||
              (k["stalled"].get<bool>() &&
               s["start_ns"].get<int64_t>() <= k["start_ns"].get<int64_t>() &&
               s["start_ns"].get<int64_t>() + s["duration_ns"].get<int64_t>() >=
                   k["end_ns"].get<int64_t>());
    EXPECT_TRUE(wraps) << s.dump();
  }
  EXPECT_EQ(events, stalled) << slow.dump();
  EXPECT_EQ(handlers, stalled) << slow.dump();
}

// How a GTK process's input is asked for: `-p PID --input`, `-p PID` alone
// (the gtk3 profile brings its display connections) or `--input-peer
// auto`. All three trace the same X11 connection the same way.
struct InputMode {
  const char* name;
  std::vector<std::string> args;
};

class GtkInput : public ::testing::TestWithParam<InputMode> {};

using TypeTime = std::pair<std::string, uint32_t>;  // "key_press", server ms

// The app's handlers of presses and releases, by type and server time.
std::map<TypeTime, nlohmann::json> handled_keys(const std::string& log) {
  std::map<TypeTime, nlohmann::json> out;
  for (const auto& k : read_jsonl(log)) {
    if (k["event"] == "key") out[{"key_press", k["time"]}] = k;
    if (k["event"] == "key_release") out[{"key_release", k["time"]}] = k;
  }
  return out;
}

// One X11_READLOG file's key lines by type and time: "read_ns" or
// "write_ns" of each (Xvfb writes each key once, to the app alone).
std::map<TypeTime, std::vector<int64_t>> logged_at(const std::string& path,
                                                   const char* field) {
  std::map<TypeTime, std::vector<int64_t>> out;
  for (const auto& r : read_jsonl(path))
    if (r.contains(field))
      out[{r["type"], r["time"]}].push_back(r[field].get<int64_t>());
  return out;
}

// Keys typed 60 ms apart (xdotool releases each 30 ms after its press)
// into the window, whose press handler of b is busy 120 ms: b's release
// and the next press arrive during the stall and are read in one batch
// after it. Ground truth: the handlers' own log (start, end and the X
// server time of each press and release) and LD_PRELOAD logs of the app's
// reads and of Xvfb's writes (tests/programs/x11_readlog.c frames the
// streams itself). Every press and release is one event, sent and
// received when those logs say, consumed within [0, 1 ms] after its own
// handler's end; one that arrived during a stall is blamed on it (a
// release that waited behind it too), a stalled press on its own handler;
// nothing else is blamed.
TEST_P(GtkInput, EveryKeyReceivedConsumedByItsOwnHandlerAndBlamedRight) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GTK();
  TempDir dir;
  const std::string preload =
      "LD_PRELOAD=" + std::string(LT_TEST_PROGRAMS_DIR) + "/x11_readlog.so";
  const std::string writes = dir.file("writes.jsonl");
  Display display(dir, {"X11_READLOG=" + writes, preload});
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  const std::string reads = dir.file("reads.jsonl");
  std::vector<std::string> args = GetParam().args;
  args.insert(args.end(), {"--slow-input", "20ms"});
  KeysRun typed;
  ASSERT_NO_FATAL_FAILURE(
      type_keys(dir, display, {"X11_READLOG=" + reads, preload}, "120", args,
                &typed, {"a", "b", "a", "c", "b", "a", "b", "q"}, 60));
  const int64_t tol = typed.steal;
  // Found by the profile, printed after the probes.
  if (GetParam().args != std::vector<std::string>{"--input-peer", "auto"}) {
    EXPECT_NE(typed.err.find("looptrace:   input X11: socket "),
              std::string::npos)
        << typed.err;
  }

  const auto keys = handled_keys(typed.log);
  ASSERT_EQ(keys.size(), 16u) << read_file(typed.log);
  const auto read_at = logged_at(reads, "read_ns");
  const auto written_at = logged_at(writes, "write_ns");
  nlohmann::json report = read_json(typed.json);
  std::map<TypeTime, nlohmann::json> got;
  for (const auto& e : report["input_events"]) {
    const std::string type = e["type"];
    EXPECT_TRUE(type == "key_press" || type == "key_release") << e.dump();
    EXPECT_TRUE(got.emplace(TypeTime{type, e["server_time_ms"]}, e).second)
        << "twice: " << e.dump();
  }
  EXPECT_EQ(got.size(), keys.size()) << report["input_events"].dump();
  // The stalled handlers, by the app's clock.
  std::vector<std::pair<int64_t, int64_t>> stalls;
  for (const auto& [tt, k] : keys)
    if (k["stalled"].get<bool>())
      stalls.emplace_back(k["start_ns"].get<int64_t>(),
                          k["end_ns"].get<int64_t>());
  ASSERT_EQ(stalls.size(), 3u);
  size_t in_stall_presses = 0, in_stall_releases = 0, batches = 0;
  for (const auto& [tt, k] : keys) {
    auto it = got.find(tt);
    if (it == got.end()) {
      ADD_FAILURE() << "key not reported: " << tt.first << " " << k.dump();
      continue;
    }
    const nlohmann::json& e = it->second;
    auto r = read_at.find(tt);
    ASSERT_TRUE(r != read_at.end() && r->second.size() == 1)
        << "the read log: " << k.dump();
    const int64_t read_ns = r->second[0];
    // Received: when the app's read returned (the 0.5 ms).
    EXPECT_LE(std::llabs(diff(e["received_ns"], read_ns)), 500'000 + tol)
        << e.dump();
    // Sent: when Xvfb wrote it to the app.
    auto w = written_at.find(tt);
    ASSERT_TRUE(w != written_at.end() && w->second.size() == 1)
        << "Xvfb's write log: " << k.dump();
    ASSERT_TRUE(e["sent_ns"].is_number()) << e.dump();
    EXPECT_LE(std::llabs(e["sent_ns"].get<int64_t>() - w->second[0]),
              500'000 + tol)
        << e.dump();
    // Consumed: at the end of its own handler, never before (1 ms).
    const int64_t end = k["end_ns"], start = k["start_ns"];
    ASSERT_TRUE(e["finished_ns"].is_number()) << e.dump() << "\n" << k.dump();
    const int64_t fin = e["finished_ns"];
    EXPECT_GE(fin, end) << e.dump() << "\n" << k.dump();
    EXPECT_LE(fin - end, 1'000'000 + tol) << e.dump() << "\n" << k.dump();
    EXPECT_LE(e["handling_start_ns"].get<int64_t>(), start) << e.dump();
    EXPECT_FALSE(e["ambiguous"].get<bool>()) << e.dump();
    // Blamed right: a stalled press on its own handler, a key that
    // arrived during a stall on that stall.
    if (k["stalled"].get<bool>()) {
      ASSERT_TRUE(e["blame"].is_object()) << e.dump();
      EXPECT_EQ(e["blame"]["kind"], "handled_slowly") << e.dump();
      EXPECT_EQ(e["blame"]["target"], key_handler_target()) << e.dump();
      continue;
    }
    // Written by Xvfb during a stall, at least --slow-input (20 ms, and
    // 1 ms to spare) before its end: it waited that long.
    const int64_t sent = w->second[0];
    for (const auto& [s0, s1] : stalls) {
      if (sent <= s0 || s1 - sent < 21'000'000) continue;
      ++(tt.first == "key_press" ? in_stall_presses : in_stall_releases);
      // Read in one batch with another key (b's release and the next
      // press).
      for (const auto& [tt2, r2] : read_at)
        if (tt2 != tt && r2.size() == 1 && r2[0] == read_ns) ++batches;
      ASSERT_TRUE(e["blame"].is_object()) << e.dump();
      EXPECT_EQ(e["blame"]["kind"], "waited_behind") << e.dump();
      EXPECT_EQ(e["blame"]["target"], key_handler_target()) << e.dump();
      EXPECT_LE(std::llabs(e["blame"]["start_ns"].get<int64_t>() - s0),
                1'000'000 + tol)
          << e.dump();
      // In the socket from Xvfb's write until the stall ended.
      EXPECT_GE(e["dispatch_latency_dur"].get<int64_t>(),
                s1 - sent - 1'000'000 - tol)
          << e.dump();
    }
  }
  EXPECT_GE(in_stall_releases, 1u) << read_file(typed.log);
  EXPECT_GE(in_stall_presses, 1u) << read_file(typed.log);
  EXPECT_GE(batches, 1u) << read_file(reads);
  // No false blame: every event blamed on a dispatch waited behind or was
  // handled in a stalled handler; one blamed on nothing named (a loaded
  // machine's delays) was slow by the app's own clock: its handler ended
  // at least --slow-input after Xvfb wrote it.
  for (const auto& e : report["input_events"]) {
    if (!e["blame"].is_object()) continue;
    if (e["blame"]["kind"] == "unknown") {
      const TypeTime tt{e["type"], e["server_time_ms"]};
      auto k = keys.find(tt);
      auto w = written_at.find(tt);
      ASSERT_TRUE(k != keys.end() && w != written_at.end()) << e.dump();
      EXPECT_GE(k->second["end_ns"].get<int64_t>() - w->second[0],
                20'000'000 - 1'000'000 - tol)
          << "blamed, not slow: " << e.dump();
      continue;
    }
    const int64_t from = e["blame"]["arrival_ns"],
                  to = e["handling_start_ns"].is_null()
                           ? from
                           : e["handling_start_ns"].get<int64_t>();
    bool stalled = false;
    for (const auto& [s0, s1] : stalls)
      stalled = stalled || (s0 < e["finished_ns"].get<int64_t>() && s1 > from &&
                            s0 <= std::max(to, from) + 1'000'000);
    EXPECT_TRUE(stalled) << "blamed with no stall: " << e.dump();
  }
  ASSERT_EQ(report["input_channels"].size(), 1u);
  const auto& c = report["input_channels"][0];
  EXPECT_EQ(c["layout"], "x11");
  EXPECT_GT(c["non_input"].get<uint64_t>(), 0u) << c.dump();
  EXPECT_EQ(c["keys"].get<uint64_t>(), 16u) << c.dump();
  EXPECT_EQ(c["ambiguous"].get<uint64_t>(), 0u) << c.dump();
  EXPECT_EQ(report["input_summary"]["x11_framing_lost"], 0) << c.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Gtk, GtkInput,
    ::testing::Values(InputMode{"input", {"--input"}},
                      InputMode{"no_option", {}},
                      InputMode{"peer_auto", {"--input-peer", "auto"}}),
    [](const ::testing::TestParamInfo<InputMode>& i) { return i.param.name; });

// Input to frame: the window draws the last key pressed (gtk_keys.py
// --frames), traced with -p PID and no option (the gtk3 profile's X11
// input, the glib profile's frames). Each key's frame_end_ns is the end of
// the first frame its thread started after consuming it: the app's own
// after-paint of the first paint cycle after its handler, within the
// issue's 1 ms; a key with no frame after it (the app logged none) has
// none, not a guess. The stages are that end less consumption and less
// the event's time.
TEST(GtkEvents, EachKeysFrameEndIsTheAppsNextFrame) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GTK();
  TempDir dir;
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  KeysRun r;
  ASSERT_NO_FATAL_FAILURE(type_keys(dir, display, {}, "60", {}, &r,
                                    {"a", "b", "a", "c", "b", "q"}, 150,
                                    {"--frames"}));
  const int64_t tol = kToleranceNs + r.steal;
  nlohmann::json report = read_json(r.json);
  ASSERT_TRUE(report.contains("frames")) << r.err;
  const auto keys = handled_keys(r.log);
  ASSERT_EQ(keys.size(), 12u) << read_file(r.log);
  std::map<TypeTime, nlohmann::json> got;
  for (const auto& e : report["input_events"])
    if (e.contains("server_time_ms")) got[{e["type"], e["server_time_ms"]}] = e;
  size_t with_frame = 0, without = 0;
  for (const auto& [tt, k] : keys) {
    auto it = got.find(tt);
    if (it == got.end()) {
      ADD_FAILURE() << "key not reported: " << k.dump();
      continue;
    }
    const nlohmann::json& e = it->second;
    ASSERT_TRUE(e.contains("frame_end_ns")) << e.dump();
    // Every press changed what is drawn: a frame followed it.
    if (tt.first == "key_press") {
      EXPECT_FALSE(k["frame_end_ns"].is_null()) << k.dump();
    }
    if (k["frame_end_ns"].is_null()) {
      ++without;
      EXPECT_TRUE(e["frame_end_ns"].is_null()) << e.dump() << "\n" << k.dump();
      EXPECT_TRUE(e["consume_to_frame_dur"].is_null()) << e.dump();
      EXPECT_TRUE(e["total_to_frame_dur"].is_null()) << e.dump();
      continue;
    }
    ++with_frame;
    ASSERT_FALSE(e["frame_end_ns"].is_null()) << e.dump() << "\n" << k.dump();
    const int64_t end = e["frame_end_ns"].get<int64_t>();
    EXPECT_LE(std::llabs(end - k["frame_end_ns"].get<int64_t>()), tol)
        << e.dump() << "\n"
        << k.dump();
    EXPECT_EQ(e["consume_to_frame_dur"].get<int64_t>(),
              end - e["finished_ns"].get<int64_t>())
        << e.dump();
    EXPECT_EQ(e["total_to_frame_dur"].get<int64_t>(),
              end - e["event_time_ns"].get<int64_t>())
        << e.dump();
  }
  EXPECT_GE(with_frame, 6u);
  // The channel's stage table has them, one per key with a frame.
  const nlohmann::json* chan = nullptr;
  for (const auto& c : report["input_channels"])
    if (!got.empty() && c["channel"] == got.begin()->second["channel"])
      chan = &c;
  ASSERT_NE(chan, nullptr) << report["input_channels"].dump();
  const auto& st = (*chan)["stages"];
  ASSERT_TRUE(st["total_to_frame_dur"].is_object()) << st.dump();
  EXPECT_EQ(st["total_to_frame_dur"]["count"].get<size_t>(), with_frame)
      << st.dump() << " (" << without << " without)";
}

// `monitor --dump-if 'input.handling_latency_dur > 100ms'` on a GTK 3
// window (-p: the gtk3 profile with its X11 connection): keys typed 300 ms
// apart, b's press handler busy for 150 ms, the app lingering 3 s after
// q. Ground truth, the app's own
// log: the handlers longer than 100 ms. Each gives one dump (--dump-every
// 0), named by the trigger, whose replay lists that very key press; the
// quick keys give none.
TEST(GtkMonitor, AnInputTriggerDumpsTheKeyItsHandlerHeld) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_GTK();
  TempDir dir;
  const std::string dumps = dir.file("dumps");
  ASSERT_EQ(mkdir(dumps.c_str(), 0700), 0);
  Display display(dir);
  ASSERT_FALSE(display.name().empty()) << read_file(dir.file("xvfb.err"));
  const std::string log = dir.file("gtk.jsonl");
  Process app(
      display.env({"/usr/bin/python3", tests_dir() + "/programs/gtk_keys.py",
                   "--stall-keys", "b", "--stall-ms", "150", "--linger", "3000",
                   "--log", log}),
      dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "gtk_keys: ready", 15000))
      << read_file(dir.file("app.err"));
  const std::string ready = read_file(dir.file("app.err"));
  const size_t at = ready.find("window=") + 7;
  const std::string window = ready.substr(at, ready.find('\n', at) - at);
  Process mon({looptrace_bin(), "monitor", "-p", std::to_string(app.pid()),
               "--dump-if", "input.handling_latency_dur > 100ms", "--dump-dir",
               dumps, "--dump-every", "0"},
              dir.file("mon.out"), dir.file("mon.err"));
  ASSERT_TRUE(
      wait_for_text(dir.file("mon.err"), "SIGINT or SIGTERM to stop", 20000))
      << read_file(dir.file("mon.err"));
  ASSERT_EQ(
      run(display.env({"/usr/bin/xdotool", "windowfocus", "--sync", window}))
          .exit_code,
      0);
  RunResult typed = run(display.env(
      {"/usr/bin/xdotool", "key", "--delay", "300", "a", "b", "a", "q"}));
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  ASSERT_EQ(app.wait(15000), 0) << read_file(dir.file("app.err"));
  // An event is final 2 s past its consumption (records come a little
  // out of order): the app lingers 3 s after q, and exits; the monitor
  // has seen b's press final before it forgets the process.
  mon.signal(SIGINT);
  ASSERT_EQ(mon.wait(20000), 0) << read_file(dir.file("mon.err"));
  const std::string mon_log = read_file(dir.file("mon.err"));

  std::vector<nlohmann::json> held;
  for (const auto& k : read_jsonl(log))
    if (k["event"] == "key" &&
        k["end_ns"].get<int64_t>() - k["start_ns"].get<int64_t>() > 100'000'000)
      held.push_back(k);
  ASSERT_EQ(held.size(), 1u) << read_file(log);
  std::vector<std::string> lt;
  for (const auto& e : std::filesystem::directory_iterator(dumps))
    if (e.path().extension() == ".lt") lt.push_back(e.path().string());
  ASSERT_EQ(lt.size(), held.size()) << mon_log;
  EXPECT_NE(mon_log.find("): input.handling_latency_dur 1"), std::string::npos)
      << mon_log;
  RunResult r =
      run({looptrace_bin(), "report", lt[0], "--json", dir.file("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("monitor dump: input.handling_latency_dur "),
            std::string::npos)
      << r.out.substr(0, 400);
  bool found = false;
  const nlohmann::json dump = read_json(dir.file("r.json"));
  for (const auto& e : dump["input_events"])
    found = found || (e["type"] == "key_press" &&
                      e["server_time_ms"] == held[0]["time"]);
  EXPECT_TRUE(found) << "the held key press (server time " << held[0]["time"]
                     << ") is not in the dump";
}

}  // namespace
}  // namespace lt_test
