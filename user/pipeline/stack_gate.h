// Unwinding a user stack by CFI costs tens of microseconds; the kernel
// sends one with every blocking point, sample and wakeup of every span, and
// most spans end fast, their stacks wanted by nobody (the analysers drop a
// fast span's samples and blocking points). The gate holds each thread's
// events from its first stack still to unwind until the span it belongs to
// ends: slow, and its stacks are unwound; fast, and they keep their frame
// pointers' frames. A thread's events leave in the order they came; other
// threads' pass freely (events reach the stream in roughly time order
// anyway; InputOptions::reorder_ns). What is held long enough to be slow
// whatever its span's role is unwound then (a span running that long is
// slow), so nothing waits longer than the largest slow threshold (at most
// kMaxHoldNs) and a hang's stacks come before its announcement.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "looptrace/abi.h"
#include "trace/events.h"

namespace looptrace {

class StackGate {
 public:
  // Called with each event as it leaves: `unwind` says whether its stack
  // is worth unwinding (its span is slow, or its fate unknown).
  using Release = std::function<void(Event&&, bool unwind)>;

  static constexpr uint64_t kMinHoldNs = 1'000'000;
  static constexpr uint64_t kMaxHoldNs = 1'000'000'000;
  // Events held per thread behind a stack whose span has not ended; past
  // it the oldest such span counts as slow.
  static constexpr size_t kMaxHeld = size_t{1} << 16;
  static constexpr size_t kMaxSlowSpans = 64;  // per thread

  // slow_ns: the run's slow thresholds by role (a span of role r at least
  // slow_ns[r] long is slow).
  StackGate(const std::array<uint64_t, LT_ROLE_MAX>& slow_ns, Release release);

  // Whether `ev` carries a stack still to unwind or name (a sample's, a
  // blocking point's, a waker's): what the gate holds.
  static bool has_stack_work(const Event& ev);

  // The next event of the stream.
  void push(Event&& ev);
  // The stream's clock (CLOCK_MONOTONIC) is now_ns: stacks held since
  // longer than the hold are their span's, which is slow.
  void expire(uint64_t now_ns);
  // Everything held of pid, stacks unwound: before its exec or its end
  // (the stacks need the mappings they were taken in).
  void flush_process(uint32_t pid);
  // Everything held, stacks unwound (the end of the stream).
  void flush();

  uint64_t hold_ns() const { return hold_ns_; }
  size_t held() const { return held_; }
  // Stacks that left not worth unwinding (their span was fast).
  uint64_t skipped() const { return skipped_; }

 private:
  enum class Fate : uint8_t { kNone, kPending, kUnwind, kSkip };
  struct Entry {
    Event ev;
    uint64_t span_id;
    uint64_t ts_ns;
    Fate fate;
  };
  using ThreadKey = std::pair<uint32_t, uint32_t>;
  struct Thread {
    std::deque<Entry> held;
    size_t pending = 0;
    // Spans of the thread already known slow (held past the hold) that
    // have not ended yet: their later stacks are unwound at once.
    std::set<uint64_t> slow;
  };

  bool slow(uint32_t role, uint64_t duration_ns) const;
  // The span `ev` (a stack to unwind) belongs to, and its fate so far.
  std::pair<uint64_t, Fate> classify(const Event& ev, const Thread* t) const;
  void settle(Thread& t, uint64_t span_id, bool unwind);
  // span_id of t is slow (held past the hold, or past the cap).
  void mark_slow(Thread& t, uint64_t span_id);
  void drain(Thread& t);
  // t's held events leave, the pending ones unwound.
  void release_all(Thread& t);
  void emit(Event&& ev, Fate fate);

  std::array<uint64_t, LT_ROLE_MAX> slow_ns_;
  uint64_t hold_ns_;
  Release release_;
  std::map<ThreadKey, Thread> threads_;  // threads with something held
  size_t held_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace looptrace
