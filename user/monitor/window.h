// The flight recorder of `looptrace monitor`: every event of every traced
// process of the last --window (fast spans included), in memory under a
// stated cap, so that an incident can be written out with what led up to
// it (MDAP's LooperMonitor history, Android's ANR trace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "trace/events.h"

namespace looptrace {

// When an event happened, by its own clock: a span's or a stop's end, the
// time of anything else (0 for run-wide events).
uint64_t event_end_ns(const Event& ev);

// What an event takes in memory, near enough to bound a window by.
size_t event_bytes(const Event& ev);

struct WindowOptions {
  uint64_t window_ns = 10'000'000'000;  // --window
  size_t max_bytes = size_t{32} << 20;  // every process's window together
};

class FlightRecorder {
 public:
  explicit FlightRecorder(WindowOptions o) : o_(o) {}

  // Keeps an event of a process (run-wide events are not kept): what is
  // older than the window before it goes, then, while the cap is passed,
  // the oldest event of any process (counted).
  void add(const Event& ev);
  // A process's mappings, kept for as long as the process is: a dump
  // starts with them whatever the window dropped.
  void set_mappings(const MappingsEvent& m);
  // A process gone: its window with it.
  void forget(uint32_t pid);

  // pid's mappings (if any) and then its window's events, oldest first.
  std::vector<const Event*> window(uint32_t pid) const;

  size_t bytes() const { return bytes_; }
  size_t processes() const { return procs_.size(); }
  // Events dropped before their time because of max_bytes.
  uint64_t evicted_by_cap() const { return evicted_by_cap_; }
  const WindowOptions& options() const { return o_; }

 private:
  struct Kept {
    uint64_t ts_ns;
    size_t bytes;
    Event ev;
  };
  struct Proc {
    std::optional<Event> maps;
    size_t maps_bytes = 0;
    uint64_t newest_ns = 0;  // the window ends here
    std::deque<Kept> events;
  };
  void drop_front(Proc& p);
  void evict_for_cap();

  WindowOptions o_;
  std::map<uint32_t, Proc> procs_;
  size_t bytes_ = 0;
  uint64_t evicted_by_cap_ = 0;
};

}  // namespace looptrace
