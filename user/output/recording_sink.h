// The recorder as a sink of the live stream: every event written to the
// recording after the symbols the analysers and reports will ask about it,
// resolved while the process lives (docs/recording.md).
#pragma once

#include <vector>

#include "model/probe.h"
#include "pipeline/symbols.h"
#include "record/recording.h"
#include "trace/stream.h"

namespace looptrace {

class RecordingSink : public EventSink {
 public:
  // `probes`: the session's, which say what keys are code pointers.
  RecordingSink(RecordingWriter* writer, CapturingSymbolizer* capture,
                const std::vector<ProbeDef>* probes)
      : writer_(writer), capture_(capture), probes_(probes) {}
  void consume(const Event& ev) override {
    capture_->prepare(ev, *probes_);
    write_symbols();
    writer_->write(ev);
  }
  // The symbols resolved since the last event (the reports' own, at the
  // end).
  void write_symbols() {
    for (SymbolEvent& s : capture_->take()) writer_->write(Event(s));
  }

 private:
  RecordingWriter* writer_;
  CapturingSymbolizer* capture_;
  const std::vector<ProbeDef>* probes_;
};

}  // namespace looptrace
