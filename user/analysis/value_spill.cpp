// How a rank is found in values that do not fit in memory.
//
// A radix selection: each pass over the values (the file read back in
// chunks, then the buffer) counts those in the candidate range [lo, lo +
// 2^bits) into 65536 buckets by their top 16 bits within it. With the
// number of values below lo, the cumulative counts name the bucket that
// holds the rank, and the range narrows to it: at most four passes from
// the whole 64-bit range down to buckets of width 1. A bucket of at most
// 2^20 values is gathered in one more pass and the rank taken with
// nth_element instead, which ends most searches after the first pass.
// p50, p90 and p99 are searched together: ranks in the same range share a
// pass's buckets, and ranks in different ranges share the pass itself.
//
// Memory: a 64 KiB read buffer, a 512 KiB histogram and at most 8 MiB of
// gathered values per rank, whatever the number of values.
#include "analysis/value_spill.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace looptrace {
namespace {

constexpr unsigned kBucketBits = 16;
constexpr size_t kBuckets = size_t{1} << kBucketBits;
constexpr uint64_t kGatherMax = uint64_t{1} << 20;
constexpr size_t kChunkValues = 65536 / sizeof(uint64_t);

// Where a rank is being looked for.
struct Range {
  uint64_t lo = 0;
  unsigned bits = 64;   // the range is [lo, lo + 2^bits)
  uint64_t below = 0;   // values < lo
  bool gather = false;  // small enough to hold: gather, then nth_element

  bool contains(uint64_t v) const {
    return v >= lo && (bits == 64 || (v - lo) >> bits == 0);
  }
  bool operator==(const Range&) const = default;
};

// The bucket of r's histogram that holds `rank`, as the next range.
Range narrow(const Range& r, const std::vector<uint64_t>& hist, uint64_t rank) {
  unsigned shift = r.bits - kBucketBits;
  uint64_t below = r.below;
  size_t b = 0;
  while (below + hist[b] < rank) below += hist[b++];
  return Range{r.lo + (uint64_t{b} << shift), shift, below,
               hist[b] <= kGatherMax};
}

// The rank arithmetic of exact_percentiles(), in double like it, so that the
// two agree to the value.
uint64_t nearest_rank(double pct, uint64_t n) {
  auto rank =
      static_cast<uint64_t>(std::ceil(pct / 100.0 * static_cast<double>(n)));
  return std::clamp<uint64_t>(rank, 1, n);
}

}  // namespace

SpillFile::SpillFile() {
  const char* tmpdir = std::getenv("TMPDIR");
  dir_ = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) close(fd_);
}

bool SpillFile::open_file() {
  fd_ = open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ >= 0) return true;
  // Not every filesystem has O_TMPFILE (and kernels before 3.11 none): a
  // named file, unlinked at once, is the same but for that instant.
  std::string path = dir_ + "/looptrace-spill.XXXXXX";
  fd_ = mkostemp(path.data(), O_CLOEXEC);
  if (fd_ < 0) {
    error_ = fmt::format("creating a spill file in {}: {}", dir_,
                         std::strerror(errno));
    return false;
  }
  unlink(path.c_str());
  return true;
}

std::optional<uint64_t> SpillFile::append(const uint64_t* values, size_t n) {
  if (failed() || (fd_ < 0 && !open_file())) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(values);
  size_t left = n * sizeof(uint64_t);
  uint64_t at = end_;
  while (left > 0) {
    ssize_t w = pwrite(fd_, p, left, static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      error_ = fmt::format("writing a spill file in {}: {}", dir_,
                           std::strerror(w < 0 ? errno : ENOSPC));
      return std::nullopt;
    }
    p += w;
    left -= static_cast<size_t>(w);
    at += static_cast<uint64_t>(w);
  }
  uint64_t offset = end_;
  end_ = at;
  return offset;
}

bool SpillFile::read(uint64_t offset, uint64_t* out, size_t n) {
  auto* p = reinterpret_cast<char*>(out);
  size_t left = n * sizeof(uint64_t);
  while (left > 0) {
    ssize_t r = pread(fd_, p, left, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      // A short file is as broken as an I/O error: it was written whole.
      if (!failed())
        error_ = fmt::format("reading a spill file in {}: {}", dir_,
                             r < 0 ? std::strerror(errno) : "unexpected end");
      return false;
    }
    p += r;
    left -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

ValueSpill::ValueSpill(SpillFile* file, size_t buffer_values)
    : file_(file), buffer_values_(std::max<size_t>(buffer_values, 1)) {}

void ValueSpill::add(uint64_t v) {
  buffer_.push_back(v);
  count_++;
  max_ = std::max(max_, v);
  if (buffer_.size() >= buffer_values_ && !file_->failed()) spill();
}

void ValueSpill::spill() {
  std::optional<uint64_t> at = file_->append(buffer_.data(), buffer_.size());
  if (!at) return;  // the buffer keeps them, and grows from now on
  // Without other spills writing in between, all blocks are one extent,
  // read back in full chunks.
  if (!extents_.empty() &&
      extents_.back().offset + extents_.back().count * sizeof(uint64_t) == *at)
    extents_.back().count += buffer_.size();
  else
    extents_.push_back({*at, buffer_.size()});
  buffer_.clear();
}

template <typename F>
bool ValueSpill::for_each_value(std::vector<uint64_t>& chunk, F f) const {
  for (const Extent& e : extents_) {
    for (uint64_t done = 0; done < e.count;) {
      size_t n =
          static_cast<size_t>(std::min<uint64_t>(e.count - done, chunk.size()));
      if (!file_->read(e.offset + done * sizeof(uint64_t), chunk.data(), n))
        return false;
      for (size_t i = 0; i < n; ++i) f(chunk[i]);
      done += n;
    }
  }
  for (uint64_t v : buffer_) f(v);
  return true;
}

Percentiles ValueSpill::percentiles() const {
  if (extents_.empty()) return exact_percentiles(buffer_);
  Percentiles p;
  p.count = count_;
  p.max = max_;

  struct Target {
    uint64_t rank;
    Range range;
    std::optional<uint64_t> value;
  };
  std::array<Target, 3> targets = {{{nearest_rank(50, count_), {}, {}},
                                    {nearest_rank(90, count_), {}, {}},
                                    {nearest_rank(99, count_), {}, {}}}};
  std::vector<uint64_t> chunk(kChunkValues);
  for (;;) {
    std::vector<Range> ranges;  // distinct, of the ranks not yet found
    for (const Target& t : targets) {
      if (!t.value &&
          std::find(ranges.begin(), ranges.end(), t.range) == ranges.end())
        ranges.push_back(t.range);
    }
    if (ranges.empty()) break;
    // A histogram of each range, or the values in it when gathering.
    std::vector<std::vector<uint64_t>> data(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (!ranges[i].gather) data[i].assign(kBuckets, 0);
    }
    bool ok = for_each_value(chunk, [&](uint64_t v) {
      for (size_t i = 0; i < ranges.size(); ++i) {
        const Range& r = ranges[i];
        if (!r.contains(v)) continue;
        if (r.gather)
          data[i].push_back(v);
        else
          data[i][(v - r.lo) >> (r.bits - kBucketBits)]++;
      }
    });
    if (!ok) return p;
    for (Target& t : targets) {
      if (t.value) continue;
      size_t i = static_cast<size_t>(
          std::find(ranges.begin(), ranges.end(), t.range) - ranges.begin());
      if (t.range.gather) {
        auto nth = data[i].begin() +
                   static_cast<ptrdiff_t>(t.rank - t.range.below - 1);
        std::nth_element(data[i].begin(), nth, data[i].end());
        t.value = *nth;
        continue;
      }
      t.range = narrow(t.range, data[i], t.rank);
      if (t.range.bits == 0) t.value = t.range.lo;
    }
  }
  p.p50 = *targets[0].value;
  p.p90 = *targets[1].value;
  p.p99 = *targets[2].value;
  return p;
}

}  // namespace looptrace
