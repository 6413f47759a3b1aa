// The reference app's own log (refapp --log: one JSON object a line, times
// from CLOCK_MONOTONIC) beside the JSON report of a run that traced it, as
// `looptrace demo` prints it: each injected stall, the idle handler, the
// sync barrier and the input events the app logged, with what looptrace
// measured and the error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace looptrace {

// The log's lines; malformed ones are skipped.
std::vector<nlohmann::json> read_app_log(const std::string& path);

// Prints the comparison to stdout. True when looptrace found everything the
// app logged (every stall, the idle handler and the barrier, every
// acknowledged input event) and reported no slow dispatch the app did not
// log.
bool compare_with_app_log(const std::vector<nlohmann::json>& app_log,
                          const nlohmann::json& report);

}  // namespace looptrace
