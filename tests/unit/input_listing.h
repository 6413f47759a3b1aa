// An InputAnalysis built by hand in a test, completed the way the analyser
// would complete it when every event fits: all listed, all drawn, the
// totals and time range from them.
#pragma once

#include <algorithm>

#include "analysis/input.h"

namespace looptrace::fixture {

inline void list_all(InputAnalysis& a) {
  a.total = a.events.size();
  a.blamed = 0;
  a.first_ns = a.last_ns = 0;
  for (const InputEventInfo& e : a.events) {
    a.blamed += e.blame ? 1 : 0;
    for (uint64_t ns :
         {e.sent_ns, e.received_ns, e.finished_ns, e.finish_received_ns}) {
      if (ns == 0) continue;
      if (a.first_ns == 0 || ns < a.first_ns) a.first_ns = ns;
      a.last_ns = std::max(a.last_ns, ns);
    }
  }
  a.not_listed = 0;
  a.timeline = a.events;
  a.timeline_omitted = 0;
}

}  // namespace looptrace::fixture
