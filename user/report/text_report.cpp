// The text report: what a person reads after a run. Every line fits 80
// columns; anything longer (deep C++ names) is cut with "...", the JSON
// report has it whole.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/barrier.h"
#include "base/duration.h"
#include "profiles/profile.h"
#include "report/key_frames.h"
#include "report/report.h"
#include "report/report_common.h"
#include "v8/frames.h"

namespace looptrace {
namespace {

// Frames of the stuck stack shown; the rest are usually the loop's own
// frames (main -> Looper::loop -> dispatch) that every stack shares.
constexpr size_t kMaxFrames = 12;
constexpr size_t kCommWidth = LT_COMM_LEN - 1;

using report::put;
constexpr size_t kColumns = 80;

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

const char* thread_title(uint32_t role) {
  if (role == LT_ROLE_DELIVERY) return "DELIVERY LAG BY THREAD";
  return role == LT_ROLE_IDLE ? "IDLE HANDLERS BY THREAD"
                              : "DISPATCHES BY THREAD";
}

const char* slow_title(uint32_t role) {
  if (role == LT_ROLE_DELIVERY) return "SLOW DELIVERIES";
  return role == LT_ROLE_IDLE ? "SLOW IDLE HANDLERS" : "SLOW DISPATCHES";
}

void write_header(std::ostream& os, const ReportContext& ctx) {
  std::string line = "looptrace:";
  if (ctx.duration_ns != 0)
    line += fmt::format(" traced {};", format_duration(ctx.duration_ns));
  bool first = true;
  bool any_probe = ctx.probes == nullptr || !ctx.probes->empty();
  if (any_probe) line += " slow";
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r) {
    // Only the roles this run has probes for (all of them when unknown).
    bool used = ctx.probes == nullptr;
    if (ctx.probes != nullptr) {
      for (const ProbeDef& p : *ctx.probes)
        used = used || p.role == r ||
               (r == LT_ROLE_DELIVERY && p.role == LT_ROLE_ENQUEUE);
    }
    if (!used) continue;
    line +=
        fmt::format("{} {} >= {}", first ? "" : ",", looptrace::role_name(r),
                    format_duration(ctx.slow_ns[r]));
    first = false;
  }
  put(os, line);
  if (!ctx.command_line.empty()) put(os, "command: " + ctx.command_line);
  if (!ctx.dump_reason.empty()) put(os, ctx.dump_reason);
}

void write_threads(std::ostream& os, const DispatchAnalysis& a, uint32_t role) {
  std::vector<const ThreadSummary*> rows;
  size_t id_width = 7;  // "PID/TID"
  for (const ThreadSummary& t : a.threads) {
    if (t.role != role) continue;
    rows.push_back(&t);
    id_width = std::max(id_width, fmt::format("{}/{}", t.pid, t.tid).size());
  }
  if (rows.empty()) return;

  // id, 2 spaces, comm, count(9), 4 x duration(8), slow(7): 80 columns with
  // the longest pid/tid (4194304/4194304) and comm.
  constexpr size_t kFixed = 2 + 9 + 4 * 8 + 7;
  size_t comm_width = std::min(kCommWidth, kColumns - kFixed - id_width);
  auto row = [&](std::string id, std::string comm, std::string count,
                 std::string p50, std::string p90, std::string p99,
                 std::string max, std::string slow) {
    if (comm.size() > comm_width) comm.resize(comm_width);
    put(os, fmt::format("{:<{}}  {:<{}}{:>9}{:>8}{:>8}{:>8}{:>8}{:>7}", id,
                        id_width, comm, comm_width, count, p50, p90, p99, max,
                        slow));
  };
  os << '\n';
  put(os, thread_title(role));
  row("PID/TID", "COMM", "COUNT", "P50", "P90", "P99", "MAX", "SLOW");
  for (const ThreadSummary* t : rows) {
    row(fmt::format("{}/{}", t->pid, t->tid), t->comm,
        fmt::format("{}", t->count), format_duration(t->pct.p50),
        format_duration(t->pct.p90), format_duration(t->pct.p99),
        format_duration(t->pct.max), fmt::format("{}", t->slow_count));
  }
}

// The loop threads' time waiting for work (a wait probe: AOSP's epoll_wait
// in pollInner): idle, not lag. IDLE is its sum, SHARE its part of the
// traced time; WOKEN the waits a wake call (Looper::wake()) ended, with
// the time from that call to the loop running again.
void write_waits(std::ostream& os, const DispatchAnalysis& a,
                 const ReportContext& ctx) {
  const uint64_t traced_ns = ctx.duration_ns;
  std::map<std::pair<uint32_t, uint32_t>, const ThreadSummary*> wakes;
  std::vector<const ThreadSummary*> rows;
  size_t id_width = 7;  // "PID/TID"
  for (const ThreadSummary& t : a.threads) {
    if (t.role == LT_ROLE_WAKE) wakes[{t.pid, t.tid}] = &t;
    if (t.role != LT_ROLE_WAIT) continue;
    rows.push_back(&t);
    id_width = std::max(id_width, fmt::format("{}/{}", t.pid, t.tid).size());
  }
  if (rows.empty()) return;
  // id, 2 spaces, comm, waits(8), idle(8), share(7), woken(7), 2 x
  // duration(8): 80 columns with the longest pid/tid and comm.
  constexpr size_t kFixed = 2 + 8 + 8 + 7 + 7 + 2 * 8;
  size_t comm_width = std::min(kCommWidth, kColumns - kFixed - id_width);
  auto row = [&](std::string id, std::string comm, std::string waits,
                 std::string idle, std::string share, std::string woken,
                 std::string p50, std::string max) {
    if (comm.size() > comm_width) comm.resize(comm_width);
    put(os, fmt::format("{:<{}}  {:<{}}{:>8}{:>8}{:>7}{:>7}{:>8}{:>8}", id,
                        id_width, comm, comm_width, waits, idle, share, woken,
                        p50, max));
  };
  os << '\n';
  put(os, "LOOP WAITS BY THREAD (idle, waiting for work: not lag)");
  row("PID/TID", "COMM", "WAITS", "IDLE", "SHARE", "WOKEN", "P50", "MAX");
  for (const ThreadSummary* t : rows) {
    auto w = wakes.find({t->pid, t->tid});
    const ThreadSummary* wake = w == wakes.end() ? nullptr : w->second;
    row(fmt::format("{}/{}", t->pid, t->tid), t->comm,
        fmt::format("{}", t->count), format_duration(t->sum_ns),
        traced_ns
            ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(t->sum_ns) /
                                         static_cast<double>(traced_ns))
            : "-",
        fmt::format("{}", wake ? wake->count : 0),
        wake ? format_duration(wake->pct.p50) : "-",
        wake ? format_duration(wake->pct.max) : "-");
  }
  // The wake probe by its label (the android profile's "Looper::wake()").
  std::string wake = "a wake call";
  if (ctx.probes != nullptr)
    for (const ProbeDef& p : *ctx.probes)
      if (p.role == LT_ROLE_WAKE) {
        wake = p.label.empty() ? p.symbol : p.label;
        break;
      }
  // (put escapes it, and cuts it at 80 columns.)
  put(os, fmt::format("  (WOKEN: waits another thread ended in {};", wake));
  put(os, "  P50, MAX: from that call to the loop running)");
}

// How a stack stopped short: its native walk before the thread's first
// frame (a frame that could not be trusted, the end of the stack copy),
// its Python frames at LT_MAX_PYFRAMES (the outermost are missing).
struct StackCut {
  bool native = false;
  bool python = false;
};

// Under the last frame of a stack whose native walk stopped early.
constexpr const char* kStackCut =
    "      (stack cut here: its callers were not read or not trusted)";

// Frames of a stack, innermost first, at most `max` and the key frame:
// that one marked "> " and shown even when it is further in.
void write_frames(std::ostream& os, uint32_t pid,
                  const std::vector<uint64_t>& frames, size_t max, StackCut cut,
                  report::FrameNames& names,
                  std::optional<size_t> key = std::nullopt) {
  auto frame = [&](size_t i) {
    put(os, (key == i ? "    > " : "      ") + names.name(pid, frames[i]));
  };
  auto more = [&](size_t n) {
    put(os,
        fmt::format("      ... {} more {}", n, n == 1 ? "frame" : "frames"));
  };
  const size_t shown = std::min(frames.size(), max);
  for (size_t i = 0; i < shown; ++i) frame(i);
  size_t next = shown;
  if (key && *key >= shown && *key < frames.size()) {
    if (*key > shown) more(*key - shown);
    frame(*key);
    next = *key + 1;
  }
  if (frames.size() > next)
    more(frames.size() - next);
  else if (cut.native && !frames.empty())
    put(os, kStackCut);
  // Under the stack, whether its last frame is shown or not.
  if (cut.python)
    put(os, fmt::format("      (Python stack cut: deeper than {} frames, the "
                        "outermost not read)",
                        LT_MAX_PYFRAMES));
}

// A Node span's JavaScript identity: the program's callbacks that took its
// samples, with their share (the three commonest).
void write_js_callbacks(std::ostream& os, const SlowSpan& s,
                        report::AppCode& app, report::FrameNames& names) {
  const std::vector<report::JsCallback> cbs =
      report::js_callbacks(s, app, names);
  if (cbs.empty() || s.nsamples == 0) return;
  std::string line = "    JavaScript:";
  for (size_t i = 0; i < cbs.size() && i < 3; ++i)
    line += fmt::format("{} {} {}%", i ? "," : "", cbs[i].function,
                        cbs[i].samples * 100 / s.nsamples);
  if (cbs.size() > 3) line += fmt::format(", +{} more", cbs.size() - 3);
  put(os, line);
}

// Where the span was stuck: its samples merged by function (a Python loop
// spreads them over lines), shown by the commonest exact stack.
// `nested`: where the samples went when the span has none of its own (a
// sample goes to the innermost span running).
void write_stacks(std::ostream& os, const SlowSpan& s, report::AppCode& app,
                  report::FrameNames& names, const std::string& nested) {
  if (s.stacks.empty()) {
    put(os, nested.empty() ? "    no stack samples"
                           : "    no stack samples of its own: " + nested);
    return;
  }
  const report::StuckHere top = report::stuck_here(s, app, names);
  std::string line = fmt::format("    stuck here: {} of {}", top.samples,
                                 plural(s.nsamples, "sample", "samples"));
  if (top.stacks > 1)
    line += fmt::format(" ({} stacks with these functions)", top.stacks);
  put(os, line);
  if (top.stack->frames.empty())
    put(os, "      (no frames: the stack read failed)");
  std::optional<size_t> key;
  if (top.key) key = top.key->index;
  write_frames(os, s.span.pid, top.stack->frames, kMaxFrames,
               {top.stack->truncated, top.stack->python_cut}, names, key);
  if (top.other_stacks == 0) return;
  uint64_t rest = s.nsamples - std::min(s.nsamples, top.samples);
  put(os, fmt::format("    + {} ({})",
                      plural(top.other_stacks, "other stack", "other stacks"),
                      plural(rest, "sample", "samples")));
  // How far the key line speaks for the whole span.
  if (key)
    put(os, fmt::format("    key line in {} of {}: {}", top.key_samples,
                        plural(s.nsamples, "sample", "samples"),
                        names.function(s.span.pid, top.stack->frames[*key])));
}

// Slow spans grouped by the key frame of where each was stuck (by its
// function; the line shown is that of the span with the most samples).
struct KeyLineRow {
  std::string name;
  uint64_t spans = 0;
  uint64_t wall_ns = 0;
  uint64_t worst_ns = 0;
  uint32_t samples = 0;  // of the span whose line is shown
};

// A span's key line: of where it was stuck, else of where it blocked most
// (a sleeping callback has no samples). `group` is its function.
struct SpanKey {
  std::string group, name;
  uint32_t samples = 0;
  bool found = false;
};

SpanKey span_key(const SlowSpan& s, report::AppCode& app,
                 report::FrameNames& names) {
  SpanKey k;
  const std::vector<uint64_t>* frames = nullptr;
  std::optional<report::KeyFrame> key;
  if (!s.stacks.empty()) {
    const report::StuckHere h = report::stuck_here(s, app, names);
    frames = &h.stack->frames;
    key = h.key;
    k.samples = h.samples;
  } else if (!s.blocked.empty()) {
    frames = &s.blocked[0].frames;
    key = report::key_frame(s.span.pid, *frames, app, names);
  }
  if (frames == nullptr) {
    k.group = k.name = "(no stack recorded)";
  } else if (!key) {
    k.group = k.name = "(no frame of the program's own code)";
  } else {
    k.group = names.function(s.span.pid, (*frames)[key->index]);
    k.name = names.name(s.span.pid, (*frames)[key->index]);
    k.found = true;
  }
  return k;
}

// For a slow span without samples, the index of the first slow span nested
// in it that has some; spans.size() if none.
size_t nested_with_samples(const std::vector<const SlowSpan*>& spans,
                           size_t i) {
  const SpanEvent& outer = spans[i]->span;
  if (!spans[i]->stacks.empty()) return spans.size();
  // Spans are listed by start, a nested one near its outer one: only the
  // neighbours are looked at (a run may have thousands of slow spans).
  constexpr size_t kNear = 64;
  const size_t from = i > kNear ? i - kNear : 0;
  const size_t to = std::min(spans.size(), i + kNear + 1);
  for (size_t j = from; j < to; ++j) {
    const SpanEvent& in = spans[j]->span;
    if (j == i || in.tid != outer.tid || in.pid != outer.pid ||
        in.depth <= outer.depth || in.start_ns < outer.start_ns ||
        in.start_ns + in.duration_ns > outer.start_ns + outer.duration_ns ||
        spans[j]->nsamples == 0)
      continue;
    return j;
  }
  return spans.size();
}

// The same said: "166 in the nested GTK event GDK_KEY_PRESS (#2)"; "" if
// none.
std::string nested_samples(const std::vector<const SlowSpan*>& spans, size_t i,
                           const ReportContext& ctx) {
  const size_t j = nested_with_samples(spans, i);
  if (j == spans.size()) return "";
  return fmt::format("{} in the nested {} (#{})", spans[j]->nsamples,
                     report::describe_target(spans[j]->span, ctx).text, j + 1);
}

// Spans whose samples are all in a slow span nested in them (GDK's event
// source around a GTK event around a Python handler) are that span's row:
// one stall, one row.
void write_key_lines(std::ostream& os,
                     const std::vector<const SlowSpan*>& spans, uint32_t role,
                     report::AppCode& app, report::FrameNames& names) {
  if (spans.size() < 2) return;  // the span's own "> " says it
  std::map<std::string, KeyLineRow> rows;
  bool any_key = false;
  for (size_t i = 0; i < spans.size(); ++i) {
    const SlowSpan* s = spans[i];
    if (nested_with_samples(spans, i) != spans.size()) continue;
    const SpanKey k = span_key(*s, app, names);
    any_key = any_key || k.found;
    KeyLineRow& r = rows[k.group];
    if (r.spans == 0 || k.samples > r.samples) {
      r.name = k.name;
      r.samples = k.samples;
    }
    ++r.spans;
    r.wall_ns += s->span.duration_ns;
    r.worst_ns = std::max(r.worst_ns, s->span.duration_ns);
  }
  if (rows.size() == 1 && rows.begin()->first == "(no stack recorded)") return;
  std::vector<const KeyLineRow*> sorted;
  for (const auto& [group, r] : rows) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const KeyLineRow* x, const KeyLineRow* y) {
                     return x->wall_ns > y->wall_ns;
                   });
  put(os, fmt::format("{} BY KEY LINE: the program's innermost own frame "
                      "(> below)",
                      slow_title(role)));
  put(os, fmt::format("{:>5} {:>8} {:>8}  {}", "SPANS", "WALL", "WORST",
                      "KEY LINE"));
  for (const KeyLineRow* r : sorted)
    put(os, fmt::format("{:>5} {:>8} {:>8}  {}", r->spans,
                        format_duration(r->wall_ns),
                        format_duration(r->worst_ns), r->name));
  if (!any_key)
    put(os,
        "  hint: name the program's own code with --app-code PATTERN (e.g. "
        "'myapp/*')");
  os << '\n';
}

// Where a slow span blocked (most blocked time first) and who woke it: the
// top place with its user stack under the kernel function it slept in,
// and its main waker.
constexpr size_t kMaxBlockFrames = 8;

void write_blocked(std::ostream& os, const SlowSpan& s, report::AppCode& app,
                   report::FrameNames& names) {
  if (s.blocked.empty()) return;
  const BlockGroup& top = s.blocked[0];
  std::string where = report::kernel_wait(top.kframes, names);
  // The split's blocked time comes from the kernel's counters, a place's
  // from switch and wakeup times: they differ by microseconds, and the
  // place is shown as at most the whole (it was "2.17ms of 2.16ms").
  put(os, fmt::format(
              "    blocked here: {} of {} ({}){}",
              format_duration(std::min(top.blocked_ns, s.span.blocked_ns())),
              format_duration(s.span.blocked_ns()),
              plural(top.count, "time", "times"),
              where.empty() ? "" : " in " + where));
  std::optional<report::KeyFrame> key =
      report::key_frame(s.span.pid, top.frames, app, names);
  write_frames(os, s.span.pid, top.frames, kMaxBlockFrames,
               {top.truncated, top.python_cut}, names,
               key ? std::optional<size_t>(key->index) : std::nullopt);
  if (!top.wakers.empty()) {
    const Waker& w = top.wakers[0];
    if (report::interrupt_wakeup(w, names)) {
      std::string what = report::kernel_waker(w.kframes, names);
      put(os, fmt::format("    woken from an interrupt{}",
                          what.empty() ? "" : " (" + what + ")"));
    } else {
      put(os, fmt::format("    woken by {}/{} {}:", w.pid, w.tid, w.comm));
      write_frames(os, w.pid, w.frames, kMaxBlockFrames, {w.truncated, false},
                   names);
    }
  }
  if (s.blocked.size() > 1)
    put(os, fmt::format("    + {}",
                        plural(s.blocked.size() - 1, "other blocking place",
                               "other blocking places")));
}

// Slow deliveries, one entry per backlog (DispatchAnalysis::backlogs) with
// the slow spans they waited behind; the JSON lists every message too.
constexpr size_t kMaxBehind = 5;  // slow spans named per backlog

void write_slow_deliveries(std::ostream& os, const DispatchAnalysis& a,
                           const ReportContext& ctx,
                           const std::vector<const SlowSpan*>& late,
                           uint64_t base) {
  auto rel = [base](uint64_t ns) { return (ns - std::min(base, ns)) / 1e9; };
  const std::vector<DeliveryBacklog>& groups = a.backlogs;
  auto spans = [&a](const std::vector<size_t>& idx) {
    std::vector<const SlowSpan*> out;
    for (size_t i : idx) out.push_back(&a.slow[i]);
    return out;
  };
  put(os,
      fmt::format("{}: {} (>= {}) in {}", slow_title(LT_ROLE_DELIVERY),
                  late.size(), format_duration(ctx.slow_ns[LT_ROLE_DELIVERY]),
                  plural(groups.size(), "backlog", "backlogs")));
  for (size_t i = 0; i < groups.size(); ++i) {
    const DeliveryBacklog& g = groups[i];
    const std::vector<const SlowSpan*> g_late = spans(g.late);
    const SpanEvent& first = g_late.front()->span;
    const SpanEvent& worst = a.slow[g.worst].span;
    os << '\n';
    std::string id = fmt::format("#{}", i + 1);
    if (g_late.size() == 1) {
      put(os,
          fmt::format("{:<4} due +{:.3f}s  lag {}  {}/{} {}", id,
                      rel(first.start_ns), format_duration(first.duration_ns),
                      first.pid, first.tid, first.comm));
      put(os, "    " + report::describe_target(first, ctx).text);
    } else {
      put(os, fmt::format(
                  "{:<4} due +{:.3f}s..+{:.3f}s  {} late, lag up to {}  "
                  "{}/{} {}",
                  id, rel(first.start_ns), rel(g_late.back()->span.start_ns),
                  g_late.size(), format_duration(worst.duration_ns), first.pid,
                  first.tid, first.comm));
      put(os, fmt::format("    worst: {} (due +{:.3f}s)",
                          report::describe_target(worst, ctx).text,
                          rel(worst.start_ns)));
    }
    // Sync barriers of the thread up while the messages waited: synchronous
    // messages cannot pass one.
    const std::vector<size_t> no_barriers;
    const std::vector<size_t>& up =
        ctx.barriers != nullptr ? g.barriers_up : no_barriers;
    for (size_t bi : up) {
      const Barrier& b = ctx.barriers->barriers[bi];
      put(os, fmt::format(
                  "    a sync barrier was up: token {} posted +{:.3f}s, "
                  "{}",
                  b.token, rel(b.posted_ns),
                  b.removed() ? fmt::format("removed after {}",
                                            format_duration(b.lifetime_ns()))
                              : std::string("never removed")));
    }
    if (g.stopped_ns)
      put(os, fmt::format("    thread stopped {} (SIGSTOP, debugger, freezer): "
                          "nothing ran",
                          format_duration(g.stopped_ns)));
    else if (g.behind.empty() && up.empty())
      put(os, "    behind dispatches each shorter than the slow threshold");
    // A long overload collects many: the longest few, in start order.
    std::vector<const SlowSpan*> shown = spans(g.behind);
    if (shown.size() > kMaxBehind) {
      std::stable_sort(shown.begin(), shown.end(),
                       [](const SlowSpan* x, const SlowSpan* y) {
                         return x->span.duration_ns > y->span.duration_ns;
                       });
      shown.resize(kMaxBehind);
      std::stable_sort(shown.begin(), shown.end(), report::starts_before);
    }
    for (const SlowSpan* b : shown)
      put(os, fmt::format("    behind {} {} at +{:.3f}s",
                          format_duration(b->span.duration_ns),
                          report::describe_target(b->span, ctx).text,
                          rel(b->span.start_ns)));
    if (g.behind.size() > shown.size())
      put(os, fmt::format(
                  "    and {} shorter slow {}", g.behind.size() - shown.size(),
                  g.behind.size() - shown.size() == 1 ? "span" : "spans"));
  }
}

void write_slow(std::ostream& os, const DispatchAnalysis& a,
                const ReportContext& ctx, uint32_t role, report::AppCode& app,
                report::FrameNames& names) {
  std::vector<const SlowSpan*> spans;
  for (const SlowSpan& s : a.slow)
    if (s.span.role == role) spans.push_back(&s);
  bool has_threads =
      std::any_of(a.threads.begin(), a.threads.end(),
                  [role](const ThreadSummary& t) { return t.role == role; });
  if (spans.empty() && !has_threads) return;

  os << '\n';
  std::string threshold = format_duration(ctx.slow_ns[role]);
  if (spans.empty()) {
    put(os, fmt::format("{}: none (>= {})", slow_title(role), threshold));
    return;
  }
  uint64_t base = ctx.start_ns != 0 ? ctx.start_ns : a.first_event_ns;
  if (role == LT_ROLE_DELIVERY) {
    // A delivery "span" runs from the message's due time to the start of
    // its dispatch; what ran meanwhile on the thread is the answer.
    write_slow_deliveries(os, a, ctx, spans, base);
    return;
  }
  write_key_lines(os, spans, role, app, names);
  put(os,
      fmt::format("{}: {} (>= {})", slow_title(role), spans.size(), threshold));
  for (size_t i = 0; i < spans.size(); ++i) {
    const SpanEvent& e = spans[i]->span;
    if (i != 0) os << '\n';
    double rel = e.start_ns >= base ? (e.start_ns - base) / 1e9 : 0.0;
    std::string line = fmt::format(
        "{:<4} +{:.3f}s  wall {}  {}/{} {}", fmt::format("#{}", i + 1), rel,
        format_duration(e.duration_ns), e.pid, e.tid, e.comm);
    if (e.depth != 0) line += fmt::format("  depth {}", e.depth);
    if (e.in_flight) line += "  STILL RUNNING";
    if (e.flags & LT_SPAN_EXIT) line += "  THREAD EXITED";
    if (e.flags & LT_SPAN_EXEC) line += "  CUT BY EXEC";
    put(os, line);
    put(os, "    " + report::describe_target(e, ctx).text);
    write_js_callbacks(os, *spans[i], app, names);
    // Where the wall time went: on a CPU, waiting for one, or blocked.
    auto share = [&e](uint64_t ns) {
      return e.duration_ns ? ns * 100 / e.duration_ns : 0;
    };
    std::string times =
        fmt::format("    cpu {} ({}%)  runq {} ({}%)  blocked {} ({}%)",
                    format_duration(e.cpu_ns), share(e.cpu_ns),
                    format_duration(e.runq_ns), share(e.runq_ns),
                    format_duration(e.blocked_ns()), share(e.blocked_ns()));
    if (e.steal_ns)
      times += fmt::format("  steal {}", format_duration(e.steal_ns));
    if (e.stopped_ns)
      times += fmt::format("  stopped {} ({}%)", format_duration(e.stopped_ns),
                           share(e.stopped_ns));
    put(os, times);
    write_stacks(os, *spans[i], app, names, nested_samples(spans, i, ctx));
    write_blocked(os, *spans[i], app, names);
  }
}

void write_lost(std::ostream& os, const DispatchAnalysis& a,
                uint64_t duration_ns) {
  os << '\n';
  std::vector<report::LostItem> items = report::lost_items(a);
  bool any = std::any_of(items.begin(), items.end(),
                         [](const report::LostItem& l) { return l.value; });
  if (!any) {
    put(os, "lost: none");
    return;
  }
  put(os, "lost:");
  for (const report::LostItem& l : items) {
    if (l.value != 0) put(os, "  " + l.text);
    if (l.value != 0 && l.json_key == std::string_view("ringbuf_full"))
      if (std::string fill = report::ring_fill(a, duration_ns); !fill.empty())
        put(os, "    filled by " + fill);
  }
}

// Node whose JavaScript frames looptrace could not name (a V8 layout it
// does not read: a warning said why) and without a perf map: its
// JavaScript runs from anonymous memory that no symbol names. Says how to
// name it, once.
void write_hints(std::ostream& os, const DispatchAnalysis& a,
                 report::FrameNames& names) {
  std::set<uint32_t> named;  // processes with named JavaScript frames
  for (const SlowSpan& s : a.slow)
    for (const StackGroup& g : s.stacks)
      if (std::any_of(g.frames.begin(), g.frames.end(), v8::is_js_frame))
        named.insert(s.span.pid);
  for (const SlowSpan& s : a.slow) {
    if (s.span.comm.rfind("node", 0) != 0 || named.count(s.span.pid)) continue;
    for (const StackGroup& g : s.stacks)
      for (uint64_t addr : g.frames) {
        const Frame& f = names.frame(s.span.pid, addr);
        if (f.known() || f.module != "[anon]") continue;
        os << '\n';
        put(os, "hint: JavaScript frames are unnamed ([anon]): run node with");
        put(os,
            "  --perf-basic-prof; looptrace reads the /tmp/perf-PID.map it");
        put(os, "  writes (docs/unwinding.md)");
        return;
      }
  }
}

}  // namespace

void write_text_report(std::ostream& os, const DispatchAnalysis& analysis,
                       const ReportContext& ctx) {
  write_header(os, ctx);
  bool any_probe = ctx.probes == nullptr || !ctx.probes->empty();
  if (any_probe && analysis.threads.empty() && analysis.slow.empty()) {
    os << '\n';
    put(os, "no spans: no probed function returned while tracing");
    // A program waiting for input or a timer dispatches nothing: the probes
    // may be right. Else, what to try: where the probes went, and what else
    // is there.
    put(os, "  (a program nobody uses may dispatch nothing: try again while");
    put(os, "  it works); else try: looptrace check PROFILE [-p PID] (where");
    put(os, "  each probe went), looptrace list BINARY GLOB (what else can be");
    const bool custom =
        ctx.probes && std::any_of(ctx.probes->begin(), ctx.probes->end(),
                                  [](const ProbeDef& p) {
                                    return p.label.rfind("GLib custom", 0) == 0;
                                  });
    if (custom) {
      put(os, "  probed)");
    } else {
      put(os, "  probed); custom GLib sources (GDK events): --dispatch");
      put(os, "  libglib-2.0.so.0:g_main_context_dispatch");
    }
  }
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r) write_threads(os, analysis, r);
  write_waits(os, analysis, ctx);
  report::FrameNames names(ctx.symbolizer);
  report::AppCode app(ctx.app_code);
  for (uint32_t r = 0; r < LT_ROLE_MAX; ++r)
    write_slow(os, analysis, ctx, r, app, names);
  write_hints(os, analysis, names);
  write_lost(os, analysis, ctx.duration_ns);
}

}  // namespace looptrace
