// Slow spans with their sampled stacks, and per-thread latency summaries.
// Role-generic: dispatch and idle spans go through the same machinery; the
// report splits them by role.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/histogram.h"
#include "analysis/timeline.h"
#include "trace/events.h"

namespace looptrace {

// Identical stack samples of one span, grouped.
struct StackGroup {
  std::vector<uint64_t> frames;  // innermost first, raw addresses
  uint32_t count = 0;            // samples with exactly these frames
  uint32_t longest_run = 0;      // most consecutive samples with them
  uint64_t first_ns = 0;         // first and last sample time
  uint64_t last_ns = 0;
  // How the first sample with these frames was unwound, and whether it
  // stopped before the thread's first frame or its Python frames were cut.
  Unwind unwind = Unwind::kFramePointer;
  bool truncated = false;
  bool python_cut = false;
};

// Who woke a thread from its blocking points (grouped by thread and stack).
struct Waker {
  uint32_t pid = 0;  // 0, "" and no frames for an interrupt
  uint32_t tid = 0;
  std::string comm;
  // From an interrupt (a timer, a device): no thread; kframes says what.
  bool from_irq = false;
  std::vector<uint64_t> frames;   // its user stack, innermost first
  std::vector<uint64_t> kframes;  // its kernel stack
  Unwind unwind = Unwind::kFramePointer;
  bool truncated = false;
  uint32_t count = 0;       // wakeups
  uint64_t blocked_ns = 0;  // of the blocks they ended
};

// Where a span's thread blocked, identical stacks grouped, weighed by the
// time it stayed blocked (switch-out to wakeup; to the span's end when no
// wakeup was seen).
struct BlockGroup {
  std::vector<uint64_t> frames;   // user stack, innermost first
  std::vector<uint64_t> kframes;  // kernel stack (schedule() on top)
  Unwind unwind = Unwind::kFramePointer;
  bool truncated = false;
  bool python_cut = false;  // as StackGroup's
  uint32_t count = 0;       // times it blocked here
  uint64_t blocked_ns = 0;
  uint64_t first_ns = 0;
  std::vector<Waker> wakers;  // most blocked time first
  // Each time it blocked here, in time order: switch-out to wakeup (or to
  // what bounded it), and who woke it.
  struct Interval {
    uint64_t from_ns = 0;
    uint64_t to_ns = 0;
    bool woken = false;        // a wakeup was seen
    bool waker_known = false;  // and who did it; then:
    bool from_irq = false;
    uint32_t waker_pid = 0;
    uint32_t waker_tid = 0;
    std::string waker_comm;
  };
  std::vector<Interval> intervals;
};

struct SlowSpan {
  SpanEvent span;
  // When it was announced as a hang while it ran (HangEvent), 0 if not.
  uint64_t hang_announced_ns = 0;
  uint32_t nsamples = 0;
  // Sorted by count desc, then longest_run desc, then first_ns: stacks[0]
  // is where the span was stuck.
  std::vector<StackGroup> stacks;
  // Where it blocked, most blocked time first (--no-off-cpu: none).
  std::vector<BlockGroup> blocked;
  // The blocked time those account for (the rest of span.blocked_ns() is
  // blocking the kernel did not record: past LT_MAX_BLOCKS, or lost).
  uint64_t blocked_recorded_ns = 0;
};

// One loop thread in one role (a thread that dispatches and runs idle
// handlers has two).
// A span announced while it runs (HangEvent), or its end.
struct HangAlert {
  SpanEvent span;  // as it was then (in flight), or as it ended
  bool ended = false;
  std::vector<uint64_t> frames;  // its latest stack sample, if any
};

struct ThreadSummary {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint32_t role = LT_ROLE_DISPATCH;
  uint64_t count = 0;  // spans, fast and slow
  uint64_t sum_ns = 0;
  uint64_t slow_count = 0;
  Percentiles pct;
};

// Slow deliveries come in backlogs: one slow dispatch makes every message
// due while it ran late, and those due while the queue catches up. A
// backlog is late messages of one thread, in due order, each due before
// the previous ones were all dispatched (analysis/backlog.h).
struct DeliveryBacklog {
  std::vector<size_t> late;       // indices into DispatchAnalysis::slow
  std::vector<size_t> behind;     // the slow spans they waited behind, by start
  uint64_t last_dispatch_ns = 0;  // of the late messages
  size_t worst = 0;               // index of the late message with most lag
  // The sync barriers of the thread up at some point from the first due
  // time to last_dispatch_ns: indices into BarrierAnalysis::barriers, in
  // post order (analysis/backlog.h, note_barriers_up).
  std::vector<size_t> barriers_up;
  // How long the thread was stopped or frozen from the first due time to
  // last_dispatch_ns (SIGSTOP, a ptrace stop, a freezer): not lag.
  uint64_t stopped_ns = 0;
};

// Why one listed slow delivery was late: the slow spans of its thread that
// ran between its due time and its dispatch, and the sync barriers of its
// thread up meanwhile. Each list holds the limits::kJsonMaxRelated that
// matter most (the longest spans, the barriers held longest in that time),
// in time order, and counts the rest.
struct DeliveryBlame {
  size_t delivery = 0;                  // index into DispatchAnalysis::slow
  std::vector<size_t> running_instead;  // indices into DispatchAnalysis::slow
  size_t running_instead_omitted = 0;
  std::vector<size_t> barriers_up;  // indices into BarrierAnalysis::barriers
  size_t barriers_up_omitted = 0;
  // The part of its lag its thread spent stopped or frozen.
  uint64_t stopped_ns = 0;
};

struct DispatchAnalysis {
  std::vector<SlowSpan> slow;          // every role, sorted by start time
  std::vector<ThreadSummary> threads;  // sorted by pid, tid, role
  Counters counters;
  // The ring buffer's size (the session header's; 0: unknown), what a
  // count of records lost to it full is measured against.
  uint32_t ringbuf_bytes = 0;
  // Samples whose span never ended or was lost (no SpanEvent/SpanDropEvent).
  uint64_t orphan_samples = 0;
  // Spans cut short by their thread's exit or exec (in `slow` if slow).
  uint64_t cut_short = 0;
  // Completed spans that reached the stream (slow ones, every one with
  // --record-all); with counters.bpf[LT_CNT_RB_FULL] the ring buffer's
  // account: records sent = received + lost.
  uint64_t span_records = 0;
  // Samples dropped because a thread had too many waiting for their span.
  uint64_t sample_overflow = 0;
  // The slow deliveries (in `slow`) grouped into backlogs.
  std::vector<DeliveryBacklog> backlogs;
  // The slow spans every output lists, by role: indices into `slow`, in
  // start order; all of them, or limits::kJsonMaxSpans of each role (a
  // hang in progress first, then the longest; a delivery's span runs from
  // its due time, so the longest lags). listed_omitted: how many each role
  // left out.
  std::array<std::vector<size_t>, LT_ROLE_MAX> listed;
  std::array<size_t, LT_ROLE_MAX> listed_omitted{};
  // Why each listed slow delivery was late, in the order of
  // listed[LT_ROLE_DELIVERY].
  std::vector<DeliveryBlame> delivery_blame;
  // Earliest timestamp in the stream (span start or sample), 0 if none.
  uint64_t first_event_ns = 0;
  // Every other span the stream held (fast ones with --record-all, slow
  // ones not listed), for the outputs that draw time.
  Timeline timeline;
  // When traced threads were stopped or frozen, by pid, tid and start; at
  // most kMaxStops (stops_dropped counts the rest).
  std::vector<StopEvent> stops;
  uint64_t stops_dropped = 0;
  static constexpr size_t kMaxStops = 100000;
};

using FrameKeyFn = std::function<uint64_t(uint32_t pid, uint64_t addr)>;

struct DispatchOptions {
  // A span is slow iff duration_ns >= slow_ns[role].
  std::array<uint64_t, LT_ROLE_MAX> slow_ns{};
  // Samples waiting for their span, per thread; beyond this they are
  // dropped and counted. 10000 samples at 99 Hz is ~100 s of one span.
  size_t max_pending_samples_per_thread = 10000;
  // Maps a sampled address to what makes two samples "the same place",
  // e.g. the start of the function containing it, so that samples a few
  // instructions apart in one busy loop group together. Unset: the address.
  FrameKeyFn frame_key;
};

class DispatchAnalyzer {
 public:
  explicit DispatchAnalyzer(DispatchOptions options);

  void consume(const Event& ev);
  // Call once, after the last event. `hists` are every (thread, probe)
  // histogram; `counters` are the run's loss counters.
  DispatchAnalysis finish(const std::vector<ThreadHistogram>& hists,
                          const Counters& counters);
  // Where a span still running was last seen: the frames of its latest
  // sample or blocking point, whichever is newer; null if neither.
  const std::vector<uint64_t>* latest_frames(uint32_t pid, uint32_t tid,
                                             uint64_t span_id) const;

 private:
  using ThreadKey = std::pair<uint32_t, uint32_t>;           // pid, tid
  using SpanKey = std::tuple<uint32_t, uint32_t, uint64_t>;  // + span_id
  using RoleKey = std::tuple<uint32_t, uint32_t, uint32_t>;  // pid, tid, role
  // pid, tid, role, probe: what the kernel keeps one histogram for.
  using HistKey = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;

  // What the stream says about one thread in one role.
  struct Seen {
    std::string comm;
    uint64_t spans = 0;
    uint64_t sum_ns = 0;
    uint64_t slow = 0;
    std::vector<uint64_t> slow_durations;
    // Fast durations (only with --record-all), kept while few enough: when
    // the stream holds every span the histogram counted, percentiles are
    // exact.
    std::vector<uint64_t> fast_durations;
    bool fast_complete = true;
  };

  void on_span(const SpanEvent& ev);
  void on_sample(const SampleEvent& ev);
  void on_drop(const SpanDropEvent& ev);
  void on_block(const BlockEvent& ev);
  void on_wake(const WakeEvent& ev);
  void on_woken(const WokenEvent& ev);
  std::vector<SampleEvent> take_samples(const SpanKey& key);
  // The span's blocking points, grouped; its end bounds blocks with no
  // wakeup.
  std::vector<BlockGroup> take_blocks(const SpanKey& key, uint64_t end_ns,
                                      uint64_t* recorded_ns);
  uint64_t take_hang(const SpanKey& key);
  void note_time(uint64_t ns);
  uint64_t slow_threshold(uint32_t role) const;
  ThreadSummary summarize(const RoleKey& key, const ThreadHistogram& hist,
                          const Seen* seen, bool tail_trusted) const;
  // The kernel's histograms plus, for spans whose thread got no histogram
  // slot (lost.hist_full), the ones built from the spans in the stream:
  // every span is counted once, in a histogram, here, or as lost.
  std::vector<ThreadHistogram> with_stream_histograms(
      const std::vector<ThreadHistogram>& hists) const;

  DispatchOptions options_;
  std::map<SpanKey, std::vector<SampleEvent>> pending_;
  std::map<ThreadKey, size_t> pending_per_thread_;
  // Blocking points waiting for their span, with their wakeup once seen.
  struct Block {
    BlockEvent block;
    uint64_t woken_ns = 0;  // back on a run queue (WokenEvent), 0: not seen
    std::optional<WakeEvent> wake;  // who woke it, if known
  };
  // The span's blocking points, no longer waiting for it or for a wakeup.
  std::vector<Block> detach_blocks(const SpanKey& key);
  std::map<SpanKey, std::vector<Block>> blocks_;
  // The block of each thread still waiting for its wakeup.
  std::map<ThreadKey, std::pair<SpanKey, size_t>> awaiting_wake_;
  // Each thread's latest wakeups (WakeEvent), until a WokenEvent names one:
  // a wakeup of a thread on its way to sleep may end no blocking point.
  std::map<ThreadKey, std::vector<WakeEvent>> recent_wakes_;
  uint64_t sample_overflow_ = 0;
  uint64_t cut_short_ = 0;
  uint64_t span_records_ = 0;
  uint64_t first_event_ns_ = 0;
  std::vector<StopEvent> stops_;
  uint64_t stops_dropped_ = 0;
  std::vector<SlowSpan> slow_;
  std::map<RoleKey, Seen> seen_;
  // Completed spans in the stream, counted the way the kernel counts them.
  std::map<HistKey, ThreadHistogram> stream_hists_;
  // Spans announced as hangs (HangEvent), until they reach the stream.
  std::map<SpanKey, uint64_t> hangs_;
  TimelineBuilder timeline_;
};

// Groups samples (any order) into stacks, sorted as SlowSpan::stacks.
// Samples whose frames map to the same keys under frame_key (if set) are
// one group; the group keeps the frames of its first sample.
std::vector<StackGroup> group_stacks(std::vector<SampleEvent> samples,
                                     const FrameKeyFn& frame_key = nullptr);

}  // namespace looptrace
