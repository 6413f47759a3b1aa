// Writes fuzz_decode's seeds: one valid record of each type, each preceded
// by its 16-bit length as fuzz_decode reads them, built from the ABI
// header so they follow its layout (rerun make_seeds.sh when it changes).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "looptrace/abi.h"

namespace {

template <typename T>
void append(std::vector<uint8_t>* out, const T& rec) {
  uint16_t len = sizeof(T);
  const auto* p = reinterpret_cast<const uint8_t*>(&len);
  out->insert(out->end(), p, p + sizeof len);
  p = reinterpret_cast<const uint8_t*>(&rec);
  out->insert(out->end(), p, p + sizeof(T));
}

template <typename T>
T with_header(uint32_t type) {
  T r;
  std::memset(&r, 0, sizeof r);
  r.hdr.type = type;
  r.hdr.size = sizeof(T);
  r.hdr.ts_ns = 1'000'000'000;
  r.hdr.pid = 1234;
  r.hdr.tid = 1235;
  return r;
}

void save(const std::string& dir, const char* name,
          const std::vector<uint8_t>& bytes) {
  std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];

  auto span = with_header<lt_span_rec>(LT_REC_SPAN);
  span.span_id = 7;
  span.start_ns = 900'000'000;
  span.duration_ns = 100'000'000;
  span.cpu_ns = 60'000'000;
  span.runq_ns = 10'000'000;
  span.probe_id = 1;
  span.role = LT_ROLE_DISPATCH;
  span.keys[0] = 0x55550000;
  std::memcpy(span.comm, "refapp", 6);

  // Few frames, so the seed stays small: the fuzzer grows nframes.
  auto sample = with_header<lt_sample_rec>(LT_REC_SAMPLE);
  sample.span_id = 7;
  sample.nframes = 3;
  sample.frames[0] = 0x401000;
  sample.frames[1] = 0x401100;
  sample.frames[2] = 0x7f0000001000;

  auto drop = with_header<lt_span_drop_rec>(LT_REC_SPAN_DROP);
  drop.span_id = 8;

  auto point = with_header<lt_point_rec>(LT_REC_POINT);
  point.probe_id = 3;
  point.role = LT_ROLE_BARRIER_POST;
  point.ret = 42;
  point.nframes = 1;
  point.frames[0] = 0x401200;

  auto io = with_header<lt_io_rec>(LT_REC_IO);
  io.bytes = 24;
  io.chan = LT_CHAN_INPUT;
  io.inode = 99;
  io.fd = 5;
  std::memcpy(io.comm, "refapp", 6);

  std::vector<uint8_t> all;
  std::vector<uint8_t> one;
  append(&one, span);
  save(dir, "span", one);
  append(&all, span);
  one.clear();
  append(&one, sample);
  save(dir, "sample", one);
  append(&all, sample);
  one.clear();
  append(&one, drop);
  save(dir, "span_drop", one);
  append(&all, drop);
  one.clear();
  append(&one, point);
  save(dir, "point", one);
  append(&all, point);
  one.clear();
  append(&one, io);
  save(dir, "io", one);
  append(&all, io);
  save(dir, "all_types", all);
  return 0;
}
