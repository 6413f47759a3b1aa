#include "elf/xz.h"

#include <fmt/format.h>
#include <lzma.h>

#include <algorithm>
#include <cstdint>

namespace looptrace::elf {
namespace {

// The decoder's own memory (dictionary); MiniDebugInfo uses xz's default
// presets, which need a few MiB to decode.
constexpr uint64_t kDecoderMemLimit = 256ull << 20;

const char* lzma_error(lzma_ret r) {
  switch (r) {
    case LZMA_MEM_ERROR:
      return "out of memory";
    case LZMA_MEMLIMIT_ERROR:
      return "needs more memory than allowed";
    case LZMA_FORMAT_ERROR:
      return "not an xz stream";
    case LZMA_OPTIONS_ERROR:
      return "unsupported options";
    case LZMA_DATA_ERROR:
      return "corrupt data";
    case LZMA_BUF_ERROR:
      return "truncated stream";
    default:
      return "decoder error";
  }
}

class Stream {
 public:
  Stream() = default;
  ~Stream() { lzma_end(&s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  lzma_stream* get() { return &s_; }

 private:
  lzma_stream s_ = LZMA_STREAM_INIT;
};

}  // namespace

Result<std::vector<char>> xz_decompress(std::string_view in, size_t max_out) {
  Stream stream;
  lzma_stream* s = stream.get();
  lzma_ret r = lzma_stream_decoder(s, kDecoderMemLimit, 0);
  if (r != LZMA_OK) return Status::Error(fmt::format("xz: {}", lzma_error(r)));
  s->next_in = reinterpret_cast<const uint8_t*>(in.data());
  s->avail_in = in.size();
  std::vector<char> out;
  constexpr size_t kChunk = 64 * 1024;
  while (true) {
    size_t used = out.size();
    if (used >= max_out + 1)
      return Status::Error(
          fmt::format("xz: decompresses to more than {} bytes", max_out));
    // One byte beyond the cap tells "exactly max_out" from "more".
    size_t grow = std::min(kChunk, max_out + 1 - used);
    out.resize(used + grow);
    s->next_out = reinterpret_cast<uint8_t*>(out.data() + used);
    s->avail_out = grow;
    // LZMA_FINISH: all input is here, so running out of it is truncation.
    r = lzma_code(s, LZMA_FINISH);
    out.resize(used + grow - s->avail_out);
    if (r == LZMA_STREAM_END) break;
    if (r != LZMA_OK)
      return Status::Error(fmt::format("xz: {} after {} bytes of output",
                                       lzma_error(r), out.size()));
  }
  if (out.size() > max_out)
    return Status::Error(
        fmt::format("xz: decompresses to more than {} bytes", max_out));
  return out;
}

}  // namespace looptrace::elf
