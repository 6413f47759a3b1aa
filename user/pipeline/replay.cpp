#include "pipeline/replay.h"

namespace looptrace {

Result<ReplayInfo> replay(RecordingReader& reader, Analysis& analysis,
                          RecordedSymbols& symbols) {
  Event ev;
  while (reader.next(&ev)) {
    if (const auto* s = std::get_if<SymbolEvent>(&ev)) {
      symbols.add(*s);
      continue;
    }
    bool was_configured = analysis.configured();
    analysis.consume(ev);
    // Thresholds are checked against the recorded ones first thing.
    if (!was_configured && analysis.configured() && !analysis.status().ok())
      return analysis.status();
  }
  ReplayInfo info;
  info.events = reader.events();
  info.damage = reader.damage();
  info.ended = analysis.ended();
  info.unknown_records = reader.unknown_records();
  if (!analysis.configured())
    return Status::Error(
        "no session header" +
            (info.damage.empty() ? std::string() : " (" + info.damage + ")"),
        ErrorKind::kUsage);
  return info;
}

}  // namespace looptrace
