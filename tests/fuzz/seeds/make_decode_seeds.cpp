// Writes fuzz_decode's seeds: one valid record of each type (and of the
// off-CPU and wakeup records, also with their user stack copy), each
// preceded by its 16-bit length as fuzz_decode reads them, built from the
// ABI header so they follow its layout (rerun make_seeds.sh when it
// changes). The records carrying a stack copy are ~9 KB: the decoder takes
// only their exact size, and libFuzzer grows no input past its largest seed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
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

// A record of variable length: its first `len` bytes.
void append_bytes(std::vector<uint8_t>* out, const void* rec, uint16_t len) {
  const auto* p = reinterpret_cast<const uint8_t*>(&len);
  out->insert(out->end(), p, p + sizeof len);
  p = static_cast<const uint8_t*>(rec);
  out->insert(out->end(), p, p + len);
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

// A record and its lt_ucopy (`C` = {R r or s; lt_ucopy u}), the header's
// size that of the whole.
template <typename C>
void set_header(C* c, uint32_t type) {
  lt_rec_header* hdr = reinterpret_cast<lt_rec_header*>(c);
  hdr->type = type;
  hdr->size = sizeof(C);
  hdr->ts_ns = 1'000'000'000;
  hdr->pid = 1234;
  hdr->tid = 1235;
}

// A few registers and stack bytes; the rest of the copy stays zero.
void fill_copy(lt_ucopy* u) {
  for (int i = 0; i < LT_NREGS; ++i) u->regs[i] = 0x1000 + i;
  u->regs[7] = 0x7ffd00001000;  // rsp
  u->regs[16] = 0x401000;       // rip
  u->stack_len = 64;
  for (uint32_t i = 0; i < u->stack_len; ++i) u->stack[i] = uint8_t(i);
  u->nret = 1;
  u->ret_addrs[0] = 0x401300;
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

  auto exec = with_header<lt_exec_rec>(LT_REC_EXEC);

  // A display read: the call, then its messages (X11: a key press and a
  // reply; Wayland: a key press and a button release), as long as they.
  auto x11 = std::make_unique<lt_x11_rec>();
  std::memset(x11.get(), 0, sizeof *x11);
  x11->io = io;
  x11->io.chan = LT_CHAN_X11;
  x11->io.bytes = 76;
  x11->nmsgs = 2;
  x11->flags = LT_X11_REC_DRAINED;
  x11->msgs[0] = {32, 32, 1000, 7, 0, 2, 0, 0, 0};
  x11->msgs[1] = {76, 44, 0, 8, 0, 1, 0, 0, 0};
  const auto x11_len = static_cast<uint16_t>(offsetof(lt_x11_rec, msgs) +
                                             2 * sizeof(lt_x11_msg));
  x11->io.hdr.size = x11_len;
  auto wl = std::make_unique<lt_wl_rec>();
  std::memset(wl.get(), 0, sizeof *wl);
  wl->io = io;
  wl->io.chan = LT_CHAN_WAYLAND;
  wl->io.bytes = 76;
  wl->nmsgs = 2;
  wl->other = 1;
  wl->flags = LT_WL_REC_DRAINED;
  wl->msgs[0] = {52, 1000, 24, 1, LT_WL_KEY_PRESS, 0, {0, 0}};
  wl->msgs[1] = {76, 1005, 24, 2, LT_WL_BUTTON_RELEASE, 0, {0, 0}};
  const auto wl_len =
      static_cast<uint16_t>(offsetof(lt_wl_rec, msgs) + 2 * sizeof(lt_wl_msg));
  wl->io.hdr.size = wl_len;

  // 9 KB each, on the heap.
  auto ustack = std::make_unique<lt_ustack_rec>();
  std::memset(ustack.get(), 0, sizeof *ustack);
  set_header(ustack.get(), LT_REC_USTACK);
  ustack->s.span_id = 7;
  ustack->s.nframes = 2;
  ustack->s.frames[0] = 0x401000;
  ustack->s.frames[1] = 0x401100;
  fill_copy(&ustack->u);

  auto offcpu = with_header<lt_offcpu_rec>(LT_REC_OFFCPU);
  offcpu.span_id = 7;
  offcpu.probe_id = 1;
  offcpu.seq = 1;
  offcpu.nframes = 2;
  offcpu.frames[0] = 0x7f0000002000;
  offcpu.frames[1] = 0x401000;
  offcpu.nkframes = 2;
  offcpu.kframes[0] = 0xffffffff81000000;
  offcpu.kframes[1] = 0xffffffff81000100;
  auto offcpu_copy = std::make_unique<lt_offcpu_copy_rec>();
  std::memset(offcpu_copy.get(), 0, sizeof *offcpu_copy);
  offcpu_copy->r = offcpu;
  set_header(offcpu_copy.get(), LT_REC_OFFCPU);
  fill_copy(&offcpu_copy->u);

  auto wake = with_header<lt_wake_rec>(LT_REC_WAKE);
  wake.wake_id = 1;
  wake.waker_pid = 1234;
  wake.waker_tid = 1236;
  std::memcpy(wake.waker_comm, "worker", 6);
  wake.nframes = 1;
  wake.frames[0] = 0x401400;
  wake.nkframes = 1;
  wake.kframes[0] = 0xffffffff81000200;
  auto wake_copy = std::make_unique<lt_wake_copy_rec>();
  std::memset(wake_copy.get(), 0, sizeof *wake_copy);
  wake_copy->r = wake;
  set_header(wake_copy.get(), LT_REC_WAKE);
  fill_copy(&wake_copy->u);
  // From an interrupt: no user stack, the kernel's path to the timer.
  auto wake_irq = wake;
  wake_irq.flags = LT_WAKE_IRQ;
  wake_irq.waker_pid = 0;
  wake_irq.waker_tid = 0;
  std::memset(wake_irq.waker_comm, 0, LT_COMM_LEN);
  std::memcpy(wake_irq.waker_comm, "swapper/0", 9);
  wake_irq.nframes = 0;

  auto woken = with_header<lt_woken_rec>(LT_REC_WOKEN);
  woken.seq = 1;
  woken.wake_id = 1;

  // Every type once, in its form without a stack copy where it has one.
  std::vector<uint8_t> all;
  auto both = [&](const char* name, const auto& rec) {
    std::vector<uint8_t> one;
    append(&one, rec);
    save(dir, name, one);
    append(&all, rec);
  };
  auto alone = [&](const char* name, const auto& rec) {
    std::vector<uint8_t> one;
    append(&one, rec);
    save(dir, name, one);
  };
  both("span", span);
  both("sample", sample);
  both("span_drop", drop);
  both("point", point);
  both("io", io);
  both("exec", exec);
  both("ustack", *ustack);
  both("offcpu", offcpu);
  alone("offcpu_copy", *offcpu_copy);
  both("wake", wake);
  alone("wake_copy", *wake_copy);
  alone("wake_irq", wake_irq);
  both("woken", woken);
  for (auto [name, rec, len] : {std::tuple<const char*, const void*, uint16_t>{
                                    "io_x11", x11.get(), x11_len},
                                {"io_wayland", wl.get(), wl_len}}) {
    std::vector<uint8_t> one;
    append_bytes(&one, rec, len);
    save(dir, name, one);
    append_bytes(&all, rec, len);
  }
  save(dir, "all_types", all);
  return 0;
}
