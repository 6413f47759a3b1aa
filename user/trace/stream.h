// The event stream's two ends: a source (the live tracer, a recording)
// hands every event, in order, to a sink (the analysis, a recorder, the
// live view, or several of them). docs/recording.md lists the events.
#pragma once

#include <vector>

#include "base/status.h"
#include "trace/events.h"

namespace looptrace {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // One event; a sink that keeps it moves from it, so a fan-out hands each
  // sink but the last a copy.
  virtual void consume(const Event& ev) = 0;
};

class EventSource {
 public:
  virtual ~EventSource() = default;
  // Hands every event to `sink`, in stream order, until the stream ends.
  // An error for a source that could not run; how it ended otherwise is
  // the source's own to say.
  virtual Status run(EventSink& sink) = 0;
};

// Every event to each sink, in the order given.
class FanOut : public EventSink {
 public:
  explicit FanOut(std::vector<EventSink*> sinks) : sinks_(std::move(sinks)) {}
  void consume(const Event& ev) override {
    for (EventSink* s : sinks_) s->consume(ev);
  }

 private:
  std::vector<EventSink*> sinks_;
};

}  // namespace looptrace
