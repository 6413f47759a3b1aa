// A recording as an event source: what `looptrace report` and the golden
// tests replay, through the same sinks as a live run.
#pragma once

#include "record/recording.h"
#include "trace/stream.h"

namespace looptrace {

class RecordingSource : public EventSource {
 public:
  explicit RecordingSource(RecordingReader& reader) : reader_(reader) {}
  // Every event of the recording, SymbolEvents included, to its end or its
  // first damage (reader().damage() says which).
  Status run(EventSink& sink) override {
    Event ev;
    while (reader_.next(&ev)) sink.consume(ev);
    return Status::Ok();
  }
  const RecordingReader& reader() const { return reader_; }

 private:
  RecordingReader& reader_;
};

}  // namespace looptrace
