#include "loader/live_source.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "base/log.h"
#include "pipeline/stack_gate.h"
#include "proc/maps.h"
#include "proc/pid.h"
#include "proc/process.h"
#include "python/frames.h"
#include "unwind/dwarf_unwinder.h"
#include "unwind/stack_trust.h"
#include "v8/frames.h"

namespace looptrace {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }
volatile sig_atomic_t g_hangup = 0;
void on_hangup(int) { g_hangup = 1; }

}  // namespace

// What the live stream needs from the processes while they live: their
// mappings (MappingsEvents), read when a process is first seen and again
// after an exec; and the unwinding of samples copied for it (--call-graph
// dwarf, auto), which needs the files they map, and the trust of every
// stack's frames, which needs the executable mappings; and the Python frames of
// the samples, blocking points and barrier posts of a CPython process, named
// while it lives.
class MappingsTracker {
 public:
  MappingsTracker(EventSink& out, Tracer& tracer, const LiveOptions& o)
      : out_(out),
        tracer_(tracer),
        py_(o.py_frames),
        js_(o.js_frames),
        call_graph_(o.call_graph),
        skip_unknown_exec_(o.follow_exits) {
    if (o.unwind_slow_ns)
      gate_.emplace(*o.unwind_slow_ns, [this](Event&& ev, bool unwind) {
        release(std::move(ev), unwind);
      });
  }
  ~MappingsTracker() {
    if (gate_ && gate_->skipped())
      log::debug("unwind", "{} stacks of fast spans kept their frame pointers",
                 gate_->skipped());
    if (py_ && (py_->kernel_names() || py_->late_reads()))
      log::debug("python",
                 "{} code objects named from the kernel's records, {} read "
                 "from the process afterwards",
                 py_->kernel_names(), py_->late_reads());
    if (js_ && js_->functions_read())
      log::debug("v8",
                 "{} JavaScript functions named ({} frames were none) in "
                 "{:.1f} ms",
                 js_->functions_read(), js_->not_functions(),
                 js_->read_ns() / 1e6);
    if (js_ && js_->recovered())
      log::debug("v8", "{} stacks' JavaScript frames found in their copy",
                 js_->recovered());
    if (js_ && js_->merged())
      log::debug(
          "v8",
          "{} stacks with {} JavaScript frames named and placed in "
          "{:.1f} ms: {:.2f} us a frame",
          js_->merged(), js_->merged_frames(), js_->merge_ns() / 1e6,
          js_->merge_ns() / 1e3 / std::max<uint64_t>(js_->merged_frames(), 1));
    if (unwound_ == 0) return;
    log::debug("unwind",
               "{} stacks unwound by CFI in {:.1f} ms: {:.0f} stacks/s, {:.1f} "
               "us each",
               unwound_, unwind_ns_ / 1e6,
               unwound_ * 1e9 / std::max<uint64_t>(unwind_ns_, 1),
               unwind_ns_ / 1e3 / unwound_);
  }

  void operator()(Event&& ev) {
    uint32_t pid = event_pid(ev);
    uint32_t tid = event_tid(ev);
    // Records come in runs from one thread: the sets are only consulted
    // when the thread changes (a flood of input records is a million a
    // second).
    // A run that lasts (follow_exits) sees every exec of the system: one
    // of a process never seen says nothing yet (its first span will).
    if (skip_unknown_exec_ && std::holds_alternative<ExecEvent>(ev) &&
        !pids_.count(pid)) {
      out_.consume(ev);
      return;
    }
    if (last_thread_ != std::make_pair(pid, tid)) {
      last_thread_ = {pid, tid};
      threads_.emplace(pid, tid);
      if (pids_.insert(pid).second) emit_maps(pid, tid, 0);
    }
    if (const auto* x = std::get_if<ExecEvent>(&ev)) {
      // What it held was taken in the mappings the exec replaces.
      if (gate_) gate_->flush_process(pid);
      py_watched_.erase(pid);
      if (js_watched_.erase(pid) && js_) js_->forget(pid);
      emit_maps(pid, tid, x->ts_ns);
      unwinder_.forget(pid);
      proc_maps_.erase(pid);
    }
    if (auto* sp = std::get_if<SpanEvent>(&ev); sp && py_) name_callables(sp);
    // A waker (often another process) may be gone by the time its stack
    // leaves the gate: its mappings are read while it lives.
    if (const auto* w = std::get_if<WakeEvent>(&ev);
        w && gate_ && w->waker_pid && w->stack.ustack)
      maps_of(w->waker_pid, w->ts_ns);
    if (gate_)
      gate_->push(std::move(ev));
    else
      release(std::move(ev), true);
  }

  // Stacks held for their span's fate (LiveOptions::unwind_slow_ns) that
  // are old enough to be a slow span's.
  void expire(uint64_t now_ns) {
    if (gate_) gate_->expire(now_ns);
  }
  // Everything held goes (the end of the stream).
  void flush() {
    if (gate_) gate_->flush();
  }

  // A Python code object's names the kernel sent (LT_REC_PYCODE): false
  // for a malformed record.
  bool learn_code(const void* data, size_t size) {
    auto k = python::decode_code_record(data, size);
    if (!k) return false;
    if (py_) py_->learn(*k);
    return true;
  }

  // A barrier post's stack with its Python frames, as a sample's.
  void merge_point(PointEvent* p) {
    Stack st;
    st.frames = std::move(p->frames);
    st.py = std::move(p->py);
    py_->merge(p->pid, &st);
    p->frames = std::move(st.frames);
  }
  std::set<std::pair<uint32_t, uint32_t>>& threads() { return threads_; }
  const std::set<uint32_t>& pids() const { return pids_; }
  // Processes whose stacks were unwound but whose own events never came
  // (wakers of traced threads).
  const std::set<uint32_t>& others() const { return others_; }

  // A process gone: nothing of it kept (a long run sees thousands).
  void forget(uint32_t pid) {
    if (gate_) gate_->flush_process(pid);
    pids_.erase(pid);
    others_.erase(pid);
    std::erase_if(threads_, [pid](const auto& t) { return t.first == pid; });
    proc_maps_.erase(pid);
    unwinder_.forget(pid);
    if (last_thread_.first == pid) last_thread_ = {0, 0};
    if (py_watched_.erase(pid) && py_) {
      py_->forget(pid);
      (void)tracer_.set_python(pid, nullptr);
    }
    if (js_watched_.erase(pid) && js_) {
      js_->forget(pid);
      (void)tracer_.set_v8(pid, nullptr);
    }
  }

  // The Python callables the kernel read as code objects: each stands as
  // the address of its Python frame (its function's first line), which
  // the symbolizer names like any frame.
  void name_callables(SpanEvent* sp) {
    uint32_t mask = tracer_.pycode_keys(sp->probe_id);
    for (uint32_t k = 0; mask != 0 && k < LT_MAX_KEYS; ++k, mask >>= 1)
      if ((mask & 1) && !(sp->key_fault_mask & (1u << k)))
        sp->keys[k] = py_->callable_address(sp->pid, sp->keys[k]);
  }

  // A process that runs V8: its samples and blocking points read its
  // JavaScript frames.
  void watch_v8(uint32_t pid, const std::vector<MapEntry>& maps) {
    if (!js_ || !js_watched_.insert(pid).second) return;
    std::optional<lt_v8_proc> p = js_->attach(pid, maps);
    if (Status st = tracer_.set_v8(pid, p ? &*p : nullptr); !st.ok())
      log::warn("pid {}: {}", pid, st.message());
  }

  // A process that runs CPython: its samples read its Python frames.
  void watch_python(uint32_t pid, const std::vector<MapEntry>& maps) {
    if (!py_ || !py_watched_.insert(pid).second) return;
    std::optional<lt_py_proc> p = py_->attach(pid, maps);
    if (Status st = tracer_.set_python(pid, p ? &*p : nullptr); !st.ok())
      log::warn("pid {}: {}", pid, st.message());
  }

 private:
  // An event leaves: its stack unwound and its Python frames named, or
  // (a fast span's, not worth it) its frame pointers' frames only.
  void release(Event&& ev, bool unwind) {
    auto fix = [&](uint32_t pid, uint64_t ts, Stack* st) {
      if (!unwind) {
        st->ustack.reset();
        st->py.reset();
        st->js.reset();
      }
      if (js_) js_->recover(pid, st);
      fix_stack(pid, ts, st);
      if (st->py && py_) py_->merge(pid, st);
      if (st->js && js_) js_->merge(pid, st);
    };
    if (auto* s = std::get_if<SampleEvent>(&ev)) {
      fix(s->pid, s->ts_ns, &s->stack);
    } else if (auto* b = std::get_if<BlockEvent>(&ev)) {
      fix(b->pid, b->ts_ns, &b->stack);
    } else if (auto* w = std::get_if<WakeEvent>(&ev)) {
      fix(w->waker_pid, w->ts_ns, &w->stack);
    } else if (auto* p = std::get_if<PointEvent>(&ev); p && p->py && py_) {
      merge_point(p);
    }
    out_.consume(ev);
  }

  void emit_maps(uint32_t pid, uint32_t tid, uint64_t ts) {
    auto maps = proc::read_maps(pid);
    // Gone already, or a zombie (no maps): nothing new to say.
    if (!maps.ok() || maps->empty()) return;
    watch_python(pid, *maps);
    watch_v8(pid, *maps);
    MappingsEvent m;
    m.pid = pid;
    m.tid = tid;
    m.ts_ns = ts ? ts : monotonic_ns();
    m.maps = std::move(*maps);
    out_.consume(Event(std::move(m)));
  }

  // The process's mappings as last read: again after a stack that stopped
  // short or had a frame in no executable mapping (a library loaded
  // since?), at most every second.
  struct ProcMaps {
    // When a stack first stopped short since the maps were read (0: none).
    uint64_t short_since = 0;
    uint64_t trampoline = 0;  // the [uprobes] page, 0 if not mapped
    ExecRanges exec;          // unknown (trusts all) if unreadable
  };
  ProcMaps& maps_of(uint32_t pid, uint64_t ts_ns) {
    auto [it, fresh] = proc_maps_.try_emplace(pid);
    ProcMaps& pm = it->second;
    if (fresh || (pm.short_since && ts_ns > pm.short_since + 1'000'000'000)) {
      // A process gone meanwhile (ESRCH on open or on read): nothing read.
      Result<std::string> text =
          proc::read_text_file(fmt::format("/proc/{}/maps", pid));
      const std::string none;
      const std::string& got = text.ok() ? *text : none;
      if (call_graph_ != CallGraph::kFramePointer) unwinder_.set_maps(pid, got);
      pm.short_since = 0;
      pm.trampoline = uprobes_page(got);
      pm.exec = text.ok() ? ExecRanges(got) : ExecRanges();
      // Another process's (a waker's): forgotten when it is gone too.
      if (fresh && !pids_.count(pid)) others_.insert(pid);
    }
    return pm;
  }

  // A stack as --call-graph says: the frame pointers, the CFI's stack of
  // the copy, or both merged; cut at its first frame in no executable
  // mapping either way. The stack bytes go.
  void fix_stack(uint32_t pid, uint64_t ts_ns, Stack* st) {
    if (pid == 0 || (st->frames.empty() && !st->ustack)) return;
    ProcMaps& pm = maps_of(pid, ts_ns);
    const bool full = st->frames.size() >= LT_MAX_STACK;
    if (!st->ustack) {
      st->truncated = cut_untrusted(pm.exec, &st->frames) || full;
    } else if (call_graph_ == CallGraph::kDwarf) {
      UnwindResult r = unwind(pid, pm, *st->ustack);
      st->truncated = cut_untrusted(pm.exec, &r.frames) || r.truncated;
      st->frames = std::move(r.frames);
      st->unwind = Unwind::kDwarf;
    } else {
      MergedStack m = merge_stacks(std::move(st->frames), full,
                                   unwind(pid, pm, *st->ustack), pm.exec);
      st->frames = std::move(m.frames);
      st->truncated = m.truncated;
      st->unwind = m.dwarf ? Unwind::kDwarf : Unwind::kFramePointer;
    }
    // A copy that stopped short may have met a library loaded since the
    // maps were read (frame pointers stop short in most of Debian's code
    // anyway: no reason to read them again).
    if (st->ustack && st->truncated && pm.short_since == 0)
      pm.short_since = ts_ns;
    st->ustack.reset();
  }

  // The CFI's stack of a sample's copy.
  UnwindResult unwind(uint32_t pid, const ProcMaps& pm, const UserStack& u) {
    UserRegs regs;
    regs.dwarf = u.regs;
    StackCopy stack;
    stack.addr = u.regs[UserRegs::kRsp];
    stack.bytes = u.bytes;
    // Our uretprobes put their trampoline where the callers' return
    // addresses were: back they go, innermost first, as the kernel's own
    // frame-pointer walk does.
    if (pm.trampoline) {
      size_t next = 0;
      for (size_t at = 0;
           at + 8 <= stack.bytes.size() && next < u.ret_addrs.size(); at += 8) {
        uint64_t word;
        std::memcpy(&word, &stack.bytes[at], 8);
        if (word < pm.trampoline || word >= pm.trampoline + 4096) continue;
        uint64_t ret = u.ret_addrs[next++];
        if (ret) std::memcpy(&stack.bytes[at], &ret, 8);
      }
    }
    const uint64_t t0 = monotonic_ns();
    UnwindResult r = unwinder_.unwind(pid, regs, stack);
    unwind_ns_ += monotonic_ns() - t0;
    unwound_++;
    return r;
  }

  EventSink& out_;
  Tracer& tracer_;
  python::PyFrames* py_;
  v8::JsFrames* js_;
  const CallGraph call_graph_;
  const bool skip_unknown_exec_;
  std::set<uint32_t> py_watched_;  // since their last exec
  std::set<uint32_t> js_watched_;  // since their last exec
  DwarfUnwinder unwinder_;
  uint64_t unwound_ = 0;    // stacks unwound by CFI
  uint64_t unwind_ns_ = 0;  // time spent doing it
  std::map<uint32_t, ProcMaps> proc_maps_;

  // Where the kernel maps the uretprobe trampoline in the process.
  static uint64_t uprobes_page(const std::string& maps) {
    size_t at = maps.find("[uprobes]");
    if (at == std::string::npos) return 0;
    size_t line = maps.rfind('\n', at);
    line = line == std::string::npos ? 0 : line + 1;
    return std::strtoull(maps.c_str() + line, nullptr, 16);
  }
  std::pair<uint32_t, uint32_t> last_thread_{0, 0};
  std::set<uint32_t> pids_;
  std::set<std::pair<uint32_t, uint32_t>> threads_;
  std::set<uint32_t> others_;
  std::optional<StackGate> gate_;  // declared last: its release uses the rest
};

void install_stop_handlers(bool hangup_stops) {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A closed terminal or a dropped ssh session: stop and report, as for
  // Ctrl-C, rather than die with nothing written.
  if (!hangup_stops) sa.sa_handler = on_hangup;
  sigaction(SIGHUP, &sa, nullptr);
  // A reader that went away (a pipe, a FIFO for --events, the terminal's
  // ssh channel) is a write error to report, not a silent death.
  signal(SIGPIPE, SIG_IGN);
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

void LiveSource::emit_queues(uint64_t now, bool all, const Tracer::Sink& sink) {
  if (!client_) return;
  for (auto [pid, queue] : client_->queues_to_check(now, all)) {
    Tracer::Waiting w = tracer_.sync_waiting(pid, queue, now);
    QueueEvent q;
    q.pid = pid;
    q.queue = queue;
    q.ts_ns = now;
    q.waiting = w.count;
    q.oldest_due_ns = w.oldest_due_ns;
    sink(Event(q));
  }
}

// Why the run stops now, or "" to go on.
std::string LiveSource::stop_reason(uint64_t now) {
  if (g_stop_signal)
    return g_stop_signal == SIGINT   ? "interrupted"
           : g_stop_signal == SIGHUP ? "hangup"
                                     : "terminated";
  if (opts_.duration_ns && now - opts_.t0 >= opts_.duration_ns)
    return "duration elapsed";
  // Whether the target lives: at most every 50 ms, not after every wakeup
  // (at a high event rate that would steal the reader's time).
  if (now - last_alive_check_ < 50'000'000) return "";
  last_alive_check_ = now;
  if (!opts_.child && opts_.pid <= 0) return "";
  // The target lives while any of its processes does: the command, or -p's
  // process even after its main thread exited, and what they forked.
  if (opts_.child && !opts_.child->exited()) return "";
  for (uint32_t tgid : tracer_.traced_processes())
    if (proc::pid_running(tgid)) return "";
  return opts_.child ? std::string(kCommandExited)
                     : fmt::format("pid {} exited", opts_.pid);
}

int LiveSource::poll_timeout_ms(uint64_t now) const {
  // Input records do not wake us (abi.h io_wakeup_bytes): poll more often,
  // so that a short-lived process's mappings are read while it is alive.
  const int max_wait_ms = opts_.input ? 25 : opts_.hang_ns ? 50 : 100;
  if (!opts_.duration_ns) return max_wait_ms;
  uint64_t left =
      opts_.duration_ns - std::min(opts_.duration_ns, now - opts_.t0);
  return static_cast<int>(
      std::min<uint64_t>(max_wait_ms, left / 1'000'000 + 1));
}

// Between polls: stall checks, hang announcements, progress.
void LiveSource::check(uint64_t now, MappingsTracker& tracker,
                       const Tracer::Sink& sink) {
  tracker.expire(now);
  // Stalls are announced as they happen, not only at exit.
  if (opts_.barriers && now - last_stall_check_ >= 20'000'000) {
    last_stall_check_ = now;
    emit_queues(now, false, sink);
    sink(Event(TickEvent{0, 0, now}));
  }
  // A span past --hang is announced while it runs, within about 50 ms.
  // The threads to look at are those seen in the stream: a span old enough
  // has had samples.
  if (opts_.hang_ns && now - last_hang_check_ >= 50'000'000) {
    last_hang_check_ = now;
    for (SpanEvent& sp :
         tracer_.read_in_flight(tracker.threads(), now, opts_.hang_ns)) {
      if (sp.duration_ns < opts_.hang_ns ||
          !hung_.insert({sp.pid, sp.tid, sp.span_id}).second)
        continue;
      HangEvent h;
      h.pid = sp.pid;
      h.tid = sp.tid;
      h.span = std::move(sp);
      sink(Event(std::move(h)));
    }
  }
  if (opts_.follow_exits && now - last_exit_check_ >= 1'000'000'000) {
    last_exit_check_ = now;
    check_exits(now, tracker);
  }
  if (g_hangup && client_) {
    g_hangup = 0;
    client_->hangup();
  }
  if (client_ && now - last_progress_ >= 250'000'000) {
    last_progress_ = now;
    client_->progress(now, tracer_);
  }
}

// Processes of the stream that exited: forgotten a second after they were
// seen dead (their last records, the spans their exit cut short, are read
// by then).
void LiveSource::check_exits(uint64_t now, MappingsTracker& tracker) {
  for (auto it = dying_.begin(); it != dying_.end();) {
    if (now - it->second < 1'000'000'000) {
      ++it;
      continue;
    }
    const uint32_t pid = it->first;
    tracker.forget(pid);
    std::erase_if(hung_,
                  [pid](const auto& h) { return std::get<0>(h) == pid; });
    if (client_) client_->process_gone(pid);
    it = dying_.erase(it);
  }
  for (const std::set<uint32_t>* pids : {&tracker.pids(), &tracker.others()})
    for (uint32_t pid : *pids)
      if (!proc::pid_running(pid)) dying_.try_emplace(pid, now);
}

// Everything is measured to this instant: recording stops, and the spans
// still in flight are read before the probes are removed (which takes a
// while), so that their age, CPU and samples end where the trace does.
void LiveSource::finish(MappingsTracker& tracker, const Tracer::Sink& sink,
                        EventSink& out) {
  end_.end_ns = monotonic_ns();
  tracer_.pause();
  // A loop stuck in a dispatch right now is the most important finding of
  // all: report spans still in flight on every thread we know of.
  std::set<std::pair<uint32_t, uint32_t>> threads = tracker.threads();
  for (uint32_t tgid : tracer_.traced_processes())
    for (uint32_t tid : proc::thread_ids(tgid)) threads.emplace(tgid, tid);
  EndEvent last;
  last.hists = tracer_.read_histograms();
  for (const ThreadHistogram& h : last.hists) threads.emplace(h.pid, h.tid);
  std::vector<SpanEvent> in_flight =
      tracer_.read_in_flight(threads, end_.end_ns);
  end_.stop_status = tracer_.stop(sink);
  last.end_ns = end_.end_ns;
  last.stop_reason = end_.reason;
  last.counters = tracer_.read_counters();
  // A leaked barrier: what is waiting behind it now, at the end.
  if (opts_.barriers) emit_queues(end_.end_ns, true, sink);
  for (SpanEvent& ev : in_flight) sink(Event(std::move(ev)));
  tracker.flush();
  out.consume(Event(std::move(last)));
}

Status LiveSource::run(EventSink& out) {
  MappingsTracker tracker(out, tracer_, opts_);
  // -p's process: its first samples already read its Python frames.
  if (opts_.pid > 0 && (opts_.py_frames || opts_.js_frames))
    if (auto maps = proc::read_maps(opts_.pid); maps.ok()) {
      tracker.watch_python(opts_.pid, *maps);
      tracker.watch_v8(opts_.pid, *maps);
    }
  Tracer::Sink sink = [&tracker](Event&& ev) { tracker(std::move(ev)); };
  tracer_.set_pycode_hook([&tracker](const void* data, size_t size) {
    return tracker.learn_code(data, size);
  });
  while (true) {
    uint64_t now = monotonic_ns();
    end_.reason = stop_reason(now);
    if (!end_.reason.empty()) break;
    end_.run_status = tracer_.poll(poll_timeout_ms(now), sink);
    check(monotonic_ns(), tracker, sink);
    if (!end_.run_status.ok()) break;
  }
  finish(tracker, sink, out);
  tracer_.set_pycode_hook(nullptr);  // the tracker goes
  return Status::Ok();
}

}  // namespace looptrace
