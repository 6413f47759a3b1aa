// Input-to-consumption latency against the reference app's own log: its
// dispatcher process logs when it sent each event and received each
// FINISHED, the app when it received each event and sent FINISHED.
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

constexpr int64_t kToleranceNs = 200'000;  // the 0.2 ms

// One event as the two processes logged it.
struct Truth {
  nlohmann::json send, recv, finish, finish_recv;
};

std::map<uint32_t, Truth> truth_by_seq(const std::vector<nlohmann::json>& log) {
  std::map<uint32_t, Truth> out;
  for (const auto& l : log) {
    const std::string ev = l.value("event", "");
    if (!l.contains("seq")) continue;
    Truth& t = out[l["seq"].get<uint32_t>()];
    if (ev == "input_send") t.send = l;
    if (ev == "input_recv") t.recv = l;
    if (ev == "input_finish") t.finish = l;
    if (ev == "input_finish_recv") t.finish_recv = l;
  }
  return out;
}

struct Traced {
  nlohmann::json report;
  std::vector<nlohmann::json> log;
  int64_t tol = kToleranceNs;
  std::string channel;  // "socket:[app inode]"
};

// `mode` is an --input-mode, or "syscall_plain": syscall mode through the
// entry program for kernels without bpf_rdonly_cast (before 6.2), or
// "syscall_tracepoint": through the per-call syscall tracepoints instead of
// the raw ones (looptrace mounts tracefs for itself where it is not).
Traced run_refapp(const TempDir& dir, std::string mode,
                  const std::vector<std::string>& app_args) {
  Traced out;
  const bool plain = mode == "syscall_plain",
             tracepoint = mode == "syscall_tracepoint";
  if (plain || tracepoint) mode = "syscall";
  const std::string log = dir.file("truth-" + mode + ".jsonl");
  const std::string json = dir.file("report-" + mode + ".json");
  std::vector<std::string> argv = {
      looptrace_bin(), "record", "--profile", "refapp", "--input",
      "--input-mode",  mode,     "--slow",    "20ms",   "--slow-input",
      "50ms",          "--json", json,        "-q",     "--",
      refapp_bin(),    "--log",  log};
  argv.insert(argv.end(), app_args.begin(), app_args.end());
  argv.insert(argv.begin() + 1, {"--debug", "loader"});
  int64_t steal_before = steal_ns();
  if (plain) setenv("LOOPTRACE_NO_TYPED_LOADS", "1", 1);
  if (tracepoint) setenv("LOOPTRACE_SYSCALL_HOOK", "tracepoint", 1);
  // Where nothing mounted tracefs, as on a fresh machine.
  RunResult r = run(without_tracefs(argv));
  unsetenv("LOOPTRACE_NO_TYPED_LOADS");
  unsetenv("LOOPTRACE_SYSCALL_HOOK");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string hook = mode == "uprobe" ? "uprobes"
                           : tracepoint     ? "syscall tracepoints"
                                            : "raw syscall tracepoints";
  EXPECT_NE(
      r.err.find(fmt::format("input entry programs: {}, {}", hook,
                             plain ? "bpf_probe_read_kernel" : "typed loads")),
      std::string::npos)
      << r.err;
  // A clock read in the app trails (or precedes) the probe by at most the
  // time the host stole from that vCPU meanwhile.
  out.tol = kToleranceNs + (steal_ns() - steal_before);
  out.log = read_jsonl(log);
  out.report = read_json(json);
  auto chan = events(out.log, "input_channel");
  EXPECT_EQ(chan.size(), 1u);
  if (!chan.empty())
    out.channel =
        "socket:[" + std::to_string(chan[0]["app_inode"].get<uint64_t>()) + "]";
  return out;
}

// Every logged event is reported once, none invented, each timestamp and
// stage within tolerance of the logs. Returns the reported events by seq.
// System-wide, other processes' channels may show up: `other_channels_ok`.
std::map<uint32_t, nlohmann::json> check_against_truth(
    const Traced& run, bool other_channels_ok = false) {
  std::map<uint32_t, Truth> truth = truth_by_seq(run.log);
  std::map<uint32_t, nlohmann::json> got;
  for (const auto& e : run.report["input_events"]) {
    if (other_channels_ok && e["channel"] != run.channel) continue;
    EXPECT_EQ(e["channel"], run.channel) << e.dump();
    uint32_t seq = e["seq"];
    EXPECT_TRUE(got.emplace(seq, e).second) << "seq twice: " << seq;
    EXPECT_TRUE(truth.count(seq)) << "invented: " << e.dump();
  }
  EXPECT_EQ(got.size(), truth.size());
  auto ts = [](const nlohmann::json& j, const char* k) {
    return j.is_object() && j.contains(k) ? j[k].get<uint64_t>() : 0;
  };
  size_t checked = 0;
  for (const auto& [seq, t] : truth) {
    auto it = got.find(seq);
    if (it == got.end()) {
      ADD_FAILURE() << "missing seq " << seq << ": " << t.send.dump();
      continue;
    }
    const nlohmann::json& e = it->second;
    if (!t.send.is_object() || !t.recv.is_object() || !t.finish.is_object() ||
        !t.finish_recv.is_object()) {
      ADD_FAILURE() << "the app's log lacks seq " << seq;
      continue;
    }
    // Read from the message bytes: exact.
    EXPECT_EQ(e["event_time_ns"], t.send["event_time_ns"]);
    EXPECT_EQ(e["type"], t.send["type"]);
    EXPECT_EQ(e["consume_time_ns"], t.finish["consume_time_ns"]);
    EXPECT_EQ(e["pid"], t.recv["pid"]);
    EXPECT_EQ(e["tid"], t.recv["tid"]);
    const uint64_t sent = ts(t.send, "sent_ns"),
                   recv = ts(t.recv, "received_ns"),
                   fin = ts(t.finish, "finished_ns"),
                   fin_recv = ts(t.finish_recv, "finish_received_ns"),
                   start = ts(t.finish, "dispatch_start_ns");
    // How long the logging thread waited for a CPU between each clock read
    // and its syscall (the app's schedstat): by so much the log's own
    // timestamp may be off.
    auto runq = [](const nlohmann::json& j, const char* k) -> int64_t {
      return j.is_object() && j.contains(k) ? j[k].get<int64_t>() : 0;
    };
    const int64_t q_sent = runq(t.send, "sent_runq_ns"),
                  q_recv = runq(t.recv, "received_runq_ns"),
                  q_fin = runq(t.finish, "finished_runq_ns"),
                  q_fin_recv = runq(t.finish_recv, "finish_received_runq_ns"),
                  q_start = runq(t.finish, "dispatch_start_runq_ns");
    struct {
      const char* key;
      int64_t want;
      int64_t runq;
    } checks[] = {
        {"sent_ns", static_cast<int64_t>(sent), q_sent},
        {"received_ns", static_cast<int64_t>(recv), q_recv},
        {"finished_ns", static_cast<int64_t>(fin), q_fin},
        {"finish_received_ns", static_cast<int64_t>(fin_recv), q_fin_recv},
        {"handling_start_ns", static_cast<int64_t>(start), q_start},
        {"dispatch_latency_dur", diff(recv, sent), q_recv + q_sent},
        {"handling_latency_dur", diff(fin, recv), q_fin + q_recv},
        {"ack_latency_dur", diff(fin_recv, fin), q_fin_recv + q_fin},
        {"total_latency_dur", diff(fin_recv, sent), q_fin_recv + q_sent},
        {"wait_before_handling_dur", diff(start, recv), q_recv + q_start},
        {"age_at_dispatch_dur",
         diff(sent, t.send["event_time_ns"].get<uint64_t>()), q_sent},
    };
    for (const auto& c : checks) {
      if (e[c.key].is_null()) {
        ADD_FAILURE() << c.key << " missing: " << e.dump();
        continue;
      }
      EXPECT_LE(std::llabs(e[c.key].get<int64_t>() - c.want), run.tol + c.runq)
          << "seq " << seq << " " << c.key << ": looptrace "
          << e[c.key].get<int64_t>() << " app " << c.want << " (the app waited "
          << c.runq << " ns for a CPU meanwhile)";
    }
    ++checked;
  }
  EXPECT_EQ(checked, truth.size());
  const auto& lost = run.report["lost"];
  EXPECT_EQ(lost.value("ringbuf_full", 0), 0) << lost.dump();
  return got;
}

class RefappInput : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { LT_REQUIRE_BPF(); }
  TempDir dir_;
};

TEST_P(RefappInput, TenEventsPerSecondEveryStage) {
  Traced r = run_refapp(dir_, GetParam(),
                        {"--rate", "100", "--duration", "2500", "--input-rate",
                         "10", "--input-type", "mixed"});
  auto got = check_against_truth(r);
  EXPECT_GE(got.size(), 15u);
  ASSERT_EQ(r.report["input_channels"].size(), 1u);
  const auto& c = r.report["input_channels"][0];
  EXPECT_EQ(c["events"].get<size_t>(), got.size());
  EXPECT_EQ(c["layout"], "current");
  EXPECT_EQ(c["mode"], "finished");
}

TEST_P(RefappInput, AThousandEventsPerSecondAllMatched) {
  Traced r = run_refapp(dir_, GetParam(),
                        {"--rate", "100", "--duration", "2500", "--input-rate",
                         "1000", "--input-type", "motion"});
  auto got = check_against_truth(r);
  EXPECT_GE(got.size(), 1800u);
}

TEST_P(RefappInput, EventDuringASlowDispatchIsBlamedOnIt) {
  Traced r = run_refapp(dir_, GetParam(),
                        {"--rate", "50", "--duration", "1600", "--stall",
                         "sleep:200@700", "--input-tap", "750"});
  auto got = check_against_truth(r);
  ASSERT_EQ(got.size(), 1u);
  auto stalls = events(r.log, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const nlohmann::json& e = got.begin()->second;
  ASSERT_TRUE(e["blame"].is_object()) << e.dump();
  const auto& b = e["blame"];
  EXPECT_EQ(b["kind"], "waited_behind");
  const std::string target = b["target"];
  EXPECT_NE(target.find("refapp::StallHandler"), std::string::npos) << target;
  EXPECT_LE(std::llabs(diff(b["start_ns"], stalls[0]["start_ns"])), r.tol);
  EXPECT_LE(std::llabs(diff(b["duration_ns"], stalls[0]["duration_ns"])),
            r.tol + 500'000);
  EXPECT_TRUE(b["dispatches"][0]["running_at_arrival"].get<bool>());
}

INSTANTIATE_TEST_SUITE_P(Modes, RefappInput,
                         ::testing::Values("syscall", "uprobe", "syscall_plain",
                                           "syscall_tracepoint"),
                         [](const auto& info) { return info.param; });

// Heavy socket traffic of an unrelated process, traced system-wide: the
// kernel filter lets none of it through (UDP is not a channel; the
// SEQPACKET payloads are not InputMessages), so the ring buffer carries the
// app's messages only.
TEST(InputFilter, UnrelatedFloodNeitherFloodsNorShowsUp) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string json = dir.file("report.json");
  Process flood({"python3", tests_dir() + "/programs/socket_flood.py", "4"},
                dir.file("flood.out"), dir.file("flood.err"));
  Process tracer({looptrace_bin(), "record", "--profile", "refapp", "--input",
                  "-d", "30s", "--json", json},
                 dir.file("lt.out"), dir.file("lt.err"));
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "tracing", 10000))
      << read_file(dir.file("lt.err"));
  usleep(300'000);
  Process app({refapp_bin(), "--rate", "100", "--duration", "1500",
               "--input-rate", "200", "--log", dir.file("truth.jsonl")},
              dir.file("app.out"), dir.file("app.err"));
  EXPECT_EQ(app.wait(20000), 0) << read_file(dir.file("app.err"));
  // Stopped once the app is done, however slow a loaded machine made it.
  tracer.signal(SIGINT);
  EXPECT_EQ(tracer.wait(15000), 0) << read_file(dir.file("lt.err"));
  EXPECT_EQ(flood.wait(10000), 0) << read_file(dir.file("flood.err"));
  nlohmann::json flood_counts =
      nlohmann::json::parse(read_file(dir.file("flood.out")));
  EXPECT_GT(flood_counts["udp"].get<int>(), 10000) << "the flood was too weak";
  Traced r;
  r.report = read_json(json);
  r.log = read_jsonl(dir.file("truth.jsonl"));
  r.channel =
      "socket:[" +
      std::to_string(
          events(r.log, "input_channel")[0]["app_inode"].get<uint64_t>()) +
      "]";
  // The flood competes for the CPUs: the app can be preempted between a
  // call and its clock read. Timing is checked by the tests above; here
  // only matching and filtering.
  r.tol = 50'000'000;
  auto got = check_against_truth(r, true);
  EXPECT_GE(got.size(), 200u);
  // Traced system-wide, another process's real input channel would be
  // reported too; none of the flood's sockets may be.
  for (const auto& c : r.report["input_channels"]) {
    EXPECT_NE(c["pid"], flood.pid()) << c.dump();
    EXPECT_NE(c["sender_pid"], flood.pid()) << c.dump();
  }
  const auto& sum = r.report["input_summary"];
  // Every message that crossed the ring buffer belongs to a reported event
  // (or is counted as unmatched or duplicate): none of the flood's did.
  size_t messages = 0;
  for (const auto& e : r.report["input_events"])
    for (const char* k :
         {"sent_ns", "received_ns", "finished_ns", "finish_received_ns"})
      messages += e[k].is_null() ? 0 : 1;
  const size_t recorded = sum["kernel_recorded"];
  EXPECT_GE(recorded, messages) << sum.dump();
  EXPECT_LE(recorded, messages + 2 * sum["unmatched_messages"].get<size_t>() +
                          sum["duplicate_messages"].get<size_t>() +
                          sum["other_messages"].get<size_t>())
      << sum.dump();
  EXPECT_GT(sum["kernel_rejected"].get<size_t>(), 1000u)
      << "the SEQPACKET junk reached the payload check";
  EXPECT_EQ(sum["undecodable_messages"], 0);
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// A channel without FINISHED replies (as X11 and Wayland clients have): a
// GLib loop reading a unix stream socket, picked by its peer's path.
// Consumption is the end of the g_main_context_dispatch that read the bytes.
// The GLib app's server socket is named `sock_name`; looptrace picks the
// channel with --input-peer `peer_arg` ("" = the socket's path).
// Every zlib stream in `bytes` inflated, one after another: a recording's
// blocks as they are on disk, read without looptrace's reader.
std::string inflate_all(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i + 2 < bytes.size(); ++i) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const auto b1 = static_cast<unsigned char>(bytes[i + 1]);
    if (b0 != 0x78 || ((b0 << 8) | b1) % 31 != 0) continue;  // zlib header
    z_stream z{};
    if (inflateInit(&z) != Z_OK) continue;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + i));
    z.avail_in = static_cast<uInt>(bytes.size() - i);
    std::string chunk;
    int rc = Z_OK;
    while (rc == Z_OK) {
      char buf[65536];
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      rc = inflate(&z, Z_NO_FLUSH);
      chunk.append(buf, sizeof(buf) - z.avail_out);
    }
    if (rc == Z_STREAM_END) {
      out += chunk;
      i += z.total_in - 1;
    }
    inflateEnd(&z);
  }
  return out;
}

void glib_raw_channel(const std::string& sock_name,
                      const std::string& peer_arg) {
  TempDir dir;
  const std::string sock = dir.file(sock_name);
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  Process app({"/usr/bin/python3", tests_dir() + "/programs/glib_input.py",
               "--socket", sock, "--log", log, "--events", "10", "--stall-at",
               "3", "--stall-ms", "100", "--start-delay", "3500"},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 10000))
      << read_file(dir.file("app.err"));
  int64_t steal_before = steal_ns();
  const std::string rec = dir.file("trace.lt");
  const std::string stream = dir.file("events.jsonl");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "-p",
                     std::to_string(app.pid()),
                     "--input",
                     "--input-peer",
                     peer_arg.empty() ? sock : peer_arg,
                     "--dispatch",
                     "libglib-2.0.so.0:g_main_context_dispatch",
                     "--slow",
                     "20ms",
                     "--slow-input",
                     "50ms",
                     "--json",
                     json,
                     "-o",
                     rec,
                     "--events",
                     stream,
                     "-q"},
                    30000);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Raw channels carry what users type (X11 key events): no byte the app
  // read is copied. The app's messages hold SECRET-KEYSTROKE; no piece of
  // it is in any output, the recording's compressed blocks inflated.
  const std::string inflated = inflate_all(read_file(rec));
  ASSERT_GT(inflated.size(), 1000u) << "the recording's blocks inflate";
  const std::string everything =
      inflated + read_file(json) + read_file(stream) + r.out + r.err;
  for (const char* piece : {"SECRET", "KEYSTROKE", "T-KEY", "ROKESEC"})
    EXPECT_EQ(everything.find(piece), std::string::npos) << piece;
  EXPECT_EQ(app.wait(5000), 0);
  const int64_t tol = kToleranceNs + (steal_ns() - steal_before);
  auto reads = events(read_jsonl(log), "read");
  nlohmann::json report = read_json(json);
  const auto& got = report["input_events"];
  if (sock_name.rfind("wayland-", 0) == 0) {
    // Named like a compositor's socket: decoded as a Wayland connection,
    // the only channel; the app's bytes are no compositor's input events.
    ASSERT_EQ(report["input_channels"].size(), 1u) << report.dump();
    EXPECT_EQ(report["input_channels"][0]["layout"], "wayland");
    EXPECT_EQ(got.size(), 0u) << got.dump();
    return;
  }
  ASSERT_EQ(got.size(), reads.size()) << got.dump();
  ASSERT_GE(reads.size(), 8u);
  for (size_t i = 0; i < reads.size(); ++i) {
    const auto& t = reads[i];
    const auto& e = got[i];
    EXPECT_EQ(e["mode"], "dispatch_end");
    EXPECT_EQ(e["type"], "bytes");
    EXPECT_EQ(e["seq"].get<size_t>(), i + 1);
    EXPECT_LE(std::llabs(diff(e["received_ns"], t["received_ns"])), tol)
        << e.dump() << "\n"
        << t.dump();
    // The dispatch ends after the callback's last clock read, within GLib's
    // and PyGObject's return path.
    int64_t after_end = diff(e["finished_ns"], t["end_ns"]);
    EXPECT_GE(after_end, -tol) << e.dump() << "\n" << t.dump();
    EXPECT_LE(after_end, 1'000'000 + tol) << e.dump() << "\n" << t.dump();
    const bool stalled = t["index"] == 3;
    EXPECT_EQ(e["blame"].is_object(), stalled) << e.dump();
    if (stalled) {
      EXPECT_EQ(e["blame"]["kind"], "handled_slowly");
      EXPECT_GE(e["handling_latency_dur"].get<int64_t>(), 100'000'000);
    }
  }
}

TEST(RawInput, GlibLoopReadingASocketPickedByPeer) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  glib_raw_channel("server.sock", "");
}

// --input-peer auto finds a connection to a socket named like a Wayland
// compositor's, and nothing else (the app's other sockets are not input),
// and decodes it as Wayland: no byte of what the app read leaves.
TEST(RawInput, GlibLoopWaylandConnectionPickedAutomatically) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  glib_raw_channel("wayland-5", "auto");
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// -p on a running app whose dispatcher is another process looptrace does
// not trace (like system_server): the dispatcher's ends are watched from
// the start, so every stage is there from the first event.
TEST(InputAttach, RunningAppWithAnUntracedDispatcher) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  Process app(
      {refapp_bin(), "--rate", "100", "--start-delay", "3500", "--duration",
       "1500", "--input-rate", "50", "--input-start", "0", "--log", log},
      dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 10000))
      << read_file(dir.file("app.err"));
  int64_t steal_before = steal_ns();
  RunResult r =
      run({looptrace_bin(), "record", "--profile", "refapp", "-p",
           std::to_string(app.pid()), "--input", "--json", json, "-q"},
          30000);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(app.wait(5000), 0);
  Traced t;
  t.report = read_json(json);
  t.log = read_jsonl(log);
  t.tol = kToleranceNs + (steal_ns() - steal_before);
  auto chan = events(t.log, "input_channel");
  ASSERT_EQ(chan.size(), 1u);
  t.channel =
      "socket:[" + std::to_string(chan[0]["app_inode"].get<uint64_t>()) + "]";
  auto got = check_against_truth(t);
  EXPECT_GE(got.size(), 60u);
  for (const auto& [seq, e] : got)
    EXPECT_EQ(e["sender_pid"], chan[0]["dispatcher_pid"]) << e.dump();
}

}  // namespace
}  // namespace lt_test

namespace lt_test {
namespace {

// A static binary's own recvfrom/sendto, probed by uprobes on the binary
// itself (--input-binary), not libc.so.
TEST(InputStatic, UprobesOnAStaticBinarysOwnSocketFunctions) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string bin = std::string(LT_TEST_PROGRAMS_DIR) + "/static_channel";
  const std::string log = dir.file("truth.jsonl");
  const std::string json = dir.file("report.json");
  int64_t steal_before = steal_ns();
  RunResult r =
      run({looptrace_bin(), "record", "--input", "--input-mode", "uprobe",
           "--input-binary", bin, "--json", json, "-q", "--", bin, "30", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t tol = kToleranceNs + (steal_ns() - steal_before);
  auto truth = read_jsonl(log);
  ASSERT_EQ(truth.size(), 30u);
  nlohmann::json report = read_json(json);
  const auto& got = report["input_events"];
  ASSERT_EQ(got.size(), truth.size()) << report["input_summary"].dump();
  for (size_t i = 0; i < truth.size(); ++i) {
    const auto& t = truth[i];
    const auto& e = got[i];
    EXPECT_EQ(e["seq"], t["seq"]);
    EXPECT_EQ(e["event_time_ns"], t["event_time_ns"]);
    for (const char* k :
         {"sent_ns", "received_ns", "finished_ns", "finish_received_ns"})
      EXPECT_LE(std::llabs(diff(e[k], t[k])), tol) << k << ": " << e.dump();
  }
}

}  // namespace
}  // namespace lt_test
