#include "pipeline/replay.h"

#include "record/recording_source.h"

namespace looptrace {
namespace {

// Symbols to the table, everything else to the analysis; nothing more once
// the analysis refused the session header (thresholds below the recorded).
class ReplaySink : public EventSink {
 public:
  ReplaySink(Analysis& analysis, RecordedSymbols& symbols)
      : analysis_(analysis), symbols_(symbols) {}
  void consume(const Event& ev) override {
    if (const auto* s = std::get_if<SymbolEvent>(&ev)) {
      symbols_.add(*s);
      return;
    }
    if (refused_) return;
    bool was_configured = analysis_.configured();
    analysis_.consume(ev);
    // Thresholds are checked against the recorded ones first thing.
    refused_ =
        !was_configured && analysis_.configured() && !analysis_.status().ok();
  }
  bool refused() const { return refused_; }

 private:
  Analysis& analysis_;
  RecordedSymbols& symbols_;
  bool refused_ = false;
};

}  // namespace

Result<ReplayInfo> replay(RecordingReader& reader, Analysis& analysis,
                          RecordedSymbols& symbols) {
  RecordingSource source(reader);
  ReplaySink sink(analysis, symbols);
  LT_RETURN_IF_ERROR(source.run(sink));
  if (sink.refused()) return analysis.status();
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
