// `looptrace record`: wires the parts of a live run together. The plan
// (plan/) says what to trace; the live source (loader/) runs the tracer;
// the symbol feed, the recorder, the analysis and the live view consume
// its stream; the outputs format the findings.
#include "cli/record.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/live_view.h"
#include "cli/record_lines.h"
#include "cli/status.h"
#include "loader/live_source.h"
#include "loader/tracer.h"
#include "output/recording_sink.h"
#include "pipeline/analysis.h"
#include "plan/plan.h"
#include "proc/pid.h"
#include "report/barrier_report.h"
#include "report/hang_report.h"
#include "symbolize/kernel_symbols.h"
#include "symbolize/proc_symbolizer.h"

namespace looptrace {
namespace {

class RecordSession : public LiveClient, public AlertListener {
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
    // A SIGKILL loses at most the last half second of the recording.
    if (recording_ && now - last_flush_ >= rec::kFlushIntervalNs) {
      last_flush_ = now;
      (void)recording_->flush();
    }
    view_->progress(now, tracer, analysis_->input_events());
  }
  void barrier_stall(const Barrier& b, uint64_t now) override {
    const ReportContext ctx = alert_context();
    const uint64_t held = now - b.posted_ns;
    alert(barrier_stall_line(b, held, ctx), barrier_stall_event(b, held, ctx));
  }
  void hang(const HangAlert& h) override {
    const ReportContext ctx = alert_context();
    alert(hang_line(h, ctx), hang_event(h, ctx));
  }

 private:
  Status start_command();
  // A barrier stall or a hang, announced while the trace runs: above the
  // status line, and to --events (a failed write is reported at the end).
  void alert(const std::string& line, const nlohmann::json& event) {
    view_->print(line);
    if (!out_.events()) return;
    out_.events()->stream() << event.dump() << '\n';
    out_.events()->flush();
  }
  ReportContext alert_context() const {
    ReportContext ctx;
    ctx.probes = &session_.probes;
    ctx.symbolizer = symbols_;
    ctx.barrier_stall_ns = plan_.opts.limits.barrier_stall_ns;
    return ctx;
  }

  const RecordArgs& a_;
  Plan plan_;
  ResolveContext rctx_;
  Outputs out_;
  std::unique_ptr<Child> child_;
  pid_t target_ = -1;
  std::unique_ptr<Tracer> tracer_;
  // The recording carries every symbol the analysers and outputs resolve:
  // what they resolve goes through `capture_`.
  ProcSymbolizer proc_symbols_;
  SystemSymbolizer live_symbols_{&proc_symbols_};
  CapturingSymbolizer capture_{&live_symbols_};
  RecordingWriter* recording_ = nullptr;
  std::unique_ptr<RecordingSink> recorder_;
  Symbolizer* symbols_ = nullptr;
  SessionEvent session_;
  std::unique_ptr<Analysis> analysis_;
  std::unique_ptr<LiveView> view_;
  LiveEnd end_;
  uint64_t last_flush_ = 0;
};

Status RecordSession::prepare() {
  int targets = (a_.pid > 0) + (!a_.command.empty()) + a_.system_wide;
  if (targets > 1)
    return Status::Error(
        "give only one of -p PID, -- COMMAND and --system-wide",
        ErrorKind::kUsage);
  // The pid first: with no probe option its libraries choose the profile.
  if (a_.pid > 0) LT_RETURN_IF_ERROR(proc::check_pid_target(a_.pid));
  LT_RETURN_IF_ERROR(parse_plan(a_, &plan_));
  rctx_.self_dir = a_.self_dir;
  rctx_.pid = a_.pid;
  if (!a_.command.empty()) {
    auto path = find_command(a_.command[0]);
    if (!path.ok()) return path.status();
    rctx_.command_path = *path;
  }
  LT_RETURN_IF_ERROR(check_bpf_environment());
  LT_RETURN_IF_ERROR(out_.open(a_.outputs));
  LT_RETURN_IF_ERROR(resolve_plan(rctx_, &plan_));
  LT_RETURN_IF_ERROR(start_command());
  LT_RETURN_IF_ERROR(plan_input(a_, rctx_, target_, &plan_));
  install_libbpf_logger();
  install_stop_handlers();
  auto tracer = Tracer::Create(plan_.opts);
  if (!tracer.ok()) return tracer.status();
  tracer_ = std::move(*tracer);
  recording_ = out_.recording().get();
  symbols_ = recording_ ? static_cast<Symbolizer*>(&capture_) : &live_symbols_;
  analysis_ = std::make_unique<Analysis>(symbols_);
  analysis_->set_alerts(this);
  session_ = session_header(a_, plan_, tracer_->input_hook(), target_);
  if (recording_)
    recorder_ = std::make_unique<RecordingSink>(recording_, &capture_,
                                                &session_.probes);
  view_ = std::make_unique<LiveView>(a_.live, a_.quiet, session_, symbols_);
  return Status::Ok();
}

// The command, started and held before its exec; its output must not land
// inside a report written to stdout.
Status RecordSession::start_command() {
  target_ = a_.pid > 0 ? a_.pid : -1;
  if (a_.command.empty()) return Status::Ok();
  child_ = std::make_unique<Child>();
  LT_RETURN_IF_ERROR(
      child_->start(rctx_.command_path, a_.command, out_.stdout_taken()));
  target_ = child_->pid();
  return Status::Ok();
}

Status RecordSession::run() {
  MappingsFeed feed(&proc_symbols_);
  std::vector<EventSink*> sinks{&feed};
  if (recorder_) sinks.push_back(recorder_.get());
  sinks.insert(sinks.end(), {analysis_.get(), view_.get()});
  FanOut stream(sinks);
  LiveOptions o;
  o.t0 = last_flush_ = session_.start_ns = monotonic_ns();
  stream.consume(Event(session_));
  if (recording_) (void)recording_->flush();
  if (child_) {
    child_->release();
    if (int err = child_->wait_exec(); err != 0)
      return command_error(a_.command[0], err);
  }
  std::string what =
      child_       ? fmt::format("pid {} ({})", child_->pid(), a_.command[0])
      : a_.pid > 0 ? fmt::format("pid {}", a_.pid)
                   : std::string("all processes");
  if (!a_.quiet)
    print_banner(plan_, session_, what, recording_ ? recording_->path() : "");
  o.child = child_.get();
  o.pid = a_.pid;
  o.duration_ns = plan_.duration_ns;
  o.barriers = analysis_->has_barriers();
  o.input = session_.has_input;
  o.hang_ns = plan_.hang_ns;
  LiveSource source(*tracer_, o, this);
  LT_RETURN_IF_ERROR(source.run(stream));
  end_ = source.end();
  view_->finish();
  return Status::Ok();
}

int RecordSession::finish() {
  const bool command_ended = child_ && child_->terminate();
  report_stop(a_.quiet, end_.reason, command_ended ? child_->status() : -1);
  const Findings& found = analysis_->finish();
  const ReportContext& ctx = analysis_->context();
  // Every failure is one line; the reports are written whatever failed.
  std::vector<Status> failures{end_.run_status, end_.stop_status};
  std::vector<BudgetOutcome> outcomes;
  for (Status& st : out_.write_reports(found, ctx, plan_.budgets, &outcomes))
    failures.push_back(st);
  if (!a_.quiet) failures.push_back(out_.write_text(found, ctx));
  if (recording_) {
    recorder_->write_symbols();  // those the reports resolved last
    Status st = recording_->close();
    if (!st.ok() || recording_->lost())
      failures.push_back(Status::Error(fmt::format(
          "{}{}: {} events not recorded", st.ok() ? "" : st.message(),
          st.ok() ? "recording " + recording_->path() : "",
          recording_->lost())));
  }
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
  return command_ended ? shell_status(child_->status()) : 0;
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
