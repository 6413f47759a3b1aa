// A synthetic run's findings for the trace outputs' tests (Perfetto, folded
// stacks): built field by field, not by the analysers, so that each test
// knows every timestamp, stack and count the output must show.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/backlog.h"
#include "fake_symbolizer.h"
#include "input_listing.h"
#include "report/findings.h"

namespace looptrace::fixture {

constexpr uint64_t kMs = 1'000'000;
// CLOCK_MONOTONIC when tracing began: 1000 s after boot, plus odd
// nanoseconds so that rounding to microseconds would show.
constexpr uint64_t kT0 = 1000 * 1000 * kMs + 123;

constexpr uint32_t kPid = 100;     // the app; its main thread is the loop
constexpr uint32_t kWorker = 101;  // a second loop thread of the app
constexpr uint32_t kSender = 200;  // the input dispatcher process
constexpr uint32_t kSenderTid = 201;

// Functions at these addresses, 0x100 bytes each; [kLibStart, kLibEnd) is
// a library without symbols; anything else is unknown.
constexpr uint64_t kMain = 0x1000;
constexpr uint64_t kLoop = 0x1100;
constexpr uint64_t kDispatch = 0x1200;
constexpr uint64_t kHandle = 0x1300;
constexpr uint64_t kBusy = 0x1400;
constexpr uint64_t kSleep = 0x1500;
constexpr uint64_t kIdle = 0x1600;
constexpr uint64_t kOdd = 0x1700;  // a name with ';' and a line break
constexpr uint64_t kStallVtable = 0x5000;
constexpr uint64_t kLibStart = 0x9000;
constexpr uint64_t kLibEnd = 0xa000;

inline FakeSymbolizer symbolizer() {
  FakeSymbolizer sym({
      {kMain, "main"},
      {kLoop, "Looper::loop()"},
      {kDispatch, "Handler::dispatchMessage(Message&)"},
      {kHandle, "StallHandler::handleMessage(Message const&)"},
      {kBusy, "busyLoop(int)"},
      {kSleep, "std::this_thread::sleep_for<long, std::ratio<1l, 1000l> >"},
      {kIdle, "IdleHandler::queueIdle()"},
      {kOdd, "operator;\nodd()"},
      {kStallVtable, "vtable for StallHandler"},
  });
  sym.add_library(kLibStart, kLibEnd, "/usr/lib/libfoo.so");
  return sym;
}

inline std::vector<ProbeDef> probes() {
  ProbeDef dispatch;
  dispatch.id = 0;
  dispatch.role = LT_ROLE_DISPATCH;
  dispatch.resolved_symbol = "Handler::dispatchMessage(Message&)";
  KeyDef target{"target", "*(*(arg1+16))", {}, KeyFormat::kVtable, {}};
  KeyDef what{"what", "*(arg1+0)", {}, KeyFormat::kInt, {}};
  what.spec.nderef = 1;
  what.spec.size = 4;
  dispatch.keys = {target, what};
  ProbeDef idle;
  idle.id = 1;
  idle.role = LT_ROLE_IDLE;
  idle.resolved_symbol = "IdleHandler::queueIdle()";
  return {dispatch, idle};
}

inline SpanEvent span(uint32_t tid, const char* comm, uint32_t role,
                      uint64_t start_ms, uint64_t dur_ms) {
  SpanEvent e;
  e.pid = kPid;
  e.tid = tid;
  e.comm = comm;
  e.role = role;
  e.probe_id = role == LT_ROLE_IDLE ? 1 : 0;
  e.start_ns = kT0 + start_ms * kMs;
  e.duration_ns = dur_ms * kMs;
  return e;
}

inline StackGroup stack(std::vector<uint64_t> frames, uint32_t count,
                        uint64_t first_ms) {
  StackGroup g;
  g.frames = std::move(frames);
  g.count = count;
  g.longest_run = count;
  g.first_ns = kT0 + first_ms * kMs;
  g.last_ns = g.first_ns + (count - 1) * 10 * kMs;
  return g;
}

// Stacks innermost first, at offsets into their functions.
inline std::vector<uint64_t> busy_stack(uint64_t off) {
  return {kBusy + off, kHandle + 0x44, kDispatch + 0x30, kLoop + 0x80,
          kMain + 0x12};
}
inline std::vector<uint64_t> sleep_stack() {
  return {kSleep + 0x8, kHandle + 0x50, kDispatch + 0x30, kLoop + 0x80,
          kMain + 0x12};
}

struct TraceFixture {
  FakeSymbolizer sym = symbolizer();
  std::vector<ProbeDef> probe_defs = probes();
  Findings found;
  ReportContext ctx;

  SlowSpan& add_span(SpanEvent e, std::vector<StackGroup> stacks = {}) {
    SlowSpan s;
    s.span = std::move(e);
    s.stacks = std::move(stacks);
    for (const StackGroup& g : s.stacks) s.nsamples += g.count;
    found.analysis.slow.push_back(std::move(s));
    return found.analysis.slow.back();
  }

  TraceFixture() {
    ctx.probes = &probe_defs;
    ctx.symbolizer = &sym;
    ctx.start_ns = kT0;
    ctx.duration_ns = 5000 * kMs;
    ctx.command_line = "looptrace record -- loopapp";
    found.analysis.slow.reserve(16);

    // Stuck 120 ms in busyLoop, then asleep; a nested dispatch inside it.
    SpanEvent a = span(kPid, "loopapp", LT_ROLE_DISPATCH, 10, 120);
    a.span_id = 1;
    a.keys = {kStallVtable + 0x10, 7, 0, 0};
    a.duration_ns += 456;  // not a whole microsecond
    a.cpu_ns = 80 * kMs;
    a.runq_ns = 15 * kMs;
    a.steal_ns = 1 * kMs;
    add_span(a, {stack(busy_stack(0x1a), 7, 12), stack(sleep_stack(), 3, 90)});
    SpanEvent b = span(kPid, "loopapp", LT_ROLE_DISPATCH, 20, 30);
    b.span_id = 2;
    b.depth = 1;
    b.keys = {kStallVtable + 0x10, 3, 0, 0};
    b.cpu_ns = 30 * kMs;
    add_span(b, {stack({kOdd + 4, kLibStart + 0x10, 0xdead0000, kLoop + 0x80,
                        kMain + 0x12},
                       2, 25)});
    // An idle handler: same functions, other offsets.
    SpanEvent c = span(kPid, "loopapp", LT_ROLE_IDLE, 200, 60);
    c.span_id = 3;
    c.cpu_ns = 60 * kMs;
    add_span(c, {stack(busy_stack(0x2c), 4, 210)});
    // The same handler again later: its stacks add up with the first's.
    SpanEvent d = span(kPid, "loopapp", LT_ROLE_DISPATCH, 300, 40);
    d.span_id = 4;
    d.keys = a.keys;
    add_span(d, {stack(busy_stack(0x20), 5, 302)});
    // The worker: one cut short by its exit, one still running at the end.
    SpanEvent e = span(kWorker, "worker", LT_ROLE_DISPATCH, 100, 50);
    e.span_id = 5;
    e.flags = LT_SPAN_EXIT;
    add_span(e);
    SpanEvent f = span(kWorker, "worker", LT_ROLE_DISPATCH, 4000, 1000);
    f.span_id = 6;
    f.in_flight = true;
    add_span(f);
    // A message due at 5 ms, dispatched at 135 ms: late behind span a.
    SpanEvent g = span(kPid, "loopapp", LT_ROLE_DELIVERY, 5, 130);
    g.span_id = 7;
    g.keys = a.keys;
    add_span(g);

    for (uint32_t tid : {kPid, kWorker}) {
      ThreadSummary t;
      t.pid = kPid;
      t.tid = tid;
      t.comm = tid == kPid ? "loopapp" : "worker";
      found.analysis.threads.push_back(t);
    }

    found.has_barriers = true;
    auto barrier = [](uint32_t token, uint64_t posted_ms, uint64_t removed_ms,
                      bool stalled) {
      Barrier b;
      b.pid = kPid;
      b.tid = kPid;
      b.queue = 0x7000;
      b.token = token;
      b.posted_ns = kT0 + posted_ms * kMs;
      b.removed_ns = removed_ms ? kT0 + removed_ms * kMs : 0;
      b.stalled = stalled;
      b.stalled_ns = stalled ? b.posted_ns + 3000 * kMs : 0;
      b.post_stack = {kDispatch + 0x10, kLoop + 0x80};
      return b;
    };
    found.barriers.barriers = {barrier(1, 30, 40, false),
                               barrier(2, 50, 3500, true),
                               barrier(3, 600, 0, true)};  // leaked

    found.has_input = true;
    // Seen at every stage.
    InputEventInfo full;
    full.channel = 5555;
    full.peer = 5556;
    full.layout = LT_LAYOUT_CURRENT;
    full.seq = 1;
    full.type = InputType::kMotion;
    full.pid = kPid;
    full.tid = kPid;
    full.comm = "loopapp";
    full.sender_pid = kSender;
    full.sender_tid = kSenderTid;
    full.sent_ns = kT0 + 15 * kMs;
    full.received_ns = full.sent_ns + 7000;
    full.finished_ns = kT0 + 131 * kMs;
    full.finish_received_ns = full.finished_ns + 9000;
    full.has_finish = true;
    full.handled = true;
    found.input.events.push_back(full);
    // Sent, never received while traced.
    InputEventInfo lost = full;
    lost.seq = 2;
    lost.pid = lost.tid = 0;
    lost.comm.clear();
    lost.sent_ns = kT0 + 700 * kMs;
    lost.received_ns = lost.finished_ns = lost.finish_received_ns = 0;
    lost.has_finish = false;
    found.input.events.push_back(lost);
    // A raw channel: read, then consumed by the end of its dispatch.
    InputEventInfo raw;
    raw.channel = 7777;
    raw.chan_kind = LT_CHAN_RAW;
    raw.seq = 1;
    raw.type = InputType::kBytes;
    raw.pid = kPid;
    raw.tid = kWorker;
    raw.comm = "worker";
    raw.received_ns = kT0 + 105 * kMs;
    raw.finished_ns = kT0 + 150 * kMs;
    found.input.events.push_back(raw);
    list_all(found.input);
    // As the analysis does.
    explain_slow_spans(found.analysis);
    note_barriers_up(found.analysis, found.barriers);
  }
};

}  // namespace looptrace::fixture
