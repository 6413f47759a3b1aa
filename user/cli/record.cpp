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

}  // namespace

int run_record(const RecordArgs& a) {
  int targets = (a.pid > 0) + (!a.command.empty()) + a.system_wide;
  if (targets > 1)
    return fail(
        Status::Error("give only one of -p PID, -- COMMAND and "
                      "--system-wide",
                      ErrorKind::kUsage));
  // The pid first: with no probe option its libraries choose the profile.
  if (a.pid > 0)
    if (Status st = proc::check_pid_target(a.pid); !st.ok()) return fail(st);
  Plan plan;
  if (Status st = parse_plan(a, &plan); !st.ok()) return fail(st);
  ResolveContext rctx;
  rctx.self_dir = a.self_dir;
  rctx.pid = a.pid;
  if (!a.command.empty()) {
    auto path = find_command(a.command[0]);
    if (!path.ok()) return fail(path.status());
    rctx.command_path = *path;
  }
  if (Status st = check_bpf_environment(); !st.ok()) return fail(st);
  // Before anything is attached: a bad output path fails now, not after
  // the whole run.
  Outputs out;
  if (Status st = out.open(a.outputs); !st.ok()) return fail(st);
  if (Status st = resolve_plan(rctx, &plan); !st.ok()) return fail(st);
  std::unique_ptr<Child> child;
  pid_t target = a.pid > 0 ? a.pid : -1;
  if (!a.command.empty()) {
    child = std::make_unique<Child>();
    // Its output must not land inside a report written to stdout.
    if (Status st =
            child->start(rctx.command_path, a.command, out.stdout_taken());
        !st.ok())
      return fail(st);
    target = child->pid();
  }
  if (Status st = plan_input(a, rctx, target, &plan); !st.ok()) return fail(st);

  install_libbpf_logger();
  install_stop_handlers();
  auto tracer = Tracer::Create(plan.opts);
  if (!tracer.ok()) return fail(tracer.status());

  // The recording carries every symbol the analysers and outputs resolve.
  ProcSymbolizer proc_symbols;
  SystemSymbolizer live_symbols(&proc_symbols);
  CapturingSymbolizer capture(&live_symbols);
  RecordingWriter* recording = out.recording().get();
  Symbolizer* symbols =
      recording ? static_cast<Symbolizer*>(&capture) : &live_symbols;
  Analysis analysis(symbols);
  SessionEvent session = make_session(a, plan, **tracer, target);
  LiveView view(a.live, a.quiet, session, symbols);
  auto announce = [&](const Barrier& b, uint64_t now) {
    ReportContext ctx;
    ctx.probes = &session.probes;
    ctx.symbolizer = symbols;
    ctx.barrier_stall_ns = plan.opts.limits.barrier_stall_ns;
    uint64_t held = now - b.posted_ns;
    view.print(barrier_stall_line(b, held, ctx));
    // A failed write is reported at the end (OutputFile::close); the
    // trace goes on.
    if (out.events()) {
      out.events()->stream()
          << barrier_stall_event(b, held, ctx).dump() << '\n';
      out.events()->flush();
    }
  };
  auto announce_hang = [&](const HangAlert& h) {
    ReportContext ctx;
    ctx.probes = &session.probes;
    ctx.symbolizer = symbols;
    view.print(hang_line(h, ctx));
    if (out.events()) {
      out.events()->stream() << hang_event(h, ctx).dump() << '\n';
      out.events()->flush();
    }
  };
  Tracer::Sink emit = [&](Event&& ev) {
    if (auto* m = std::get_if<MappingsEvent>(&ev))
      proc_symbols.add_mappings(m->pid, m->maps);
    if (recording) {
      capture.prepare(ev, session.probes);
      for (SymbolEvent& s : capture.take()) recording->write(Event(s));
      recording->write(ev);
    }
    analysis.consume(ev);
    if (const auto* t = std::get_if<TickEvent>(&ev))
      for (const Barrier& b : analysis.take_new_stalls()) announce(b, t->ts_ns);
    if (std::holds_alternative<HangEvent>(ev) ||
        std::holds_alternative<SpanEvent>(ev))
      for (const HangAlert& h : analysis.take_hang_alerts()) announce_hang(h);
    view.consume(ev);
  };

  uint64_t t0 = monotonic_ns();
  session.start_ns = t0;
  emit(Event(session));
  // The header on disk first: a recording cut at any point says what it is.
  if (recording) (void)recording->flush();
  if (child) {
    child->release();
    if (int err = child->wait_exec(); err != 0)
      return fail(command_error(a.command[0], err));
  }
  if (!a.quiet) {
    std::string what =
        child       ? fmt::format("pid {} ({})", child->pid(), a.command[0])
        : a.pid > 0 ? fmt::format("pid {}", a.pid)
                    : std::string("all processes");
    std::string input;
    if (session.has_input)
      input = fmt::format(" and input channels ({})", session.input_hook);
    std::string to = recording
                         ? fmt::format(", recording to {}", recording->path())
                         : std::string();
    if (!plan.profile_note.empty()) {
      // Found, not asked for: say where each probe went.
      std::fprintf(stderr, "%s\n", plan.profile_note.c_str());
      for (const ProbeDef& p : plan.probes)
        std::fprintf(
            stderr, "looptrace:   %s %s: %s %s at offset %#llx%s\n",
            role_name(p.role),
            p.label.empty() ? p.resolved_symbol.c_str() : p.label.c_str(),
            p.path.c_str(), p.symbol.c_str(),
            static_cast<unsigned long long>(p.file_offset),
            p.version.empty() ? "" : (" (" + p.version + ")").c_str());
    }
    std::fprintf(stderr,
                 "looptrace: tracing %zu probe%s%s in %s%s; Ctrl-C to stop\n",
                 plan.probes.size(), plan.probes.size() == 1 ? "" : "s",
                 input.c_str(), what.c_str(), to.c_str());
  }
  LiveHooks hooks;
  hooks.hang_ns = plan.hang_ns;
  hooks.queues_to_check = [&analysis](uint64_t now, bool all) {
    return analysis.queues_to_check(now, all);
  };
  uint64_t last_flush = t0;
  hooks.on_progress = [&](uint64_t now) {
    // A SIGKILL loses at most the last half second of the recording.
    if (recording && now - last_flush >= rec::kFlushIntervalNs) {
      last_flush = now;
      (void)recording->flush();
    }
    view.progress(now, **tracer);
  };
  LiveEnd end =
      run_live(**tracer, child.get(), a.pid, t0, plan.duration_ns,
               analysis.has_barriers(), session.has_input, emit, hooks);
  view.finish();
  const bool command_ended = child && child->terminate();
  report_stop(a, end.reason, command_ended ? child->status() : -1);

  const Findings& found = analysis.finish();
  const ReportContext& ctx = analysis.context();
  // Every failure is one line; the reports are written whatever failed.
  std::vector<Status> failures{end.run_status, end.stop_status};
  std::vector<BudgetOutcome> outcomes;
  for (Status& st : out.write_reports(found, ctx, plan.budgets, &outcomes))
    failures.push_back(st);
  if (!a.quiet) failures.push_back(write_text(out, found, ctx));
  if (recording) {
    // Symbols the reports resolved last (after every report).
    for (SymbolEvent& s : capture.take()) recording->write(Event(s));
    Status st = recording->close();
    if (!st.ok() || recording->lost())
      failures.push_back(Status::Error(fmt::format(
          "{}{}: {} events not recorded", st.ok() ? "" : st.message(),
          st.ok() ? "recording " + recording->path() : "", recording->lost())));
  }
  // Removing the probes takes the kernel a while (Tracer::stop): once the
  // reports are out.
  tracer->reset();
  write_broken_budgets(std::cerr, outcomes);
  if (int rc = report_failures(failures); rc != 0) return rc;
  // A broken budget is the lab script's answer, over the command's own.
  if (any_budget_broken(outcomes)) return kBudgetBroken;
  // A command that ended on its own gives its status, as perf and shells
  // do; one that looptrace stopped (--duration, a signal to looptrace)
  // does not.
  return command_ended ? shell_status(child->status()) : 0;
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
