// `looptrace demo`: the reference app under looptrace, then the app's own
// ground-truth log beside what looptrace found.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/duration.h"
#include "base/log.h"
#include "cli/record.h"
#include "profiles/resolve.h"

namespace looptrace {
namespace {

struct Stall {
  std::string kind;  // busy, sleep, lock; or the target of a "slow" event
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
};

// The app's log (JSON lines), read once; malformed lines are skipped.
std::vector<nlohmann::json> read_log(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

// The lines of one "event".
std::vector<nlohmann::json> events(const std::vector<nlohmann::json>& log,
                                   const std::string& event) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& j : log)
    if (j.value("event", "") == event) out.push_back(j);
  return out;
}

// The app logs injected stalls ("stall") and any other dispatch over
// --log-slow ("slow": a loaded machine makes some).
std::vector<Stall> stalls(const std::vector<nlohmann::json>& log,
                          const std::string& event) {
  std::vector<Stall> out;
  for (const nlohmann::json& j : events(log, event))
    out.push_back({j.value(event == "stall" ? "kind" : "target", "?"),
                   j.value("start_ns", uint64_t{0}),
                   j.value("duration_ns", uint64_t{0})});
  return out;
}

const nlohmann::json* find_reported(const nlohmann::json& slow,
                                    uint64_t start_ns) {
  for (const auto& sd : slow) {
    uint64_t st = sd.value("start_ns", uint64_t{0});
    if (std::llabs(static_cast<long long>(st - start_ns)) < 2'000'000)
      return &sd;
  }
  return nullptr;
}

// The demo's run: 500 ordinary 0.1-2 ms dispatches a second, and one stall
// of each kind. Its dispatcher process sends a 60 Hz stream of input
// events, and a tap while the sleep stall holds the loop. A slow idle
// handler in a calm moment (the queue must go idle for it to run) and,
// once the backlog of the 300 ms stall has drained, a sync barrier left up
// for 400 ms: over the demo's 200 ms stall threshold, so looptrace
// announces it while it is still up.
RecordArgs demo_args(const std::string& self_dir, const std::string& refapp,
                     const std::string& report_path,
                     const std::string& log_path) {
  RecordArgs ra;
  ra.self_dir = self_dir;
  ra.profile = "refapp";
  ra.outputs.json = report_path;
  ra.input = true;
  ra.thresholds[ThresholdOption::kSlowInput] = "50ms";
  ra.thresholds[ThresholdOption::kBarrierStall] = "200ms";
  ra.command = {refapp,          "--rate",       "500",
                "--duration",    "4500",         "--stall",
                "busy:50@400",   "--stall",      "sleep:120@1000",
                "--stall",       "lock:80@1600", "--stall",
                "busy:300@2200", "--idle-stall", "busy:30@700",
                "--barrier",     "400@3500",     "--barrier-report-ms",
                "200",           "--input-rate", "60",
                "--input-tap",   "1050",         "--log",
                log_path};
  return ra;
}

// The injected stalls and any other slow dispatch, against the app's log:
// whether each was found and nothing unexplained was reported.
bool compare_stalls(const std::vector<nlohmann::json>& app_log,
                    nlohmann::json& report) {
  std::vector<Stall> truth = stalls(app_log, "stall");
  std::vector<Stall> app_slow = stalls(app_log, "slow");
  std::printf("\nGround truth (the app's own log) vs looptrace:\n");
  std::printf("  %-6s %10s %10s %10s %9s\n", "kind", "app log", "looptrace",
              "error", "cpu");
  int found = 0;
  for (const Stall& s : truth) {
    const nlohmann::json* match =
        find_reported(report["slow_dispatches"], s.start_ns);
    if (!match) {
      std::printf("  %-6s %10s %10s\n", s.kind.c_str(),
                  format_duration(s.duration_ns).c_str(), "MISSED");
      continue;
    }
    ++found;
    uint64_t d = match->value("duration_ns", uint64_t{0});
    uint64_t cpu = match->value("cpu_ns", uint64_t{0});
    double err_us =
        (static_cast<double>(d) - static_cast<double>(s.duration_ns)) / 1e3;
    std::printf("  %-6s %10s %10s %8.1fus %9s\n", s.kind.c_str(),
                format_duration(s.duration_ns).c_str(),
                format_duration(d).c_str(), err_us,
                format_duration(cpu).c_str());
  }
  size_t reported = report["slow_dispatches"].size();
  std::printf(
      "  %d of %zu injected stalls found; %zu slow dispatches reported\n",
      found, truth.size(), reported);
  // Anything else looptrace reported should be in the app's log too.
  size_t confirmed = 0;
  for (const Stall& s : app_slow) {
    const nlohmann::json* m =
        find_reported(report["slow_dispatches"], s.start_ns);
    if (!m || m->value("duration_ns", uint64_t{0}) < Thresholds::kSlowNs)
      continue;
    ++confirmed;
    std::printf("  also slow, not injected: %s %s (app log: %s)\n",
                m->value("target", "?").c_str(),
                format_duration(m->value("duration_ns", uint64_t{0})).c_str(),
                format_duration(s.duration_ns).c_str());
  }
  size_t unexplained = reported - static_cast<size_t>(found) - confirmed;
  if (unexplained)
    std::printf("  %zu reported slow dispatches are not in the app's log\n",
                unexplained);

  return found == static_cast<int>(truth.size()) && unexplained == 0;
}

// The idle handler and the barrier, against the app's own log.
bool compare_idle_and_barriers(const std::vector<nlohmann::json>& app_log,
                               nlohmann::json& report) {
  std::vector<nlohmann::json> idle_truth = events(app_log, "idle");
  std::vector<nlohmann::json> barrier_truth = events(app_log, "barrier_remove");
  size_t idle_found = 0, barriers_found = 0;
  // Both depend on the loop: an idle handler runs only when the queue goes
  // idle, the barrier is posted by a message.
  if (idle_truth.empty())
    std::printf(
        "  idle: the app logged no idle-handler run (its queue never "
        "went idle?)\n");
  if (barrier_truth.empty())
    std::printf("  barrier: the app logged no barrier removal\n");
  for (const nlohmann::json& t : idle_truth) {
    uint64_t start = t.value("start_ns", uint64_t{0}),
             dur = t.value("duration_ns", uint64_t{0});
    const nlohmann::json* m =
        find_reported(report["slow_idle_handlers"], start);
    if (!m) {
      std::printf("  %-6s %10s %10s\n", "idle", format_duration(dur).c_str(),
                  "MISSED");
      continue;
    }
    ++idle_found;
    uint64_t d = m->value("duration_ns", uint64_t{0});
    std::printf("  %-6s %10s %10s %8.1fus %9s\n", "idle",
                format_duration(dur).c_str(), format_duration(d).c_str(),
                (static_cast<double>(d) - static_cast<double>(dur)) / 1e3,
                format_duration(m->value("cpu_ns", uint64_t{0})).c_str());
  }
  for (const nlohmann::json& t : barrier_truth) {
    uint64_t life = t.value("lifetime_ns", uint64_t{0});
    const nlohmann::json* m = nullptr;
    if (report.contains("barriers") && report["barriers"].is_array())
      for (const auto& b : report["barriers"])
        if (b.value("token", uint64_t{0}) == t.value("token", uint64_t{0}) &&
            b["removed_ns"].is_number())
          m = &b;
    if (!m) {
      std::printf("  %-6s %10s %10s\n", "barrier",
                  format_duration(life).c_str(), "MISSED");
      continue;
    }
    ++barriers_found;
    uint64_t got = m->value("removed_ns", uint64_t{0}) -
                   m->value("posted_ns", uint64_t{0});
    std::printf("  %-6s %10s %10s %8.1fus  %s\n", "barrier",
                format_duration(life).c_str(), format_duration(got).c_str(),
                (static_cast<double>(got) - static_cast<double>(life)) / 1e3,
                m->value("stalled", false) ? "stall announced" : "no stall");
  }

  return idle_found == idle_truth.size() && !idle_truth.empty() &&
         barriers_found == barrier_truth.size() && !barrier_truth.empty();
}

// Input: every event the dispatcher logged sending, matched by seq, with
// the worst total latency on both sides.
bool compare_input(const std::vector<nlohmann::json>& app_log,
                   nlohmann::json& report) {
  std::map<uint64_t, nlohmann::json> sent, acked;
  for (const nlohmann::json& j : app_log) {
    if (!j.contains("seq")) continue;
    if (j.value("event", "") == "input_send") sent[j["seq"]] = j;
    if (j.value("event", "") == "input_finish_recv") acked[j["seq"]] = j;
  }
  size_t matched = 0;
  int64_t worst_err = 0;
  uint64_t worst_total = 0;
  for (const auto& e : report.value("input_events", nlohmann::json::array())) {
    auto s_it = sent.find(e.value("seq", uint64_t{0}));
    auto a_it = acked.find(e.value("seq", uint64_t{0}));
    if (s_it == sent.end() || a_it == acked.end() ||
        !e["total_latency_dur"].is_number())
      continue;
    ++matched;
    int64_t app_total = a_it->second["finish_received_ns"].get<int64_t>() -
                        s_it->second["sent_ns"].get<int64_t>();
    int64_t err = e["total_latency_dur"].get<int64_t>() - app_total;
    if (std::llabs(err) > std::llabs(worst_err)) worst_err = err;
    worst_total = std::max<uint64_t>(worst_total, app_total);
  }
  // An event the app had not acknowledged when it exited (a loaded machine
  // leaves a backlog) has no total latency on either side.
  std::printf(
      "\nInput: %zu events sent by the dispatcher, %zu acknowledged; "
      "looptrace matched %zu stage by stage; worst total latency %s, "
      "largest error %.1fus\n",
      sent.size(), acked.size(), matched, format_duration(worst_total).c_str(),
      static_cast<double>(worst_err) / 1e3);
  return matched == acked.size() && !acked.empty();
}

}  // namespace

int run_demo(const std::string& self_dir, const std::string& json_path) {
  // The demo reads its report back to compare it with the app's log.
  if (json_path == "-") {
    log::error("demo --json: give a file name; the demo reads it back");
    return 2;
  }
  ResolveContext rctx;
  rctx.self_dir = self_dir;
  auto refapp = resolve_binary("refapp", rctx);
  if (!refapp.ok()) {
    log::error("the reference app was not found next to looptrace: {}",
               refapp.status().message());
    return 1;
  }
  // The app's log (and the report, without --json) live here for the run;
  // kept only when the comparison fails, to be looked at.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_tmpl =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/looptrace-demo.XXXXXX";
  if (!mkdtemp(dir_tmpl.data())) {
    log::error("mkdtemp {}: {}", dir_tmpl, std::strerror(errno));
    return 1;
  }
  const std::string dir = dir_tmpl;
  bool keep = false;
  struct Cleanup {
    const std::string& dir;
    const bool& keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir, keep};
  const std::string log_path = dir + "/refapp-truth.jsonl";
  const std::string report_path =
      json_path.empty() ? dir + "/report.json" : json_path;
  RecordArgs ra = demo_args(self_dir, *refapp, report_path, log_path);
  ra.preamble = fmt::format(
      "looptrace demo: {} --rate 500 --duration 4500 with stalls busy 50ms, "
      "sleep 120ms, lock 80ms, busy 300ms; a 30ms idle handler; a sync "
      "barrier up for 400ms; input at 60 Hz and a tap at 1050ms\n\n",
      *refapp);
  int rc = run_record(ra);
  if (rc != 0) return rc;

  const std::vector<nlohmann::json> app_log = read_log(log_path);
  std::ifstream in(report_path);
  nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) {
    log::error("could not read back {}", report_path);
    return 1;
  }
  bool stalls_ok = compare_stalls(app_log, report);
  bool others_ok = compare_idle_and_barriers(app_log, report);
  bool input_ok = compare_input(app_log, report);
  if (stalls_ok && input_ok && others_ok) return 0;
  keep = true;
  std::printf("\nThe app's log is kept in %s\n", log_path.c_str());
  return 1;
}

}  // namespace looptrace
