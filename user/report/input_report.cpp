#include "report/input_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "analysis/list_limits.h"
#include "base/duration.h"
#include "profiles/profile.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

using nlohmann::json;

std::string channel_name(uint64_t inode) {
  return fmt::format("socket:[{}]", inode);
}

const char* mode_name(uint32_t chan_kind) {
  // How consumption is known: Android's FINISHED reply, or (raw channels)
  // the end of the dispatch that read the bytes.
  // X11, Wayland: the dispatch of the event's own type and time.
  if (is_display_chan(chan_kind)) return "dispatch_match";
  return chan_kind == LT_CHAN_RAW ? "dispatch_end" : "finished";
}

const char* layout_name(uint32_t chan_kind, uint32_t layout) {
  if (chan_kind == LT_CHAN_X11) return "x11";
  if (chan_kind == LT_CHAN_WAYLAND) return "wayland";
  switch (layout) {
    case LT_LAYOUT_CURRENT:
      return "current";
    case LT_LAYOUT_LEGACY:
      return "legacy";
    default:
      return "raw";
  }
}

// The stages a channel can show: raw channels have no sender or ACK;
// display events have their own time and the server's send, and no ACK;
// the frame stages only where frames were traced; the present stages only
// where the app sent a TIMELINE (Android 12+).
bool stage_applies(uint32_t chan_kind, InputStage s, bool frames,
                   bool presents) {
  if (s == InputStage::kConsumeToFrame || s == InputStage::kTotalToFrame)
    return frames;
  if (s == InputStage::kConsumeToPresent || s == InputStage::kTotalToPresent)
    return presents;
  if (is_display_chan(chan_kind))
    return s != InputStage::kAckLatency && s != InputStage::kTotalLatency;
  if (chan_kind != LT_CHAN_RAW) return true;
  return s == InputStage::kWaitBeforeHandling ||
         s == InputStage::kHandlingLatency;
}

// Whether the channel's app sent back any event's present time.
bool has_presents(const InputChannelSummary& c) {
  return c.stages[static_cast<int>(InputStage::kTotalToPresent)].count != 0;
}

// Stacks of slow spans by (pid, tid, span_id).
using SpanIndex =
    std::map<std::tuple<uint32_t, uint32_t, uint64_t>, const SlowSpan*>;

SpanIndex index_spans(const DispatchAnalysis& d) {
  SpanIndex idx;
  for (const SlowSpan& s : d.slow)
    idx[{s.span.pid, s.span.tid, s.span.span_id}] = &s;
  return idx;
}

json blame_span_json(const BlameSpan& b, const SpanIndex& idx,
                     const ReportContext& ctx, report::FrameNames& names) {
  const SpanEvent& e = b.span;
  json stack = json::array();
  auto it = idx.find({e.pid, e.tid, e.span_id});
  if (it != idx.end() && !it->second->stacks.empty())
    for (uint64_t addr : it->second->stacks[0].frames)
      stack.push_back(names.name(e.pid, addr));
  return {{"target", report::describe_target(e, ctx).text},
          {"role", role_name(e.role)},
          {"start_ns", e.start_ns},
          {"duration_ns", e.duration_ns},
          {"running_at_arrival", b.running_at_arrival},
          {"in_flight", e.in_flight},
          {"stack", stack}};
}

json opt(std::optional<uint64_t> v) { return v ? json(*v) : json(nullptr); }
json opt_ts(uint64_t v) { return v ? json(v) : json(nullptr); }

json event_json(const InputEventInfo& e, bool frames, const SpanIndex& idx,
                const ReportContext& ctx, report::FrameNames& names) {
  json stages = json::object();
  for (int s = 0; s < kInputStages; ++s) {
    auto st = static_cast<InputStage>(s);
    if (stage_applies(e.chan_kind, st, frames, e.present_ns != 0))
      stages[std::string(input_stage_name(st))] = opt(e.stage(st));
  }
  json blame = nullptr;
  if (e.blame) {
    const InputBlame& b = *e.blame;
    json chain = json::array();
    for (const BlameSpan& bs : b.chain)
      chain.push_back(blame_span_json(bs, idx, ctx, names));
    blame = {{"kind", b.own_handler     ? "handled_slowly"
                      : b.chain.empty() ? "unknown"
                                        : "waited_behind"},
             {"arrival_ns", b.arrival_ns},
             {"waited_ns", b.waited_ns},
             {"unattributed_ns", b.unattributed_ns},
             {"dispatches", chain}};
    if (b.omitted) blame["dispatches_omitted"] = b.omitted;
    if (!b.chain.empty()) {
      for (const char* k : {"target", "start_ns", "duration_ns", "stack"})
        blame[k] = chain[b.primary][k];
    }
  }
  json j = {
      {"pid", e.pid},
      {"tid", e.tid},
      {"comm", e.comm},
      {"channel", channel_name(e.channel)},
      {"peer", e.peer ? json(channel_name(e.peer)) : json(nullptr)},
      {"mode", mode_name(e.chan_kind)},
      {"seq", e.seq},
      {"type", std::string(input_type_name(e.type))},
      {"sender_pid", e.sender_pid ? json(e.sender_pid) : json(nullptr)},
      {"event_time_ns",
       e.event_time_ns > 0 ? json(e.event_time_ns) : json(nullptr)},
      {"sent_ns", opt_ts(e.sent_ns)},
      {"received_ns", opt_ts(e.received_ns)},
      {"handling_start_ns", opt_ts(e.handling_start_ns)},
      {"finished_ns", opt_ts(e.finished_ns)},
      {"finish_received_ns", opt_ts(e.finish_received_ns)},
      {"handled", e.has_finish ? json(e.handled) : json(nullptr)},
      {"consume_time_ns", e.has_finish && e.consume_time_ns
                              ? json(e.consume_time_ns)
                              : json(nullptr)},
      {"stages", stages},
      {"blame", std::move(blame)},
  };
  if (frames) j["frame_end_ns"] = opt_ts(e.frame_end_ns);
  if (e.present_ns != 0) {  // a TIMELINE's
    j["present_ns"] = e.present_ns;
    j["gpu_completed_ns"] = opt_ts(e.gpu_completed_ns);
  }
  for (auto& [k, v] : stages.items()) j[k] = v;  // flat, as Perfetto has
  if (is_display_chan(e.chan_kind)) {
    j["server_time_ms"] = e.server_time_ms;
    j["position"] = e.position;  // its message's place in the read
    j["coalesced"] = e.coalesced;
    j["ambiguous"] = e.ambiguous;
    j["dispatches"] = e.dispatches;
  }
  return j;
}

// A channel's worst groups, as the text report lists them.
json worst_json(const InputChannelSummary& c, bool frames, const SpanIndex& idx,
                const ReportContext& ctx, report::FrameNames& names) {
  json out = json::array();
  for (const InputGroup& g : c.worst)
    out.push_back({{"events", g.events},
                   {"seq_first", g.seq_lo},
                   {"seq_last", g.seq_hi},
                   {"first_arrival_ns", g.first_arrival_ns},
                   {"last_arrival_ns", g.last_arrival_ns},
                   {"worst", event_json(g.worst, frames, idx, ctx, names)}});
  return out;
}

}  // namespace

json input_summary_to_json(const InputAnalysis& a,
                           const DispatchAnalysis& dispatch,
                           const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  SpanIndex idx = index_spans(dispatch);
  // Too many channels: the ones with the most events.
  std::vector<const InputChannelSummary*> all;
  for (const InputChannelSummary& c : a.channels) all.push_back(&c);
  size_t channels_omitted = 0;
  std::vector<const InputChannelSummary*> kept = limits::keep_best(
      all, limits::kJsonMaxInputChannels,
      [](const InputChannelSummary* x, const InputChannelSummary* y) {
        return x->events > y->events;
      },
      &channels_omitted);
  json channels = json::array();
  for (const InputChannelSummary* cp : kept) {
    const InputChannelSummary& c = *cp;
    json stages = json::object();
    for (int s = 0; s < kInputStages; ++s) {
      auto st = static_cast<InputStage>(s);
      if (!stage_applies(c.chan_kind, st, a.frames, has_presents(c))) continue;
      const Percentiles& p = c.stages[s];
      stages[std::string(input_stage_name(st))] = p.count == 0
                                                      ? json(nullptr)
                                                      : json{{"count", p.count},
                                                             {"p50_ns", p.p50},
                                                             {"p90_ns", p.p90},
                                                             {"p99_ns", p.p99},
                                                             {"max_ns", p.max}};
    }
    json channel_json = {
        {"channel", channel_name(c.channel)},
        {"peer", c.peer ? json(channel_name(c.peer)) : json(nullptr)},
        {"mode", mode_name(c.chan_kind)},
        {"layout", layout_name(c.chan_kind, c.layout)},
        {"pid", c.pid},
        {"comm", c.comm},
        {"sender_pid", c.sender_pid ? json(c.sender_pid) : json(nullptr)},
        {"events", c.events},
        {"keys", c.keys},
        {"motions", c.motions},
        {"unfinished", c.unfinished},
        {"coalesced", c.coalesced},
        {"non_input", c.non_input},
        {"blamed", c.blamed},
        {"stages", stages},
        {"worst", worst_json(c, a.frames, idx, ctx, names)}};
    if (is_display_chan(c.chan_kind)) channel_json["ambiguous"] = c.ambiguous;
    channels.push_back(std::move(channel_json));
  }
  json out = json::object();
  out["input_summary"] = {
      {"events", a.total},
      {"channels", a.channels.size()},
      {"unmatched_messages", a.unmatched},
      {"duplicate_messages", a.duplicates},
      {"other_messages", a.other_messages},
      {"legacy_messages", a.legacy_messages},
      {"undecodable_messages", a.undecodable},
      {"x11_unframed_reads", a.unframed_reads},
      {"x11_framing_lost", a.framing_lost},
      {"wayland_unframed_reads", a.wl_unframed_reads},
      {"wayland_framing_lost", a.wl_framing_lost},
      {"not_listed", a.not_listed},
      {"channels_not_listed", channels_omitted},
      // What the kernel filter let through and turned away.
      {"kernel_recorded", dispatch.counters.bpf[LT_CNT_IO]},
      {"kernel_rejected", dispatch.counters.bpf[LT_CNT_IO_REJECT]},
      {"blame_spans_dropped", a.spans_dropped}};
  out["input_channels"] = std::move(channels);
  return out;
}

void for_each_listed_input_event(
    const InputAnalysis& a, const DispatchAnalysis& dispatch,
    const ReportContext& ctx,
    const std::function<void(const InputEventInfo&, const nlohmann::json&)>&
        fn) {
  report::FrameNames names(ctx.symbolizer);
  SpanIndex idx = index_spans(dispatch);
  for (const InputEventInfo& e : a.events)
    fn(e, event_json(e, a.frames, idx, ctx, names));
}

size_t input_events_not_listed(const InputAnalysis& a) { return a.not_listed; }

void for_each_input_event_json(
    const InputAnalysis& a, const DispatchAnalysis& dispatch,
    const ReportContext& ctx,
    const std::function<void(const nlohmann::json&)>& emit) {
  for_each_listed_input_event(
      a, dispatch, ctx,
      [&emit](const InputEventInfo&, const nlohmann::json& j) { emit(j); });
}

namespace {

// The section's first lines: how many events and channels, and what could
// not be read.
void write_input_totals(std::ostream& os, const InputAnalysis& a,
                        const ReportContext& ctx) {
  report::put(os, fmt::format("INPUT: {} event{} on {} channel{}", a.total,
                              a.total == 1 ? "" : "s", a.channels.size(),
                              a.channels.size() == 1 ? "" : "s"));
  if (a.channels.empty()) {
    // What was looked for, and how to pick a channel: a profile with a
    // display dispatch (gtk3) adds -p's X11 and Wayland connections.
    const bool display =
        ctx.probes && std::any_of(ctx.probes->begin(), ctx.probes->end(),
                                  [](const ProbeDef& p) { return p.input; });
    // With a display profile, -p's connections were traced (the banner
    // named them): a program nobody types into reads no input on them.
    report::put(os, display ? "  no input message seen on what was traced:"
                            : "  no input channel seen; looked for:");
    if (display)
      report::put(os,
                  "    X11 and Wayland connections of -p PID (the profile's "
                  "display input)");
    report::put(os, "    Android InputChannels (AF_UNIX SOCK_SEQPACKET)");
    if (display) {
      report::put(os,
                  "  (none while nothing was typed); another channel: "
                  "--input-peer PATH");
      report::put(os, "    (connected to PATH) or --input-fd FD");
    } else {
      report::put(os,
                  "  pick one with -p PID and --input-peer auto (its X11 and "
                  "Wayland");
      report::put(os,
                  "    connections), --input-peer PATH (connected to PATH) or "
                  "--input-fd FD");
    }
  }
  if (a.legacy_messages)
    report::put(os, fmt::format("  {} messages in the legacy (Android 9) "
                                "layout: no consume time",
                                a.legacy_messages));
  if (a.unmatched || a.duplicates)
    report::put(os, fmt::format("  unmatched messages: {}   duplicates: {}",
                                a.unmatched, a.duplicates));
}

// A channel's heading: whose it is, what it carried, what "consumed" means.
void write_channel_heading(std::ostream& os, const InputChannelSummary& c,
                           bool frames) {
  report::put(
      os,
      fmt::format("{} {}{}", channel_name(c.channel),
                  c.pid ? fmt::format("of pid {} ({})", c.pid, c.comm)
                        : std::string("(no process seen reading it)"),
                  c.sender_pid ? fmt::format(", sender pid {}", c.sender_pid)
                               : std::string()));
  report::put(
      os, fmt::format(
              "  {} event{} ({} key, {} motion), {} layout{}", c.events,
              c.events == 1 ? "" : "s", c.keys, c.motions,
              layout_name(c.chan_kind, c.layout),
              is_display_chan(c.chan_kind)
                  ? fmt::format("; {} other messages, not input", c.non_input)
                  : std::string()));
  report::put(
      os, fmt::format(
              "  consumed = {}{}{}",
              is_display_chan(c.chan_kind)
                  ? "end of the dispatch of that event (its type and time)"
              : c.chan_kind == LT_CHAN_RAW ? "end of the dispatch that read it"
                                           : "FINISHED sent by the app",
              c.unfinished ? fmt::format("; {} never consumed", c.unfinished)
                           : std::string(),
              c.coalesced ? fmt::format(" ({} passed over for a later one)",
                                        c.coalesced)
                          : std::string()));
  if (frames)
    report::put(
        os,
        "  frame end = end of the first frame started after it (not its "
        "present)");
  if (c.ambiguous)
    report::put(os, fmt::format("  {} event{} shared type and time with "
                                "another: matched in order (ambiguous)",
                                c.ambiguous, c.ambiguous == 1 ? "" : "s"));
}

// The percentiles of each stage the channel has.
void write_stage_table(std::ostream& os, const InputChannelSummary& c,
                       bool frames) {
  report::put(os, fmt::format("  {:<26} {:>6} {:>9} {:>9} {:>9} {:>9}", "stage",
                              "count", "p50", "p90", "p99", "max"));
  for (int s = 0; s < kInputStages; ++s) {
    auto st = static_cast<InputStage>(s);
    const Percentiles& p = c.stages[s];
    if (!stage_applies(c.chan_kind, st, frames, has_presents(c)) ||
        p.count == 0)
      continue;
    report::put(
        os, fmt::format("  {:<26} {:>6} {:>9} {:>9} {:>9} {:>9}",
                        input_stage_name(st), p.count, format_duration(p.p50),
                        format_duration(p.p90), format_duration(p.p99),
                        format_duration(p.max)));
  }
}

// One group of the worst events: when they arrived, how late they were
// consumed.
void write_worst_group(std::ostream& os, const InputGroup& g,
                       const ReportContext& ctx) {
  auto rel = [&ctx](uint64_t ns) {
    return format_duration(ctx.start_ns && ns > ctx.start_ns ? ns - ctx.start_ns
                                                             : 0);
  };
  const InputEventInfo* e = &g.worst;
  // When its thread's next frame ended (the worst's, for a group).
  std::string frame = e->frame_end_ns
                          ? fmt::format(", frame end +{}", rel(e->frame_end_ns))
                          : std::string();
  if (e->present_ns)
    frame += fmt::format(", presented +{}", rel(e->present_ns));
  if (g.events == 1)
    report::put(
        os, fmt::format("    seq {} {}: arrived +{}, consumed {} "
                        "later{}",
                        e->seq, input_type_name(e->type), rel(e->arrival_ns()),
                        format_duration(*e->app_latency()), frame));
  else
    report::put(os, fmt::format("    {} events, seq {}..{}: arrived +{}.."
                                "+{}, consumed up to {} later{}",
                                g.events, g.seq_lo, g.seq_hi,
                                rel(g.first_arrival_ns), rel(g.last_arrival_ns),
                                format_duration(*e->app_latency()), frame));
}

// What the group's worst event waited behind, and where the dispatch to
// blame was stuck (the top of its first stack).
void write_group_blame(std::ostream& os, const InputGroup& g,
                       const ReportContext& ctx, const SpanIndex& idx,
                       report::FrameNames& names) {
  const InputBlame& b = *g.worst.blame;
  if (b.chain.empty()) {
    report::put(os, fmt::format("      behind dispatches each shorter than "
                                "the slow threshold ({}{})",
                                format_duration(b.unattributed_ns),
                                g.events == 1 ? "" : ", the worst"));
    return;
  }
  const BlameSpan& p = b.chain[b.primary];
  std::string target = report::describe_target(p.span, ctx).text;
  report::put(
      os,
      fmt::format(
          "      {} {} ({}{})", b.own_handler ? "handled in" : "behind", target,
          format_duration(p.span.duration_ns),
          p.running_at_arrival && g.events == 1 ? ", running at arrival" : ""));
  const size_t behind = b.chain.size() + b.omitted;
  if (behind > 1)
    report::put(os, fmt::format("      and {} more dispatch{}; waited {} "
                                "in all{}",
                                behind - 1, behind == 2 ? "" : "es",
                                format_duration(b.waited_ns),
                                g.events == 1 ? "" : " (the worst)"));
  // Waits behind dispatches under --slow are not itemized, only summed.
  if (!b.own_handler && b.unattributed_ns >= 1'000'000)
    report::put(os, fmt::format("      and {} behind shorter dispatches{}",
                                format_duration(b.unattributed_ns),
                                g.events == 1 ? "" : " (the worst)"));
  auto it = idx.find({p.span.pid, p.span.tid, p.span.span_id});
  if (it != idx.end() && !it->second->stacks.empty()) {
    const auto& fr = it->second->stacks[0].frames;
    for (size_t i = 0; i < fr.size() && i < 3; ++i)
      report::put(os,
                  fmt::format("        at {}", names.name(p.span.pid, fr[i])));
  }
}

}  // namespace

void write_input_report(std::ostream& os, const InputAnalysis& a,
                        const DispatchAnalysis& dispatch,
                        const ReportContext& ctx) {
  report::FrameNames names(ctx.symbolizer);
  SpanIndex idx = index_spans(dispatch);
  os << '\n';
  write_input_totals(os, a, ctx);
  for (const InputChannelSummary& c : a.channels) {
    os << '\n';
    write_channel_heading(os, c, a.frames);
    write_stage_table(os, c, a.frames);
    // The worst events: longest from arrival to consumption, grouped
    // (analysis/input.h, InputGroup).
    if (c.worst.empty()) continue;
    report::put(os, "  worst (arrival -> consumed):");
    for (const InputGroup& g : c.worst) {
      write_worst_group(os, g, ctx);
      if (g.worst.blame) write_group_blame(os, g, ctx, idx, names);
    }
  }
}

}  // namespace looptrace
