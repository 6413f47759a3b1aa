// Golden tests: real recordings (`looptrace record -o`, kept in
// tests/data/recordings/ with scripts/regen-golden.sh) replayed to the very
// JSON and text `looptrace report` gave when they were made; what those
// expected files say checked against the traced programs' own logs, so that
// they are more than "whatever looptrace said"; and every recording cut at
// each block boundary and at random offsets replays without a crash.
// tests/data/recordings/README.md says when to regenerate them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/output_file.h"
#include "pipeline/analysis.h"
#include "pipeline/replay.h"
#include "pipeline/symbols.h"
#include "record/recording.h"
#include "report/findings.h"

namespace looptrace {
namespace {

using nlohmann::json;

// The reference app reads its clock first and last thing in a dispatch,
// within a few µs of the probes: the 1 ms covers that and the
// scheduling noise of a quiet machine (the recordings are made with
// nice -n -10, scripts/regen-golden.sh).
constexpr int64_t kToleranceNs = 1'000'000;
// Recordings kept in the repository stay small.
constexpr size_t kMaxRecordingBytes = 200 * 1024;
// Frames (refapp_frames): doFrame and its doCallbacks phases read the
// clock first and last thing too, a few µs from looptrace's probes at
// their entry and return (under 10 µs in the recording): a janky frame's
// start and duration, its phases' and the stall that held it back agree
// with the app's log within 0.2 ms (the frames integration test's).
constexpr int64_t kFrameToleranceNs = 200'000;
// A frame that ended within 0.3 ms of its deadline (or whose lateness is
// within 0.3 ms of a whole number of intervals) is too near to call: it
// may fall either side by the probes' few µs and the 1 ns rounding of
// the interval.
constexpr int64_t kDeadlineEdgeNs = 300'000;
// The interval frames are timed against is the app's vsync period, which
// doFrame is given (1e9 / 60 ns, rounded to the ns either way).
constexpr int64_t kRefreshToleranceNs = 1;

const char* const kRecordings[] = {"refapp", "refapp_frames", "glib_loop",
                                   "glib_input"};

std::string data_path(const std::string& name) {
  return std::string(LT_TEST_DATA_DIR) + "/recordings/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

std::vector<json> log_events(const std::vector<json>& lines,
                             const std::string& event) {
  std::vector<json> out;
  for (const json& l : lines)
    if (l.value("event", "") == event) out.push_back(l);
  return out;
}

int64_t diff(const json& a, const json& b) {
  return a.get<int64_t>() - b.get<int64_t>();
}

// What `looptrace report REC --json FILE` gives: its JSON and its text.
struct Reported {
  Status status;
  ReplayInfo info;
  std::string json;
  std::string text;
};

Reported report_of(RecordingReader& reader) {
  Reported out;
  RecordedSymbols symbols;
  Analysis analysis(&symbols);
  auto info = replay(reader, analysis, symbols);
  if (!info.ok()) {
    out.status = info.status();
    return out;
  }
  out.info = *info;
  const Findings& found = analysis.finish();
  std::string path =
      ::testing::TempDir() + "/lt_golden_" + std::to_string(getpid()) + ".json";
  unlink(path.c_str());
  auto f = OutputFile::Create("--json", path);
  if (!f.ok()) {
    out.status = f.status();
    return out;
  }
  out.status = write_json_report(**f, found, analysis.context());
  out.json = read_file(path);
  unlink(path.c_str());
  std::ostringstream text;
  write_text_reports(text, found, analysis.context());
  out.text = text.str();
  return out;
}

// The reports of the recording at `path`, which must be whole: no damage,
// its end event, no record this build does not know.
Reported report_of_whole(const std::string& path) {
  Reported r;
  auto reader = RecordingReader::Open(path);
  if (!reader.ok()) {
    r.status = reader.status();
    return r;
  }
  r = report_of(**reader);
  EXPECT_EQ(r.info.damage, "") << path;
  EXPECT_TRUE(r.info.ended) << path;
  EXPECT_EQ(r.info.unknown_records, 0u) << path;
  return r;
}

// "line 12:\n  got:  ...\n  want: ..." for the first line that differs.
std::string first_difference(const std::string& got, const std::string& want) {
  std::istringstream g(got), w(want);
  std::string gl, wl;
  for (int line = 1;; ++line) {
    bool gm = static_cast<bool>(std::getline(g, gl));
    bool wm = static_cast<bool>(std::getline(w, wl));
    if (!gm && !wm) return "no line differs (line endings?)";
    if (gm != wm || gl != wl)
      return "line " + std::to_string(line) +
             ":\n  got:  " + (gm ? gl : "<end>") +
             "\n  want: " + (wm ? wl : "<end>");
  }
}

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, ReplaysToTheExpectedJsonAndText) {
  const std::string name = GetParam();
  const std::string rec = data_path(name + ".lt");
  std::string bytes = read_file(rec);
  ASSERT_FALSE(bytes.empty()) << rec << " missing (scripts/regen-golden.sh)";
  EXPECT_LE(bytes.size(), kMaxRecordingBytes) << rec;
  Reported r = report_of_whole(rec);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  const std::string want_json = read_file(data_path(name + ".json"));
  const std::string want_text = read_file(data_path(name + ".txt"));
  ASSERT_FALSE(want_json.empty());
  ASSERT_FALSE(want_text.empty());
  EXPECT_TRUE(r.json == want_json)
      << name << ".json differs at " << first_difference(r.json, want_json)
      << "\nIf the change is intended, see tests/data/recordings/README.md.";
  EXPECT_TRUE(r.text == want_text)
      << name << ".txt differs at " << first_difference(r.text, want_text)
      << "\nIf the change is intended, see tests/data/recordings/README.md.";
}

std::string param_name(const ::testing::TestParamInfo<const char*>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Recordings, Golden, ::testing::ValuesIn(kRecordings),
                         param_name);

// Recordings made before looptrace wrote its blocks with libdeflate were
// compressed by zlib's compress2(): the same format, read the same. The
// recording fuzzer's seed is one, recorded from a real run by then.
TEST(GoldenFormat, ARecordingZlibWroteStillReplays) {
  const std::string rec =
      std::string(LT_TEST_DATA_DIR) + "/../fuzz/corpus/recording/refapp-run.lt";
  Reported r = report_of_whole(rec);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_GT(r.info.events, 10u);
  json j = json::parse(r.json);
  EXPECT_FALSE(j["slow_dispatches"].empty()) << r.text;
}

// --- the expected files against the programs' own logs --------------------

json expected_json(const std::string& name) {
  return json::parse(read_file(data_path(name + ".json")));
}

std::vector<json> app_log(const std::string& name) {
  return read_jsonl(data_path(name + ".log.jsonl"));
}

// The span of `spans` that starts within the tolerance of `start_ns`.
const json* span_at(const json& spans, const json& start_ns) {
  for (const json& s : spans)
    if (std::llabs(diff(s["start_ns"], start_ns)) <= kToleranceNs) return &s;
  return nullptr;
}

// The dispatch count of each thread, by tid, for `role`.
std::map<uint64_t, uint64_t> counts(const json& report, const char* role) {
  std::map<uint64_t, uint64_t> out;
  for (const json& t : report["threads"])
    if (t["role"] == role)
      out[t["tid"].get<uint64_t>()] += t["count"].get<uint64_t>();
  return out;
}

// Every counter of events lost is 0. Not `unseen_switches`, which loses
// no event (docs/looptrace.md, LIMITS: a Firecracker guest's kernel traces
// no switch away from its agent's threads; a span across one takes its CPU
// split from the kernel's counters): the recordings may be made there.
void expect_nothing_lost(const json& report) {
  for (const auto& [what, n] : report["lost"].items())
    if (what != "unseen_switches") {
      EXPECT_EQ(n, 0) << "lost." << what;
    }
}

// The reference app: stalls, an input event handled slowly, a slow idle
// handler, a barrier held 500 ms and a leaked one, a burst's delivery lag,
// input at 20 Hz (scripts/regen-golden.sh has the command line).
TEST(GoldenTruth, RefappReportAgreesWithTheAppsLog) {
  const json report = expected_json("refapp");
  const std::vector<json> log = app_log("refapp");
  expect_nothing_lost(report);

  // Each stall, slow input handler and slow dispatch the app logged is a
  // slow dispatch from its first to its last clock read, and nothing else.
  std::vector<json> slow = log_events(log, "stall");
  for (const json& s : log_events(log, "input_stall")) {
    json d = s;
    d["start_ns"] = s["dispatch_start_ns"];
    d["end_ns"] = s["dispatch_end_ns"];
    slow.push_back(d);
  }
  for (const json& s : log_events(log, "slow")) slow.push_back(s);
  ASSERT_EQ(log_events(log, "stall").size(), 2u);
  ASSERT_EQ(log_events(log, "input_stall").size(), 1u);
  const json& dispatches = report["slow_dispatches"];
  for (const json& s : slow) {
    const json* m = span_at(dispatches, s["start_ns"]);
    ASSERT_NE(m, nullptr) << "not reported: " << s.dump();
    EXPECT_LE(std::llabs(diff((*m)["start_ns"].get<int64_t>() +
                                  (*m)["duration_ns"].get<int64_t>(),
                              s["end_ns"])),
              kToleranceNs)
        << s.dump() << "\nreported: " << m->dump();
    EXPECT_EQ((*m)["tid"], s["tid"]);
  }
  EXPECT_EQ(dispatches.size(), slow.size()) << "reported but never logged";
  for (const json& s : log_events(log, "stall")) {
    const json* m = span_at(dispatches, s["start_ns"]);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ((*m)["target"], "refapp::StallHandler what=" +
                                  std::to_string(s["what"].get<int>()));
    if (s["kind"] == "sleep") {
      EXPECT_GE((*m)["blocked_ns"].get<int64_t>(),
                s["requested_ms"].get<int64_t>() * 1'000'000 - kToleranceNs);
    }
  }

  // The slow idle handler.
  std::vector<json> idle = log_events(log, "idle");
  ASSERT_EQ(idle.size(), 1u);
  const json& idle_spans = report["slow_idle_handlers"];
  ASSERT_EQ(idle_spans.size(), 1u);
  EXPECT_LE(std::llabs(diff(idle_spans[0]["start_ns"], idle[0]["start_ns"])),
            kToleranceNs);
  EXPECT_LE(
      std::llabs(diff(idle_spans[0]["duration_ns"], idle[0]["duration_ns"])),
      kToleranceNs);
  EXPECT_EQ(idle_spans[0]["target"], "refapp::SlowIdleHandler");

  // Both barriers, posted and removed (or not) when the app says, both
  // held past the 300 ms stall threshold.
  std::vector<json> posts = log_events(log, "barrier_post");
  std::vector<json> removes = log_events(log, "barrier_remove");
  ASSERT_EQ(posts.size(), 2u);
  ASSERT_EQ(removes.size(), 1u);
  const json& barriers = report["barriers"];
  ASSERT_EQ(barriers.size(), posts.size());
  for (const json& p : posts) {
    const json* b = nullptr;
    for (const json& x : barriers)
      if (x["tid"] == p["tid"] && x["token"] == p["token"] &&
          x["queue"] == p["queue"])
        b = &x;
    ASSERT_NE(b, nullptr) << p.dump();
    EXPECT_LE(std::llabs(diff((*b)["posted_ns"], p["posted_ns"])),
              kToleranceNs);
    EXPECT_TRUE((*b)["stalled"].get<bool>()) << b->dump();
    bool leaked = p["source"] == "leak";
    EXPECT_EQ((*b)["removed_ns"].is_null(), leaked) << b->dump();
    if (!leaked) {
      EXPECT_LE(std::llabs(diff((*b)["removed_ns"], removes[0]["removed_ns"])),
                kToleranceNs);
      EXPECT_LE(
          std::llabs(diff((*b)["lifetime_ns"], removes[0]["lifetime_ns"])),
          kToleranceNs);
    }
  }
  EXPECT_EQ(report["barrier_summary"]["leaked"], 1);

  // The burst: each item the app saw start clearly late is a slow
  // delivery with the app's lag.
  const uint64_t slow_delivery =
      report["slow_threshold_ns"]["delivery"].get<uint64_t>();
  size_t late = 0;
  for (const json& d : log_events(log, "delivery")) {
    if (d["lag_ns"].get<uint64_t>() < slow_delivery + kToleranceNs) continue;
    ++late;
    std::string target =
        "refapp::BurstHandler callback=refapp::burstWork(refapp::Message*) "
        "what=" +
        std::to_string(d["what"].get<int>());
    const json* m = nullptr;
    for (const json& s : report["slow_deliveries"])
      if (s["target"] == target && s["tid"] == d["tid"]) m = &s;
    ASSERT_NE(m, nullptr) << d.dump();
    EXPECT_LE(std::llabs(diff((*m)["lag_ns"], d["lag_ns"])), kToleranceNs)
        << d.dump() << "\nreported: " << m->dump();
    EXPECT_LE(std::llabs(diff((*m)["due_ns"], d["due_ns"])), kToleranceNs);
  }
  EXPECT_GE(late, 5u) << "a burst of 20 messages of 1 ms each";

  // Every input event, each stage where the app and its dispatcher saw it.
  std::map<int, json> sent, recv, fin, fin_recv;
  for (const json& e : log_events(log, "input_send")) sent[e["seq"]] = e;
  for (const json& e : log_events(log, "input_recv")) recv[e["seq"]] = e;
  for (const json& e : log_events(log, "input_finish")) fin[e["seq"]] = e;
  for (const json& e : log_events(log, "input_finish_recv"))
    fin_recv[e["seq"]] = e;
  const json& inputs = report["input_events"];
  ASSERT_EQ(inputs.size(), sent.size());
  ASSERT_GE(sent.size(), 30u) << "20 Hz for 2 s";
  const int stalled_seq = log_events(log, "input_stall")[0]["seq"];
  for (const json& e : inputs) {
    int seq = e["seq"];
    ASSERT_TRUE(sent.count(seq) && recv.count(seq) && fin.count(seq) &&
                fin_recv.count(seq))
        << e.dump();
    EXPECT_LE(std::llabs(diff(e["sent_ns"], sent[seq]["sent_ns"])),
              kToleranceNs);
    EXPECT_LE(std::llabs(diff(e["received_ns"], recv[seq]["received_ns"])),
              kToleranceNs);
    EXPECT_LE(std::llabs(diff(e["finished_ns"], fin[seq]["finished_ns"])),
              kToleranceNs);
    EXPECT_LE(std::llabs(diff(e["finish_received_ns"],
                              fin_recv[seq]["finish_received_ns"])),
              kToleranceNs);
    EXPECT_EQ(e["event_time_ns"], sent[seq]["event_time_ns"]);
    EXPECT_EQ(e["type"], sent[seq]["type"]);
    if (seq == stalled_seq) {
      ASSERT_TRUE(e["blame"].is_object()) << e.dump();
      EXPECT_EQ(e["blame"]["kind"], "handled_slowly");
    }
  }

  // Every dispatch, idle run and delivery counted, per thread.
  std::vector<json> summary = log_events(log, "summary");
  ASSERT_EQ(summary.size(), 1u);
  auto dispatched = counts(report, "dispatch");
  auto idle_runs = counts(report, "idle");
  auto delivered = counts(report, "delivery");
  for (const json& t : summary[0]["threads"]) {
    uint64_t tid = t["tid"];
    EXPECT_EQ(dispatched[tid], t["dispatches"].get<uint64_t>()) << t.dump();
    EXPECT_EQ(idle_runs[tid], t["idle_runs"].get<uint64_t>()) << t.dump();
    EXPECT_EQ(delivered[tid], t["dispatches"].get<uint64_t>()) << t.dump();
  }
}

// The reference app's Choreographer stand-in, traced with the refapp
// profile: frames at 60 Hz, each FrameHandler::doFrame a frame timed from
// the vsync it was scheduled for, every 40th working 25 ms in its
// animation phase, and a busy and a sleeping stall that each hold a frame
// back (scripts/regen-golden.sh has the command line). Against the app's
// own log of every frame (vsync, start, end, phases) and the rules of
// docs/looptrace.md, FRAMES: expected start = the vsync, or the previous
// frame's end if later (never after the frame's start); deadline one
// interval after; missed vsyncs the intervals from the deadline to the
// end, rounded up.
TEST(GoldenTruth, RefappFramesReportAgreesWithTheAppsLog) {
  const json report = expected_json("refapp_frames");
  const std::vector<json> log = app_log("refapp_frames");
  expect_nothing_lost(report);
  const std::vector<json> frames = log_events(log, "frame");
  const std::vector<json> stalls = log_events(log, "stall");
  const std::vector<json> start = log_events(log, "start");
  ASSERT_GE(frames.size(), 100u) << "60 Hz for 2 s";
  ASSERT_EQ(stalls.size(), 2u);
  ASSERT_EQ(start.size(), 1u);

  // Every frame the app drew, on its thread, timed against its period.
  ASSERT_EQ(report["frames"].size(), 1u) << report["frames"].dump();
  const json& summary = report["frames"][0];
  EXPECT_EQ(summary["count"].get<size_t>(), frames.size()) << summary.dump();
  EXPECT_EQ(summary["tid"], frames[0]["tid"]) << summary.dump();
  EXPECT_EQ(summary["source"], "doFrame");
  const int64_t interval = start[0]["frame_period_ns"];
  EXPECT_EQ(interval, 16'666'667) << "--barrier-rate 60";
  EXPECT_LE(std::llabs(summary["refresh_ns"].get<int64_t>() - interval),
            kRefreshToleranceNs)
      << summary.dump();
  const json& janky = report["janky_frames"];
  EXPECT_EQ(summary["janky"].get<size_t>(), janky.size());

  // Frames run back to back after a stall, 0.1 ms apart: a janky frame is
  // the app's frame whose start is nearest to its own.
  auto nearest = [&](int64_t t) -> const json* {
    const json* best = nullptr;
    for (const json& f : frames)
      if (best == nullptr ||
          std::llabs(f["start_ns"].get<int64_t>() - t) <
              std::llabs((*best)["start_ns"].get<int64_t>() - t))
        best = &f;
    return best;
  };
  auto janky_of = [&](const json& f) -> const json* {
    for (const json& j : janky)
      if (std::llabs(diff(j["start_ns"], f["start_ns"])) <= kFrameToleranceNs &&
          nearest(j["start_ns"]) == &f)
        return &j;
    return nullptr;
  };

  // When each of the app's frames should have started, by its own clock,
  // and how late it ended: its end minus its deadline.
  std::map<const json*, int64_t> expected_at, over;
  int64_t prev_end = 0;
  for (const json& f : frames) {
    const int64_t vsync = f["vsync_ns"], begin = f["start_ns"];
    expected_at[&f] = std::min(begin, std::max(vsync, prev_end));
    prev_end = f["end_ns"];
    over[&f] = prev_end - (expected_at[&f] + interval);
  }

  size_t late = 0, ran_long = 0;
  std::vector<bool> held(stalls.size(), false);
  for (const json& f : frames) {
    const int64_t begin = f["start_ns"], end = f["end_ns"];
    const int64_t expected = expected_at[&f], late_by = over[&f];
    const json* j = janky_of(f);
    if (late_by <= -kDeadlineEdgeNs) {
      EXPECT_EQ(j, nullptr)
          << "janky, yet on time by the app's log: " << f.dump() << "\n"
          << (j ? j->dump() : "");
      continue;
    }
    if (late_by < kDeadlineEdgeNs) continue;  // too near its deadline
    ++late;
    ASSERT_NE(j, nullptr) << "not janky: " << f.dump();
    EXPECT_LE(std::llabs(diff((*j)["start_ns"], f["start_ns"])),
              kFrameToleranceNs);
    EXPECT_LE(std::llabs((*j)["duration_ns"].get<int64_t>() - (end - begin)),
              kFrameToleranceNs)
        << j->dump() << "\n"
        << f.dump();
    const int64_t rem = late_by % interval;
    if (rem > kDeadlineEdgeNs && rem < interval - kDeadlineEdgeNs) {
      EXPECT_EQ((*j)["missed_vsyncs"].get<int64_t>(),
                (late_by + interval - 1) / interval)
          << j->dump() << "\n"
          << f.dump();
    }
    // Its phases (doCallbacks) as the app timed them, in order.
    const json& phases = (*j)["phases"];
    ASSERT_EQ(phases.size(), f["phases"].size()) << j->dump();
    for (size_t i = 0; i < phases.size(); ++i) {
      const json& lp = f["phases"][i];
      EXPECT_EQ(phases[i]["target"],
                "doCallbacks " + lp["type"].get<std::string>());
      EXPECT_LE(std::llabs(diff(phases[i]["start_ns"], lp["start_ns"])),
                kFrameToleranceNs)
          << phases.dump();
      EXPECT_LE(std::llabs(phases[i]["duration_ns"].get<int64_t>() -
                           diff(lp["end_ns"], lp["start_ns"])),
                kFrameToleranceNs)
          << phases.dump();
    }
    // A frame whose animation phase ran longer than an interval (the
    // app's --frame-stall-phase): that is the longest span inside it.
    const json& anim = f["phases"][1];
    if (diff(anim["end_ns"], anim["start_ns"]) > interval) {
      ++ran_long;
      EXPECT_EQ((*j)["cause"]["longest_inside"]["target"],
                "doCallbacks animation")
          << j->dump();
    }
    // Held back mostly by a stall (it ran through more than half the
    // time from the frame's expected start to its start): that stall,
    // named as the app names it, held it.
    for (size_t k = 0; k < stalls.size(); ++k) {
      const json& s = stalls[k];
      const int64_t overlap = std::min<int64_t>(begin, s["end_ns"]) -
                              std::max<int64_t>(expected, s["start_ns"]);
      if (2 * overlap <= begin - expected) continue;
      held[k] = true;
      const json& by = (*j)["cause"]["held_by"];
      ASSERT_FALSE(by.empty()) << j->dump();
      EXPECT_EQ(by[0]["target"], s["target"].get<std::string>() + " what=" +
                                     std::to_string(s["what"].get<int>()))
          << j->dump();
      EXPECT_EQ(by[0]["tid"], s["tid"]) << j->dump();
      EXPECT_LE(std::llabs(diff(by[0]["start_ns"], s["start_ns"])),
                kFrameToleranceNs)
          << j->dump() << "\n"
          << s.dump();
    }
  }
  // Every 40th frame works 25 ms (frames 0, 40, 80...): each ends late.
  EXPECT_EQ(ran_long, (frames.size() + 39) / 40) << janky.dump();
  EXPECT_GE(late, ran_long + stalls.size()) << janky.dump();
  for (size_t k = 0; k < stalls.size(); ++k)
    EXPECT_TRUE(held[k]) << "held no frame back: " << stalls[k].dump();

  // And no janky frame the app did not draw late.
  for (const json& j : janky) {
    const json* f = nearest(j["start_ns"]);
    ASSERT_NE(f, nullptr);
    EXPECT_LE(std::llabs(diff(j["start_ns"], (*f)["start_ns"])),
              kFrameToleranceNs)
        << "no such frame in the app's log: " << j.dump();
    EXPECT_GT(over[f], -kDeadlineEdgeNs)
        << "janky, yet on time by the app's log: " << j.dump() << "\n"
        << f->dump();
  }
}

// GLib's main loop in Debian's python3 (tests/programs/glib_loop.py):
// three timeout callbacks that block, busy or asleep.
TEST(GoldenTruth, GlibLoopReportAgreesWithPythonsLog) {
  const json report = expected_json("glib_loop");
  const std::vector<json> log = app_log("glib_loop");
  expect_nothing_lost(report);
  std::vector<json> stalls = log_events(log, "stall");
  std::vector<json> summary = log_events(log, "summary");
  ASSERT_EQ(stalls.size(), 3u);
  ASSERT_EQ(summary.size(), 1u);
  // The loop thread's whole wait for a CPU during the run, by the kernel's
  // count: GLib's and PyGObject's work around a callback is inside the
  // span and outside python's clock reads, and so may be such a wait.
  const int64_t run_delay =
      std::max<int64_t>(0, summary[0]["run_delay_ns"].get<int64_t>());
  const json& slow = report["slow_dispatches"];
  for (const json& st : stalls) {
    // The dispatch span contains the callback.
    const json* m = nullptr;
    for (const json& s : slow) {
      int64_t start = s["start_ns"],
              end = start + s["duration_ns"].get<int64_t>();
      if (start <= st["start_ns"].get<int64_t>() + kToleranceNs &&
          end + kToleranceNs >= st["end_ns"].get<int64_t>())
        m = &s;
    }
    ASSERT_NE(m, nullptr) << st.dump() << "\nreported: " << slow.dump();
    int64_t d = diff((*m)["duration_ns"], st["duration_ns"]);
    EXPECT_GE(d, -kToleranceNs) << st.dump();
    EXPECT_LE(d, kToleranceNs + run_delay) << st.dump();
    EXPECT_EQ((*m)["tid"], st["tid"]);
  }
  EXPECT_EQ(slow.size(), stalls.size()) << slow.dump();
  // g_main_context_dispatch runs every ready source: each 2 ms tick in one
  // call of its own (a source is dispatched once per iteration), the
  // stalls, the start and the quit in those or in calls of their own.
  auto dispatched = counts(report, "dispatch");
  const uint64_t ticks = summary[0]["ticks"];
  const uint64_t calls = dispatched[summary[0]["tid"].get<uint64_t>()];
  EXPECT_GE(calls, ticks);
  EXPECT_LE(calls, ticks + stalls.size() + 2);
}

// A GLib loop reading a unix stream socket (tests/programs/glib_input.py):
// a raw input channel; consumption is the end of the dispatch that read it.
TEST(GoldenTruth, GlibInputReportAgreesWithPythonsLog) {
  const json report = expected_json("glib_input");
  const std::vector<json> reads = log_events(app_log("glib_input"), "read");
  expect_nothing_lost(report);
  const json& got = report["input_events"];
  ASSERT_GE(reads.size(), 8u) << "10 writes, a few may coalesce";
  ASSERT_EQ(got.size(), reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    const json& t = reads[i];
    const json& e = got[i];
    EXPECT_EQ(e["mode"], "dispatch_end");
    EXPECT_EQ(e["seq"].get<size_t>(), i + 1);
    EXPECT_LE(std::llabs(diff(e["received_ns"], t["received_ns"])),
              kToleranceNs)
        << e.dump() << "\n"
        << t.dump();
    // The dispatch ends after the callback's last clock read, within
    // GLib's and PyGObject's return path.
    int64_t after_end = diff(e["finished_ns"], t["end_ns"]);
    EXPECT_GE(after_end, -kToleranceNs) << e.dump() << "\n" << t.dump();
    EXPECT_LE(after_end, 2 * kToleranceNs) << e.dump() << "\n" << t.dump();
    const bool stalled = t["index"] == 3;
    EXPECT_EQ(e["blame"].is_object(), stalled) << e.dump();
    if (stalled) {
      EXPECT_EQ(e["blame"]["kind"], "handled_slowly");
      EXPECT_GE(e["handling_latency_dur"].get<int64_t>(), 100'000'000);
    }
  }
}

// --- cut short ---------------------------------------------------------------

// File offsets where each block of `bytes` ends (the format's framing:
// docs/recording.md).
std::vector<size_t> block_ends(const std::string& bytes) {
  std::vector<size_t> ends;
  size_t off = 16;
  while (off + 20 <= bytes.size()) {
    uint32_t clen;
    std::memcpy(&clen, bytes.data() + off + 8, 4);
    off += 20 + clen;
    if (off > bytes.size()) break;
    ends.push_back(off);
  }
  return ends;
}

class GoldenTruncated : public ::testing::TestWithParam<const char*> {};

// Cut anywhere, a real recording replays what it has up to its last
// complete block and gives a JSON and a text report without throwing; the
// more of it there is, the more events.
TEST_P(GoldenTruncated, EveryBlockBoundaryAndRandomCutsReplay) {
  const std::string bytes =
      read_file(data_path(std::string(GetParam()) + ".lt"));
  ASSERT_FALSE(bytes.empty());
  std::vector<size_t> ends = block_ends(bytes);
  ASSERT_FALSE(ends.empty());
  ASSERT_EQ(ends.back(), bytes.size()) << "the file is whole";
  std::vector<size_t> cuts = ends;
  cuts.push_back(16);  // the header alone
  for (size_t e : ends) {
    cuts.push_back(e - 1);  // a block one byte short
    cuts.push_back(e + 1 <= bytes.size() ? e + 1 : e);
  }
  std::mt19937 rng(20261123);
  for (int i = 0; i < 60; ++i) cuts.push_back(rng() % (bytes.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  uint64_t last_events = 0;
  bool ended = false;
  for (size_t cut : cuts) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut) + " of " +
                 std::to_string(bytes.size()));
    auto reader = RecordingReader::FromMemory(bytes.data(), cut);
    if (cut < 16) {
      EXPECT_FALSE(reader.ok());
      continue;
    }
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    Reported r;
    ASSERT_NO_THROW(r = report_of(**reader));
    bool whole_block = std::find(ends.begin(), ends.end(), cut) != ends.end();
    size_t complete = static_cast<size_t>(
        std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin());
    if (complete == 0) {
      // Not even the block with the session header: one clear error.
      EXPECT_FALSE(r.status.ok());
      EXPECT_NE(r.status.message().find("no session header"), std::string::npos)
          << r.status.message();
      continue;
    }
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.info.damage.empty(), whole_block) << r.info.damage;
    // The end event is in the last block (or in one before the symbols
    // the reports resolved last): once there, it stays.
    if (cut == bytes.size()) {
      EXPECT_TRUE(r.info.ended);
    }
    EXPECT_TRUE(r.info.ended || !ended) << "the end event vanished";
    ended = r.info.ended;
    EXPECT_FALSE(json::parse(r.json, nullptr, false).is_discarded());
    EXPECT_FALSE(r.text.empty());
    EXPECT_GE(r.info.events, last_events) << "fewer events for a longer cut";
    last_events = r.info.events;
  }
}

INSTANTIATE_TEST_SUITE_P(Recordings, GoldenTruncated,
                         ::testing::ValuesIn(kRecordings), param_name);

}  // namespace
}  // namespace looptrace
