#include "monitor/monitor.h"

#include <fmt/format.h>
#include <time.h>

#include "base/log.h"
#include "base/output_file.h"
#include "output/recording_sink.h"
#include "pipeline/analysis.h"
#include "proc/process.h"
#include "record/recording.h"
#include "report/pprof_report.h"

namespace looptrace {
namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

Monitor::Monitor(MonitorOptions o, Symbolizer* symbols, ProcSymbolizer* proc,
                 std::ostream& log)
    : o_(std::move(o)),
      symbols_(symbols),
      proc_(proc),
      log_(log),
      window_(o_.window) {}

void Monitor::consume(const Event& ev) {
  if (const auto* s = std::get_if<SessionEvent>(&ev)) {
    session_ = *s;
    check_ = std::make_unique<TriggerCheck>(
        o_.triggers, *s, frame_options(s->probes, o_.refresh_ns));
    return;
  }
  const uint32_t pid = event_pid(ev);
  if (pid == 0) return;  // run-wide: ticks, the end
  if (const auto* m = std::get_if<MappingsEvent>(&ev)) {
    // Kept for the process's first span (its mappings come first).
    if (procs_.count(pid)) {
      window_.set_mappings(*m);
    } else {
      if (pending_maps_.size() >= kPendingMaps) pending_maps_.clear();
      pending_maps_[pid] = *m;
    }
    return;
  }
  // Every event is judged, a process's that is not followed too: an input
  // event's sender (the display server, Android's dispatcher) is not.
  std::optional<Firing> f;
  if (check_) f = check_->check(ev);
  auto it = procs_.find(pid);
  if (it == procs_.end()) {
    // A process is followed from its first span: the other events of a
    // system-wide run (an exec, a wakeup) may be any process's.
    if (!std::holds_alternative<SpanEvent>(ev) &&
        !std::holds_alternative<HangEvent>(ev))
      return;
    it = attach(pid, ev);
  }
  window_.add(ev);
  if (const auto* s = std::get_if<SpanEvent>(&ev);
      s && !s->unfinished() && s->role == LT_ROLE_DISPATCH)
    it->second.dispatches++;
  // (An input event's process is followed once it dispatched.)
  if (f && procs_.count(f->pid)) fire(*f, ev);
}

std::map<uint32_t, Monitor::Proc>::iterator Monitor::attach(uint32_t pid,
                                                            const Event& ev) {
  auto it = procs_.try_emplace(pid).first;
  Proc& p = it->second;
  p.comm = proc::comm(pid, pid);
  if (p.comm.empty())
    if (const auto* s = std::get_if<SpanEvent>(&ev)) p.comm = s->comm;
  std::string profile;
  if (auto m = pending_maps_.find(pid); m != pending_maps_.end()) {
    if (o_.profile_of) profile = o_.profile_of(m->second.maps);
    window_.set_mappings(m->second);
    pending_maps_.erase(m);
  }
  log_ << fmt::format("looptrace: attach pid {} ({}{})\n", pid,
                      log::printable(p.comm, 32),
                      profile.empty() ? "" : ", profile " + profile);
  log_.flush();
  return it;
}

void Monitor::advance(uint64_t now_ns) {
  if (!check_) return;
  std::optional<Firing> f = check_->advance(now_ns);
  if (f && procs_.count(f->pid)) fire(*f, Event(TickEvent{0, 0, now_ns}));
}

void Monitor::process_gone(uint32_t pid) {
  pending_maps_.erase(pid);
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  // Its input events complete so far are judged now: nothing of it comes
  // later to make them final.
  if (check_)
    for (const Firing& f : check_->process_gone(pid))
      fire(f, Event(TickEvent{0, 0, f.ts_ns}));
  log_ << fmt::format(
      "looptrace: detach pid {} ({}): exited after {} dispatches\n", pid,
      log::printable(it->second.comm, 32), it->second.dispatches);
  log_.flush();
  procs_.erase(it);
  window_.forget(pid);
  if (check_) check_->forget(pid);
  if (o_.dumps) o_.dumps->forget(pid);
  if (proc_) proc_->forget(pid);
}

void Monitor::fire(const Firing& f, const Event& ev) {
  const std::string comm = log::printable(procs_[f.pid].comm, 32);
  if (!o_.dumps) {
    log_ << fmt::format("looptrace: pid {} ({}): {}\n", f.pid, comm, f.why);
    log_.flush();
    return;
  }
  if (!o_.dumps->allow(f.pid, f.ts_ns)) return;
  o_.dumps->dumped(f.pid, f.ts_ns);
  uint64_t realtime =
      session_.start_realtime_ns + (f.ts_ns - session_.start_ns);
  std::string path = o_.dumps->path_for(f.pid, procs_[f.pid].comm, realtime);
  const uint64_t t0 = now_ns();
  DumpStats stats;
  Status st = write_dump(path, f, ev, &stats);
  if (!st.ok()) {
    dump_failures_++;
    log_ << fmt::format("looptrace: dump pid {} ({}): {}\n", f.pid, comm,
                        st.message());
    log_.flush();
    return;
  }
  dumps_++;
  size_t trimmed = o_.dumps->trim();
  log_ << fmt::format(
      "looptrace: dump pid {} ({}): {}: {} ({} events, {} KiB, {} ms{})\n",
      f.pid, comm, f.why, path, stats.events, (stats.bytes + 1023) >> 10,
      (now_ns() - t0) / 1'000'000,
      trimmed ? fmt::format("; {} oldest removed", trimmed) : "");
  log_.flush();
  if (on_dump) on_dump();
}

// The window as a recording: the session (its target the process, its
// start the window's), the process's mappings and events with the symbols
// they need, a hang's span in flight, and an end that says what fired.
Status Monitor::write_dump(const std::string& path, const Firing& f,
                           const Event& ev, DumpStats* stats) {
  auto file = OutputFile::Create("--dump-dir", path);
  if (!file.ok()) return file.status();
  RecordingWriter writer(std::move(*file));
  CapturingSymbolizer capture(symbols_, proc_);
  RecordingSink sink(&writer, &capture, &session_.probes);
  std::vector<const Event*> events = window_.window(f.pid);
  SessionEvent s = session_;
  s.target_pid = static_cast<int32_t>(f.pid);
  s.start_ns = f.ts_ns;
  for (const Event* e : events) {
    if (std::holds_alternative<MappingsEvent>(*e)) continue;
    const auto* sp = std::get_if<SpanEvent>(e);
    uint64_t t = sp ? sp->start_ns : event_end_ns(*e);
    if (t) s.start_ns = std::min(s.start_ns, t);
  }
  s.start_ns = std::max(s.start_ns, session_.start_ns);
  s.start_realtime_ns =
      session_.start_realtime_ns + (s.start_ns - session_.start_ns);
  sink.consume(Event(s));
  for (const Event* e : events) sink.consume(*e);
  if (const auto* h = std::get_if<HangEvent>(&ev)) sink.consume(Event(h->span));
  EndEvent end;
  end.end_ns = f.ts_ns;
  end.stop_reason = "monitor dump: " + f.why;
  sink.consume(Event(std::move(end)));
  Status st = sink.close();
  stats->events = writer.events();
  stats->bytes = writer.bytes_written();
  if (!st.ok() || !o_.dump_pprof) return st;
  return write_dump_pprof(path, f, ev, s);
}

// The dump's slow spans' stacks as a pprof profile beside it: the window
// replayed through the analysis, as `report --pprof` would.
Status Monitor::write_dump_pprof(const std::string& path, const Firing& f,
                                 const Event& ev, const SessionEvent& s) {
  std::string pb = path.substr(0, path.size() - 3) + ".pb.gz";
  auto file = OutputFile::Create("--dump-pprof", pb);
  if (!file.ok()) return file.status();
  Analysis analysis(symbols_);
  analysis.consume(Event(s));
  for (const Event* e : window_.window(f.pid)) analysis.consume(*e);
  if (const auto* h = std::get_if<HangEvent>(&ev))
    analysis.consume(Event(h->span));
  EndEvent end;
  end.end_ns = f.ts_ns;
  analysis.consume(Event(std::move(end)));
  const Findings& found = analysis.finish();
  Status st = write_pprof((*file)->stream(), found, analysis.context());
  Status closed = (*file)->close();
  return st.ok() ? closed : st;
}

}  // namespace looptrace
