// Percentiles through a spill file against exact_percentiles() of the same
// values, with buffers small enough that nearly everything is spilled.
#include "analysis/value_spill.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "analysis/histogram.h"

namespace looptrace {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

void expect_same(const Percentiles& got, const Percentiles& want) {
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.p50, want.p50);
  EXPECT_EQ(got.p90, want.p90);
  EXPECT_EQ(got.p99, want.p99);
  EXPECT_EQ(got.max, want.max);
}

// Adds v to a ValueSpill over `file` and checks its percentiles.
void check(SpillFile& file, const std::vector<uint64_t>& v, size_t buffer) {
  ValueSpill spill(&file, buffer);
  for (uint64_t x : v) spill.add(x);
  EXPECT_EQ(spill.count(), v.size());
  expect_same(spill.percentiles(), exact_percentiles(v));
}

// What a spill of n values through `buffer` puts in the file.
uint64_t spilled_bytes(size_t n, size_t buffer) {
  return n / buffer * buffer * sizeof(uint64_t);
}

std::vector<uint64_t> uniform(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (uint64_t& x : v) x = rng();
  return v;
}

// Sets an environment variable for one test and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ValueSpillTest, Empty) {
  SpillFile file;
  check(file, {}, 16);
  EXPECT_EQ(file.size(), 0u);
  EXPECT_FALSE(file.failed());
}

TEST(ValueSpillTest, OneValue) {
  SpillFile file;
  check(file, {42}, 16);
  check(file, {42}, 1);  // the one value is in the file
  EXPECT_EQ(file.size(), sizeof(uint64_t));
}

TEST(ValueSpillTest, AFewValues) {
  std::vector<uint64_t> v = {7, 3, 9, 3, 100, 0, 5};
  SpillFile memory_only;
  check(memory_only, v, 16);
  EXPECT_EQ(memory_only.size(), 0u);
  SpillFile file;
  check(file, v, 2);
  EXPECT_EQ(file.size(), spilled_bytes(v.size(), 2));
}

TEST(ValueSpillTest, RandomValuesInManyBlocks) {
  SpillFile file;
  std::vector<uint64_t> v = uniform(1, 100'003);
  check(file, v, 16);
  EXPECT_EQ(file.size(), spilled_bytes(v.size(), 16));
  EXPECT_FALSE(file.failed()) << file.error();
}

TEST(ValueSpillTest, AllEqual) {
  SpillFile file;
  check(file, std::vector<uint64_t>(1'000'000, 123'456'789), 7);
  EXPECT_EQ(file.size(), spilled_bytes(1'000'000, 7));
}

TEST(ValueSpillTest, WholeRange) {
  std::vector<uint64_t> v = uniform(2, 50'000);
  v.insert(v.end(), {0, 0, kU64Max, 1, kU64Max - 1, kU64Max});
  SpillFile file;
  check(file, v, 16);
  // Only the extremes: every rank at one end of the range or the other.
  std::vector<uint64_t> ends(1000, 0);
  ends.insert(ends.end(), 20, kU64Max);
  check(file, ends, 16);
  std::vector<uint64_t> top(1000, kU64Max);
  top[0] = 0;
  check(file, top, 16);
}

// More duplicates of small values than are gathered in one pass: the search
// narrows down to buckets of width 1. The large values put p99 in another
// range, searched in the same passes.
TEST(ValueSpillTest, TwoMillionWithDuplicates) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> v(2'000'000);
  for (uint64_t& x : v) x = rng() % 100 < 95 ? 1'000'000 + rng() % 5000 : rng();
  SpillFile file;
  check(file, v, 4096);
  EXPECT_EQ(file.size(), spilled_bytes(v.size(), 4096));
  check(file, std::vector<uint64_t>(2'000'000, 17), 4096);
}

// Spills that write in turn: each one's blocks are scattered in the file.
TEST(ValueSpillTest, SharedFile) {
  SpillFile file;
  std::vector<std::vector<uint64_t>> values;
  std::vector<ValueSpill> spills;
  for (uint64_t seed = 10; seed < 13; ++seed) {
    values.push_back(uniform(seed, 10'000 + seed));
    spills.emplace_back(&file, 16);
  }
  for (size_t i = 0; i < 10'012; ++i) {
    for (size_t s = 0; s < spills.size(); ++s) {
      if (i < values[s].size()) spills[s].add(values[s][i] % 100'000);
    }
  }
  for (size_t s = 0; s < spills.size(); ++s) {
    for (uint64_t& x : values[s]) x %= 100'000;
    expect_same(spills[s].percentiles(), exact_percentiles(values[s]));
  }
  EXPECT_GT(file.size(), 0u);
}

TEST(ValueSpillTest, UncreatableFileKeepsValuesInMemory) {
  ScopedEnv tmpdir("TMPDIR", "/nonexistent/looptrace-spill-test");
  SpillFile file;
  std::vector<uint64_t> v = uniform(4, 10'000);
  check(file, v, 16);
  EXPECT_TRUE(file.failed());
  EXPECT_NE(file.error().find("/nonexistent/looptrace-spill-test"),
            std::string::npos)
      << file.error();
  EXPECT_EQ(file.size(), 0u);
}

// A write failing part way (here the file size limit, EFBIG, for a full
// disk): the blocks written before stay in the file, the rest in memory.
TEST(ValueSpillTest, FailedWriteKeepsValuesInMemory) {
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct sigaction ignore {};
  struct sigaction old_action {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit small = old;
  small.rlim_cur = 1000;  // 7 blocks of 16 values, and part of an 8th
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);

  SpillFile file;
  std::vector<uint64_t> v = uniform(5, 10'000);
  ValueSpill spill(&file, 16);
  for (uint64_t x : v) spill.add(x);
  ValueSpill after(&file, 16);
  for (uint64_t x : v) after.add(x / 2);

  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &old_action, nullptr), 0);
  EXPECT_TRUE(file.failed());
  EXPECT_NE(file.error().find("File too large"), std::string::npos)
      << file.error();
  EXPECT_EQ(file.size(), 7 * 16 * sizeof(uint64_t));
  expect_same(spill.percentiles(), exact_percentiles(v));
  for (uint64_t& x : v) x /= 2;
  expect_same(after.percentiles(), exact_percentiles(v));
}

}  // namespace
}  // namespace looptrace
