// Wayland input on a pair built from libwayland itself
// (tests/programs/wl_pair.c): a server sending wl_keyboard.key and
// wl_pointer.button events to a client loop, no compositor with input
// injection being available here. Ground truth: the server's log of each
// event's send, the client's log of its reads and of each handler run, all
// CLOCK_MONOTONIC; never looptrace's own output.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

std::string wl_pair() { return std::string(LT_TEST_PROGRAMS_DIR) + "/wl_pair"; }

// A probe per handler: the event's state (arg5: 1 pressed, 0 released) is
// its type, its time (arg3) the server's.
std::string profile_json(const std::string& bin) {
  auto probe = [&](const char* sym, const char* label, const char* press,
                   const char* release) {
    return fmt::format(
        R"({{"role": "dispatch", "binary": "{}", "symbol": "{}", "label": "{}",
  "keys": [{{"name": "state", "expr": "arg5", "format": "int"}},
           {{"name": "time", "expr": "arg3", "format": "int"}}],
  "input": {{"type": "state", "time": "time",
             "kinds": {{"1": "{}", "0": "{}"}}}}}})",
        bin, sym, label, press, release);
  };
  return fmt::format(
      R"({{"name": "wl_pair", "description": "the Wayland test pair",
  "probes": [{}, {}]}})",
      probe("lt_wl_on_key", "key", "key_press", "key_release"),
      probe("lt_wl_on_button", "button", "button_press", "button_release"));
}

// The client set up its keyboard before tracing (looptrace reads it from
// the client's memory); the server offers a pointer once tracing runs, and
// the client's request for it is seen (the kernel's framing learns it).
// Key 48's press is handled in 200 ms: the events sent meanwhile wait in
// the socket. Every input event is reported once, with its type and time;
// sent when the server's log says (0.5 ms), received within the client's
// read (0.5 ms), consumed at the end of its own handler (1 ms, never
// before); those sent during a stall wait at least its rest and are blamed
// on it; nothing else is blamed; non-input messages are counted.
TEST(WaylandInput, KeysAndButtonsDecodedEventByEvent) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_INSTALLED(access(wl_pair().c_str(), X_OK) == 0,
                       "libwayland-dev (for wl_pair)");
  TempDir dir;
  const std::string env = "XDG_RUNTIME_DIR=" + dir.path();
  const std::string slog = dir.file("server.jsonl"),
                    clog = dir.file("client.jsonl"),
                    json = dir.file("report.json"),
                    prof = dir.file("wl_pair.json");
  write_file(prof, profile_json(wl_pair()));
  Process server({"/usr/bin/env", env, wl_pair(), "server", "wayland-lt", slog},
                 dir.file("server.out"), dir.file("server.err"));
  ASSERT_TRUE(wait_for_text(dir.file("server.err"), "wl_pair: listening", 5000))
      << read_file(dir.file("server.err"));
  Process client({"/usr/bin/env", env, wl_pair(), "client", "wayland-lt", clog,
                  "48", "200"},
                 dir.file("client.out"), dir.file("client.err"));
  ASSERT_TRUE(wait_for_text(dir.file("client.err"), "wl_pair: ready", 5000))
      << read_file(dir.file("client.err"));
  const int64_t steal_before = steal_ns();
  Process lt(without_tracefs({looptrace_bin(), "record", "-p",
                              std::to_string(client.pid()), "--profile", prof,
                              "--slow", "20ms", "--slow-input", "20ms",
                              "--json", json}),
             dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 15000))
      << read_file(dir.file("lt.err"));
  server.signal(SIGUSR1);
  ASSERT_EQ(client.wait(15000), 0) << read_file(dir.file("client.err"));
  ASSERT_EQ(lt.wait(15000), 0) << read_file(dir.file("lt.err"));
  const int64_t tol = steal_ns() - steal_before;
  const std::string err = read_file(dir.file("lt.err"));
  EXPECT_NE(err.find("looptrace:   input Wayland: socket "), std::string::npos)
      << err;

  // The server's sends and the client's handler runs, by (type, time).
  using Key = std::pair<std::string, uint32_t>;
  std::map<Key, int64_t> sent;
  for (const auto& s : events(read_jsonl(slog), "send"))
    sent[{s["type"], s["time"]}] = s["send_ns"];
  std::vector<nlohmann::json> log = read_jsonl(clog);
  std::map<Key, nlohmann::json> handled;
  std::vector<std::pair<int64_t, int64_t>> stalls, reads;
  for (const auto& h : log) {
    if (h["event"] == "read") reads.emplace_back(h["before_ns"], h["after_ns"]);
    if (h["event"] != "key" && h["event"] != "button") continue;
    const std::string type =
        std::string(h["event"]) + (h["state"] == 1 ? "_press" : "_release");
    handled[{type, h["time"]}] = h;
    if (h["stalled"].get<bool>())
      stalls.emplace_back(h["start_ns"], h["end_ns"]);
  }
  ASSERT_EQ(sent.size(), 15u) << read_file(slog);
  ASSERT_EQ(handled.size(), sent.size()) << read_file(clog);
  ASSERT_EQ(stalls.size(), 2u);

  nlohmann::json report = read_json(json);
  std::map<Key, nlohmann::json> got;
  for (const auto& e : report["input_events"])
    EXPECT_TRUE(got.emplace(Key{e["type"], e["server_time_ms"]}, e).second)
        << "twice: " << e.dump();
  EXPECT_EQ(got.size(), sent.size()) << report["input_events"].dump();
  size_t in_stall = 0, buttons = 0;
  for (const auto& [key, h] : handled) {
    auto it = got.find(key);
    if (it == got.end()) {
      ADD_FAILURE() << "not reported: " << h.dump();
      continue;
    }
    const nlohmann::json& e = it->second;
    if (key.first.rfind("button", 0) == 0) ++buttons;
    // Sent: the server's write, just after its log line.
    ASSERT_TRUE(e["sent_ns"].is_number()) << e.dump();
    const int64_t s = sent[key];
    EXPECT_LE(std::llabs(e["sent_ns"].get<int64_t>() - s), 500'000 + tol)
        << e.dump();
    // Received: inside the client's read that brought it, the last one
    // that ended before its handler began.
    const int64_t start = h["start_ns"], end = h["end_ns"];
    std::pair<int64_t, int64_t> read{0, 0};
    for (const auto& r : reads)
      if (r.second <= start) read = r;
    ASSERT_NE(read.second, 0) << h.dump();
    const int64_t rcv = e["received_ns"];
    EXPECT_GE(rcv, read.first - 500'000 - tol) << e.dump();
    EXPECT_LE(rcv, read.second + 500'000 + tol) << e.dump();
    // Consumed: at the end of its own handler, never before.
    const int64_t fin = e["finished_ns"];
    EXPECT_GE(fin, end) << e.dump() << "\n" << h.dump();
    EXPECT_LE(fin - end, 1'000'000 + tol) << e.dump() << "\n" << h.dump();
    EXPECT_LE(e["handling_start_ns"].get<int64_t>(), start) << e.dump();
    // Sent during a stall: in the socket until the stall ended, blamed on
    // it when that made it slow (--slow-input 20ms).
    for (const auto& [s0, s1] : stalls) {
      if (s <= s0 || s >= s1) continue;
      ++in_stall;
      EXPECT_GE(e["dispatch_latency_dur"].get<int64_t>(), s1 - s - 1'000'000)
          << e.dump();
      if (s1 - s < 25'000'000) continue;
      ASSERT_TRUE(e["blame"].is_object()) << e.dump();
      EXPECT_EQ(e["blame"]["kind"], "waited_behind") << e.dump();
      EXPECT_EQ(e["blame"]["arrival_ns"], e["sent_ns"]) << e.dump();
      EXPECT_LE(std::llabs(e["blame"]["start_ns"].get<int64_t>() - s0),
                1'000'000 + tol)
          << e.dump();
    }
  }
  EXPECT_EQ(buttons, 2u);  // the pointer made after tracing began
  EXPECT_GE(in_stall, 3u) << read_file(clog);
  // No false blame: a blamed event was sent during a stall or handled in
  // one.
  for (const auto& e : report["input_events"]) {
    if (!e["blame"].is_object()) continue;
    const int64_t from = e["sent_ns"], fin = e["finished_ns"];
    bool stalled = false;
    for (const auto& [s0, s1] : stalls)
      stalled = stalled || (s0 < fin && s1 > from);
    EXPECT_TRUE(stalled) << "blamed with no stall: " << e.dump();
  }
  ASSERT_EQ(report["input_channels"].size(), 1u);
  const auto& c = report["input_channels"][0];
  EXPECT_EQ(c["layout"], "wayland") << c.dump();
  // Each press came with a modifiers event, and the seat's capabilities.
  EXPECT_GE(c["non_input"].get<uint64_t>(), 9u) << c.dump();
  EXPECT_EQ(report["input_summary"]["wayland_framing_lost"], 0);
  EXPECT_EQ(report["input_summary"]["wayland_unframed_reads"], 0);
}

}  // namespace
}  // namespace lt_test
