// The files a run writes, opened before tracing starts (a bad path fails
// before anything is traced) and written from the Findings at the end.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/output_file.h"
#include "base/status.h"
#include "budget/budget.h"
#include "output/events_writer.h"
#include "record/recording.h"
#include "report/findings.h"
#include "report/report.h"

namespace looptrace {

struct OutputPaths {
  std::string json;
  std::string events;     // live events, JSON lines (record only)
  std::string recording;  // -o (record only)
  std::string perfetto;
  std::string folded;
  std::string folded_blocked;  // --folded-blocked: off-CPU, in microseconds
  std::string html;
  std::string pprof;  // --pprof: gzipped profile.proto
};

class Outputs {
 public:
  // Creates every file named (0600, never through a link; an old file
  // moves to FILE.old). Two outputs naming one file, or two on stdout, are
  // a usage error.
  Status open(const OutputPaths& paths);

  // Some output goes to stdout ("-"): the text report and the traced
  // command's stdout go to stderr instead.
  bool stdout_taken() const { return stdout_taken_; }

  // --events, or null: its lines never block (EventsWriter).
  EventsWriter* events() { return events_.get(); }
  std::unique_ptr<RecordingWriter>& recording() { return recording_; }

  // Judges `budgets` on the findings (the JSON report's numbers) into
  // *outcomes, then writes and closes every report output (the JSON says
  // which budgets held, and how many --events lines were dropped); one
  // Status per failure.
  std::vector<Status> write_reports(const Findings& found,
                                    const ReportContext& ctx,
                                    const std::vector<Budget>& budgets,
                                    std::vector<BudgetOutcome>* outcomes);
  // The text report: on stdout, or on stderr when an output took stdout.
  Status write_text(const Findings& found, const ReportContext& ctx) const;

 private:
  std::unique_ptr<OutputFile> json_, perfetto_, folded_, folded_blocked_, html_,
      pprof_;
  std::unique_ptr<EventsWriter> events_;
  std::unique_ptr<RecordingWriter> recording_;
  bool stdout_taken_ = false;
};

}  // namespace looptrace
