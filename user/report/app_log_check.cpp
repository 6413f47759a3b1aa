// The reference app's own log beside a report of the run that traced it:
// what `looptrace demo` prints after the report.
#include "report/app_log_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/duration.h"
#include "model/thresholds.h"

namespace looptrace {
namespace {

struct Stall {
  std::string kind;  // busy, sleep, lock; or the target of a "slow" event
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
};

// The app's log (JSON lines), read once; malformed lines are skipped.
std::vector<nlohmann::json> read_log_lines(const std::string& path) {
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

// The report's list `key`; an empty one when it has none.
const nlohmann::json& list(const nlohmann::json& report, const char* key) {
  static const nlohmann::json kNone = nlohmann::json::array();
  auto it = report.find(key);
  return it != report.end() && it->is_array() ? *it : kNone;
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

// The injected stalls and any other slow dispatch, against the app's log:
// whether each was found and nothing unexplained was reported.
bool compare_stalls(const std::vector<nlohmann::json>& app_log,
                    const nlohmann::json& report) {
  std::vector<Stall> truth = stalls(app_log, "stall");
  std::vector<Stall> app_slow = stalls(app_log, "slow");
  std::printf("\nGround truth (the app's own log) vs looptrace:\n");
  std::printf("  %-6s %10s %10s %10s %9s\n", "kind", "app log", "looptrace",
              "error", "cpu");
  int found = 0;
  for (const Stall& s : truth) {
    const nlohmann::json* match =
        find_reported(list(report, "slow_dispatches"), s.start_ns);
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
  size_t reported = list(report, "slow_dispatches").size();
  std::printf(
      "  %d of %zu injected stalls found; %zu slow dispatches reported\n",
      found, truth.size(), reported);
  // Anything else looptrace reported should be in the app's log too.
  size_t confirmed = 0;
  for (const Stall& s : app_slow) {
    const nlohmann::json* m =
        find_reported(list(report, "slow_dispatches"), s.start_ns);
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
  // Each, with what its own books say: time the app's clock reads did not
  // see (a trap of the probe held up by a VM's host shows as CPU time
  // without stack samples, or as steal).
  for (const auto& sd : list(report, "slow_dispatches")) {
    const uint64_t st = sd.value("start_ns", uint64_t{0});
    bool known = false;
    for (const Stall& s : truth)
      known = known ||
              std::llabs(static_cast<long long>(st - s.start_ns)) < 2'000'000;
    for (const Stall& s : app_slow)
      known = known ||
              std::llabs(static_cast<long long>(st - s.start_ns)) < 2'000'000;
    if (known) continue;
    std::printf(
        "    not in the app's log: %s %s: cpu %s, runq %s, steal %s, %llu "
        "stack samples\n",
        sd.value("target", "?").c_str(),
        format_duration(sd.value("duration_ns", uint64_t{0})).c_str(),
        format_duration(sd.value("cpu_ns", uint64_t{0})).c_str(),
        format_duration(sd.value("runq_ns", uint64_t{0})).c_str(),
        format_duration(sd.value("steal_ns", uint64_t{0})).c_str(),
        static_cast<unsigned long long>(sd.value("samples", uint64_t{0})));
  }

  return found == static_cast<int>(truth.size()) && unexplained == 0;
}

// The idle handler and the barrier, against the app's own log.
bool compare_idle_and_barriers(const std::vector<nlohmann::json>& app_log,
                               const nlohmann::json& report) {
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
        find_reported(list(report, "slow_idle_handlers"), start);
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
                   const nlohmann::json& report) {
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

std::vector<nlohmann::json> read_app_log(const std::string& path) {
  return read_log_lines(path);
}

bool compare_with_app_log(const std::vector<nlohmann::json>& app_log,
                          const nlohmann::json& report) {
  bool stalls_ok = compare_stalls(app_log, report);
  bool others_ok = compare_idle_and_barriers(app_log, report);
  bool input_ok = compare_input(app_log, report);
  return stalls_ok && others_ok && input_ok;
}

}  // namespace looptrace
