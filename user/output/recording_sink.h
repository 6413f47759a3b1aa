// The recorder as a sink of the live stream: every event written to the
// recording after the symbols the analysers and reports will ask about it,
// resolved while the process lives (docs/recording.md).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "base/status.h"
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
  // Called as the trace runs: a SIGKILL loses at most the last half second
  // of the recording.
  void flush_if_due(uint64_t now_ns) {
    if (now_ns - last_flush_ns_ >= rec::kFlushIntervalNs) flush(now_ns);
  }
  void flush(uint64_t now_ns) {
    last_flush_ns_ = now_ns;
    (void)writer_->flush();
  }
  // Once the reports are written: their symbols, then the file closed. A
  // failure, or events that could not be written, as one error.
  Status close() {
    write_symbols();
    Status st = writer_->close();
    if (st.ok() && writer_->lost() == 0) return st;
    return Status::Error(fmt::format(
        "{}{}: {} events not recorded", st.ok() ? "" : st.message(),
        st.ok() ? "recording " + writer_->path() : "", writer_->lost()));
  }

 private:
  RecordingWriter* writer_;
  uint64_t last_flush_ns_ = 0;
  CapturingSymbolizer* capture_;
  const std::vector<ProbeDef>* probes_;
};

}  // namespace looptrace
