// Percentiles from log-linear slots against the exact percentiles of the same
// synthetic data, filled in the way the BPF side fills them.
#include "analysis/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace looptrace {
namespace {

// Nearest-rank percentile, the definition PercentileEstimator implements.
uint64_t exact_percentile(std::vector<uint64_t> v, uint64_t pct) {
  std::sort(v.begin(), v.end());
  uint64_t rank = (v.size() * pct + 99) / 100;
  return v[std::max<uint64_t>(rank, 1) - 1];
}

ThreadHistogram fill(const std::vector<uint64_t>& v) {
  ThreadHistogram h;
  for (uint64_t d : v) histogram_add(h, d);
  return h;
}

std::vector<uint64_t> lognormal(uint64_t seed, size_t n, double median_ns,
                                double sigma) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> dist(std::log(median_ns), sigma);
  std::vector<uint64_t> v(n);
  for (uint64_t& d : v) d = static_cast<uint64_t>(dist(rng));
  return v;
}

// A loop that is mostly fast with a long tail of stalls: 2% take 20-500 ms.
std::vector<uint64_t> janky(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> fast(1.0 / 200000.0);  // mean 200us
  std::uniform_real_distribution<double> stall(20e6, 500e6);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<uint64_t> v(n);
  for (uint64_t& d : v)
    d = static_cast<uint64_t>(coin(rng) < 0.02 ? stall(rng) : fast(rng));
  return v;
}

void expect_within_slot(const std::vector<uint64_t>& data,
                        const PercentileEstimator& est) {
  for (uint64_t pct : {1, 10, 25, 50, 75, 90, 95, 99, 100}) {
    uint64_t want = exact_percentile(data, pct);
    uint64_t got = est.percentile(static_cast<double>(pct));
    // Same slot, so off by less than the slot width: < 25% of the value.
    EXPECT_EQ(lt_hist_slot(got), lt_hist_slot(want)) << "p" << pct;
    EXPECT_LE(std::fabs(static_cast<double>(got) - static_cast<double>(want)),
              0.25 * static_cast<double>(want))
        << "p" << pct << " want " << want << " got " << got;
  }
}

TEST(Histogram, EmptyIsAllZero) {
  ThreadHistogram h;
  Percentiles p = compute_percentiles(h);
  EXPECT_EQ(p.count, 0u);
  EXPECT_EQ(p.p50, 0u);
  EXPECT_EQ(p.max, 0u);
}

TEST(Histogram, SmallValuesAreExact) {
  std::vector<uint64_t> v = {0, 1, 2, 3, 4, 5, 6, 7, 7, 7};
  PercentileEstimator est(fill(v));
  for (uint64_t pct : {10, 30, 50, 70, 90, 100})
    EXPECT_EQ(est.percentile(static_cast<double>(pct)),
              exact_percentile(v, pct));
}

TEST(Histogram, LogNormalWithinSlotResolution) {
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<uint64_t> v = lognormal(seed, 10000, 1e6, 1.0);
    PercentileEstimator est(fill(v));
    EXPECT_FALSE(est.exact_tail_used());
    expect_within_slot(v, est);
  }
}

TEST(Histogram, UniformAndJankyWithinSlotResolution) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> uni(1000, 50000000);
  std::vector<uint64_t> v(10000);
  for (uint64_t& d : v) d = uni(rng);
  expect_within_slot(v, PercentileEstimator(fill(v)));

  std::vector<uint64_t> j = janky(11, 10000);
  expect_within_slot(j, PercentileEstimator(fill(j)));
}

TEST(Histogram, MaxIsExactAndCapsEstimates) {
  std::vector<uint64_t> v(100, 1000000);  // all in one slot
  ThreadHistogram h = fill(v);
  Percentiles p = compute_percentiles(h);
  EXPECT_EQ(p.count, 100u);
  EXPECT_EQ(p.max, 1000000u);
  EXPECT_LE(p.p99, 1000000u);
  EXPECT_GE(p.p50, lt_hist_slot_low(lt_hist_slot(1000000)));
}

TEST(Histogram, ExactTailGivesExactTopRanks) {
  std::vector<uint64_t> v = janky(5, 10000);
  const uint64_t threshold = 16000000;  // 16 ms
  ExactTail tail{threshold, {}};
  for (uint64_t d : v)
    if (d >= threshold) tail.durations.push_back(d);
  ASSERT_GT(tail.durations.size(), 100u);  // p99 is among them

  PercentileEstimator est(fill(v), &tail);
  ASSERT_TRUE(est.exact_tail_used());
  EXPECT_EQ(est.percentile(99), exact_percentile(v, 99));
  EXPECT_EQ(est.percentile(100), exact_percentile(v, 100));
  EXPECT_EQ(est.percentiles().max, *std::max_element(v.begin(), v.end()));
  // Every rank in the tail is exact.
  std::vector<uint64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t r = sorted.size() - tail.durations.size() + 1;
       r <= sorted.size(); ++r)
    ASSERT_EQ(est.at_rank(r), sorted[r - 1]) << r;
  // Below the tail: still within a slot, and below the threshold.
  expect_within_slot(v, est);
  EXPECT_LT(est.at_rank(sorted.size() - tail.durations.size()), threshold);
}

TEST(Histogram, ThresholdInsideASlotCutsIt) {
  // 950 us and 1040 us share the slot [917504, 1048576); with a 1 ms
  // threshold only the second is slow.
  const uint64_t threshold = 1000000;
  ASSERT_EQ(lt_hist_slot(950000), lt_hist_slot(1040000));
  std::vector<uint64_t> v(99, 950000);
  v.push_back(1040000);
  ExactTail tail{threshold, {1040000}};
  PercentileEstimator est(fill(v), &tail);
  ASSERT_TRUE(est.exact_tail_used());
  EXPECT_EQ(est.percentile(100), 1040000u);
  EXPECT_LT(est.percentile(99), threshold);
  EXPECT_GE(est.percentile(99), lt_hist_slot_low(lt_hist_slot(950000)));
  // Without the tail the estimate may land anywhere in the slot.
  EXPECT_LE(PercentileEstimator(fill(v)).percentile(99), 1040000u);
}

TEST(Histogram, InconsistentTailIsIgnored) {
  std::vector<uint64_t> v = {100, 200, 30000000, 40000000};
  ThreadHistogram h = fill(v);
  // One slow span missing from the stream (lost record).
  ExactTail missing{16000000, {40000000}};
  EXPECT_FALSE(PercentileEstimator(h, &missing).exact_tail_used());
  // A "slow" duration the histogram never counted.
  ExactTail extra{16000000, {30000000, 40000000, 90000000}};
  EXPECT_FALSE(PercentileEstimator(h, &extra).exact_tail_used());
  // A duration under the threshold.
  ExactTail under{16000000, {200, 30000000, 40000000}};
  EXPECT_FALSE(PercentileEstimator(h, &under).exact_tail_used());
  ExactTail ok{16000000, {40000000, 30000000}};
  EXPECT_TRUE(PercentileEstimator(h, &ok).exact_tail_used());
}

TEST(Histogram, FullExactTailMakesEverythingExact) {
  std::vector<uint64_t> v = lognormal(9, 1000, 5e5, 0.8);
  ExactTail all{0, v};
  PercentileEstimator est(fill(v), &all);
  ASSERT_TRUE(est.exact_tail_used());
  for (uint64_t pct : {1, 50, 90, 99, 100})
    EXPECT_EQ(est.percentile(static_cast<double>(pct)),
              exact_percentile(v, pct));
}

TEST(Histogram, MergeAddsEverything) {
  std::vector<uint64_t> a = lognormal(1, 500, 1e6, 1.0);
  std::vector<uint64_t> b = lognormal(2, 700, 3e6, 0.5);
  ThreadHistogram ha = fill(a);
  merge_histogram(ha, fill(b));
  std::vector<uint64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  ThreadHistogram hall = fill(all);
  EXPECT_EQ(ha.count, hall.count);
  EXPECT_EQ(ha.sum_ns, hall.sum_ns);
  EXPECT_EQ(ha.max_ns, hall.max_ns);
  EXPECT_EQ(ha.slots, hall.slots);
}

TEST(Histogram, PercentileRanksAreNearestRank) {
  // 100 values 1..100 (each exactly known via a full tail): p50 is the 50th.
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 100; ++i) v.push_back(i * 1000);
  ExactTail all{0, v};
  PercentileEstimator est(fill(v), &all);
  EXPECT_EQ(est.percentile(50), 50000u);
  EXPECT_EQ(est.percentile(99), 99000u);
  EXPECT_EQ(est.percentile(99.5), 100000u);
  EXPECT_EQ(est.percentile(0.1), 1000u);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

TEST(ExactPercentiles, NearestRankOfKnownValues) {
  // 10 values in any order: rank ceil(p/100 * 10).
  Percentiles p = exact_percentiles({7, 3, 10, 1, 9, 2, 8, 5, 4, 6});
  EXPECT_EQ(p.count, 10u);
  EXPECT_EQ(p.p50, 5u);
  EXPECT_EQ(p.p90, 9u);
  EXPECT_EQ(p.p99, 10u);
  EXPECT_EQ(p.max, 10u);
  EXPECT_EQ(exact_percentiles({}).count, 0u);
  EXPECT_EQ(exact_percentiles({42}).p50, 42u);
}

}  // namespace
}  // namespace looptrace
