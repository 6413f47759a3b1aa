// `looptrace monitor`: the live pipeline of `record` with every span sent
// to userspace, run until stopped, into the monitor's own sinks: the
// flight recorder and its dumps (monitor/), the metrics.
#include "cli/monitor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>

#include "base/duration.h"
#include "base/exit.h"
#include "base/log.h"
#include "base/size.h"
#include "loader/live_source.h"
#include "loader/tracer.h"
#include "monitor/metrics.h"
#include "monitor/monitor.h"
#include "pipeline/symbols.h"
#include "plan/plan.h"
#include "proc/target.h"

namespace looptrace {
namespace {

// The monitor's own options, checked before anything is traced.
Result<MonitorOptions> parse_monitor_options(const MonitorArgs& a) {
  MonitorOptions o;
  auto window = parse_duration(a.window);
  if (!window.ok() || *window == 0)
    return Status::Error(
        fmt::format("--window {}: a duration above 0, e.g. 10s",
                    log::printable(a.window, 40)),
        ErrorKind::kUsage);
  o.window.window_ns = *window;
  auto cap = parse_size(a.window_max);
  if (!cap.ok() || *cap < (1u << 20))
    return Status::Error(
        fmt::format("--window-max {}: a size of at least 1M, e.g. 32M",
                    log::printable(a.window_max, 40)),
        ErrorKind::kUsage);
  o.window.max_bytes = *cap;
  for (const std::string& t : a.dump_if) {
    auto trig = parse_dump_trigger(t);
    if (!trig.ok()) return trig.status();
    o.triggers.push_back(*trig);
  }
  if (a.dump_dir.empty()) {
    if (a.dump_every != "60s" || a.dump_max_bytes != "1G" || a.dump_pprof)
      return Status::Error(
          "--dump-every, --dump-max-bytes and --dump-pprof need --dump-dir",
          ErrorKind::kUsage);
    return o;
  }
  // What an incident is by default: a hang, or a dispatch a user sees.
  if (o.triggers.empty())
    for (const char* t : {"hang", "dispatch > 100ms"})
      o.triggers.push_back(*parse_dump_trigger(t));
  DumpOptions d;
  d.dir = a.dump_dir;
  auto every = a.dump_every == "0" ? Result<uint64_t>(uint64_t{0})
                                   : parse_duration(a.dump_every);
  if (!every.ok())
    return Status::Error(
        fmt::format("--dump-every {}: a duration, e.g. 60s (0: every trigger)",
                    log::printable(a.dump_every, 40)),
        ErrorKind::kUsage);
  d.every_ns = *every;
  auto max = parse_size(a.dump_max_bytes);
  if (!max.ok() || *max < (1u << 20))
    return Status::Error(
        fmt::format("--dump-max-bytes {}: a size of at least 1M, e.g. 1G",
                    log::printable(a.dump_max_bytes, 40)),
        ErrorKind::kUsage);
  d.max_bytes = *max;
  auto dir = DumpDir::Open(d);
  if (!dir.ok()) return dir.status();
  o.dumps.emplace(std::move(*dir));
  o.dump_pprof = a.dump_pprof;
  return o;
}

class MonitorSession : public LiveClient {
 public:
  explicit MonitorSession(const MonitorArgs& a) : a_(a), rec_(a.rec) {}

  Status prepare();
  Status run();
  int finish();

  std::vector<std::pair<uint32_t, uint64_t>> queues_to_check(uint64_t,
                                                             bool) override {
    return {};
  }
  void progress(uint64_t now, const Tracer& tracer) override;
  void process_gone(uint32_t pid) override { monitor_->process_gone(pid); }
  void hangup() override { status_line("running"); }

 private:
  void status_line(const std::string& state);

  const MonitorArgs& a_;
  RecordArgs rec_;  // as the plan reads it: every span, every runtime
  Plan plan_;
  Target target_;
  std::unique_ptr<Tracer> tracer_;
  LiveSymbols symbols_;
  SessionEvent session_;
  std::unique_ptr<Monitor> monitor_;
  LiveEnd end_;
  Counters counters_;
  uint64_t last_counters_ = 0;
  std::unique_ptr<MetricsSink> metrics_;
};

Status MonitorSession::prepare() {
  LT_RETURN_IF_ERROR(target_.check(a_.rec.pid, {}, a_.rec.pid <= 0));
  // Every span crosses the ring buffer: the window holds the fast ones,
  // the metrics count them all.
  rec_.record_all = true;
  rec_.system_wide = rec_.pid <= 0;
  rec_.every_runtime = rec_.pid <= 0 && rec_.profile.empty();
  LT_RETURN_IF_ERROR(parse_plan(rec_, &plan_));
  auto mo = parse_monitor_options(a_);
  if (!mo.ok()) return mo.status();
  mo->refresh_ns = plan_.opts.limits.refresh_ns;
  mo->profile_of = plan::profile_of_maps;
  if (a_.metrics_per_pid && a_.metrics.empty())
    return Status::Error("--metrics-per-pid needs --metrics",
                         ErrorKind::kUsage);
  if (!a_.metrics.empty()) {
    auto m = MetricsSink::Start({a_.metrics, a_.metrics_per_pid});
    if (!m.ok()) return m.status();
    metrics_ = std::move(*m);
  }
  ResolveContext rctx;
  rctx.self_dir = rec_.self_dir;
  rctx.pid = rec_.pid;
  LT_RETURN_IF_ERROR(check_bpf_environment());
  LT_RETURN_IF_ERROR(resolve_plan(rctx, &plan_));
  LT_RETURN_IF_ERROR(plan_input(rec_, rctx, target_.pid(), &plan_));
  install_libbpf_logger();
  install_stop_handlers(false);
  auto tracer = Tracer::Create(plan_.opts);
  if (!tracer.ok()) return tracer.status();
  tracer_ = std::move(*tracer);
  session_ = session_header(rec_, plan_, tracer_->input_hook(), target_.pid());
  monitor_ = std::make_unique<Monitor>(std::move(*mo), &symbols_.live,
                                       &symbols_.proc, std::cerr);
  if (metrics_) monitor_->on_dump = [m = metrics_.get()] { m->count_dump(); };
  return Status::Ok();
}

void MonitorSession::status_line(const std::string& state) {
  std::cerr << fmt::format(
      "looptrace: monitor {}: {} processes traced, {} dumps ({} held back by "
      "--dump-every or a pile-up), window {} KiB ({} events dropped by "
      "--window-max), {} records lost\n",
      state, monitor_->traced(), monitor_->dumps(),
      monitor_->dumps_suppressed(), monitor_->window().bytes() >> 10,
      monitor_->window().evicted_by_cap(),
      counters_.bpf[LT_CNT_RB_FULL] + counters_.decode_errors);
}

void MonitorSession::progress(uint64_t now, const Tracer& tracer) {
  monitor_->advance(now);
  if (now - last_counters_ < 1'000'000'000) return;
  last_counters_ = now;
  counters_ = tracer.read_counters();
  if (metrics_) {
    metrics_->set_lost(counters_);
    metrics_->set_traced_processes(monitor_->traced());
  }
}

Status MonitorSession::run() {
  MappingsFeed feed(&symbols_.proc);
  std::vector<EventSink*> sinks{&feed, monitor_.get()};
  if (metrics_) sinks.push_back(metrics_.get());
  FanOut stream(sinks);
  LiveOptions o;
  o.t0 = session_.start_ns = monotonic_ns();
  stream.consume(Event(session_));
  if (!plan_.profile_note.empty())
    std::cerr << log::printable(plan_.profile_note, 400) << "\n";
  std::cerr << fmt::format(
      "looptrace: monitoring {} probes in {}; window {}; {}; SIGINT or "
      "SIGTERM to stop\n",
      plan_.probes.size(), target_.describe(), a_.window,
      a_.dump_dir.empty()
          ? std::string("no --dump-dir: triggers are announced, not dumped")
          : fmt::format("dumps to {} when {}", log::printable(a_.dump_dir, 200),
                        a_.dump_if.empty()
                            ? "hang, dispatch > 100ms"
                            : fmt::format("{}", fmt::join(a_.dump_if, ", "))));
  o.pid = -1;  // runs on when the processes it traces have exited
  o.follow_exits = true;
  o.hang_ns = plan_.hang_ns;
  o.py_frames = &symbols_.python;
  o.js_frames = &symbols_.js;
  o.call_graph = plan_.opts.call_graph;
  // Only the slow spans' stacks are worth unwinding: the fast ones of the
  // window (--record-all) are for their times and counts.
  o.unwind_slow_ns = plan_.opts.limits.slow_ns;
  o.input = session_.has_input;
  LiveSource source(*tracer_, o, this);
  LT_RETURN_IF_ERROR(source.run(stream));
  end_ = source.end();
  return Status::Ok();
}

int MonitorSession::finish() {
  counters_ = tracer_->read_counters();
  status_line(fmt::format("stopped ({})", end_.reason));
  tracer_.reset();
  std::vector<Status> failures{end_.run_status, end_.stop_status};
  return report_failures(failures);
}

}  // namespace

int run_monitor(const MonitorArgs& a) {
  MonitorSession session(a);
  if (Status st = session.prepare(); !st.ok()) return fail(st);
  if (Status st = session.run(); !st.ok()) return fail(st);
  return session.finish();
}

}  // namespace looptrace
