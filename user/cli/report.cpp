// `looptrace report FILE`: a recording replayed through the analysers into
// the same reports as `record`.
#include <iostream>

#include "base/exit.h"
#include "base/log.h"
#include "cli/record.h"
#include "pipeline/analysis.h"
#include "pipeline/replay.h"
#include "pipeline/symbols.h"
#include "plan/plan.h"
#include "record/recording.h"
#include "report/key_frames.h"

namespace looptrace {

int run_report(const ReportArgs& a) {
  auto reader = RecordingReader::Open(a.recording);
  if (!reader.ok()) return fail(reader.status());
  auto o = parse_thresholds(a.thresholds);
  if (!o.ok()) return fail(o.status());
  auto budgets = parse_budgets(a.fail_if);
  if (!budgets.ok()) return fail(budgets.status());
  if (Status st = report::check_app_code(a.app_code); !st.ok()) return fail(st);
  Outputs out;
  if (Status st = out.open(a.outputs); !st.ok()) return fail(st);

  RecordedSymbols symbols;
  Analysis analysis(&symbols, *o);
  auto info = replay(**reader, analysis, symbols);
  if (!info.ok())
    return fail(Status::Error(
        fmt::format("{}: {}", a.recording, info.status().message()),
        info.status().kind()));
  if (!info->damage.empty())
    log::warn("{}: damaged: {}; replayed the {} events before it", a.recording,
              info->damage, info->events);
  if (!info->ended)
    log::warn(
        "{}: the recording has no end (the tracer was killed or the disk "
        "filled): no histograms or loss counters; durations run to its last "
        "event",
        a.recording);
  if (info->unknown_records)
    log::warn("{}: {} records of a newer looptrace skipped", a.recording,
              info->unknown_records);
  if (uint64_t n = (*reader)->symbols_dropped())
    log::warn(
        "{}: {} symbols past the cap of {} MiB of names skipped: their "
        "addresses stay unnamed",
        a.recording, n, rec::kMaxSymbolBytes >> 20);
  const Findings& found = analysis.finish();
  ReportContext ctx = analysis.context();
  ctx.app_code = a.app_code;
  std::vector<BudgetOutcome> outcomes;
  std::vector<Status> failures =
      out.write_reports(found, ctx, *budgets, &outcomes);
  if (!a.quiet) failures.push_back(out.write_text(found, ctx));
  write_broken_budgets(std::cerr, outcomes);
  if (int rc = report_failures(failures); rc != 0) return rc;
  return any_budget_broken(outcomes) ? kBudgetBroken : 0;
}

}  // namespace looptrace
