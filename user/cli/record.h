// `looptrace record`: trace, analyse, report.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/duration.h"
#include "base/status.h"
#include "model/thresholds.h"
#include "output/outputs.h"
#include "plan/request.h"

namespace looptrace {

// `looptrace report FILE`: a recording replayed through the analysers.
struct ReportArgs {
  std::string recording;
  ThresholdArgs thresholds;  // raised thresholds; empty: the recorded ones
  OutputPaths outputs;       // --json, --perfetto, --folded, --html
  std::vector<std::string> fail_if;   // budgets
  std::vector<std::string> app_code;  // --app-code, for key lines
  bool quiet = false;
};

// Runs a whole tracing session; returns the process exit code.
int run_record(const RecordArgs& args);

// Replays a recording; returns the process exit code.
int run_report(const ReportArgs& args);

// Runs the reference app under looptrace with a built-in scenario.
int run_demo(const std::string& self_dir, const std::string& json_path);

}  // namespace looptrace
