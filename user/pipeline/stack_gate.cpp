#include "pipeline/stack_gate.h"

#include <algorithm>
#include <tuple>

namespace looptrace {
namespace {

bool stack_work(const Stack& s) { return s.ustack || s.py; }

}  // namespace

StackGate::StackGate(const std::array<uint64_t, LT_ROLE_MAX>& slow_ns,
                     Release release)
    : slow_ns_(slow_ns), release_(std::move(release)) {
  const uint64_t most = *std::max_element(slow_ns_.begin(), slow_ns_.end());
  hold_ns_ = std::clamp(most, kMinHoldNs, kMaxHoldNs);
}

bool StackGate::has_stack_work(const Event& ev) {
  if (const auto* s = std::get_if<SampleEvent>(&ev))
    return stack_work(s->stack);
  if (const auto* b = std::get_if<BlockEvent>(&ev)) return stack_work(b->stack);
  if (const auto* w = std::get_if<WakeEvent>(&ev)) return stack_work(w->stack);
  return false;
}

bool StackGate::slow(uint32_t role, uint64_t duration_ns) const {
  // A role this run does not know: its stacks are not judged.
  return role >= LT_ROLE_MAX || duration_ns >= slow_ns_[role];
}

std::pair<uint64_t, StackGate::Fate> StackGate::classify(
    const Event& ev, const Thread* t) const {
  uint64_t span = 0;
  if (const auto* s = std::get_if<SampleEvent>(&ev)) {
    span = s->span_id;
  } else if (const auto* b = std::get_if<BlockEvent>(&ev)) {
    span = b->span_id;
  } else if (t) {
    // A wakeup of the thread ends its latest blocking point: its span's.
    for (auto it = t->held.rbegin(); it != t->held.rend(); ++it)
      if (std::holds_alternative<BlockEvent>(it->ev))
        return {it->span_id, it->fate};
  }
  // A wakeup whose blocking point left already, or a span id of 0: what
  // it belongs to is not known, so it is unwound as before the gate.
  if (span == 0) return {0, Fate::kUnwind};
  if (t && t->slow.count(span)) return {span, Fate::kUnwind};
  return {span, Fate::kPending};
}

void StackGate::push(Event&& ev) {
  const ThreadKey key{event_pid(ev), event_tid(ev)};
  auto it = threads_.find(key);
  Thread* t = it == threads_.end() ? nullptr : &it->second;
  // A span's end settles its stacks; a hang's announcement makes its span
  // slow before the span ends.
  if (const auto* s = std::get_if<SpanEvent>(&ev); s && t) {
    settle(*t, s->span_id, slow(s->role, s->duration_ns));
    t->slow.erase(s->span_id);
  } else if (const auto* d = std::get_if<SpanDropEvent>(&ev); d && t) {
    settle(*t, d->span_id, false);
    t->slow.erase(d->span_id);
  } else if (const auto* h = std::get_if<HangEvent>(&ev); h && t) {
    mark_slow(*t, h->span.span_id);
  }
  Fate fate = Fate::kNone;
  uint64_t span = 0;
  uint64_t ts = 0;
  if (has_stack_work(ev)) {
    std::tie(span, fate) = classify(ev, t);
    ts = std::visit(
        [](const auto& e) -> uint64_t {
          if constexpr (requires { e.ts_ns; })
            return e.ts_ns;
          else
            return 0;
        },
        ev);
  }
  if (!t && fate != Fate::kPending) {
    emit(std::move(ev), fate);
    return;
  }
  if (!t) t = &threads_[key];
  t->held.push_back({std::move(ev), span, ts, fate});
  ++held_;
  if (fate == Fate::kPending) ++t->pending;
  // Bounded: past the cap, the oldest span still open counts as slow.
  while (t->held.size() > kMaxHeld && t->pending) {
    for (const Entry& e : t->held)
      if (e.fate == Fate::kPending) {
        mark_slow(*t, e.span_id);
        break;
      }
  }
  drain(*t);
  if (t->held.empty() && t->slow.empty()) threads_.erase(key);
}

void StackGate::settle(Thread& t, uint64_t span_id, bool unwind) {
  if (!t.pending) return;
  for (Entry& e : t.held) {
    if (e.fate != Fate::kPending || e.span_id != span_id) continue;
    e.fate = unwind ? Fate::kUnwind : Fate::kSkip;
    --t.pending;
  }
}

void StackGate::mark_slow(Thread& t, uint64_t span_id) {
  // Their ends normally forget them; a few suffice where one was lost
  // (the spans of one thread nest a few deep).
  if (t.slow.size() >= kMaxSlowSpans) t.slow.erase(t.slow.begin());
  t.slow.insert(span_id);
  settle(t, span_id, true);
}

void StackGate::drain(Thread& t) {
  while (!t.held.empty() && t.held.front().fate != Fate::kPending) {
    Entry e = std::move(t.held.front());
    t.held.pop_front();
    --held_;
    emit(std::move(e.ev), e.fate);
  }
}

void StackGate::emit(Event&& ev, Fate fate) {
  if (fate == Fate::kSkip) ++skipped_;
  release_(std::move(ev), fate != Fate::kSkip);
}

void StackGate::expire(uint64_t now_ns) {
  for (auto it = threads_.begin(); it != threads_.end();) {
    Thread& t = it->second;
    while (t.pending && !t.held.empty()) {
      // The first pending entry is the oldest stack still waiting.
      auto first =
          std::find_if(t.held.begin(), t.held.end(),
                       [](const Entry& e) { return e.fate == Fate::kPending; });
      if (now_ns < first->ts_ns + hold_ns_) break;
      mark_slow(t, first->span_id);
    }
    drain(t);
    if (t.held.empty() && t.slow.empty())
      it = threads_.erase(it);
    else
      ++it;
  }
}

void StackGate::release_all(Thread& t) {
  for (Entry& e : t.held)
    if (e.fate == Fate::kPending) e.fate = Fate::kUnwind;
  t.pending = 0;
  drain(t);
}

void StackGate::flush_process(uint32_t pid) {
  auto it = threads_.lower_bound({pid, 0});
  while (it != threads_.end() && it->first.first == pid) {
    release_all(it->second);
    it = threads_.erase(it);
  }
}

void StackGate::flush() {
  for (auto& [key, t] : threads_) release_all(t);
  threads_.clear();
}

}  // namespace looptrace
