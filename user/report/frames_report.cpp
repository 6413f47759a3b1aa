#include "report/frames_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/duration.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

using report::put;
constexpr size_t kColumns = 80;
constexpr size_t kCommWidth = LT_COMM_LEN - 1;
// A janky frame's wait before it started is shown from this long, or when
// a recorded span ran in it.
constexpr uint64_t kNotableDelayNs = 1'000'000;

std::string hz(uint64_t interval_ns) {
  return interval_ns ? fmt::format("{:.1f} Hz", 1e9 / interval_ns) : "? Hz";
}

// "+1.234s" from the start of tracing.
std::string at(uint64_t ns, uint64_t base) {
  return fmt::format("+{:.3f}s", ns >= base ? (ns - base) / 1e9 : 0.0);
}

void write_threads(std::ostream& os, const FrameAnalysis& a) {
  size_t id_width = 7;  // "PID/TID"
  for (const FrameThread& t : a.threads)
    id_width = std::max(id_width, fmt::format("{}/{}", t.pid, t.tid).size());
  // id, 2 spaces, comm, frames(8), janky(7), dropped(8), fps(6),
  // 3 x duration(8): 80 columns with the longest pid/tid.
  constexpr size_t kFixed = 2 + 8 + 7 + 8 + 6 + 3 * 8;
  size_t comm_width = std::min(kCommWidth, kColumns - kFixed - id_width);
  auto row = [&](std::string id, std::string comm, std::string frames,
                 std::string janky, std::string dropped, std::string fps,
                 std::string p50, std::string p99, std::string max) {
    if (comm.size() > comm_width) comm.resize(comm_width);
    put(os, fmt::format("{:<{}}  {:<{}}{:>8}{:>7}{:>8}{:>6}{:>8}{:>8}{:>8}", id,
                        id_width, comm, comm_width, frames, janky, dropped, fps,
                        p50, p99, max));
  };
  os << '\n';
  put(os,
      "FRAMES BY THREAD (janky: ended past its deadline, one interval after "
      "due)");
  row("PID/TID", "COMM", "FRAMES", "JANKY", "DROPPED", "FPS", "P50", "P99",
      "MAX");
  for (const FrameThread& t : a.threads) {
    row(fmt::format("{}/{}", t.pid, t.tid), t.comm, fmt::format("{}", t.count),
        fmt::format("{}", t.janky), fmt::format("{}", t.missed_vsyncs),
        fmt::format("{:.1f}", t.fps), format_duration(t.pct.p50),
        format_duration(t.pct.p99), format_duration(t.pct.max));
    std::string more = fmt::format("  {} at {}: {} frozen (>= 700ms)", t.source,
                                   hz(t.refresh_ns), t.frozen);
    if (t.in_flight)
      more += fmt::format(", {} still drawing at the end", t.in_flight);
    put(os, more);
  }
}

void write_cause(std::ostream& os, const JankyFrame& j,
                 const ReportContext& ctx, uint64_t base) {
  const SpanEvent& e = j.span;
  if (j.between_ends)
    put(os, "    from the previous frame end: no CPU split");
  else
    put(os, fmt::format("    ran {}: cpu {}, run queue {}, blocked {}",
                        format_duration(e.duration_ns),
                        format_duration(e.cpu_ns), format_duration(e.runq_ns),
                        format_duration(e.blocked_ns())));
  if (!j.phases.empty()) {
    // Its phases in order (the longest is "longest inside" below).
    // "phases (doCallbacks): input 17.5us, animation 25.0ms, ...":
    // a label all of them share is said once.
    std::vector<std::string> names;
    for (const SpanEvent& p : j.phases)
      names.push_back(report::describe_target(p, ctx).text);
    const ProbeDef* first = report::find_probe(ctx, j.phases[0].probe_id);
    std::string label = first ? first->label : "";
    for (const std::string& n : names)
      if (label.empty() || n.size() <= label.size() + 1 ||
          n.compare(0, label.size() + 1, label + " ") != 0)
        label.clear();
    std::string line =
        label.empty() ? "    phases:" : fmt::format("    phases ({}):", label);
    for (size_t i = 0; i < j.phases.size(); ++i)
      line += fmt::format(
          "{} {} {}", i == 0 ? "" : ",",
          label.empty() ? names[i] : names[i].substr(label.size() + 1),
          format_duration(j.phases[i].duration_ns));
    if (j.phases_omitted)
      line += fmt::format(", and {} more", j.phases_omitted);
    put(os, line);
  }
  if (j.cause.longest_inside) {
    const SpanEvent& in = *j.cause.longest_inside;
    // Another thread's (a GUI thread that held back the render thread).
    std::string tid =
        in.tid != e.tid ? fmt::format(" tid {}:", in.tid) : std::string();
    // A frame between ends counts a span that ran in part inside it.
    const uint64_t in_end = in.start_ns + in.duration_ns;
    const uint64_t f_end = e.start_ns + e.duration_ns;
    const uint64_t part =
        std::min(in_end, f_end) - std::max(in.start_ns, e.start_ns);
    std::string partly =
        part < in.duration_ns
            ? fmt::format(" ({} of it inside)", format_duration(part))
            : std::string();
    put(os, fmt::format("    longest inside: {}{}{} {}",
                        format_duration(in.duration_ns), partly, tid,
                        report::describe_target(in, ctx).text));
  }
  // A start a little after its tick is the loop's own pace, not news.
  if (!j.cause.held_by.empty() || j.timing.delay_ns >= kNotableDelayNs) {
    put(os, fmt::format("    held back {}: due {}, started {}",
                        format_duration(j.timing.delay_ns),
                        at(j.timing.expected_ns, base), at(e.start_ns, base)));
    for (const HeldBy& h : j.cause.held_by)
      put(os,
          fmt::format("      {} of it in {} {}", format_duration(h.overlap_ns),
                      format_duration(h.span.duration_ns),
                      report::describe_target(h.span, ctx).text));
    if (j.cause.held_by_omitted)
      put(os, fmt::format("      and {} more", j.cause.held_by_omitted));
  }
  if (j.input_waiting) put(os, "    input was waiting while it was late");
}

void write_janky(std::ostream& os, const FrameAnalysis& a,
                 const ReportContext& ctx) {
  uint64_t total = 0;
  for (const FrameThread& t : a.threads) total += t.janky;
  os << '\n';
  if (total == 0) {
    put(os, "JANKY FRAMES: none");
    return;
  }
  std::vector<const JankyFrame*> worst;
  for (const JankyFrame& j : a.janky) worst.push_back(&j);
  std::stable_sort(worst.begin(), worst.end(),
                   [](const JankyFrame* x, const JankyFrame* y) {
                     if (x->timing.missed_vsyncs != y->timing.missed_vsyncs)
                       return x->timing.missed_vsyncs > y->timing.missed_vsyncs;
                     return x->span.duration_ns > y->span.duration_ns;
                   });
  if (worst.size() > kTextJankyFrames) worst.resize(kTextJankyFrames);
  std::stable_sort(worst.begin(), worst.end(),
                   [](const JankyFrame* x, const JankyFrame* y) {
                     return x->span.start_ns < y->span.start_ns;
                   });
  put(os, worst.size() < total
              ? fmt::format("JANKY FRAMES: {} (the {} that missed most)", total,
                            worst.size())
              : fmt::format("JANKY FRAMES: {}", total));
  uint64_t base = ctx.start_ns;
  for (const JankyFrame* j : worst) {
    const SpanEvent& e = j->span;
    std::string line = fmt::format(
        "  {}  {}/{}  {} {}, missed {} vsync{} ({})", at(e.start_ns, base),
        e.pid, e.tid, e.in_flight ? "drawing for" : "took",
        format_duration(e.duration_ns), j->timing.missed_vsyncs,
        j->timing.missed_vsyncs == 1 ? "" : "s", bucket_name(j->timing.bucket));
    put(os, line);
    write_cause(os, *j, ctx, base);
  }
}

nlohmann::json span_ref(const SpanEvent& s, const ReportContext& ctx) {
  return {{"target", report::describe_target(s, ctx).text},
          {"tid", s.tid},
          {"start_ns", s.start_ns},
          {"duration_ns", s.duration_ns}};
}

// A janky frame's phases, by start: each named by its target.
nlohmann::json phases_json(const JankyFrame& j, const ReportContext& ctx) {
  nlohmann::json out = nlohmann::json::array();
  for (const SpanEvent& p : j.phases) out.push_back(span_ref(p, ctx));
  return out;
}

nlohmann::json cause_json(const JankyFrame& j, const ReportContext& ctx) {
  nlohmann::json held = nlohmann::json::array();
  for (const HeldBy& h : j.cause.held_by) {
    nlohmann::json r = span_ref(h.span, ctx);
    r["overlap_ns"] = h.overlap_ns;
    held.push_back(std::move(r));
  }
  nlohmann::json out = {
      {"held_back_ns", j.timing.delay_ns},
      {"held_by", std::move(held)},
      {"held_by_omitted", j.cause.held_by_omitted},
      {"longest_inside", j.cause.longest_inside
                             ? span_ref(*j.cause.longest_inside, ctx)
                             : nlohmann::json(nullptr)}};
  // A frame between two frame ends ran no one span: no CPU split.
  if (!j.between_ends) {
    out["cpu_ns"] = j.span.cpu_ns;
    out["runq_ns"] = j.span.runq_ns;
    out["blocked_ns"] = j.span.blocked_ns();
  }
  return out;
}

}  // namespace

void write_frames_report(std::ostream& os, const FrameAnalysis& a,
                         const ReportContext& ctx) {
  if (a.threads.empty()) {
    os << '\n';
    put(os, "FRAMES: none drawn while tracing");
    return;
  }
  write_threads(os, a);
  write_janky(os, a, ctx);
}

nlohmann::json frames_to_json(const FrameAnalysis& a,
                              const ReportContext& ctx) {
  nlohmann::json threads = nlohmann::json::array();
  for (const FrameThread& t : a.threads)
    threads.push_back({{"pid", t.pid},
                       {"tid", t.tid},
                       {"comm", t.comm},
                       {"source", t.source},
                       {"count", t.count},
                       {"janky", t.janky},
                       {"frozen", t.frozen},
                       {"missed_vsyncs", t.missed_vsyncs},
                       {"in_flight", t.in_flight},
                       {"fps", t.fps},
                       {"refresh_ns", t.refresh_ns},
                       {"p50_ns", t.pct.p50},
                       {"p90_ns", t.pct.p90},
                       {"p99_ns", t.pct.p99},
                       {"max_ns", t.pct.max}});
  nlohmann::json janky = nlohmann::json::array();
  for (const JankyFrame& j : a.janky)
    janky.push_back({{"pid", j.span.pid},
                     {"tid", j.span.tid},
                     {"comm", j.span.comm},
                     {"source", j.source},
                     {"start_ns", j.span.start_ns},
                     {"duration_ns", j.span.duration_ns},
                     {"expected_ns", j.timing.expected_ns},
                     {"deadline_ns", j.timing.deadline_ns},
                     {"missed_vsyncs", j.timing.missed_vsyncs},
                     {"bucket", bucket_name(j.timing.bucket)},
                     {"frozen", j.timing.frozen},
                     {"in_flight", j.span.unfinished()},
                     {"phases", phases_json(j, ctx)},
                     {"phases_omitted", j.phases_omitted},
                     {"cause", cause_json(j, ctx)},
                     {"input_waiting", j.input_waiting}});
  return {{"frames", std::move(threads)},
          {"frames_omitted", a.threads_omitted},
          {"janky_frames", std::move(janky)},
          {"janky_frames_omitted", a.janky_omitted}};
}

}  // namespace looptrace
