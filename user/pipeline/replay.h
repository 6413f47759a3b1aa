// A recording replayed through the analysers: what `looptrace report` and
// the golden tests do.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "pipeline/analysis.h"
#include "pipeline/symbols.h"
#include "record/recording.h"

namespace looptrace {

struct ReplayInfo {
  uint64_t events = 0;
  std::string damage;  // empty: the recording ended at a block boundary
  bool ended = false;  // it has its EndEvent
  uint64_t unknown_records = 0;
};

// Feeds every event of `reader` to `analysis` (symbols to `symbols`). An
// error for a recording without a session header or thresholds below the
// recorded ones (the analysis's status); damage is not an error, it is
// reported in the info.
Result<ReplayInfo> replay(RecordingReader& reader, Analysis& analysis,
                          RecordedSymbols& symbols);

}  // namespace looptrace
