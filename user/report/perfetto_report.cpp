// The trace-event format as Perfetto's JSON importer reads it
// (src/trace_processor/importers/json/json_trace_parser.cc):
// - "X" slices go on their thread's track and must nest there: a slice that
//   partly overlaps another is moved to an overflow track with an error.
//   Slow dispatches and idle handlers nest (a nested loop runs inside its
//   caller), so they are X slices; a delivery's lag overlaps the dispatches
//   that made it late, so it is an async slice.
// - Async ("b"/"e") slices go on a process's track named after the event:
//   the name is the track, so every slice of one kind shares a name and
//   says what it is in its args.
// - Flows ("bind_id" with "flow_out"/"flow_in" on an X slice) attach to
//   that slice itself; the older "s"/"f" events attach to whatever slice
//   is open on the thread, and there may be none.
// - "stackFrames"/"samples" are skipped by the importer: a stack is shown
//   as an instant event with its frames in args.
#include "report/perfetto_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "profiles/profile.h"
#include "report/barrier_report.h"
#include "report/input_report.h"
#include "report/json_stream.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

using nlohmann::json;
using Emit = std::function<void(const json&)>;

// Every timestamp the trace shows, CLOCK_MONOTONIC.
struct TimeRange {
  uint64_t first = std::numeric_limits<uint64_t>::max();
  uint64_t last = 0;
  void add(uint64_t ns) {
    if (ns == 0) return;  // a stage not seen
    first = std::min(first, ns);
    last = std::max(last, ns);
  }
};

TimeRange time_range(const Findings& f, const ReportContext& ctx) {
  TimeRange r;
  if (ctx.start_ns) {
    r.add(ctx.start_ns);
    r.add(ctx.start_ns + ctx.duration_ns);
  }
  for (const SlowSpan& s : f.analysis.slow) {
    r.add(s.span.start_ns);
    r.add(s.span.start_ns + s.span.duration_ns);
    for (const StackGroup& g : s.stacks) r.add(g.first_ns);
  }
  for (const TimelineSpan& s : f.analysis.timeline.spans) {
    r.add(s.start_ns);
    r.add(s.start_ns + s.duration_ns);
  }
  if (f.has_barriers)
    for (const Barrier& b : f.barriers.barriers) {
      r.add(b.posted_ns);
      r.add(b.removed_ns);
    }
  if (f.has_input) {
    r.add(f.input.first_ns);
    r.add(f.input.last_ns);
  }
  if (f.has_frames)
    for (const FrameSlice& fr : f.frames.timeline) {
      r.add(fr.timing.expected_ns);
      r.add(fr.start_ns + fr.duration_ns);
    }
  if (r.first > r.last) r.first = r.last = 0;  // nothing at all
  return r;
}

// One stage of an input event where a thread of ours saw it.
struct InputPoint {
  const char* stage;
  uint32_t pid, tid;
  uint64_t ns;
};

// Sent and acknowledged on the sender's side (the analysis keeps one
// thread for it: the first that moved the event), received and consumed on
// the app's receiving thread, and the end of its next frame there (frames
// traced) and its present (the app's TIMELINE); stages not seen, or seen on a
// thread not known, are left out. In time order, as the flow runs.
std::vector<InputPoint> input_points(const InputEventInfo& e) {
  std::vector<InputPoint> out;
  auto add = [&out](const char* stage, uint32_t pid, uint32_t tid,
                    uint64_t ns) {
    if (ns != 0 && tid != 0) out.push_back({stage, pid, tid, ns});
  };
  add("sent", e.sender_pid, e.sender_tid, e.sent_ns);
  add("received", e.pid, e.tid, e.received_ns);
  add("consumed", e.pid, e.tid, e.finished_ns);
  add("acknowledged", e.sender_pid, e.sender_tid, e.finish_received_ns);
  if (e.frame_end_ns != 0 || e.present_ns != 0) {
    add("frame end", e.pid, e.tid, e.frame_end_ns);
    add("present", e.pid, e.tid, e.present_ns);  // a TIMELINE's
    std::stable_sort(
        out.begin(), out.end(),
        [](const InputPoint& a, const InputPoint& b) { return a.ns < b.ns; });
  }
  return out;
}

class TraceEvents {
 public:
  // Shows the slow spans the analysis lists (DispatchAnalysis::listed) in
  // full, and every other span it kept (DispatchAnalysis::timeline) as a
  // bare slice.
  TraceEvents(const Findings& f, const ReportContext& ctx, TimeRange range,
              std::ostream& os, const Emit& emit)
      : f_(f),
        ctx_(ctx),
        range_(range),
        os_(os),
        emit_(emit),
        names_(ctx.symbolizer) {}

  void write_all();

 private:
  // Microseconds since the base, exact to the nanosecond below 2^51 ns
  // (26 days): Perfetto rounds ts * 1000 to the nearest integer.
  double ts(uint64_t ns) const {
    return ns > range_.first ? static_cast<double>(ns - range_.first) / 1e3
                             : 0.0;
  }
  static double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

  void thread_names();
  void spans();
  void span(const SlowSpan& s);
  void timeline_span(const TimelineSpan& s);
  const std::string& target_name(const TimelineSpan& s);
  void delivery(const DeliveryBlame& why);
  void barrier(const Barrier& b);
  void frame(const FrameSlice& fr);
  void input_event(const InputEventInfo& e, const json& fields);
  void async_slice(const std::string& name, const char* cat, uint32_t pid,
                   uint32_t tid, uint64_t begin_ns, uint64_t end_ns, json args);

  const Findings& f_;
  const ReportContext& ctx_;
  TimeRange range_;
  std::ostream& os_;
  const Emit& emit_;
  report::FrameNames names_;
  uint64_t next_id_ = 1;  // async slices and flows
  // The text of each of the timeline's targets, once needed.
  std::vector<std::string> target_names_;
  std::vector<bool> target_named_;
};

void TraceEvents::write_all() {
  thread_names();
  spans();
  const DispatchAnalysis& a = f_.analysis;
  for (const DeliveryBlame& why : a.delivery_blame) {
    if (!os_) return;
    delivery(why);
  }
  if (f_.has_barriers)
    for (const Barrier& b : f_.barriers.barriers) {
      if (!os_) return;
      barrier(b);
    }
  if (f_.has_frames)
    for (const FrameSlice& fr : f_.frames.timeline) {
      if (!os_) return;
      frame(fr);
    }
  if (f_.has_input)
    for_each_listed_input_event(
        f_.input, f_.analysis, ctx_,
        [this](const InputEventInfo& e, const json& fields) {
          if (os_) input_event(e, fields);
        });
}

// The listed slow spans and the timeline's, merged by start: a nested span
// starting at its caller's nanosecond must come after it.
void TraceEvents::spans() {
  const DispatchAnalysis& a = f_.analysis;
  std::vector<const SlowSpan*> listed;
  for (uint32_t role : {LT_ROLE_DISPATCH, LT_ROLE_IDLE})
    for (size_t i : a.listed[role]) listed.push_back(&a.slow[i]);
  auto key = [](uint64_t start, uint64_t duration) {
    return std::make_tuple(start,
                           std::numeric_limits<uint64_t>::max() - duration);
  };
  std::stable_sort(listed.begin(), listed.end(),
                   [&key](const SlowSpan* x, const SlowSpan* y) {
                     return key(x->span.start_ns, x->span.duration_ns) <
                            key(y->span.start_ns, y->span.duration_ns);
                   });
  const std::vector<TimelineSpan>& rest = a.timeline.spans;
  size_t i = 0, k = 0;
  while ((i < listed.size() || k < rest.size()) && os_) {
    if (k == rest.size() ||
        (i < listed.size() &&
         key(listed[i]->span.start_ns, listed[i]->span.duration_ns) <=
             key(rest[k].start_ns, rest[k].duration_ns)))
      span(*listed[i++]);
    else
      timeline_span(rest[k++]);
  }
}

const std::string& TraceEvents::target_name(const TimelineSpan& s) {
  const Timeline& t = f_.analysis.timeline;
  if (target_names_.empty()) {
    target_names_.resize(t.targets.size() + 1);
    target_named_.resize(t.targets.size() + 1);
  }
  // A span without a target of its own is named by its probe.
  size_t i = s.target < t.targets.size() ? s.target : t.targets.size();
  if (!target_named_[i]) {
    if (i < t.targets.size()) {
      target_names_[i] = report::describe_target(t.targets[i], ctx_).text;
    } else {
      const ProbeDef* p = report::find_probe(ctx_, s.probe_id);
      target_names_[i] =
          p ? p->resolved_symbol : fmt::format("probe#{}", s.probe_id);
    }
    target_named_[i] = true;
  }
  return target_names_[i];
}

// A span kept only for the timeline (fast, or slow and not listed): a
// bare slice, a delivery's on its thread's row of deliveries.
void TraceEvents::timeline_span(const TimelineSpan& s) {
  const std::string& name = target_name(s);
  const bool slow = (s.flags & TimelineSpan::kSlow) != 0;
  json args = {{"start_ns", s.start_ns},
               {"duration_ns", s.duration_ns},
               {"depth", s.depth},
               {"slow", slow}};
  if (s.flags & TimelineSpan::kInFlight) args["in_flight"] = true;
  if (s.flags & TimelineSpan::kCutShort) args["cut_short"] = true;
  if (s.role == LT_ROLE_DELIVERY) {
    args = {{"target", name},
            {"due_ns", s.start_ns},
            {"start_ns", s.start_ns + s.duration_ns},
            {"lag_ns", s.duration_ns},
            {"slow", slow}};
    async_slice(
        fmt::format("{}deliveries (tid {})", slow ? "slow " : "", s.tid),
        "delivery", s.pid, s.tid, s.start_ns, s.start_ns + s.duration_ns,
        std::move(args));
    return;
  }
  emit_({{"name", name},
         {"cat", role_name(s.role)},
         {"ph", "X"},
         {"pid", s.pid},
         {"tid", s.tid},
         {"ts", ts(s.start_ns)},
         {"dur", us(s.duration_ns)},
         {"args", std::move(args)}});
}

// A name for every thread and process whose name the run saw: loop
// threads, and the threads that received input.
void TraceEvents::thread_names() {
  std::map<std::pair<uint32_t, uint32_t>, std::string> comm;
  auto note = [&comm](uint32_t pid, uint32_t tid, const std::string& name) {
    if (tid != 0 && !name.empty()) comm.try_emplace({pid, tid}, name);
  };
  for (const ThreadSummary& t : f_.analysis.threads) note(t.pid, t.tid, t.comm);
  for (const SlowSpan& s : f_.analysis.slow)
    note(s.span.pid, s.span.tid, s.span.comm);
  if (f_.has_input)
    for (const InputEventInfo& e : f_.input.events) note(e.pid, e.tid, e.comm);
  auto meta = [](const char* what, uint32_t pid, uint32_t tid,
                 const std::string& name) {
    return json{{"name", what},
                {"ph", "M"},
                {"pid", pid},
                {"tid", tid},
                {"args", {{"name", name}}}};
  };
  for (const auto& [key, name] : comm) {
    const auto [pid, tid] = key;
    // A process is named after its main thread, as ps shows it.
    if (pid == tid) emit_(meta("process_name", pid, tid, name));
    emit_(meta("thread_name", pid, tid, name));
  }
}

// A slow dispatch or idle handler, then where its stack samples were: one
// instant per distinct stack, at its first sample.
void TraceEvents::span(const SlowSpan& s) {
  const SpanEvent& e = s.span;
  json fields = slow_span_json(s, ctx_, names_);
  const std::string target = fields["target"];
  emit_({{"name", target},
         {"cat", role_name(e.role)},
         {"ph", "X"},
         {"pid", e.pid},
         {"tid", e.tid},
         {"ts", ts(e.start_ns)},
         {"dur", us(e.duration_ns)},
         {"args", std::move(fields)}});
  for (const StackGroup& g : s.stacks) {
    json frames = json::array();
    for (uint64_t addr : g.frames) frames.push_back(names_.name(e.pid, addr));
    std::string top =
        g.frames.empty() ? "[no frames]" : names_.function(e.pid, g.frames[0]);
    emit_({{"name", "stack: " + top},
           {"cat", "stack"},
           {"ph", "i"},
           {"s", "t"},
           {"pid", e.pid},
           {"tid", e.tid},
           {"ts", ts(g.first_ns)},
           {"args",
            {{"span", target},
             {"count", g.count},
             {"longest_run", g.longest_run},
             {"first_ns", g.first_ns},
             {"last_ns", g.last_ns},
             {"frames", std::move(frames)}}}});
  }
  // Where it blocked, each time, inside the span's slice.
  for (const BlockGroup& g : s.blocked) {
    std::string wait = report::kernel_wait(g.kframes, names_);
    json frames = json::array();
    for (uint64_t addr : g.frames) frames.push_back(names_.name(e.pid, addr));
    for (const BlockGroup::Interval& iv : g.intervals) {
      if (iv.to_ns <= iv.from_ns) continue;
      std::string by = !iv.woken         ? "no wakeup seen"
                       : !iv.waker_known ? "unknown"
                       : iv.from_irq     ? "an interrupt"
                                         : fmt::format("{}/{} {}", iv.waker_pid,
                                                       iv.waker_tid, iv.waker_comm);
      emit_(
          {{"name", "blocked" + (wait.empty() ? "" : " in " + wait)},
           {"cat", "blocked"},
           {"ph", "X"},
           {"pid", e.pid},
           {"tid", e.tid},
           {"ts", ts(iv.from_ns)},
           {"dur", us(iv.to_ns - iv.from_ns)},
           {"args", {{"span", target}, {"woken_by", by}, {"frames", frames}}}});
    }
  }
}

// Its lag, from the message's due time to its dispatch, on the thread's
// row of late messages.
void TraceEvents::delivery(const DeliveryBlame& why) {
  const SpanEvent& e = f_.analysis.slow[why.delivery].span;
  async_slice(fmt::format("slow deliveries (tid {})", e.tid), "delivery", e.pid,
              e.tid, e.start_ns, e.start_ns + e.duration_ns,
              slow_delivery_json(why, f_.analysis, ctx_));
}

// From post to removal (a leaked one to the end of the trace); the ones
// that stalled get a row of their own.
void TraceEvents::barrier(const Barrier& b) {
  std::string name = fmt::format("{}sync barriers on queue {:#x}",
                                 b.stalled ? "STALLED " : "", b.queue);
  uint64_t end =
      b.removed() ? b.removed_ns : std::max(range_.last, b.posted_ns);
  async_slice(name, "barrier", b.pid, b.tid, b.posted_ns, end,
              barrier_json(b, names_));
}

// A frame on its thread's two frame tracks, as Android's frame timeline
// has them: expected (its expected start to its deadline) and actual (its
// start to its end); a janky one is marked on the thread's track at its
// deadline.
void TraceEvents::frame(const FrameSlice& fr) {
  const FrameTiming& t = fr.timing;
  async_slice(fmt::format("expected frames (tid {})", fr.tid), "frame", fr.pid,
              fr.tid, t.expected_ns, t.deadline_ns,
              {{"expected_ns", t.expected_ns}, {"deadline_ns", t.deadline_ns}});
  json args = {{"start_ns", fr.start_ns},
               {"duration_ns", fr.duration_ns},
               {"expected_ns", t.expected_ns},
               {"deadline_ns", t.deadline_ns},
               {"janky", t.janky},
               {"missed_vsyncs", t.missed_vsyncs},
               {"bucket", bucket_name(t.bucket)}};
  if (t.frozen) args["frozen"] = true;
  if (fr.in_flight) args["in_flight"] = true;
  async_slice(fmt::format("actual frames (tid {})", fr.tid), "frame", fr.pid,
              fr.tid, fr.start_ns, fr.start_ns + fr.duration_ns, args);
  if (!t.janky) return;
  emit_({{"name",
          fmt::format("janky frame: missed {} vsync{} ({})", t.missed_vsyncs,
                      t.missed_vsyncs == 1 ? "" : "s", bucket_name(t.bucket))},
         {"cat", "frame"},
         {"ph", "i"},
         {"s", "t"},
         {"pid", fr.pid},
         {"tid", fr.tid},
         {"ts", ts(t.deadline_ns)},
         {"args", std::move(args)}});
}

// An async slice from its first seen stage to its last, and a zero-length
// slice at each stage on the thread where it happened, linked by a flow.
void TraceEvents::input_event(const InputEventInfo& e, const json& fields) {
  const std::vector<InputPoint> points = input_points(e);
  const uint64_t id = next_id_++;
  const std::string channel = fields.value("channel", "");
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  for (uint64_t ns : {e.sent_ns, e.received_ns, e.finished_ns,
                      e.finish_received_ns, e.frame_end_ns}) {
    if (ns == 0) continue;
    first = std::min(first, ns);
    last = std::max(last, ns);
  }
  const uint32_t pid = e.pid ? e.pid : e.sender_pid;
  if (pid != 0 && last != 0) {
    // The JSON report's fields less what a long trace repeats for nothing:
    // the stages are flat keys too, and null is a stage not seen.
    json args = json::object();
    for (const auto& [k, v] : fields.items())
      if (!v.is_null() && k != "stages") args[k] = v;
    async_slice("input events on " + channel, "input", pid,
                e.pid ? e.tid : e.sender_tid, first, last, std::move(args));
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const InputPoint& p = points[i];
    json ev = {{"name", std::string("input ") + p.stage},
               {"cat", "input"},
               {"ph", "X"},
               {"pid", p.pid},
               {"tid", p.tid},
               {"ts", ts(p.ns)},
               {"dur", 0},
               {"args", {{"seq", e.seq}, {"channel", channel}}}};
    if (points.size() > 1) {
      ev["bind_id"] = id;
      if (i > 0) ev["flow_in"] = true;
      if (i + 1 < points.size()) ev["flow_out"] = true;
    }
    emit_(ev);
  }
}

void TraceEvents::async_slice(const std::string& name, const char* cat,
                              uint32_t pid, uint32_t tid, uint64_t begin_ns,
                              uint64_t end_ns, json args) {
  const uint64_t id = next_id_++;
  emit_({{"name", name},
         {"cat", cat},
         {"ph", "b"},
         {"id", id},
         {"pid", pid},
         {"tid", tid},
         {"ts", ts(begin_ns)},
         {"args", std::move(args)}});
  emit_({{"name", name},
         {"cat", cat},
         {"ph", "e"},
         {"id", id},
         {"pid", pid},
         {"tid", tid},
         {"ts", ts(std::max(begin_ns, end_ns))}});
}

}  // namespace

Status write_perfetto(std::ostream& os, const Findings& found,
                      const ReportContext& ctx) {
  const TimeRange range = time_range(found, ctx);
  const std::array<size_t, LT_ROLE_MAX>& omitted =
      found.analysis.listed_omitted;
  // What the JSON report leaves out, this trace leaves out too (a run can
  // have a million slow deliveries: a trace nobody can open); Perfetto
  // shows these counts under "json_metadata" in the trace's info page.
  json metadata = {
      {"source", "looptrace"},
      {"clock", "CLOCK_MONOTONIC"},
      {"ts_base_ns", range.first},
      {"command", ctx.command_line},
      {"duration_ns", ctx.duration_ns},
      {"slow_dispatches_omitted", omitted[LT_ROLE_DISPATCH]},
      {"slow_idle_handlers_omitted", omitted[LT_ROLE_IDLE]},
      {"slow_deliveries_omitted", omitted[LT_ROLE_DELIVERY]},
      {"input_events_not_listed",
       found.has_input ? input_events_not_listed(found.input) : 0},
      {"barriers_not_listed", found.has_barriers ? found.barriers.dropped : 0},
      {"timeline_spans_not_kept", found.analysis.timeline.dropped},
      {"frames_not_kept", found.has_frames ? found.frames.timeline_omitted : 0},
  };
  json top = {{"displayTimeUnit", "ms"}, {"metadata", std::move(metadata)}};
  std::map<std::string, JsonElements> arrays;
  arrays["traceEvents"] = [&](const Emit& emit) {
    TraceEvents(found, ctx, range, os, emit).write_all();
  };
  write_json_object(os, top, arrays, JsonElementLayout::kOneLine);
  os << '\n';
  os.flush();
  if (!os) return Status::Error("writing the Perfetto trace failed");
  return Status::Ok();
}

}  // namespace looptrace
