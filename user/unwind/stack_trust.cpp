#include "unwind/stack_trust.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace looptrace {

ExecRanges::ExecRanges(const std::string& maps_text) : known_(true) {
  std::istringstream in(maps_text);
  std::string line;
  while (std::getline(in, line)) {
    // "lo-hi perms offset dev inode [path]"
    char* end = nullptr;
    uint64_t lo = std::strtoull(line.c_str(), &end, 16);
    if (!end || *end != '-') continue;
    uint64_t hi = std::strtoull(end + 1, &end, 16);
    if (!end || *end != ' ' || hi <= lo) continue;
    const char* perms = end + 1;
    if (std::char_traits<char>::length(perms) < 4 || perms[2] != 'x') continue;
    ranges_.emplace_back(lo, hi);
  }
  std::sort(ranges_.begin(), ranges_.end());
}

bool ExecRanges::contains(uint64_t addr) const {
  if (!known_) return true;
  auto it =
      std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                       [](uint64_t a, const std::pair<uint64_t, uint64_t>& r) {
                         return a < r.first;
                       });
  if (it == ranges_.begin()) return false;
  --it;
  return addr < it->second;
}

bool cut_untrusted(const ExecRanges& exec, std::vector<uint64_t>* frames) {
  for (size_t i = 0; i < frames->size(); ++i)
    if (!exec.contains((*frames)[i])) {
      frames->resize(i);
      return true;
    }
  return false;
}

MergedStack merge_stacks(std::vector<uint64_t> fp, bool fp_full,
                         UnwindResult cfi, const ExecRanges& exec) {
  const bool fp_truncated = cut_untrusted(exec, &fp) || fp_full;
  const bool cfi_truncated = cut_untrusted(exec, &cfi.frames) || cfi.truncated;
  MergedStack out;
  if (!cfi_truncated && !cfi.frames.empty()) {
    out.frames = std::move(cfi.frames);
    out.dwarf = true;
    return out;
  }
  // Frame pointers skip the callers of functions without them, never add
  // one: the CFI's last frame k is at most at k in the frame-pointer
  // stack. The deepest match keeps every frame (recursion repeats
  // addresses).
  const size_t k = cfi.frames.size();
  if (k >= 2 && fp.size() >= 2) {
    for (size_t j = std::min(k - 1, fp.size() - 1); j >= 1; --j) {
      if (fp[j] != cfi.frames.back()) continue;
      out.frames = std::move(cfi.frames);
      out.frames.insert(out.frames.end(), fp.begin() + static_cast<long>(j) + 1,
                        fp.end());
      out.truncated = fp_truncated;
      out.dwarf = true;
      return out;
    }
  }
  if (fp.size() > k) {
    out.frames = std::move(fp);
    out.truncated = fp_truncated;
    return out;
  }
  out.frames = std::move(cfi.frames);
  out.truncated = true;
  out.dwarf = true;
  return out;
}

}  // namespace looptrace
