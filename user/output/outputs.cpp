#include "output/outputs.h"

#include <filesystem>
#include <iostream>
#include <utility>

#include "report/folded_report.h"
#include "report/html_report.h"
#include "report/perfetto_report.h"
#include "report/pprof_report.h"

namespace looptrace {

Status Outputs::open(const OutputPaths& paths) {
  struct Want {
    const char* option;
    const std::string& path;
    std::unique_ptr<OutputFile>* file;
  };
  std::unique_ptr<OutputFile> recording, events;
  std::vector<Want> wants{
      {"--json", paths.json, &json_},
      {"--events", paths.events, &events},
      {"-o", paths.recording, &recording},
      {"--perfetto", paths.perfetto, &perfetto_},
      {"--folded", paths.folded, &folded_},
      {"--folded-blocked", paths.folded_blocked, &folded_blocked_},
      {"--html", paths.html, &html_},
      {"--pprof", paths.pprof, &pprof_}};
  // One file for two outputs would be moved aside by the second open; two
  // on stdout would interleave.
  std::vector<std::pair<const char*, std::filesystem::path>> seen;
  for (const Want& w : wants) {
    if (w.path.empty()) continue;
    std::error_code ec;
    std::filesystem::path canon =
        w.path == "-" ? std::filesystem::path("-")
                      : std::filesystem::weakly_canonical(w.path, ec);
    if (ec) canon = w.path;
    for (const auto& [option, p] : seen)
      if (p == canon)
        return Status::Error(w.path == "-"
                                 ? fmt::format("{} and {} both write to stdout",
                                               option, w.option)
                                 : fmt::format("{} and {} both name {}", option,
                                               w.option, w.path),
                             ErrorKind::kUsage);
    seen.emplace_back(w.option, canon);
    if (w.path == "-") stdout_taken_ = true;
  }
  if (paths.recording == "-")
    return Status::Error("-o: a recording is binary; give a file",
                         ErrorKind::kUsage);
  if (paths.pprof == "-")
    return Status::Error("--pprof: a profile is binary; give a file",
                         ErrorKind::kUsage);
  for (const Want& w : wants) {
    if (w.path.empty()) continue;
    auto f = OutputFile::Create(w.option, w.path);
    if (!f.ok()) return f.status();
    *w.file = std::move(*f);
  }
  if (recording)
    recording_ = std::make_unique<RecordingWriter>(std::move(recording));
  if (events) events_ = std::make_unique<EventsWriter>(std::move(events));
  return Status::Ok();
}

std::vector<Status> Outputs::write_reports(
    const Findings& found, const ReportContext& ctx,
    const std::vector<Budget>& budgets, std::vector<BudgetOutcome>* outcomes) {
  std::vector<Status> failures;
  auto done = [&failures](Status st) {
    if (!st.ok()) failures.push_back(std::move(st));
  };
  // The live events first: how many of their lines were dropped goes into
  // the JSON report.
  if (events_) done(events_->close());
  if (json_ || !budgets.empty()) {
    // One document: the budgets judge the numbers the JSON shows.
    nlohmann::json doc = findings_to_json(found, ctx);
    // Only then: the replay of the recording writes the same JSON.
    if (events_ && events_->dropped() != 0)
      doc["events_dropped"] = events_->dropped();
    if (!budgets.empty()) {
      *outcomes = evaluate_budgets(budgets, doc);
      doc["budgets"] = budgets_to_json(*outcomes);
    }
    if (json_) done(write_json_report(*json_, found, ctx, std::move(doc)));
  }
  // Each formatter's own error first (a stream gone bad), then the file's.
  auto write = [&](std::unique_ptr<OutputFile>& f, auto&& writer) {
    if (!f) return;
    Status st = writer(f->stream(), found, ctx);
    Status cl = f->close();
    done(cl.ok() ? st : cl);
  };
  write(perfetto_, write_perfetto);
  write(folded_, write_folded);
  write(folded_blocked_, write_folded_blocked);
  write(html_, write_html);
  write(pprof_, write_pprof);
  return failures;
}

Status Outputs::write_text(const Findings& found,
                           const ReportContext& ctx) const {
  if (stdout_taken_) {
    write_text_reports(std::cerr, found, ctx);
    return Status::Ok();
  }
  auto text = OutputFile::Create("text report", "-");
  if (!text.ok()) return text.status();
  write_text_reports((*text)->stream(), found, ctx);
  return (*text)->close();
}

}  // namespace looptrace
