#include "monitor/window.h"

#include <algorithm>
#include <type_traits>

namespace looptrace {
namespace {

size_t stack_bytes(const Stack& s) { return s.frames.capacity() * 8; }

}  // namespace

uint64_t event_end_ns(const Event& ev) {
  return std::visit(
      [](const auto& e) -> uint64_t {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, SpanEvent>) {
          return e.start_ns + e.duration_ns;
        } else if constexpr (std::is_same_v<T, HangEvent>) {
          return e.span.start_ns + e.span.duration_ns;
        } else if constexpr (std::is_same_v<T, EndEvent>) {
          return e.end_ns;
        } else if constexpr (requires { e.ts_ns; }) {
          return e.ts_ns;
        } else {
          return 0;
        }
      },
      ev);
}

size_t event_bytes(const Event& ev) {
  size_t extra = std::visit(
      [](const auto& e) -> size_t {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, SpanEvent>) {
          return e.comm.capacity() + e.key_str.capacity();
        } else if constexpr (std::is_same_v<T, HangEvent>) {
          return e.span.comm.capacity() + e.span.key_str.capacity();
        } else if constexpr (std::is_same_v<T, MappingsEvent>) {
          size_t n = e.maps.capacity() * sizeof(MapEntry);
          for (const MapEntry& m : e.maps) n += m.path.capacity();
          return n;
        } else if constexpr (requires { e.stack; }) {
          return stack_bytes(e.stack);
        } else if constexpr (requires { e.frames; }) {
          return e.frames.capacity() * sizeof(e.frames[0]);
        } else {
          return 0;
        }
      },
      ev);
  // The deque's entry besides the event itself.
  return sizeof(Event) + 2 * sizeof(uint64_t) + extra;
}

void FlightRecorder::drop_front(Proc& p) {
  bytes_ -= p.events.front().bytes;
  p.events.pop_front();
}

void FlightRecorder::add(const Event& ev) {
  uint32_t pid = event_pid(ev);
  if (pid == 0) return;
  Proc& p = procs_[pid];
  uint64_t ts = event_end_ns(ev);
  size_t n = event_bytes(ev);
  p.events.push_back(Kept{ts, n, ev});
  bytes_ += n;
  // Events end out of order by a little (a sample before its span's end):
  // the window is judged against the newest.
  p.newest_ns = std::max(p.newest_ns, ts);
  while (p.events.size() > 1 &&
         p.events.front().ts_ns + o_.window_ns < p.newest_ns)
    drop_front(p);
  if (bytes_ > o_.max_bytes) evict_for_cap();
}

// The oldest event of any process until under the cap; a process's last
// event stays (what just happened is what a dump is for).
void FlightRecorder::evict_for_cap() {
  while (bytes_ > o_.max_bytes) {
    Proc* oldest = nullptr;
    for (auto& [pid, p] : procs_)
      if (p.events.size() > 1 &&
          (!oldest || p.events.front().ts_ns < oldest->events.front().ts_ns))
        oldest = &p;
    if (!oldest) return;
    drop_front(*oldest);
    evicted_by_cap_++;
  }
}

void FlightRecorder::set_mappings(const MappingsEvent& m) {
  Proc& p = procs_[m.pid];
  bytes_ -= p.maps_bytes;
  p.maps = Event(m);
  p.maps_bytes = event_bytes(*p.maps);
  bytes_ += p.maps_bytes;
}

void FlightRecorder::forget(uint32_t pid) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  for (const Kept& k : it->second.events) bytes_ -= k.bytes;
  bytes_ -= it->second.maps_bytes;
  procs_.erase(it);
}

std::vector<const Event*> FlightRecorder::window(uint32_t pid) const {
  std::vector<const Event*> out;
  auto it = procs_.find(pid);
  if (it == procs_.end()) return out;
  if (it->second.maps) out.push_back(&*it->second.maps);
  for (const Kept& k : it->second.events) out.push_back(&k.ev);
  return out;
}

}  // namespace looptrace
