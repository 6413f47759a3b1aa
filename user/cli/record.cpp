#include "cli/record.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/duration.h"
#include "base/log.h"
#include "base/output_file.h"
#include "cli/command.h"
#include "cli/live.h"
#include "cli/live_view.h"
#include "cli/outputs.h"
#include "cli/plan.h"
#include "loader/tracer.h"
#include "pipeline/analysis.h"
#include "pipeline/replay.h"
#include "pipeline/symbols.h"
#include "proc/pid.h"
#include "profiles/profile.h"
#include "record/recording.h"
#include "report/barrier_report.h"
#include "report/hang_report.h"
#include "report/report_common.h"
#include "symbolize/kernel_symbols.h"
#include "symbolize/proc_symbolizer.h"

namespace looptrace {
namespace {

// Exit status of a run whose --fail-if budgets were broken (EXIT STATUS).
constexpr int kBudgetBroken = 3;

int fail(const Status& st) {
  log::error("{}", st.message());
  if (!st.hint().empty()) std::fprintf(stderr, "hint: %s\n", st.hint().c_str());
  return st.exit_code();
}

// "looptrace: stopped: command exited with status 3". `command_status` is
// the wait status of a command that ended on its own, else -1. How a
// command ended is said even with -q when it failed: it is the exit code.
void report_stop(const RecordArgs& a, const std::string& reason,
                 int command_status) {
  if (command_status == -1) {
    if (!a.quiet)
      std::fprintf(stderr, "looptrace: stopped: %s\n", reason.c_str());
    return;
  }
  std::string end = "command " + describe_end(command_status);
  bool show = !a.quiet || shell_status(command_status) != 0;
  if (reason == kCommandExited) {
    if (show) std::fprintf(stderr, "looptrace: stopped: %s\n", end.c_str());
    return;
  }
  // It ended on its own just as looptrace stopped for another reason.
  if (!a.quiet)
    std::fprintf(stderr, "looptrace: stopped: %s\n", reason.c_str());
  if (show) std::fprintf(stderr, "looptrace: %s\n", end.c_str());
}

// Every failure one line; the exit code of the first.
int report_failures(const std::vector<Status>& failures) {
  int rc = 0;
  for (const Status& st : failures) {
    if (st.ok()) continue;
    int code = fail(st);
    if (rc == 0) rc = code;
  }
  return rc;
}

SessionEvent make_session(const RecordArgs& a, const Plan& plan,
                          const Tracer& tracer, pid_t target) {
  SessionEvent s;
  s.looptrace_version = LOOPTRACE_VERSION;
  s.thresholds = plan.opts.limits;
  s.probes = plan.probes;
  s.command_line = a.command.empty() ? "" : join_command(a.command);
  s.target_pid = target;
  s.has_input = plan.opts.input.mode != InputMode::kOff;
  s.input_hook = tracer.input_hook();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) s.hostname = host;
  utsname u{};
  if (uname(&u) == 0) s.kernel = u.release;
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  s.start_realtime_ns = static_cast<uint64_t>(rt.tv_sec) * 1'000'000'000ull +
                        static_cast<uint64_t>(rt.tv_nsec);
  return s;
}

// The text report: on stdout, or on stderr when an output took stdout.
Status write_text(const Outputs& out, const Findings& found,
                  const ReportContext& ctx) {
  if (out.stdout_taken()) {
    write_text_reports(std::cerr, found, ctx);
    return Status::Ok();
  }
  auto text = OutputFile::Create("text report", "-");
  if (!text.ok()) return text.status();
  write_text_reports((*text)->stream(), found, ctx);
  return (*text)->close();
}

// One `record` run: plan -> source (the tracer) -> recorder -> analysers
// -> outputs. Each step is a method; run_record calls them in order.
class RecordSession {
 public:
  explicit RecordSession(const RecordArgs& a) : a_(a) {}

  // Everything that can fail before anything is traced: the target, the
  // plan and its probes, the outputs (a bad path fails now, not after the
  // whole run), the command (started, held before exec), the tracer.
  Status prepare();
  // The session header (on disk first: a recording cut at any point says
  // what it is), the command let go, the banner.
  Status start();
  // Until the command ends, --duration, or a signal.
  LiveEnd trace();
  // Stops the command, writes every output; the process exit code.
  int finish(const LiveEnd& end);

 private:
  void on_event(Event&& ev);
  // A barrier stall or a hang, announced while the trace runs.
  void alert(const std::string& line, const nlohmann::json& event);
  void print_banner() const;
  ReportContext alert_context() const;

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
  Symbolizer* symbols_ = nullptr;
  SessionEvent session_;
  std::unique_ptr<Analysis> analysis_;
  std::unique_ptr<LiveView> view_;
  uint64_t t0_ = 0;
};

Status RecordSession::prepare() {
  int targets = (a_.pid > 0) + (!a_.command.empty()) + a_.system_wide;
  if (targets > 1)
    return Status::Error(
        "give only one of -p PID, -- COMMAND and --system-wide",
        ErrorKind::kUsage);
  // The pid first: with no probe option its libraries choose the profile.
  if (a_.pid > 0)
    if (Status st = proc::check_pid_target(a_.pid); !st.ok()) return st;
  if (Status st = parse_plan(a_, &plan_); !st.ok()) return st;
  rctx_.self_dir = a_.self_dir;
  rctx_.pid = a_.pid;
  if (!a_.command.empty()) {
    auto path = find_command(a_.command[0]);
    if (!path.ok()) return path.status();
    rctx_.command_path = *path;
  }
  if (Status st = check_bpf_environment(); !st.ok()) return st;
  if (Status st = out_.open(a_.outputs); !st.ok()) return st;
  if (Status st = resolve_plan(rctx_, &plan_); !st.ok()) return st;
  target_ = a_.pid > 0 ? a_.pid : -1;
  if (!a_.command.empty()) {
    child_ = std::make_unique<Child>();
    // Its output must not land inside a report written to stdout.
    if (Status st =
            child_->start(rctx_.command_path, a_.command, out_.stdout_taken());
        !st.ok())
      return st;
    target_ = child_->pid();
  }
  if (Status st = plan_input(a_, rctx_, target_, &plan_); !st.ok()) return st;

  install_libbpf_logger();
  install_stop_handlers();
  auto tracer = Tracer::Create(plan_.opts);
  if (!tracer.ok()) return tracer.status();
  tracer_ = std::move(*tracer);

  recording_ = out_.recording().get();
  symbols_ = recording_ ? static_cast<Symbolizer*>(&capture_) : &live_symbols_;
  analysis_ = std::make_unique<Analysis>(symbols_);
  session_ = make_session(a_, plan_, *tracer_, target_);
  view_ = std::make_unique<LiveView>(a_.live, a_.quiet, session_, symbols_);
  return Status::Ok();
}

ReportContext RecordSession::alert_context() const {
  ReportContext ctx;
  ctx.probes = &session_.probes;
  ctx.symbolizer = symbols_;
  ctx.barrier_stall_ns = plan_.opts.limits.barrier_stall_ns;
  return ctx;
}

void RecordSession::alert(const std::string& line,
                          const nlohmann::json& event) {
  view_->print(line);
  // A failed write is reported at the end (OutputFile::close); the trace
  // goes on.
  if (out_.events()) {
    out_.events()->stream() << event.dump() << '\n';
    out_.events()->flush();
  }
}

// The one sink of the tracer's events: mappings to the symbolizer, every
// event to the recording (after the symbols it needs), the analysers, the
// live alerts and the status line.
void RecordSession::on_event(Event&& ev) {
  if (auto* m = std::get_if<MappingsEvent>(&ev))
    proc_symbols_.add_mappings(m->pid, m->maps);
  if (recording_) {
    capture_.prepare(ev, session_.probes);
    for (SymbolEvent& s : capture_.take()) recording_->write(Event(s));
    recording_->write(ev);
  }
  analysis_->consume(ev);
  if (const auto* t = std::get_if<TickEvent>(&ev)) {
    for (const Barrier& b : analysis_->take_new_stalls()) {
      ReportContext ctx = alert_context();
      uint64_t held = t->ts_ns - b.posted_ns;
      alert(barrier_stall_line(b, held, ctx),
            barrier_stall_event(b, held, ctx));
    }
  }
  if (std::holds_alternative<HangEvent>(ev) ||
      std::holds_alternative<SpanEvent>(ev)) {
    for (const HangAlert& h : analysis_->take_hang_alerts()) {
      ReportContext ctx = alert_context();
      alert(hang_line(h, ctx), hang_event(h, ctx));
    }
  }
  view_->consume(ev);
}

Status RecordSession::start() {
  t0_ = monotonic_ns();
  session_.start_ns = t0_;
  on_event(Event(session_));
  if (recording_) (void)recording_->flush();
  if (child_) {
    child_->release();
    if (int err = child_->wait_exec(); err != 0)
      return command_error(a_.command[0], err);
  }
  if (!a_.quiet) print_banner();
  return Status::Ok();
}

void RecordSession::print_banner() const {
  std::string what =
      child_       ? fmt::format("pid {} ({})", child_->pid(), a_.command[0])
      : a_.pid > 0 ? fmt::format("pid {}", a_.pid)
                   : std::string("all processes");
  std::string input;
  if (session_.has_input)
    input = fmt::format(" and input channels ({})", session_.input_hook);
  std::string to = recording_
                       ? fmt::format(", recording to {}", recording_->path())
                       : std::string();
  if (!plan_.profile_note.empty()) {
    // Found, not asked for: say where each probe went.
    std::fprintf(stderr, "%s\n", plan_.profile_note.c_str());
    for (const ProbeDef& p : plan_.probes)
      std::fprintf(
          stderr, "looptrace:   %s %s: %s %s at offset %#llx%s\n",
          role_name(p.role),
          p.label.empty() ? p.resolved_symbol.c_str() : p.label.c_str(),
          p.path.c_str(), p.symbol.c_str(),
          static_cast<unsigned long long>(p.file_offset),
          p.version.empty() ? "" : (" (" + p.version + ")").c_str());
  }
  // Display connections a profile brought along: which, and how decoded.
  if (!plan_.input_note.empty())
    std::fprintf(stderr, "%s\n", plan_.input_note.c_str());
  if (!plan_.gsource_note.empty())
    std::fprintf(stderr, "%s\n", plan_.gsource_note.c_str());
  std::fprintf(stderr,
               "looptrace: tracing %zu probe%s%s in %s%s; Ctrl-C to stop\n",
               plan_.probes.size(), plan_.probes.size() == 1 ? "" : "s",
               input.c_str(), what.c_str(), to.c_str());
}

LiveEnd RecordSession::trace() {
  LiveHooks hooks;
  hooks.hang_ns = plan_.hang_ns;
  hooks.queues_to_check = [this](uint64_t now, bool all) {
    return analysis_->queues_to_check(now, all);
  };
  uint64_t last_flush = t0_;
  hooks.on_progress = [&](uint64_t now) {
    // A SIGKILL loses at most the last half second of the recording.
    if (recording_ && now - last_flush >= rec::kFlushIntervalNs) {
      last_flush = now;
      (void)recording_->flush();
    }
    view_->progress(now, *tracer_, analysis_->input_events());
  };
  Tracer::Sink sink = [this](Event&& ev) { on_event(std::move(ev)); };
  LiveEnd end =
      run_live(*tracer_, child_.get(), a_.pid, t0_, plan_.duration_ns,
               analysis_->has_barriers(), session_.has_input, sink, hooks);
  view_->finish();
  return end;
}

int RecordSession::finish(const LiveEnd& end) {
  const bool command_ended = child_ && child_->terminate();
  report_stop(a_, end.reason, command_ended ? child_->status() : -1);

  const Findings& found = analysis_->finish();
  const ReportContext& ctx = analysis_->context();
  // Every failure is one line; the reports are written whatever failed.
  std::vector<Status> failures{end.run_status, end.stop_status};
  std::vector<BudgetOutcome> outcomes;
  for (Status& st : out_.write_reports(found, ctx, plan_.budgets, &outcomes))
    failures.push_back(st);
  if (!a_.quiet) failures.push_back(write_text(out_, found, ctx));
  if (recording_) {
    // Symbols the reports resolved last (after every report).
    for (SymbolEvent& s : capture_.take()) recording_->write(Event(s));
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
  RecordSession run(a);
  if (Status st = run.prepare(); !st.ok()) return fail(st);
  if (Status st = run.start(); !st.ok()) return fail(st);
  return run.finish(run.trace());
}

int run_report(const ReportArgs& a) {
  auto reader = RecordingReader::Open(a.recording);
  if (!reader.ok()) return fail(reader.status());
  ThresholdOverrides o;
  auto dur = [](const std::string& text, std::optional<uint64_t>* into,
                const char* option) -> Status {
    if (text.empty()) return Status::Ok();
    auto d = parse_duration(text);
    if (!d.ok())
      return Status::Error(fmt::format("{}: {}", option, d.status().message()),
                           ErrorKind::kUsage);
    if (*d == 0)
      return Status::Error(fmt::format("{} must be above 0", option),
                           ErrorKind::kUsage);
    *into = *d;
    return Status::Ok();
  };
  for (Status st :
       {dur(a.slow, &o.slow_ns[LT_ROLE_DISPATCH], "--slow"),
        // As in record: --slow-idle defaults to --slow.
        dur(a.slow_idle.empty() ? a.slow : a.slow_idle,
            &o.slow_ns[LT_ROLE_IDLE], "--slow-idle"),
        dur(a.slow_delivery, &o.slow_ns[LT_ROLE_DELIVERY], "--slow-delivery"),
        dur(a.slow_input, &o.slow_input_ns, "--slow-input"),
        dur(a.barrier_stall, &o.barrier_stall_ns, "--barrier-stall")})
    if (!st.ok()) return fail(st);
  auto budgets = parse_budgets(a.fail_if);
  if (!budgets.ok()) return fail(budgets.status());
  Outputs out;
  if (Status st = out.open(a.outputs); !st.ok()) return fail(st);

  RecordedSymbols symbols;
  Analysis analysis(&symbols, o);
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
  const Findings& found = analysis.finish();
  const ReportContext& ctx = analysis.context();
  std::vector<BudgetOutcome> outcomes;
  std::vector<Status> failures =
      out.write_reports(found, ctx, *budgets, &outcomes);
  if (!a.quiet) failures.push_back(write_text(out, found, ctx));
  write_broken_budgets(std::cerr, outcomes);
  if (int rc = report_failures(failures); rc != 0) return rc;
  return any_budget_broken(outcomes) ? kBudgetBroken : 0;
}

int run_profiles() {
  for (const std::string& name : builtin_profile_names()) {
    auto p = load_profile(name);
    if (!p.ok()) return fail(p.status());
    std::printf("%-8s %s\n", p->name.c_str(), p->description.c_str());
    for (const ProbeDef& d : p->probes)
      std::printf("         %-14s %s:%s%s%s\n", role_name(d.role),
                  d.binary.c_str(), d.symbol.c_str(),
                  d.label.empty() ? "" : "  ", d.label.c_str());
  }
  std::fflush(stdout);
  return std::ferror(stdout) ? 1 : 0;
}

}  // namespace looptrace
