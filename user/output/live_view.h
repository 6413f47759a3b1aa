// What a person sees while tracing: on a terminal, one status line updated
// in place (elapsed, dispatches, idle handlers, slow, input events, janky
// frames, lost); with --live, each slow span and janky frame as it ends;
// barrier stalls as they happen.
// Lines are printed above the status line, never through it.
#pragma once

#include <cstdint>
#include <string>

#include "output/events_writer.h"
#include "pipeline/analysis.h"
#include "report/report_common.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"
#include "trace/kernel_counts.h"
#include "trace/stream.h"

namespace looptrace {

// Also the analysis's AlertListener: barrier stalls and hangs are
// announced while the trace runs, as a line above the status line and as a
// JSON line to --events (never blocking; a failed write or a dropped line
// is reported at the end).
class LiveView : public EventSink, public AlertListener {
 public:
  // `live`: print slow spans as they end. `quiet`: print nothing but what
  // print() is given. The status line is drawn only on a terminal.
  LiveView(bool live, bool quiet, const SessionEvent& session,
           Symbolizer* symbols);

  void consume(const Event& ev) override;
  // Redraws the status line (at most four times a second); reads the
  // kernel's counts from `tracer` once a second. `input_events`: those the
  // analysis has seen (Analysis::input_events()).
  void progress(uint64_t now_ns, const KernelCounts& tracer,
                uint64_t input_events);
  // One line on stderr, above the status line.
  void print(const std::string& line);
  // Clears the status line for good.
  void finish();

  // --events, if given.
  void set_events(EventsWriter* events) { events_ = events; }
  void barrier_stall(const Barrier& b, uint64_t now_ns) override;
  void hang(const HangAlert& h) override;
  // Counted in the status line; with --live, one line each.
  void janky_frame(const JankyFrame& j) override;

 private:
  void clear();
  void draw();
  void alert(const std::string& line, const nlohmann::json& event);
  ReportContext alert_context() const;

  bool live_;
  bool quiet_;
  bool tty_;
  const SessionEvent& session_;
  Symbolizer* symbols_;
  EventsWriter* events_ = nullptr;
  bool drawn_ = false;
  uint64_t now_ns_ = 0;
  uint64_t last_counts_ns_ = 0;
  uint64_t dispatches_ = 0;  // every dispatch the kernel counted
  uint64_t idle_ = 0;        // every idle handler
  uint64_t slow_ = 0;
  uint64_t input_ = 0;  // input events the analysis has seen
  uint64_t lost_ = 0;
  bool frames_ = false;  // a probe has the frame role
  uint64_t janky_ = 0;   // janky frames so far
};

}  // namespace looptrace
