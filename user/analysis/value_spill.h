// Exact percentiles of more values than fit in memory: a ValueSpill keeps a
// bounded buffer and appends the rest, in blocks, to a temporary file, then
// selects ranks from the file in a few passes (value_spill.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/histogram.h"

namespace looptrace {

// One temporary file shared by many ValueSpills. It has no name (O_TMPFILE,
// else mkstemp then unlink), so nothing is left behind however the process
// ends; mode 0600. The directory is chosen when constructed ($TMPDIR, else
// /tmp); the file is created on the first append. Not thread-safe.
class SpillFile {
 public:
  SpillFile();
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // Appends n values as one block; its offset, or nullopt if the file could
  // not be created or written. After the first failure every append fails
  // (the caller keeps its values), blocks already written stay readable.
  std::optional<uint64_t> append(const uint64_t* values, size_t n);
  // Reads n values at offset; false on an I/O error, which also fails the
  // file.
  bool read(uint64_t offset, uint64_t* out, size_t n);

  // Whether creating, writing or reading failed; error() says how
  // ("writing a spill file in /tmp: No space left on device"), for the
  // caller to warn once.
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // Bytes appended so far.
  uint64_t size() const { return end_; }

 private:
  bool open_file();

  std::string dir_;
  int fd_ = -1;
  uint64_t end_ = 0;
  std::string error_;
};

// Nearest-rank percentiles of a stream of values in bounded memory: up to
// buffer_values in memory, the rest in `file` (which must outlive it).
// Should the file fail, values are kept in memory instead: none is lost.
class ValueSpill {
 public:
  explicit ValueSpill(SpillFile* file, size_t buffer_values = 8192);

  void add(uint64_t v);
  uint64_t count() const { return count_; }
  // The same as exact_percentiles() of every value added. Reads the file a
  // few times over; its memory does not grow with count(). Should a read
  // fail (file->failed()), p50, p90 and p99 are 0.
  Percentiles percentiles() const;

 private:
  // A run of values in the file; adjacent blocks merge into one.
  struct Extent {
    uint64_t offset = 0;
    uint64_t count = 0;
  };

  void spill();
  template <typename F>
  bool for_each_value(std::vector<uint64_t>& chunk, F f) const;

  SpillFile* file_;
  size_t buffer_values_;
  std::vector<uint64_t> buffer_;
  std::vector<Extent> extents_;
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace looptrace
