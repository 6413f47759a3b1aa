#include "analysis/barrier.h"

#include <algorithm>
#include <cstring>

namespace looptrace {

BarrierAnalyzer::BarrierAnalyzer(BarrierOptions options,
                                 const std::vector<ProbeDef>* probes)
    : options_(options), probes_(probes) {}

int BarrierAnalyzer::key_index(uint32_t probe_id, KeyRole role) const {
  if (probes_ == nullptr) return -1;
  for (const ProbeDef& p : *probes_) {
    if (p.id != probe_id) continue;
    for (size_t i = 0; i < p.keys.size(); ++i)
      if (p.keys[i].role == role) return static_cast<int>(i);
  }
  return -1;
}

uint64_t BarrierAnalyzer::queue_of(const PointEvent& ev) const {
  // Without a queue key every barrier of a process shares one queue.
  int q = key_index(ev.probe_id, KeyRole::kQueue);
  return q >= 0 ? ev.keys[q] : 0;
}

void BarrierAnalyzer::consume(const Event& ev) {
  const auto* p = std::get_if<PointEvent>(&ev);
  if (p == nullptr) return;
  if (p->role == LT_ROLE_BARRIER_POST) on_post(*p);
  if (p->role == LT_ROLE_BARRIER_REMOVE) on_remove(*p);
}

void BarrierAnalyzer::on_post(const PointEvent& ev) {
  ++posted_;
  // Tokens are ints: only the low 32 bits of the return register count.
  Key key{ev.pid, queue_of(ev), static_cast<uint32_t>(ev.ret)};
  Barrier b;
  b.pid = ev.pid;
  b.tid = ev.tid;
  b.queue = std::get<1>(key);
  b.token = std::get<2>(key);
  b.posted_ns = ev.ts_ns;
  b.post_stack = ev.frames;
  auto early = early_removes_.find(key);
  if (early != early_removes_.end() && early->second >= ev.ts_ns) {
    b.removed_ns = early->second;
    early_removes_.erase(early);
    ++removed_;
    done_.push_back(std::move(b));
    return;
  }
  auto [it, added] = open_.try_emplace(key, b);
  if (!added) {
    // Posted again while posted: the old one was lost track of.
    ++duplicate_posts_;
    it->second = std::move(b);
  }
}

void BarrierAnalyzer::on_remove(const PointEvent& ev) {
  int t = key_index(ev.probe_id, KeyRole::kToken);
  uint32_t token = t >= 0 ? static_cast<uint32_t>(ev.keys[t]) : 0;
  Key key{ev.pid, queue_of(ev), token};
  auto it = open_.find(key);
  if (it == open_.end()) {
    early_removes_[key] = ev.ts_ns;
    return;
  }
  Barrier b = std::move(it->second);
  open_.erase(it);
  b.removed_ns = std::max(ev.ts_ns, b.posted_ns);
  if (!b.stalled && b.lifetime_ns() >= options_.stall_ns) {
    b.stalled = true;
    b.stalled_ns = b.posted_ns + options_.stall_ns;
    ++stalled_;
  }
  ++removed_;
  if (done_.size() < options_.max_barriers)
    done_.push_back(std::move(b));
  else
    ++dropped_;
}

std::vector<Barrier> BarrierAnalyzer::check_stalls(uint64_t now_ns,
                                                   const WaitingFn& waiting) {
  std::vector<Barrier> out;
  for (auto& [key, b] : open_) {
    if (b.stalled || now_ns < b.posted_ns + options_.stall_ns) continue;
    if (waiting) {
      auto [count, oldest] = waiting(b);
      b.waiting_sync = count;
      b.oldest_sync_due_ns = oldest;
      if (count == 0) continue;  // harmless so far: nothing is held up
    }
    b.stalled = true;
    b.stalled_ns = now_ns;
    ++stalled_;
    out.push_back(b);
  }
  return out;
}

std::vector<Barrier> BarrierAnalyzer::open_barriers() const {
  std::vector<Barrier> out;
  for (const auto& [key, b] : open_) out.push_back(b);
  return out;
}

void BarrierAnalyzer::note_waiting(const Barrier& b, int64_t waiting,
                                   uint64_t oldest_due_ns) {
  auto it = open_.find(Key{b.pid, b.queue, b.token});
  if (it == open_.end()) return;
  it->second.waiting_sync = waiting;
  it->second.oldest_sync_due_ns = oldest_due_ns;
}

BarrierAnalysis BarrierAnalyzer::finish(uint64_t end_ns) {
  check_stalls(end_ns);
  BarrierAnalysis a;
  a.barriers = done_;
  for (auto& [key, b] : open_) a.barriers.push_back(b);
  std::sort(a.barriers.begin(), a.barriers.end(),
            [](const Barrier& x, const Barrier& y) {
              return x.posted_ns < y.posted_ns;
            });
  a.posted = posted_;
  a.removed = removed_;
  a.stalled = stalled_;
  a.leaked = open_.size();
  // Removals whose post never came: an unknown token (Android throws).
  a.unknown_removes = early_removes_.size();
  a.duplicate_posts = duplicate_posts_;
  a.dropped = dropped_;
  return a;
}

}  // namespace looptrace
