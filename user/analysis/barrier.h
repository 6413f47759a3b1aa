// Sync barriers: every barrier's lifetime, matched by (process, queue,
// token); barriers held past a threshold (stalls, announced live) and never
// removed (leaks). Pure: fed PointEvents, told the time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/probe.h"
#include "trace/events.h"

namespace looptrace {

struct Barrier {
  uint32_t pid = 0;
  uint32_t tid = 0;    // the thread that posted it
  uint64_t queue = 0;  // the queue object's address
  uint32_t token = 0;
  uint64_t posted_ns = 0;
  uint64_t removed_ns = 0;           // 0: not removed (yet)
  bool stalled = false;              // held >= the stall threshold
  uint64_t stalled_ns = 0;           // when it crossed the threshold
  std::vector<uint64_t> post_stack;  // raw addresses, innermost first
  // Synchronous messages due and waiting on its queue when it was found
  // stalled (or at the end, for a leak); -1: not known (no enqueue probe).
  int64_t waiting_sync = -1;
  uint64_t oldest_sync_due_ns = 0;

  bool removed() const { return removed_ns != 0; }
  uint64_t lifetime_ns() const {
    return removed() ? removed_ns - posted_ns : 0;
  }
};

struct BarrierAnalysis {
  std::vector<Barrier> barriers;  // by post time
  uint64_t posted = 0;
  uint64_t removed = 0;
  uint64_t stalled = 0;
  uint64_t leaked = 0;           // still posted at the end
  uint64_t unknown_removes = 0;  // remove of a token never seen posted
  uint64_t duplicate_posts = 0;  // a token posted again while posted
  uint64_t dropped = 0;          // barriers beyond max_barriers
};

struct BarrierOptions {
  uint64_t stall_ns = Thresholds::kBarrierStallNs;
  // Keeps memory bounded at 60 barriers/s for hours; counts are exact.
  size_t max_barriers = 100000;
};

class BarrierAnalyzer {
 public:
  // `probes` tells which key is the queue (KeyRole::kQueue) and which the
  // token of a removal (KeyRole::kToken).
  BarrierAnalyzer(BarrierOptions options, const std::vector<ProbeDef>* probes);

  void consume(const Event& ev);
  // What waits behind a barrier: {sync messages due and queued, oldest due
  // time}; count -1 when unknown (no enqueue probe).
  using WaitingFn = std::function<std::pair<int64_t, uint64_t>(const Barrier&)>;
  // Barriers that have just become stalls at now_ns (each is returned once):
  // held past the threshold while synchronous messages wait behind them
  // (or, when that is unknown, held past the threshold). A barrier with
  // nothing waiting is checked again later.
  std::vector<Barrier> check_stalls(uint64_t now_ns,
                                    const WaitingFn& waiting = nullptr);
  BarrierAnalysis finish(uint64_t end_ns);
  // Barriers posted and not (yet) removed.
  std::vector<Barrier> open_barriers() const;
  // Records what waited behind an open barrier (see Barrier::waiting_sync).
  void note_waiting(const Barrier& b, int64_t waiting, uint64_t oldest_due_ns);

 private:
  using Key = std::tuple<uint32_t, uint64_t, uint32_t>;  // pid, queue, token
  int key_index(uint32_t probe_id, KeyRole role) const;
  uint64_t queue_of(const PointEvent& ev) const;
  void on_post(const PointEvent& ev);
  void on_remove(const PointEvent& ev);

  BarrierOptions options_;
  const std::vector<ProbeDef>* probes_;
  std::vector<Barrier> done_;    // removed, by removal order
  std::map<Key, Barrier> open_;  // posted, not removed
  // Removals seen before their post (events of different CPUs can arrive
  // out of order): kept until the post shows up.
  std::map<Key, uint64_t> early_removes_;
  uint64_t posted_ = 0, removed_ = 0, stalled_ = 0, duplicate_posts_ = 0,
           dropped_ = 0;
};

}  // namespace looptrace
