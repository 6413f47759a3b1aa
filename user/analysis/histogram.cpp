// How a percentile is computed.
//
// The BPF side counts every span in a log-linear histogram: 4 linear slots
// per power of two, so a slot [low, high) is at most 25% of its low bound
// wide. A percentile is a rank (nearest-rank: the ceil(p * n)-th smallest
// span); walking the cumulative counts finds the slot that holds it. Inside
// the slot we know only how many spans there are, so we assume they are
// spread evenly and place the k-th of n at the middle of the k-th n-th of
// the slot. The true value lies in the same slot, so the estimate is off by
// less than the slot width, i.e. less than 25% of the true value. Nothing
// is above max_ns, so the top slot is cut there.
//
// Slow spans cross the ring buffer with their exact duration. If every span
// >= the slow threshold is known (none lost), the slowest ranks are known
// exactly: with K slow spans of n, ranks n-K+1..n are the sorted slow
// durations. That matters because p99 and max of a janky loop are exactly
// the slow spans people look at. The remaining n-K spans are all below the
// threshold, so their slots are counted without the slow ones and the slot
// that straddles the threshold is cut at it.
#include "analysis/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace looptrace {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// Exclusive upper bound of a slot; the last slot reaches the end of u64.
uint64_t slot_high(uint32_t s) {
  return s + 1 < LT_HIST_SLOTS ? lt_hist_slot_low(s + 1) : kU64Max;
}

}  // namespace

void merge_histogram(ThreadHistogram& into, const ThreadHistogram& from) {
  for (size_t s = 0; s < into.slots.size(); ++s) into.slots[s] += from.slots[s];
  into.count += from.count;
  into.sum_ns += from.sum_ns;
  into.max_ns = std::max(into.max_ns, from.max_ns);
}

void histogram_add(ThreadHistogram& h, uint64_t duration_ns) {
  h.slots[lt_hist_slot(duration_ns)]++;
  h.count++;
  h.sum_ns += duration_ns;
  h.max_ns = std::max(h.max_ns, duration_ns);
}

PercentileEstimator::PercentileEstimator(const ThreadHistogram& h,
                                         const ExactTail* tail)
    : max_ns_(h.max_ns), slots_(h.slots.begin(), h.slots.end()) {
  // Ranks come from the slots themselves: `count` is bumped separately and
  // a snapshot taken mid-update could disagree by one.
  for (uint64_t n : slots_) count_ += n;
  if (count_ == 0) return;
  if (max_ns_ == 0) {
    // An old or partial record without max: the top slot's bound will do.
    uint32_t top = LT_HIST_SLOTS - 1;
    while (slots_[top] == 0) --top;
    max_ns_ = slot_high(top) - 1;
  }
  if (tail == nullptr) return;

  std::vector<uint64_t> below = slots_;
  for (uint64_t d : tail->durations) {
    uint32_t s = lt_hist_slot(d);
    // A slow duration the histogram never counted, or a "slow" one under
    // the threshold: the two sources disagree, trust neither's tail.
    if (d < tail->threshold_ns || below[s] == 0) return;
    below[s]--;
  }
  for (uint32_t s = 0; s < LT_HIST_SLOTS; ++s) {
    // A span at or above the threshold that never crossed the ring buffer.
    if (below[s] != 0 && lt_hist_slot_low(s) >= tail->threshold_ns) return;
  }
  slots_ = std::move(below);
  threshold_ns_ = tail->threshold_ns;
  tail_ = tail->durations;
  std::sort(tail_.begin(), tail_.end());
  tail_ok_ = true;
  if (!tail_.empty()) max_ns_ = std::max(max_ns_, tail_.back());
}

uint64_t PercentileEstimator::estimate_below_tail(uint64_t rank) const {
  uint64_t cum = 0;
  for (uint32_t s = 0; s < LT_HIST_SLOTS; ++s) {
    uint64_t n = slots_[s];
    if (n == 0 || cum + n < rank) {
      cum += n;
      continue;
    }
    uint64_t k = rank - cum;  // 1..n within this slot
    uint64_t low = lt_hist_slot_low(s);
    uint64_t high = slot_high(s);
    if (tail_ok_ && threshold_ns_ > low) high = std::min(high, threshold_ns_);
    if (max_ns_ < kU64Max) high = std::min(high, max_ns_ + 1);
    if (high <= low) return std::min(low, max_ns_);
    // Middle of the k-th of n equal parts of [low, high).
    unsigned __int128 width = high - low;
    uint64_t off = static_cast<uint64_t>(width * (2 * k - 1) / (2 * n));
    return std::min(low + off, max_ns_);
  }
  return max_ns_;  // unreachable while rank <= count
}

uint64_t PercentileEstimator::at_rank(uint64_t rank) const {
  if (count_ == 0) return 0;
  rank = std::clamp<uint64_t>(rank, 1, count_);
  // The slowest span is known exactly even without a tail.
  if (rank == count_) return max_ns_;
  if (tail_ok_) {
    uint64_t nbelow = count_ - tail_.size();
    if (rank > nbelow) return tail_[rank - nbelow - 1];
  }
  return estimate_below_tail(rank);
}

uint64_t PercentileEstimator::percentile(double pct) const {
  if (count_ == 0) return 0;
  // In parts per million, integer arithmetic: 0.99 * 100 in double is not
  // reliably 99, and rank boundaries are what tests compare.
  auto ppm = static_cast<uint64_t>(
      std::llround(std::clamp(pct, 0.0, 100.0) * 10000.0));
  unsigned __int128 r =
      (static_cast<unsigned __int128>(count_) * ppm + 999'999) / 1'000'000;
  return at_rank(static_cast<uint64_t>(r));
}

Percentiles PercentileEstimator::percentiles() const {
  Percentiles p;
  p.count = count_;
  if (count_ == 0) return p;
  p.p50 = percentile(50);
  p.p90 = percentile(90);
  p.p99 = percentile(99);
  p.max = max_ns_;
  return p;
}

Percentiles compute_percentiles(const ThreadHistogram& h,
                                const ExactTail* tail) {
  return PercentileEstimator(h, tail).percentiles();
}

Percentiles exact_percentiles(std::vector<uint64_t> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double pct) {
    size_t rank = static_cast<size_t>(
        std::ceil(pct / 100.0 * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
  };
  p.count = v.size();
  p.p50 = at(50);
  p.p90 = at(90);
  p.p99 = at(99);
  p.max = v.back();
  return p;
}

}  // namespace looptrace
