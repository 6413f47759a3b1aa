#include "pipeline/stack_gate.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

// What left the gate, in order: "B7+" a blocking point of span 7 unwound,
// "B7-" one left to its frame pointers; "S7" a span, "D7" a drop, "W+"
// "W-" a wakeup, "K" a woken, "H7" a hang, "I" anything else.
struct Out {
  std::vector<std::string> seen;
  StackGate gate;
  explicit Out(uint64_t slow_ns = 16 * kMs)
      : gate({slow_ns, slow_ns * 2, slow_ns},
             [this](Event&& ev, bool unwind) { note(ev, unwind); }) {}
  void note(const Event& ev, bool unwind) {
    const std::string u = unwind ? "+" : "-";
    if (const auto* b = std::get_if<BlockEvent>(&ev))
      seen.push_back("B" + std::to_string(b->span_id) + u);
    else if (const auto* s = std::get_if<SampleEvent>(&ev))
      seen.push_back("P" + std::to_string(s->span_id) + u);
    else if (std::holds_alternative<WakeEvent>(ev))
      seen.push_back("W" + u);
    else if (const auto* sp = std::get_if<SpanEvent>(&ev))
      seen.push_back("S" + std::to_string(sp->span_id));
    else if (const auto* d = std::get_if<SpanDropEvent>(&ev))
      seen.push_back("D" + std::to_string(d->span_id));
    else if (const auto* h = std::get_if<HangEvent>(&ev))
      seen.push_back("H" + std::to_string(h->span.span_id));
    else if (std::holds_alternative<WokenEvent>(ev))
      seen.push_back("K");
    else
      seen.push_back("I");
  }
};

std::shared_ptr<const UserStack> copy() {
  return std::make_shared<UserStack>();
}

Event block(uint32_t tid, uint64_t span, uint64_t ts, bool with_copy = true) {
  BlockEvent b;
  b.pid = 100;
  b.tid = tid;
  b.span_id = span;
  b.ts_ns = ts;
  if (with_copy) b.stack.ustack = copy();
  return b;
}

Event sample(uint32_t tid, uint64_t span, uint64_t ts) {
  SampleEvent s;
  s.pid = 100;
  s.tid = tid;
  s.span_id = span;
  s.ts_ns = ts;
  s.stack.ustack = copy();
  return s;
}

Event wake(uint32_t tid, uint64_t ts) {
  WakeEvent w;
  w.pid = 100;
  w.tid = tid;
  w.ts_ns = ts;
  w.waker_pid = 200;
  w.stack.ustack = copy();
  return w;
}

Event woken(uint32_t tid, uint64_t ts) {
  WokenEvent w;
  w.pid = 100;
  w.tid = tid;
  w.ts_ns = ts;
  return w;
}

Event span(uint32_t tid, uint64_t id, uint64_t start, uint64_t dur,
           uint32_t role = LT_ROLE_DISPATCH) {
  SpanEvent s;
  s.pid = 100;
  s.tid = tid;
  s.span_id = id;
  s.start_ns = start;
  s.duration_ns = dur;
  s.role = role;
  return s;
}

Event drop(uint32_t tid, uint64_t id) {
  SpanDropEvent d;
  d.pid = 100;
  d.tid = tid;
  d.span_id = id;
  return d;
}

Event io(uint32_t tid, uint64_t ts) {
  IoEvent e;
  e.pid = 100;
  e.tid = tid;
  e.ts_ns = ts;
  return e;
}

using V = std::vector<std::string>;

TEST(StackGate, AFastSpansStacksAreNotUnwoundASlowOnesAre) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));
  o.gate.push(wake(1, 11 * kMs));
  o.gate.push(woken(1, 11 * kMs));
  o.gate.push(io(1, 12 * kMs));
  EXPECT_TRUE(o.seen.empty());  // held until the span ends
  o.gate.push(span(1, 7, 9 * kMs, 5 * kMs));
  EXPECT_EQ(o.seen, (V{"B7-", "W-", "K", "I", "S7"}));
  o.gate.push(block(1, 8, 30 * kMs));
  o.gate.push(sample(1, 8, 31 * kMs));
  o.gate.push(span(1, 8, 29 * kMs, 20 * kMs));
  EXPECT_EQ(o.seen, (V{"B7-", "W-", "K", "I", "S7", "B8+", "P8+", "S8"}));
  EXPECT_EQ(o.gate.skipped(), 2u);
  EXPECT_EQ(o.gate.held(), 0u);
}

TEST(StackGate, EachRolesOwnThreshold) {
  Out o;  // idle's threshold is 32 ms
  o.gate.push(block(1, 7, 10 * kMs));
  o.gate.push(span(1, 7, 9 * kMs, 20 * kMs, LT_ROLE_IDLE));
  o.gate.push(block(1, 8, 40 * kMs));
  o.gate.push(span(1, 8, 39 * kMs, 20 * kMs, LT_ROLE_DISPATCH));
  EXPECT_EQ(o.seen, (V{"B7-", "S7", "B8+", "S8"}));
}

TEST(StackGate, ADropSkipsItsSpansStacks) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));
  o.gate.push(sample(1, 7, 11 * kMs));
  o.gate.push(drop(1, 7));
  EXPECT_EQ(o.seen, (V{"B7-", "P7-", "D7"}));
}

TEST(StackGate, OtherThreadsAndStacklessEventsPass) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));
  o.gate.push(io(2, 10 * kMs));
  o.gate.push(block(3, 9, 10 * kMs, false));  // frame pointers only
  EXPECT_EQ(o.seen, (V{"I", "B9+"}));
  o.gate.push(drop(1, 7));
  EXPECT_EQ(o.seen, (V{"I", "B9+", "B7-", "D7"}));
}

TEST(StackGate, NestedSpansKeepTheThreadsOrder) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));  // outer span 7
  o.gate.push(block(1, 8, 11 * kMs));  // inner span 8
  o.gate.push(span(1, 8, 10 * kMs, 2 * kMs));
  EXPECT_TRUE(o.seen.empty());  // behind the outer span's block
  o.gate.push(span(1, 7, 9 * kMs, 40 * kMs));
  EXPECT_EQ(o.seen, (V{"B7+", "B8-", "S8", "S7"}));
}

TEST(StackGate, AStackHeldPastTheHoldIsASlowSpans) {
  Out o;
  EXPECT_EQ(o.gate.hold_ns(), 32 * kMs);  // the largest threshold
  o.gate.push(block(1, 7, 10 * kMs));
  o.gate.push(io(1, 12 * kMs));
  o.gate.expire(41 * kMs);
  EXPECT_TRUE(o.seen.empty());
  o.gate.expire(42 * kMs);
  EXPECT_EQ(o.seen, (V{"B7+", "I"}));
  // Later stacks of the same span are unwound at once.
  o.gate.push(sample(1, 7, 50 * kMs));
  EXPECT_EQ(o.seen, (V{"B7+", "I", "P7+"}));
  o.gate.push(span(1, 7, 9 * kMs, 60 * kMs));
  // ... until it ends: a new span's wait again.
  o.gate.push(block(1, 9, 80 * kMs));
  EXPECT_EQ(o.seen.size(), 4u);
}

TEST(StackGate, AHangReleasesItsSpansStacksFirst) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));
  HangEvent h;
  h.pid = 100;
  h.tid = 1;
  h.span.span_id = 7;
  o.gate.push(Event(h));
  EXPECT_EQ(o.seen, (V{"B7+", "H7"}));
}

TEST(StackGate, AWakeupWithNoHeldBlockIsUnwound) {
  Out o;
  o.gate.push(wake(1, 10 * kMs));
  EXPECT_EQ(o.seen, (V{"W+"}));
}

TEST(StackGate, AProcessFlushedUnwindsWhatItHeld) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));
  o.gate.push(block(2, 8, 10 * kMs));
  BlockEvent other = std::get<BlockEvent>(block(1, 9, 10 * kMs));
  other.pid = 101;
  o.gate.push(Event(other));
  o.gate.flush_process(100);
  EXPECT_EQ(o.seen, (V{"B7+", "B8+"}));
  EXPECT_EQ(o.gate.held(), 1u);
  o.gate.flush();
  EXPECT_EQ(o.seen, (V{"B7+", "B8+", "B9+"}));
  EXPECT_EQ(o.gate.held(), 0u);
}

TEST(StackGate, ThePerThreadCapCountsTheOldestOpenSpanAsSlow) {
  Out o;
  o.gate.push(block(1, 7, 10 * kMs));
  for (size_t i = 0; i < StackGate::kMaxHeld; ++i) o.gate.push(io(1, 11 * kMs));
  ASSERT_EQ(o.seen.size(), StackGate::kMaxHeld + 1);
  EXPECT_EQ(o.seen.front(), "B7+");
  EXPECT_EQ(o.gate.held(), 0u);
}

}  // namespace
}  // namespace looptrace
