// How much the analysis lists. Every list in the JSON report is bounded, so
// that a long or pathological run cannot write a report nobody can open (one
// run listed 270 000 slow deliveries, 77 MB). The analysis decides what is
// listed, so the bounds are its own; what does not fit is counted beside the
// list (docs/json-schema.md, "Bounded lists"); the text report and every
// count, percentile and total still cover everything.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace looptrace::limits {

// slow_dispatches, slow_idle_handlers, slow_deliveries: each.
constexpr size_t kJsonMaxSpans = 10000;
// threads: (thread, role) summaries.
constexpr size_t kJsonMaxThreads = 10000;
// Distinct sampled stacks of one slow span (the first is where it was
// stuck; the text report shows only that one).
constexpr size_t kJsonMaxStacks = 10;
// What one entry names: a delivery's running_instead and sync_barriers_up,
// an input event's blame.dispatches.
constexpr size_t kJsonMaxRelated = 100;
// input_events and input_channels.
constexpr size_t kJsonMaxInputEvents = 100000;
constexpr size_t kJsonMaxInputChannels = 10000;
// Input events drawn on the HTML page's timeline: the slowest.
constexpr size_t kMaxTimelineInputs = 20000;
// Groups of input events in a channel's "worst" list (text and JSON).
constexpr size_t kMaxWorstGroups = 10;

// The `cap` items that rank first by `better` (a strict weak order: "a is
// more worth listing than b"), in their original order; all of them when
// they fit. `omitted` gets how many were left out.
template <typename T, typename Better>
std::vector<T> keep_best(const std::vector<T>& items, size_t cap, Better better,
                         size_t* omitted) {
  *omitted = items.size() > cap ? items.size() - cap : 0;
  if (*omitted == 0) return items;
  std::vector<size_t> idx(items.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::nth_element(idx.begin(), idx.begin() + static_cast<long>(cap), idx.end(),
                   [&](size_t a, size_t b) {
                     if (better(items[a], items[b])) return true;
                     if (better(items[b], items[a])) return false;
                     return a < b;  // ties: the earlier one
                   });
  idx.resize(cap);
  std::sort(idx.begin(), idx.end());
  std::vector<T> out;
  out.reserve(cap);
  for (size_t i : idx) out.push_back(items[i]);
  return out;
}

}  // namespace looptrace::limits
