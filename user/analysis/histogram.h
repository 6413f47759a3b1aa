// Percentiles from the in-kernel log-linear histograms (abi.h, lt_hist_slot),
// refined by the exact durations of the spans that crossed the ring buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/events.h"

namespace looptrace {

struct Percentiles {
  uint64_t count = 0;
  uint64_t p50 = 0;
  uint64_t p90 = 0;
  uint64_t p99 = 0;
  uint64_t max = 0;
  bool operator==(const Percentiles&) const = default;
};

// Adds `from` into `into`: slots, count, sum, max. The identity fields of
// `into` (pid, tid, comm, probe, role) are left alone.
void merge_histogram(ThreadHistogram& into, const ThreadHistogram& from);

// Counts one duration the way the BPF side does.
void histogram_add(ThreadHistogram& h, uint64_t duration_ns);

// The exactly known top of a distribution: the duration of every span that
// took >= threshold_ns (every slow span crosses the ring buffer, so when none
// was lost these are all of them). threshold_ns == 0 means every span.
struct ExactTail {
  uint64_t threshold_ns = 0;
  std::vector<uint64_t> durations;  // any order
};

// Nearest-rank percentiles of one histogram. See histogram.cpp for how a
// rank is turned into a value.
class PercentileEstimator {
 public:
  // `tail` is used only if it is consistent with the histogram (every exact
  // duration has a matching histogram entry and no histogram entry at or
  // above the threshold is missing from it); otherwise it is ignored.
  explicit PercentileEstimator(const ThreadHistogram& h,
                               const ExactTail* tail = nullptr);

  // Whether the exact tail was accepted.
  bool exact_tail_used() const { return tail_ok_; }
  // Value at percentile `pct` in (0, 100]: the duration of the span of rank
  // ceil(pct/100 * count), 1-based, in ascending order. 0 if empty.
  uint64_t percentile(double pct) const;
  // Value of the span of 1-based ascending `rank` (clamped to [1, count]).
  uint64_t at_rank(uint64_t rank) const;
  Percentiles percentiles() const;

 private:
  uint64_t estimate_below_tail(uint64_t rank) const;

  uint64_t count_ = 0;
  uint64_t max_ns_ = 0;
  std::vector<uint64_t> slots_;  // entries below the tail when tail_ok_
  uint64_t threshold_ns_ = 0;
  std::vector<uint64_t> tail_;  // sorted ascending
  bool tail_ok_ = false;
};

// Nearest-rank percentiles of values all known exactly (any order).
Percentiles exact_percentiles(std::vector<uint64_t> values);

// Shorthand for PercentileEstimator(h, tail).percentiles().
Percentiles compute_percentiles(const ThreadHistogram& h,
                                const ExactTail* tail = nullptr);

}  // namespace looptrace
