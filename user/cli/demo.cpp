// `looptrace demo`: the reference app under looptrace, then the app's own
// ground-truth log beside what looptrace found.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/log.h"
#include "cli/record.h"
#include "profiles/resolve.h"
#include "report/app_log_check.h"

namespace looptrace {
namespace {

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

  const std::vector<nlohmann::json> app_log = read_app_log(log_path);
  std::ifstream in(report_path);
  nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded()) {
    log::error("could not read back {}", report_path);
    return 1;
  }
  if (compare_with_app_log(app_log, report)) return 0;
  keep = true;
  std::printf("\nThe app's log is kept in %s\n", log_path.c_str());
  return 1;
}

}  // namespace looptrace
