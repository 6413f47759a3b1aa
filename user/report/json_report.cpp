// The JSON report for scripts; every field is described in
// docs/json-schema.md. Bump "version" when a field changes meaning or goes
// away; adding fields keeps it.
#include <nlohmann/json.hpp>

#include "profiles/profile.h"
#include "report/report.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

using nlohmann::json;

constexpr int kSchemaVersion = 1;

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

// Why a span ended without returning: its thread exited or exec'd.
json cut_short_json(const SpanEvent& e) {
  if (e.flags & LT_SPAN_EXIT) return "exit";
  if (e.flags & LT_SPAN_EXEC) return "exec";
  return nullptr;
}

json span_json(const SlowSpan& s, const ReportContext& ctx,
               report::FrameNames& names) {
  const SpanEvent& e = s.span;
  report::SpanTarget target = report::describe_target(e, ctx);
  json keys = json::object();
  for (const RenderedKey& k : target.keys) keys[k.name] = key_value(k);
  const ProbeDef* probe = report::find_probe(ctx, e.probe_id);

  json stacks = json::array();
  for (const StackGroup& g : s.stacks) {
    stacks.push_back({{"count", g.count},
                      {"longest_run", g.longest_run},
                      {"first_ns", g.first_ns},
                      {"last_ns", g.last_ns},
                      {"frames", frames_json(e.pid, g.frames, names)}});
  }
  return {
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
  };
}

// The sync barriers of a delivery's thread up while it waited.
json barriers_up(const SpanEvent& d, const ReportContext& ctx) {
  json out = json::array();
  for (const Barrier* b : report::barriers_up(ctx, d.pid, d.tid, d.start_ns,
                                              d.start_ns + d.duration_ns))
    out.push_back(
        {{"token", b->token},
         {"queue", fmt::format("{:#x}", b->queue)},
         {"posted_ns", b->posted_ns},
         {"removed_ns", b->removed() ? json(b->removed_ns) : json()}});
  return out;
}

// due_ns -> start_ns is the span; lag_ns its length.
json delivery_json(const SlowSpan& s, const report::RunningInstead& running,
                   const ReportContext& ctx) {
  const SpanEvent& e = s.span;
  json instead = json::array();
  for (const SlowSpan* b : running(e))
    instead.push_back({{"target", report::describe_target(b->span, ctx).text},
                       {"role", looptrace::role_name(b->span.role)},
                       {"start_ns", b->span.start_ns},
                       {"duration_ns", b->span.duration_ns}});
  return {
      {"pid", e.pid},
      {"tid", e.tid},
      {"comm", e.comm},
      {"due_ns", e.start_ns},
      {"start_ns", e.start_ns + e.duration_ns},
      {"lag_ns", e.duration_ns},
      {"target", report::describe_target(e, ctx).text},
      {"running_instead", instead},
      {"sync_barriers_up", barriers_up(e, ctx)},
  };
}

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

}  // namespace

json to_json(const DispatchAnalysis& a, const ReportContext& ctx) {
  json thresholds = json::object();
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r)
    thresholds[looptrace::role_name(r)] = ctx.slow_ns[r];

  json threads = json::array();
  uint64_t total_spans = 0;  // completed spans, from the histograms
  for (const ThreadSummary& t : a.threads) {
    threads.push_back(thread_json(t));
    if (t.role != LT_ROLE_DELIVERY) total_spans += t.count;
  }

  report::FrameNames names(ctx.symbolizer);
  json dispatches = json::array();
  json idle = json::array();
  json deliveries = json::array();
  const report::RunningInstead running(a);
  for (const SlowSpan& s : a.slow) {
    if (s.span.role == LT_ROLE_DISPATCH)
      dispatches.push_back(span_json(s, ctx, names));
    else if (s.span.role == LT_ROLE_IDLE)
      idle.push_back(span_json(s, ctx, names));
    else if (s.span.role == LT_ROLE_DELIVERY)
      deliveries.push_back(delivery_json(s, running, ctx));
  }

  json lost = json::object();
  for (const report::LostItem& l : report::lost_items(a))
    lost[l.json_key] = l.value;

  return {
      {"version", kSchemaVersion},
      {"command", ctx.command_line},
      {"duration_ns", ctx.duration_ns},
      {"slow_threshold_ns", thresholds},
      {"threads", std::move(threads)},
      {"slow_dispatches", std::move(dispatches)},
      {"slow_idle_handlers", std::move(idle)},
      {"slow_deliveries", std::move(deliveries)},
      {"lost", std::move(lost)},
      {"totals",
       {{"spans", total_spans},
        {"samples", a.counters.bpf[LT_CNT_SAMPLES]},
        {"span_records", a.span_records},
        {"cut_short", a.cut_short}}},
  };
}

}  // namespace looptrace
