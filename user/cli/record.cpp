// `looptrace record`: wires the parts of a live run together. The plan
// (plan/) says what to trace; the live source (loader/) runs the tracer;
// the symbol feed, the recorder, the analysis and the live view consume
// its stream; the outputs format the findings.
#include "cli/record.h"

#include <iostream>
#include <memory>

#include "base/exit.h"
#include "loader/live_source.h"
#include "loader/tracer.h"
#include "output/live_view.h"
#include "output/recording_sink.h"
#include "pipeline/analysis.h"
#include "pipeline/symbols.h"
#include "plan/plan.h"
#include "plan/record_lines.h"
#include "proc/target.h"

namespace looptrace {
namespace {

class RecordSession : public LiveClient {
 public:
  explicit RecordSession(const RecordArgs& a) : a_(a) {}

  // Everything that can fail before anything is traced: the target, the
  // plan and its probes, the outputs (a bad path fails now, not after the
  // whole run), the command (started, held before exec), the tracer.
  Status prepare();
  // The session header (on disk first: a recording cut at any point says
  // what it is), the command let go, the banner; then the run.
  Status run();
  // Stops the command, writes every output; the process exit code.
  int finish();

  std::vector<std::pair<uint32_t, uint64_t>> queues_to_check(
      uint64_t now, bool all) override {
    return analysis_->queues_to_check(now, all);
  }
  void progress(uint64_t now, const Tracer& tracer) override {
    if (recorder_) recorder_->flush_if_due(now);
    view_->progress(now, tracer, analysis_->input_events());
  }

 private:
  void make_sinks();

  const RecordArgs& a_;
  Plan plan_;
  ResolveContext rctx_;
  Outputs out_;
  Target target_;
  std::unique_ptr<Tracer> tracer_;
  // The recording carries every symbol the analysers and outputs resolve:
  // with -o, what they resolve goes through `symbols_.capture`.
  LiveSymbols symbols_;
  std::unique_ptr<RecordingSink> recorder_;
  SessionEvent session_;
  std::unique_ptr<Analysis> analysis_;
  std::unique_ptr<LiveView> view_;
  LiveEnd end_;
};

Status RecordSession::prepare() {
  // The pid first: with no probe option its libraries choose the profile.
  LT_RETURN_IF_ERROR(target_.check(a_.pid, a_.command, a_.system_wide));
  LT_RETURN_IF_ERROR(parse_plan(a_, &plan_));
  rctx_.self_dir = a_.self_dir;
  rctx_.pid = a_.pid;
  rctx_.command_path = target_.command_path();
  LT_RETURN_IF_ERROR(check_bpf_environment());
  LT_RETURN_IF_ERROR(out_.open(a_.outputs));
  LT_RETURN_IF_ERROR(resolve_plan(rctx_, &plan_));
  // The command, started and held before its exec; its output must not
  // land inside a report written to stdout.
  LT_RETURN_IF_ERROR(target_.start(out_.stdout_taken()));
  LT_RETURN_IF_ERROR(plan_input(a_, rctx_, target_.pid(), &plan_));
  install_libbpf_logger();
  install_stop_handlers();
  auto tracer = Tracer::Create(plan_.opts);
  if (!tracer.ok()) return tracer.status();
  tracer_ = std::move(*tracer);
  session_ = session_header(a_, plan_, tracer_->input_hook(), target_.pid());
  make_sinks();
  return Status::Ok();
}

// The consumers of the stream: the recorder (-o), the analysis, the live
// view, which also announces the analysis's alerts.
void RecordSession::make_sinks() {
  RecordingWriter* recording = out_.recording().get();
  Symbolizer* symbols = symbols_.for_analysis(recording != nullptr);
  if (recording)
    recorder_ = std::make_unique<RecordingSink>(recording, &symbols_.capture,
                                                &session_.probes);
  analysis_ = std::make_unique<Analysis>(symbols);
  view_ = std::make_unique<LiveView>(a_.live, a_.quiet, session_, symbols);
  view_->set_events(out_.events());
  analysis_->set_alerts(view_.get());
}

Status RecordSession::run() {
  MappingsFeed feed(&symbols_.proc);
  std::vector<EventSink*> sinks{&feed};
  if (recorder_) sinks.push_back(recorder_.get());
  sinks.insert(sinks.end(), {analysis_.get(), view_.get()});
  FanOut stream(sinks);
  LiveOptions o;
  o.t0 = session_.start_ns = monotonic_ns();
  stream.consume(Event(session_));
  if (recorder_) recorder_->flush(o.t0);
  LT_RETURN_IF_ERROR(target_.release());
  if (!a_.quiet)
    print_banner(plan_, session_, target_.describe(),
                 recorder_ ? out_.recording()->path() : "");
  o.child = target_.child();
  o.pid = a_.pid;
  o.duration_ns = plan_.duration_ns;
  o.barriers = analysis_->has_barriers();
  o.input = session_.has_input;
  o.hang_ns = plan_.hang_ns;
  o.py_frames = &symbols_.python;
  o.js_frames = &symbols_.js;
  o.call_graph = plan_.opts.call_graph;
  // A recording of every span may be reported with lower thresholds:
  // then every stack is unwound.
  if (!plan_.opts.limits.record_all)
    o.unwind_slow_ns = plan_.opts.limits.slow_ns;
  LiveSource source(*tracer_, o, this);
  LT_RETURN_IF_ERROR(source.run(stream));
  end_ = source.end();
  view_->finish();
  return Status::Ok();
}

int RecordSession::finish() {
  const bool command_ended =
      stop_command(target_.child(), a_.quiet, end_.reason);
  // Debug files still being fetched are waited for now, not while tracing.
  symbols_.settle();
  const Findings& found = analysis_->finish();
  ReportContext ctx = analysis_->context();
  ctx.app_code = a_.app_code;
  // Every failure is one line; the reports are written whatever failed.
  std::vector<Status> failures{end_.run_status, end_.stop_status};
  std::vector<BudgetOutcome> outcomes;
  for (Status& st : out_.write_reports(found, ctx, plan_.budgets, &outcomes))
    failures.push_back(st);
  if (!a_.quiet) failures.push_back(out_.write_text(found, ctx));
  if (recorder_) failures.push_back(recorder_->close());
  // Removing the probes takes the kernel a while (Tracer::stop): once the
  // reports are out.
  tracer_.reset();
  write_broken_budgets(std::cerr, outcomes);
  if (int rc = report_failures(failures); rc != 0) return rc;
  // A broken budget is the lab script's answer, over the command's own.
  if (any_budget_broken(outcomes)) return kBudgetBroken;
  // A command that ended on its own gives its status, as perf and shells
  // do; one that looptrace stopped (--duration, a signal to looptrace)
  // does not.
  return command_ended ? shell_status(target_.child()->status()) : 0;
}

}  // namespace

int run_record(const RecordArgs& a) {
  RecordSession session(a);
  if (Status st = session.prepare(); !st.ok()) return fail(st);
  if (!a.preamble.empty()) std::cerr << a.preamble;
  if (Status st = session.run(); !st.ok()) return fail(st);
  return session.finish();
}

}  // namespace looptrace
