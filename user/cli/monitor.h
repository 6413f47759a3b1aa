// `looptrace monitor`: always on. Every process of a built-in profile's
// runtime (or -p, --comm, --profile), followed as processes come and go,
// with a flight recorder whose window is dumped when a trigger fires, and
// Prometheus metrics (docs/looptrace.md, MONITOR).
#pragma once

#include <string>
#include <vector>

#include "plan/request.h"

namespace looptrace {

struct MonitorArgs {
  // The target, profile, thresholds, sampling and kernel options, as
  // `record` takes them (a subset is offered).
  RecordArgs rec;
  std::string window = "10s";
  std::string window_max = "32M";  // every process's window together
  std::vector<std::string> dump_if;
  std::string dump_dir;
  std::string dump_every = "60s";
  std::string dump_max_bytes = "1G";
  std::string metrics;  // ADDR:PORT; empty: none
  bool metrics_per_pid = false;
};

// Runs until SIGINT or SIGTERM; the process exit code.
int run_monitor(const MonitorArgs& args);

}  // namespace looptrace
