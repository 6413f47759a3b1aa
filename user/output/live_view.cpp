#include "output/live_view.h"

#include <unistd.h>

#include <cstdio>

#include "base/duration.h"
#include "base/json_text.h"
#include "base/text.h"
#include "profiles/profile.h"
#include "report/barrier_report.h"
#include "report/hang_report.h"
#include "report/report_common.h"

namespace looptrace {

LiveView::LiveView(bool live, bool quiet, const SessionEvent& session,
                   Symbolizer* symbols)
    : live_(live),
      quiet_(quiet),
      tty_(!quiet && isatty(STDERR_FILENO)),
      session_(session),
      symbols_(symbols) {
  for (const ProbeDef& p : session.probes) frames_ = frames_ || p.frame;
}

void LiveView::consume(const Event& ev) {
  const auto* sp = std::get_if<SpanEvent>(&ev);
  // Slow dispatches and idle handlers; the late deliveries behind one are
  // its symptoms (the report groups them).
  if (sp == nullptr ||
      (sp->role != LT_ROLE_DISPATCH && sp->role != LT_ROLE_IDLE) ||
      sp->duration_ns < session_.thresholds.slow_ns[sp->role])
    return;
  ++slow_;
  if (!live_) return;  // asked for, even with -q
  ReportContext ctx;
  ctx.probes = &session_.probes;
  ctx.symbolizer = symbols_;
  std::string state = sp->in_flight     ? " STILL RUNNING"
                      : sp->cut_short() ? " cut short"
                                        : "";
  print(fmt::format("looptrace: slow {} {} {} pid {} tid {} ({}){}",
                    role_name(sp->role), format_duration(sp->duration_ns),
                    report::describe_target(*sp, ctx).text, sp->pid, sp->tid,
                    sp->comm, state));
}

void LiveView::progress(uint64_t now_ns, const KernelCounts& tracer,
                        uint64_t input_events) {
  if (!tty_) return;
  now_ns_ = now_ns;
  input_ = input_events;
  if (now_ns - last_counts_ns_ >= 1'000'000'000) {
    last_counts_ns_ = now_ns;
    uint64_t dispatches = 0, idle = 0;
    for (const ThreadHistogram& h : tracer.read_histograms()) {
      if (h.role == LT_ROLE_DISPATCH) dispatches += h.count;
      if (h.role == LT_ROLE_IDLE) idle += h.count;
    }
    dispatches_ = dispatches;
    idle_ = idle;
    // The kernel's share of the report's `lost` (the analysers' own
    // counts, orphan samples and the like, are known only at the end).
    Counters c = tracer.read_counters();
    lost_ = c.decode_errors;
    for (uint32_t k :
         {LT_CNT_RB_FULL, LT_CNT_HIST_FULL, LT_CNT_DEPTH_OVERFLOW,
          LT_CNT_RET_UNMATCHED, LT_CNT_ABANDONED, LT_CNT_STORAGE_FAIL,
          LT_CNT_KEY_FAULT, LT_CNT_STACK_FAIL, LT_CNT_SCHED_UNSEEN,
          LT_CNT_OFFCPU_CAPPED, LT_CNT_WATCH_FULL, LT_CNT_DELIVERY_UNMATCHED})
      lost_ += c.bpf[k];
  }
  draw();
}

void LiveView::draw() {
  std::string line =
      fmt::format("looptrace: {} traced, {} dispatches",
                  format_duration(now_ns_ - session_.start_ns), dispatches_);
  if (idle_ > 0) line += fmt::format(", {} idle", idle_);
  line += fmt::format(", {} slow", slow_);
  if (session_.has_input) line += fmt::format(", {} input events", input_);
  if (frames_) line += fmt::format(", {} janky frames", janky_);
  line += fmt::format(", {} lost", lost_);
  // \r and clear-to-end: the line is rewritten in place.
  std::fprintf(stderr, "\r%s\033[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void LiveView::clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

void LiveView::print(const std::string& line) {
  bool was = drawn_;
  clear();
  // The traced process's names in it: escaped for the terminal.
  std::fprintf(stderr, "%s\n", printable(line).c_str());
  if (was) draw();
  std::fflush(stderr);
}

void LiveView::finish() {
  clear();
  tty_ = false;
}

void LiveView::barrier_stall(const Barrier& b, uint64_t now_ns) {
  const ReportContext ctx = alert_context();
  const uint64_t held = now_ns - b.posted_ns;
  alert(barrier_stall_line(b, held, ctx), barrier_stall_event(b, held, ctx));
}

void LiveView::hang(const HangAlert& h) {
  const ReportContext ctx = alert_context();
  alert(hang_line(h, ctx), hang_event(h, ctx));
}

void LiveView::janky_frame(const JankyFrame& j) {
  ++janky_;
  if (!live_) return;
  const FrameTiming& t = j.timing;
  const uint64_t at = j.span.start_ns > session_.start_ns
                          ? j.span.start_ns - session_.start_ns
                          : 0;
  print(fmt::format(
      "looptrace: janky frame +{:.3f}s pid {} tid {} ({}): "
      "took {}, missed {} vsync{} ({}){}, {}",
      static_cast<double>(at) / 1e9, j.span.pid, j.span.tid, j.span.comm,
      format_duration(j.span.duration_ns), t.missed_vsyncs,
      t.missed_vsyncs == 1 ? "" : "s", bucket_name(t.bucket),
      j.span.in_flight ? " STILL DRAWING" : "", j.source));
}

void LiveView::alert(const std::string& line, const nlohmann::json& event) {
  print(line);
  if (events_) events_->write(json_text(event));
}

ReportContext LiveView::alert_context() const {
  ReportContext ctx;
  ctx.probes = &session_.probes;
  ctx.symbolizer = symbols_;
  ctx.barrier_stall_ns = session_.thresholds.barrier_stall_ns;
  return ctx;
}

}  // namespace looptrace
