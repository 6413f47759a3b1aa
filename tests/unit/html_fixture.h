// Synthetic findings for the HTML report's tests: the unit test reads the
// page's data, the browser test (tests/integration/html_test.cpp) what the
// page draws. Every time, count and name a test expects is written here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/backlog.h"
#include "fake_symbolizer.h"
#include "input_listing.h"
#include "looptrace/abi.h"
#include "model/probe.h"
#include "report/findings.h"
#include "report/report.h"

namespace looptrace::html_fixture {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kT0 = 50'000 * kMs;  // tracing began (CLOCK_MONOTONIC)
constexpr uint64_t kTraced = 1000 * kMs;

constexpr uint32_t kPid = 4242;
constexpr uint32_t kMainTid = 4242;    // "refapp": the loop under test
constexpr uint32_t kWorkerTid = 4250;  // "worker": one cut-short dispatch

// Code addresses and their names.
constexpr uint64_t kBusyLoop = 0x2000;
constexpr uint64_t kHandleMessage = 0x2100;
constexpr uint64_t kDispatch = 0x2200;
constexpr uint64_t kLoop = 0x2300;
constexpr uint64_t kMain = 0x2400;
constexpr uint64_t kSleep = 0x2500;
constexpr uint64_t kOnTick = 0x1000;
constexpr uint64_t kEvil = 0x3000;
// A symbol that would end the page's data <script> if it were not escaped.
inline const std::string kEvilName =
    "evil</script><script>document.title='pwned'</script>";

inline fixture::FakeSymbolizer make_symbolizer() {
  return fixture::FakeSymbolizer({
      {kBusyLoop, "refapp::busyLoop(int)"},
      {kHandleMessage,
       "refapp::StallHandler::handleMessage(refapp::Message const&)"},
      {kDispatch, "refapp::Handler::dispatchMessage(refapp::Message&)"},
      {kLoop, "refapp::Looper::loop()"},
      {kMain, "main"},
      {kSleep, "nanosleep"},
      {kOnTick, "refapp::onTick(refapp::Message*)"},
      {kEvil, kEvilName},
  });
}

// Dispatch spans are named by their callback; idle handlers by the probe.
inline std::vector<ProbeDef> make_probes() {
  ProbeDef dispatch;
  dispatch.id = 0;
  dispatch.role = LT_ROLE_DISPATCH;
  dispatch.resolved_symbol =
      "refapp::Handler::dispatchMessage(refapp::Message&)";
  dispatch.keys = {{"callback", "*(arg1+24)", {}, KeyFormat::kSymbol, {}}};
  ProbeDef idle;
  idle.id = 1;
  idle.role = LT_ROLE_IDLE;
  idle.resolved_symbol = "refapp::IdleHandler::queueIdle()";
  return {dispatch, idle};
}

// One slow span as the tables and the timeline show it.
struct SpanSpec {
  uint32_t tid;
  uint32_t role;
  uint64_t start_ms;  // after kT0
  uint64_t duration_ms;
  uint64_t callback;  // dispatch key (0 for idle)
  bool in_flight = false;
  uint32_t flags = 0;
};

// Stacks innermost first, as sampled.
inline std::vector<uint64_t> busy_stack(uint64_t offset) {
  return {kBusyLoop + offset, kHandleMessage + 0x8, kDispatch + 0x30,
          kLoop + 0x40, kMain + 0x10};
}
inline std::vector<uint64_t> sleep_stack() {
  return {kSleep + 0x4, kOnTick + 0x12, kDispatch + 0x30, kLoop + 0x40,
          kMain + 0x10};
}
inline std::vector<uint64_t> evil_stack() {
  return {kEvil + 0x2, kDispatch + 0x30, kLoop + 0x40, kMain + 0x10};
}

// The timeline of the 1 s trace (ms after kT0):
//   refapp: dispatch 100+50 (20 busyLoop samples), 400+100 (10 busyLoop at
//           another offset, 6 in nanosleep), 700+300 still running at the
//           end; idle 550+60; a delivery due at 380, 20 ms late;
//           input seq 1 arrives at 120, consumed at 160; seq 2 arrives at
//           420, never consumed; barrier 7 up from 150 to 350, barrier 8
//           posted at 800, stalled at 900, never removed.
//   worker: dispatch 250+50 cut short by exit (4 samples in kEvilName).
// The flame graph: 40 samples; handleMessage and busyLoop hold 30 (75 %).
inline const std::vector<SpanSpec>& span_specs() {
  static const std::vector<SpanSpec> specs = {
      {kMainTid, LT_ROLE_DISPATCH, 100, 50, kBusyLoop},
      {kWorkerTid, LT_ROLE_DISPATCH, 250, 50, kEvil, false, LT_SPAN_EXIT},
      {kMainTid, LT_ROLE_DELIVERY, 380, 20, kOnTick},
      {kMainTid, LT_ROLE_DISPATCH, 400, 100, kOnTick},
      {kMainTid, LT_ROLE_IDLE, 550, 60, 0},
      {kMainTid, LT_ROLE_DISPATCH, 700, 300, kHandleMessage, true},
  };
  return specs;
}

inline SlowSpan make_span(const SpanSpec& s, uint64_t span_id) {
  SlowSpan out;
  SpanEvent& e = out.span;
  e.pid = kPid;
  e.tid = s.tid;
  e.comm = s.tid == kMainTid ? "refapp" : "worker";
  e.span_id = span_id;
  e.start_ns = kT0 + s.start_ms * kMs;
  e.duration_ns = s.duration_ms * kMs;
  e.cpu_ns = e.duration_ns / 2;
  e.runq_ns = e.duration_ns / 10;
  e.probe_id = s.role == LT_ROLE_IDLE ? 1 : 0;
  e.role = s.role;
  e.keys[0] = s.callback;
  e.flags = s.flags;
  e.in_flight = s.in_flight;
  auto group = [&](std::vector<uint64_t> frames, uint32_t count) {
    StackGroup g;
    g.frames = std::move(frames);
    g.count = g.longest_run = count;
    g.first_ns = e.start_ns + kMs;
    g.last_ns = e.start_ns + count * kMs;
    out.stacks.push_back(std::move(g));
    out.nsamples += count;
  };
  if (s.start_ms == 100) group(busy_stack(0x10), 20);
  if (s.start_ms == 400) {
    group(busy_stack(0x24), 10);
    group(sleep_stack(), 6);
  }
  if (s.start_ms == 250) group(evil_stack(), 4);
  return out;
}

inline ThreadSummary summary(uint32_t tid, uint32_t role, uint64_t count,
                             uint64_t slow, uint64_t max_ms) {
  ThreadSummary t;
  t.pid = kPid;
  t.tid = tid;
  t.comm = tid == kMainTid ? "refapp" : "worker";
  t.role = role;
  t.count = count;
  t.slow_count = slow;
  t.sum_ns = count * 3 * kMs;
  t.pct = {count, 2 * kMs, 8 * kMs, 60 * kMs, max_ms * kMs};
  return t;
}

inline Barrier barrier(uint32_t token, uint64_t posted_ms, uint64_t removed_ms,
                       uint64_t stalled_ms) {
  Barrier b;
  b.pid = kPid;
  b.tid = kMainTid;
  b.queue = 0x7f0000001000;
  b.token = token;
  b.posted_ns = kT0 + posted_ms * kMs;
  b.removed_ns = removed_ms ? kT0 + removed_ms * kMs : 0;
  b.stalled = stalled_ms != 0;
  b.stalled_ns = stalled_ms ? kT0 + stalled_ms * kMs : 0;
  b.post_stack = {kLoop + 0x50, kMain + 0x10};
  b.waiting_sync = stalled_ms ? 3 : -1;
  b.oldest_sync_due_ns = stalled_ms ? b.posted_ns + kMs : 0;
  return b;
}

inline InputEventInfo input_event(uint32_t seq, InputType type,
                                  uint64_t sent_ms, uint64_t finished_ms) {
  InputEventInfo e;
  e.channel = 777;
  e.peer = 778;
  e.layout = LT_LAYOUT_CURRENT;
  e.seq = seq;
  e.type = type;
  e.pid = kPid;
  e.tid = kMainTid;
  e.comm = "refapp";
  e.sender_pid = 4000;
  e.sender_tid = 4000;
  e.sent_ns = kT0 + sent_ms * kMs;
  e.received_ns = e.sent_ns + kMs;
  if (finished_ms) {
    e.handling_start_ns = kT0 + (finished_ms - 20) * kMs;
    e.finished_ns = kT0 + finished_ms * kMs;
    e.finish_received_ns = e.finished_ns + kMs;
    e.has_finish = e.handled = true;
  }
  return e;
}

inline InputChannelSummary input_channel() {
  InputChannelSummary c;
  c.channel = 777;
  c.peer = 778;
  c.layout = LT_LAYOUT_CURRENT;
  c.pid = kPid;
  c.comm = "refapp";
  c.sender_pid = 4000;
  c.events = 2;
  c.keys = c.motions = 1;
  c.unfinished = 1;
  auto at = [&c](InputStage s) -> Percentiles& {
    return c.stages[static_cast<int>(s)];
  };
  at(InputStage::kDispatchLatency) = {2, kMs, kMs, kMs, kMs};
  at(InputStage::kHandlingLatency) = {1, 39 * kMs, 39 * kMs, 39 * kMs,
                                      39 * kMs};
  at(InputStage::kTotalLatency) = {1, 41 * kMs, 41 * kMs, 41 * kMs, 41 * kMs};
  return c;
}
constexpr size_t kStageRows = 3;  // the stages with a count above

// How many times `what` occurs in `s` (rows of a table, ends of an element).
inline size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos;
       at = s.find(what, at + 1))
    ++n;
  return n;
}

// A third loop thread, "fast": only fast dispatches, as --record-all keeps
// them (DispatchAnalysis::timeline), none listed.
constexpr uint32_t kFastTid = 4260;
// They fill the traced second but for this gap, in ms.
constexpr uint64_t kFastGapFrom = 600, kFastGapTo = 700;

// `n` fast dispatches of "fast" evenly over the traced second outside the
// gap, each half as long as the time between two starts.
inline void add_fast_spans(Findings& found, size_t n) {
  TimelineBuilder b;
  const uint64_t span = kTraced - (kFastGapTo - kFastGapFrom) * kMs;
  const uint64_t step = span / n;
  for (size_t i = 0; i < n; ++i) {
    SpanEvent e;
    e.pid = kPid;
    e.tid = kFastTid;
    e.comm = "fast";
    e.role = LT_ROLE_DISPATCH;
    e.probe_id = 0;
    e.keys[0] = i % 2 ? kOnTick : kHandleMessage;
    uint64_t at = i * step;
    if (at >= kFastGapFrom * kMs) at += (kFastGapTo - kFastGapFrom) * kMs;
    e.start_ns = kT0 + at;
    e.duration_ns = step / 2;
    b.add(e);
  }
  found.analysis.timeline = b.finish(found.analysis);
}

// Owns everything the ReportContext points to: build it in place.
struct Fixture {
  fixture::FakeSymbolizer sym = make_symbolizer();
  std::vector<ProbeDef> probes = make_probes();
  Findings found;
  ReportContext ctx;

  Fixture() {
    uint64_t id = 1;
    for (const SpanSpec& s : span_specs())
      found.analysis.slow.push_back(make_span(s, id++));
    found.analysis.threads = {
        summary(kMainTid, LT_ROLE_DISPATCH, 500, 3, 300),
        summary(kMainTid, LT_ROLE_IDLE, 40, 1, 60),
        summary(kMainTid, LT_ROLE_DELIVERY, 100, 1, 20),
        summary(kWorkerTid, LT_ROLE_DISPATCH, 200, 1, 50),
    };
    found.analysis.counters.bpf[LT_CNT_RB_FULL] = 3;
    found.analysis.counters.bpf[LT_CNT_SAMPLES] = 40;
    found.analysis.first_event_ns = kT0 + 100 * kMs;
    found.analysis.cut_short = 1;

    found.has_barriers = true;
    found.barriers.barriers = {barrier(7, 150, 350, 0),
                               barrier(8, 800, 0, 900)};
    found.barriers.posted = 2;
    found.barriers.removed = found.barriers.stalled = 1;
    found.barriers.leaked = 1;

    found.has_input = true;
    found.input.events = {input_event(1, InputType::kKey, 120, 160),
                          input_event(2, InputType::kMotion, 420, 0)};
    found.input.channels = {input_channel()};
    fixture::list_all(found.input);
    // As the analysis does.
    explain_slow_spans(found.analysis);
    note_barriers_up(found.analysis, found.barriers);

    ctx.probes = &probes;
    ctx.symbolizer = &sym;
    ctx.slow_ns = {16 * kMs, 50 * kMs, 10 * kMs};
    ctx.duration_ns = kTraced;
    ctx.command_line = "refapp --scenario html";
    ctx.start_ns = kT0;
    ctx.barrier_stall_ns = 100 * kMs;
    ctx.barriers = &found.barriers;
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;
};

}  // namespace looptrace::html_fixture
