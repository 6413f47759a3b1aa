// The JSON report for scripts; every field is described in
// docs/json-schema.md. Bump "version" when a field changes meaning or goes
// away; adding fields keeps it.
#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "analysis/list_limits.h"
#include "profiles/profile.h"
#include "python/frames.h"
#include "report/key_frames.h"
#include "report/report.h"
#include "report/report_common.h"
#include "symbolize/kernel_symbols.h"
#include "v8/frames.h"

namespace looptrace {
namespace {

using nlohmann::json;

constexpr int kSchemaVersion = 2;

json key_value(const RenderedKey& k) {
  if (k.fault || k.omitted) return nullptr;
  if (k.format == KeyFormat::kInt) return k.int_value;
  return k.text;
}

json frames_json(uint32_t pid, const std::vector<uint64_t>& frames,
                 report::FrameNames& names) {
  json out = json::array();
  for (uint64_t addr : frames) out.push_back(names.name(pid, addr));
  return out;
}

// The same frames whole, for tools that aggregate them: address, module
// (path, [vdso], [anon], [kernel]; a script's name for a Python or
// JavaScript frame), function (null when unknown), the offset into it and
// the frame's kind: "native", "python" or "js" (the last two with their
// script's line, null when unknown).
json frames_detail_json(uint32_t pid, const std::vector<uint64_t>& frames,
                        report::FrameNames& names) {
  json out = json::array();
  for (uint64_t addr : frames) {
    const Frame& f = names.frame(pid, addr);
    json d = {{"addr", addr},
              {"module", f.module},
              {"function", f.known() ? json(f.function) : json()},
              {"offset", f.known() ? json(f.offset) : json()}};
    const bool py = python::is_py_frame(addr), js = v8::is_js_frame(addr);
    d["kind"] = py ? "python" : js ? "js" : "native";
    if (py || js) {
      // "stall (app.js:46)": the number after the script's name.
      json line;
      const size_t colon = f.function.rfind(':');
      if (f.known() && colon != std::string::npos && f.function.back() == ')')
        try {
          size_t used = 0;
          const std::string digits =
              f.function.substr(colon + 1, f.function.size() - colon - 2);
          const int n = std::stoi(digits, &used);
          if (used == digits.size() && n > 0) line = n;
        } catch (const std::exception&) {
        }
      d["script"] = f.module;
      d["line"] = line;
    }
    out.push_back(std::move(d));
  }
  return out;
}

// Where in `frames` the program's own code is (report/key_frames.h): the
// index of its innermost frame, and what made it the program's.
void add_key_frame(json* entry, uint32_t pid,
                   const std::vector<uint64_t>& frames, report::AppCode& app,
                   report::FrameNames& names) {
  std::optional<report::KeyFrame> k =
      report::key_frame(pid, frames, app, names);
  (*entry)["key_frame"] = k ? json(k->index) : json();
  (*entry)["key_frame_by"] = k ? json(k->by) : json();
}

// The program's JavaScript callbacks that took the span's samples
// (report/key_frames.h js_callbacks): function and samples, most first;
// empty outside JavaScript.
json js_callbacks_json(const SlowSpan& s, report::AppCode& app,
                       report::FrameNames& names) {
  json out = json::array();
  for (const report::JsCallback& c : report::js_callbacks(s, app, names))
    out.push_back({{"function", c.function}, {"samples", c.samples}});
  return out;
}

// Where the span was stuck, as the text report says it: its stacks merged
// by function, shown by the commonest exact one; null without samples.
json stuck_here_json(const SlowSpan& s, report::AppCode& app,
                     report::FrameNames& names) {
  const report::StuckHere h = report::stuck_here(s, app, names);
  if (h.stack == nullptr) return nullptr;
  const uint32_t pid = s.span.pid;
  return {
      {"samples", h.samples},
      {"stacks", h.stacks},
      {"frames", frames_json(pid, h.stack->frames, names)},
      {"key_frame", h.key ? json(h.key->index) : json()},
      {"key_line",
       h.key ? json(names.name(pid, h.stack->frames[h.key->index])) : json()},
      {"key_line_samples", h.key_samples}};
}

// Why a span ended without returning: its thread exited or exec'd.
json cut_short_json(const SpanEvent& e) {
  if (e.flags & LT_SPAN_EXIT) return "exit";
  if (e.flags & LT_SPAN_EXEC) return "exec";
  return nullptr;
}

const char* unwind_name(Unwind u) {
  return u == Unwind::kDwarf ? "dwarf" : "frame_pointer";
}

// Where the span blocked, most blocked time first, with who woke it.
json blocked_json(const SlowSpan& s, report::AppCode& app,
                  report::FrameNames& names) {
  json out = json::array();
  for (size_t i = 0; i < s.blocked.size() && i < limits::kJsonMaxStacks; ++i) {
    const BlockGroup& g = s.blocked[i];
    json wakers = json::array();
    for (size_t k = 0; k < g.wakers.size() && k < limits::kJsonMaxStacks; ++k) {
      const Waker& w = g.wakers[k];
      // An interrupt's user stack is whatever thread it hit: left out.
      const bool irq = report::interrupt_wakeup(w, names);
      wakers.push_back(
          {{"pid", w.pid},
           {"tid", w.tid},
           {"comm", w.comm},
           {"interrupt", irq},
           {"count", w.count},
           {"blocked_ns", w.blocked_ns},
           {"unwind", unwind_name(w.unwind)},
           {"truncated", w.truncated},
           {"frames",
            irq ? json::array() : frames_json(w.pid, w.frames, names)},
           {"kernel_frames", frames_json(kKernelPid, w.kframes, names)}});
    }
    json entry = {
        {"blocked_ns", g.blocked_ns},
        {"count", g.count},
        {"first_ns", g.first_ns},
        {"kernel_wait", report::kernel_wait(g.kframes, names)},
        {"unwind", unwind_name(g.unwind)},
        {"truncated", g.truncated || g.python_cut},
        {"frames", frames_json(s.span.pid, g.frames, names)},
        {"frames_detail", frames_detail_json(s.span.pid, g.frames, names)},
        {"kernel_frames", frames_json(kKernelPid, g.kframes, names)},
        {"wakers", wakers}};
    if (g.python_cut) entry["python_cut"] = true;
    add_key_frame(&entry, s.span.pid, g.frames, app, names);
    if (g.wakers.size() > limits::kJsonMaxStacks)
      entry["wakers_omitted"] = g.wakers.size() - limits::kJsonMaxStacks;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

json slow_span_json(const SlowSpan& s, const ReportContext& ctx,
                    report::FrameNames& names) {
  const SpanEvent& e = s.span;
  report::SpanTarget target = report::describe_target(e, ctx);
  json keys = json::object();
  for (const RenderedKey& k : target.keys) keys[k.name] = key_value(k);
  const ProbeDef* probe = report::find_probe(ctx, e.probe_id);
  report::AppCode app(ctx.app_code);

  // Most samples first: the stacks left out are the rarest.
  json stacks = json::array();
  for (size_t i = 0; i < s.stacks.size() && i < limits::kJsonMaxStacks; ++i) {
    const StackGroup& g = s.stacks[i];
    stacks.push_back(
        {{"count", g.count},
         {"longest_run", g.longest_run},
         {"first_ns", g.first_ns},
         {"last_ns", g.last_ns},
         {"weight_ns",
          ctx.sample_hz ? g.count * (1'000'000'000 / ctx.sample_hz) : 0},
         {"unwind", unwind_name(g.unwind)},
         {"truncated", g.truncated || g.python_cut},
         {"frames", frames_json(e.pid, g.frames, names)},
         {"frames_detail", frames_detail_json(e.pid, g.frames, names)}});
    if (g.python_cut) stacks.back()["python_cut"] = true;
    add_key_frame(&stacks.back(), e.pid, g.frames, app, names);
  }
  json out = {
      {"pid", e.pid},
      {"tid", e.tid},
      {"comm", e.comm},
      {"probe", probe ? probe->resolved_symbol : std::string()},
      {"start_ns", e.start_ns},
      {"duration_ns", e.duration_ns},
      {"cpu_ns", e.cpu_ns},
      {"runq_ns", e.runq_ns},
      {"steal_ns", e.steal_ns},
      {"blocked_ns", e.blocked_ns()},
      {"split_from",
       (e.flags & LT_SPAN_SPLIT_KERNEL) ? "kernel_counters" : "sched_switch"},
      {"in_flight", e.in_flight},
      {"cut_short", cut_short_json(e)},
      {"target", target.text},
      {"keys", keys},
      {"depth", e.depth},
      {"samples", s.nsamples},
      {"stack", s.stacks.empty()
                    ? json::array()
                    : frames_json(e.pid, s.stacks[0].frames, names)},
      {"stacks", stacks},
      {"stuck_here", stuck_here_json(s, app, names)},
      {"js_callbacks", js_callbacks_json(s, app, names)},
      {"blocked", blocked_json(s, app, names)},
      {"blocked_recorded_ns", s.blocked_recorded_ns},
  };
  if (s.blocked.size() > limits::kJsonMaxStacks)
    out["blocked_omitted"] = s.blocked.size() - limits::kJsonMaxStacks;
  if (s.stacks.size() > limits::kJsonMaxStacks)
    out["stacks_omitted"] = s.stacks.size() - limits::kJsonMaxStacks;
  if (s.hang_announced_ns) out["hang_announced_ns"] = s.hang_announced_ns;
  if (e.stopped_ns) out["stopped_ns"] = e.stopped_ns;  // not in blocked_ns
  return out;
}

namespace {

// A slow span a delivery or backlog names: what it was, and when.
json blamed_span_json(const SpanEvent& b, const ReportContext& ctx) {
  return {{"target", report::describe_target(b, ctx).text},
          {"role", looptrace::role_name(b.role)},
          {"start_ns", b.start_ns},
          {"duration_ns", b.duration_ns}};
}

// Inline, without a BlamedSpans: the longest few spans, the rest counted.
constexpr size_t kInlineRunningInstead = 5;

}  // namespace

BlamedSpans::BlamedSpans(const DispatchAnalysis& a) {
  std::vector<size_t> all;
  for (const DeliveryBlame& why : a.delivery_blame)
    all.insert(all.end(), why.running_instead.begin(),
               why.running_instead.end());
  for (size_t g = 0; g < a.backlogs.size() && g < limits::kJsonMaxSpans; ++g) {
    const std::vector<size_t>& behind = a.backlogs[g].behind;
    all.insert(all.end(), behind.begin(),
               behind.begin() + static_cast<long>(std::min(
                                    behind.size(), limits::kJsonMaxRelated)));
  }
  // By index into a.slow, which is by start.
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (size_t i : all) index_.emplace(i, index_.size());
}

json BlamedSpans::to_json(const DispatchAnalysis& a,
                          const ReportContext& ctx) const {
  json out = json::array();
  for (const auto& [slow, at] : index_)
    out.push_back(blamed_span_json(a.slow[slow].span, ctx));
  return out;
}

// due_ns -> start_ns is the span; lag_ns its length.
json slow_delivery_json(const DeliveryBlame& why, const DispatchAnalysis& a,
                        const ReportContext& ctx, const BlamedSpans* blamed) {
  const SpanEvent& e = a.slow[why.delivery].span;
  json instead = json::array();
  size_t instead_omitted = why.running_instead_omitted;
  if (blamed != nullptr) {
    for (size_t i : why.running_instead) instead.push_back(blamed->at(i));
  } else {
    std::vector<size_t> longest = limits::keep_best(
        why.running_instead, kInlineRunningInstead,
        [&a](size_t x, size_t y) {
          return a.slow[x].span.duration_ns > a.slow[y].span.duration_ns;
        },
        &instead_omitted);
    instead_omitted += why.running_instead_omitted;
    for (size_t i : longest)
      instead.push_back(blamed_span_json(a.slow[i].span, ctx));
  }
  json up = json::array();
  if (ctx.barriers != nullptr)
    for (size_t i : why.barriers_up) {
      const Barrier& b = ctx.barriers->barriers[i];
      up.push_back({{"token", b.token},
                    {"queue", fmt::format("{:#x}", b.queue)},
                    {"posted_ns", b.posted_ns},
                    {"removed_ns", b.removed() ? json(b.removed_ns) : json()}});
    }
  json out = {
      {"pid", e.pid},
      {"tid", e.tid},
      {"comm", e.comm},
      {"due_ns", e.start_ns},
      {"start_ns", e.start_ns + e.duration_ns},
      {"lag_ns", e.duration_ns},
      {"target", report::describe_target(e, ctx).text},
      {"running_instead", std::move(instead)},
      {"sync_barriers_up", std::move(up)},
  };
  if (instead_omitted) out["running_instead_omitted"] = instead_omitted;
  if (why.barriers_up_omitted)
    out["sync_barriers_up_omitted"] = why.barriers_up_omitted;
  if (why.stopped_ns) out["stopped_ns"] = why.stopped_ns;
  return out;
}

namespace {

json thread_json(const ThreadSummary& t) {
  return {
      {"pid", t.pid},        {"tid", t.tid},
      {"comm", t.comm},      {"role", looptrace::role_name(t.role)},
      {"count", t.count},    {"slow_count", t.slow_count},
      {"p50_ns", t.pct.p50}, {"p90_ns", t.pct.p90},
      {"p99_ns", t.pct.p99}, {"max_ns", t.pct.max},
      {"sum_ns", t.sum_ns},
  };
}

// Completed spans, from the histograms.
uint64_t total_spans(const DispatchAnalysis& a) {
  uint64_t n = 0;
  for (const ThreadSummary& t : a.threads)
    if (t.role < LT_ROLE_MAX && t.role != LT_ROLE_DELIVERY) n += t.count;
  return n;
}

// Too many threads: the ones with the most slow spans, then the busiest.
json threads_json(const DispatchAnalysis& a, size_t* omitted) {
  std::vector<const ThreadSummary*> all_threads;
  for (const ThreadSummary& t : a.threads) all_threads.push_back(&t);
  json threads = json::array();
  for (const ThreadSummary* t : limits::keep_best(
           all_threads, limits::kJsonMaxThreads,
           [](const ThreadSummary*x, const ThreadSummary*y) {
             return std::tie(x->slow_count, x->sum_ns) >
                    std::tie(y->slow_count, y->sum_ns);
           },
           omitted))
    threads.push_back(thread_json(*t));
  return threads;
}

// One backlog of late deliveries: who was late, and what ran meanwhile.
json backlog_json(const DeliveryBacklog& g, const DispatchAnalysis& a,
                  const ReportContext& ctx, const BlamedSpans& blamed) {
  const SpanEvent& first = a.slow[g.late.front()].span;
  const SpanEvent& worst = a.slow[g.worst].span;
  json behind = json::array();
  size_t behind_omitted = 0;
  for (size_t i : g.behind) {
    if (behind.size() >= limits::kJsonMaxRelated) {
      ++behind_omitted;
      continue;
    }
    behind.push_back(blamed.at(i));
  }
  json entry = {{"pid", first.pid},
                {"tid", first.tid},
                {"comm", first.comm},
                {"first_due_ns", first.start_ns},
                {"last_due_ns", a.slow[g.late.back()].span.start_ns},
                {"last_dispatch_ns", g.last_dispatch_ns},
                {"late", g.late.size()},
                {"worst_lag_ns", worst.duration_ns},
                {"worst_target", report::describe_target(worst, ctx).text},
                {"behind", std::move(behind)}};
  if (behind_omitted) entry["behind_omitted"] = behind_omitted;
  if (g.stopped_ns) entry["stopped_ns"] = g.stopped_ns;
  return entry;
}

// The backlogs the text report shows, with the same grouping.
json backlogs_json(const DispatchAnalysis& a, const ReportContext& ctx,
                   const BlamedSpans& blamed, size_t* omitted) {
  json backlogs = json::array();
  *omitted = 0;
  for (const DeliveryBacklog& g : a.backlogs) {
    if (backlogs.size() >= limits::kJsonMaxSpans) {
      ++*omitted;
      continue;
    }
    backlogs.push_back(backlog_json(g, a, ctx, blamed));
  }
  return backlogs;
}

// The listed slow spans of one role.
json listed_json(const DispatchAnalysis& a, lt_role role,
                 const ReportContext& ctx, report::FrameNames& names) {
  json out = json::array();
  for (size_t i : a.listed[role])
    out.push_back(slow_span_json(a.slow[i], ctx, names));
  return out;
}

}  // namespace

json to_json(const DispatchAnalysis& a, const ReportContext& ctx) {
  json thresholds = json::object();
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r)
    thresholds[looptrace::role_name(r)] = ctx.slow_ns[r];
  size_t threads_omitted = 0;
  json threads = threads_json(a, &threads_omitted);

  report::FrameNames names(ctx.symbolizer);
  json dispatches = listed_json(a, LT_ROLE_DISPATCH, ctx, names);
  json idle = listed_json(a, LT_ROLE_IDLE, ctx, names);
  // What deliveries waited behind, each span once, named by index.
  const BlamedSpans blamed(a);
  json deliveries = json::array();
  for (const DeliveryBlame& why : a.delivery_blame)
    deliveries.push_back(slow_delivery_json(why, a, ctx, &blamed));
  size_t backlogs_omitted = 0;
  json backlogs = backlogs_json(a, ctx, blamed, &backlogs_omitted);

  json lost = json::object();
  for (const report::LostItem& l : report::lost_items(a))
    lost[l.json_key] = l.value;

  return {
      {"version", kSchemaVersion},
      {"command", ctx.command_line},
      {"duration_ns", ctx.duration_ns},
      {"dump_reason",
       ctx.dump_reason.empty() ? json(nullptr) : json(ctx.dump_reason)},
      {"slow_threshold_ns", thresholds},
      {"app_code", report::AppCode(ctx.app_code).patterns()},
      {"threads", std::move(threads)},
      {"threads_omitted", threads_omitted},
      {"slow_dispatches", std::move(dispatches)},
      {"slow_dispatches_omitted", a.listed_omitted[LT_ROLE_DISPATCH]},
      {"slow_idle_handlers", std::move(idle)},
      {"slow_idle_handlers_omitted", a.listed_omitted[LT_ROLE_IDLE]},
      {"slow_deliveries", std::move(deliveries)},
      {"slow_deliveries_omitted", a.listed_omitted[LT_ROLE_DELIVERY]},
      {"delivery_backlogs", std::move(backlogs)},
      {"delivery_backlogs_omitted", backlogs_omitted},
      {"blamed_spans", blamed.to_json(a, ctx)},
      {"lost", std::move(lost)},
      {"totals",
       {{"spans", total_spans(a)},
        {"samples", a.counters.bpf[LT_CNT_SAMPLES]},
        {"span_records", a.span_records},
        {"cut_short", a.cut_short}}},
  };
}

}  // namespace looptrace
