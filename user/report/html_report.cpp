#include "report/html_report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/list_limits.h"
#include "base/json_text.h"
#include "profiles/profile.h"
#include "report/html_page.h"  // generated from report/html/page.html
#include "report/report_common.h"
#include "trace/input_message.h"

namespace looptrace {
namespace {

using nlohmann::json;

// Where the data goes in the page. (Not a static_assert on the page: GCC
// cannot evaluate string_view::find on it under -fsanitize=undefined.)
constexpr std::string_view kDataMarker = "<!-- looptrace:data -->";

struct Window {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// The interval the timeline spans: from the start of tracing (or the first
// event) to its end, widened to every drawn item so that none falls off.
Window time_window(const Findings& found, const ReportContext& ctx) {
  uint64_t start =
      ctx.start_ns != 0 ? ctx.start_ns : found.analysis.first_event_ns;
  uint64_t end = 0;
  auto see = [&](uint64_t from, uint64_t to) {
    if (from == 0) return;
    if (start == 0 || from < start) start = from;
    end = std::max({end, from, to});
  };
  for (const SlowSpan& s : found.analysis.slow)
    see(s.span.start_ns, s.span.start_ns + s.span.duration_ns);
  for (const TimelineSpan& s : found.analysis.timeline.spans)
    see(s.start_ns, s.start_ns + s.duration_ns);
  for (const Barrier& b : found.barriers.barriers)
    see(b.posted_ns, std::max(b.removed_ns, b.stalled_ns));
  see(found.input.first_ns, found.input.last_ns);
  for (const FrameSlice& f : found.frames.timeline)
    see(f.start_ns, f.start_ns + f.duration_ns);
  end = std::max({end, start + ctx.duration_ns, start + 1});
  return {start, end};
}

// Every sample of every slow span, folded the way flamegraph.pl's input
// is: one entry per distinct stack, root first, with its sample count.
// Frames are indices into "names": the same frames recur in every stack.
json flame_json(const DispatchAnalysis& a, report::FrameNames& names) {
  std::map<std::string, uint32_t> index;
  json name_list = json::array();
  std::map<std::vector<uint32_t>, uint64_t> folded;
  for (const SlowSpan& s : a.slow) {
    for (const StackGroup& g : s.stacks) {
      std::vector<uint32_t> path;
      for (auto it = g.frames.rbegin(); it != g.frames.rend(); ++it) {
        const std::string& name = names.name(s.span.pid, *it);
        auto [pos, added] =
            index.try_emplace(name, static_cast<uint32_t>(index.size()));
        if (added) name_list.push_back(name);
        path.push_back(pos->second);
      }
      folded[path] += g.count;
    }
  }
  json stacks = json::array();
  for (const auto& [path, count] : folded)
    stacks.push_back({{"count", count}, {"frames", path}});
  return {{"names", std::move(name_list)}, {"stacks", std::move(stacks)}};
}

// Each input event's arrival and consumption on its app thread; events
// never consumed first, then the slowest, when there are too many.
// The analysis picked them (InputAnalysis::timeline): each is one SVG
// rectangle, and tens of thousands make a browser sluggish; the input
// stages table still covers every event.
json input_timeline_json(const InputAnalysis& a, size_t* omitted) {
  *omitted = a.timeline_omitted;
  json out = json::array();
  for (const InputEventInfo& ev : a.timeline) {
    const InputEventInfo* e = &ev;
    out.push_back({{"pid", e->pid},
                   {"tid", e->tid},
                   {"comm", e->comm},
                   {"seq", e->seq},
                   {"type", std::string(input_type_name(e->type))},
                   {"arrival_ns", e->arrival_ns()},
                   {"consumed_ns", e->consumed_ns() ? json(e->consumed_ns())
                                                    : json(nullptr)}});
  }
  return out;
}

// The spans drawn from the timeline (fast ones, slow ones not listed), as
// columns: at 100 000 spans an object each would be most of the page.
// Starts are deltas from the previous span's (the first from `t0`), kinds
// a role index into "roles" plus 4 x TimelineSpan::Flags, threads and
// targets indices into their lists.
json timeline_json(const DispatchAnalysis& a, const ReportContext& ctx,
                   uint64_t t0) {
  const Timeline& t = a.timeline;
  std::map<std::pair<uint32_t, uint32_t>, size_t> thread_index;
  json threads = json::array();
  // Spans without a target of their own are named by their probe, after
  // the targets.
  std::map<uint32_t, size_t> probe_index;
  json targets = json::array();
  for (const SpanEvent& e : t.targets)
    targets.push_back(report::describe_target(e, ctx).text);
  json thread = json::array(), kind = json::array(), depth = json::array(),
       start = json::array(), dur = json::array(), target = json::array();
  uint64_t prev = t0;
  for (const TimelineSpan& s : t.spans) {
    auto [th, new_thread] =
        thread_index.try_emplace({s.pid, s.tid}, thread_index.size());
    if (new_thread) threads.push_back({s.pid, s.tid});
    size_t name = s.target;
    if (s.target >= t.targets.size()) {
      auto [p, new_probe] = probe_index.try_emplace(s.probe_id, targets.size());
      if (new_probe) {
        const ProbeDef* probe = report::find_probe(ctx, s.probe_id);
        targets.push_back(probe ? probe->resolved_symbol
                                : "probe#" + std::to_string(s.probe_id));
      }
      name = p->second;
    }
    thread.push_back(th->second);
    kind.push_back(s.role + 4 * s.flags);
    depth.push_back(s.depth);
    // Sorted by start, all at or after t0 (the window holds them).
    start.push_back(s.start_ns >= prev ? s.start_ns - prev : 0);
    prev = std::max(prev, s.start_ns);
    dur.push_back(s.duration_ns);
    target.push_back(name);
  }
  json roles = json::array();
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r) roles.push_back(role_name(r));
  return {{"roles", std::move(roles)},     {"threads", std::move(threads)},
          {"targets", std::move(targets)}, {"thread", std::move(thread)},
          {"kind", std::move(kind)},       {"depth", std::move(depth)},
          {"start", std::move(start)},     {"dur", std::move(dur)},
          {"target", std::move(target)},   {"not_kept", t.dropped},
          {"cap", kMaxTimelineSpans}};
}

// Each thread's frames for the frame-duration chart, as columns: starts
// (ns since `t0`), durations, deadlines (ns after the start, negative when
// it started past its deadline), missed vsyncs (a janky frame has any, or
// ended past its deadline: janky).
json frames_json(const FrameAnalysis& a, uint64_t t0) {
  json out = json::array();
  const std::vector<FrameSlice>& v = a.timeline;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    json start = json::array(), dur = json::array(), deadline = json::array(),
         missed = json::array(), janky = json::array();
    for (; j < v.size() && v[j].pid == v[i].pid && v[j].tid == v[i].tid; ++j) {
      const FrameSlice& f = v[j];
      start.push_back(f.start_ns >= t0 ? f.start_ns - t0 : 0);
      dur.push_back(f.duration_ns);
      deadline.push_back(static_cast<int64_t>(f.timing.deadline_ns) -
                         static_cast<int64_t>(f.start_ns));
      missed.push_back(f.timing.missed_vsyncs);
      janky.push_back(f.timing.janky ? 1 : 0);
    }
    uint64_t refresh = 0;
    for (const FrameThread& t : a.threads)
      if (t.pid == v[i].pid && t.tid == v[i].tid) refresh = t.refresh_ns;
    out.push_back({{"pid", v[i].pid},
                   {"tid", v[i].tid},
                   {"refresh_ns", refresh},
                   {"start", std::move(start)},
                   {"dur", std::move(dur)},
                   {"deadline", std::move(deadline)},
                   {"missed", std::move(missed)},
                   {"janky", std::move(janky)}});
    i = j;
  }
  return out;
}

json page_data(const Findings& found, const ReportContext& ctx) {
  json report = findings_to_json(found, ctx);
  // Each span keeps its stuck stack ("stack"); every other sample is in
  // "flame", so the per-span lists would only repeat them.
  for (const char* list : {"slow_dispatches", "slow_idle_handlers"}) {
    for (json& s : report[list]) {
      s.erase("stacks");
      s.erase("stacks_omitted");
      // Where it blocked stays, without what the page does not show.
      for (json& b : s["blocked"]) {
        b.erase("frames_detail");
        b.erase("kernel_frames");
        for (json& w : b["wakers"]) {
          w.erase("kernel_frames");
          w.erase("frames_detail");
        }
      }
    }
  }
  json lost = json::array();
  for (const report::LostItem& l : report::lost_items(found.analysis))
    if (l.value != 0) lost.push_back(l.text);
  if (std::string fill = report::ring_fill(found.analysis, ctx.duration_ns);
      !fill.empty())
    lost.push_back("ring buffer filled by " + fill);
  report::FrameNames names(ctx.symbolizer);
  size_t inputs_omitted = 0;
  json inputs = found.has_input
                    ? input_timeline_json(found.input, &inputs_omitted)
                    : json::array();
  const Window w = time_window(found, ctx);
  json frames =
      found.has_frames ? frames_json(found.frames, w.start_ns) : json(nullptr);
  return {
      {"report", std::move(report)},
      {"frames", std::move(frames)},
      {"frames_not_kept", found.has_frames ? found.frames.timeline_omitted : 0},
      {"window", {{"start_ns", w.start_ns}, {"end_ns", w.end_ns}}},
      {"lost", std::move(lost)},
      {"flame", flame_json(found.analysis, names)},
      {"timeline", timeline_json(found.analysis, ctx, w.start_ns)},
      {"input_events", std::move(inputs)},
      {"input_events_omitted", inputs_omitted}};
}

// JSON text that cannot end the <script> element holding it: '<' occurs
// only inside JSON strings, where \u003c means the same character, so
// "</script>" or "<!--" in a symbol name stays data.
std::string script_safe(const json& j) {
  // Symbol names and comms are bytes from the traced system: invalid UTF-8
  // becomes U+FFFD instead of an exception.
  const std::string text = json_text(j);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

}  // namespace

Status write_html(std::ostream& os, const Findings& found,
                  const ReportContext& ctx) {
  const std::string_view page = kHtmlPage;
  const size_t at = page.find(kDataMarker);
  if (at == std::string_view::npos)  // an edit of page.html lost it
    return Status::Error("the built-in HTML page has no data marker");
  os << page.substr(0, at)
     << R"(<script type="application/json" id="looptrace-data">)"
     << script_safe(page_data(found, ctx)) << "</script>"
     << page.substr(at + kDataMarker.size());
  os.flush();
  if (!os) return Status::Error("writing the HTML report failed");
  return Status::Ok();
}

}  // namespace looptrace
