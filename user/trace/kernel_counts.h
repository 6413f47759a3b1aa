// What the kernel side counts while a trace runs, read on demand (the
// status line reads it once a second): spans per thread and role, and the
// counters behind the report's `lost` line. The loader's Tracer is one.
#pragma once

#include <vector>

#include "trace/events.h"

namespace looptrace {

class KernelCounts {
 public:
  virtual ~KernelCounts() = default;
  virtual std::vector<ThreadHistogram> read_histograms() const = 0;
  virtual Counters read_counters() const = 0;
};

}  // namespace looptrace
