// Ring-buffer records -> events: the input is a sequence of records, each
// preceded by a 16-bit length (as the ring buffer hands over one record and
// its size). A record decodes or is refused; never a read past its size.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "trace/decode.h"

namespace {

// A user stack within what the kernel walks, and its copy within what the
// kernel copies (or none).
bool stack_ok(const looptrace::Stack& s) {
  const auto& u = s.ustack;
  return s.frames.size() <= LT_MAX_STACK &&
         (!u || (u->bytes.size() <= LT_STACK_COPY &&
                 u->ret_addrs.size() <= LT_MAX_DEPTH));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  while (size >= 2) {
    uint16_t len = 0;
    std::memcpy(&len, data, sizeof len);
    data += 2;
    size -= 2;
    if (len > size) len = static_cast<uint16_t>(size);
    // An exact-size heap copy, so ASan sees any read past the record.
    std::vector<uint8_t> rec(data, data + len);
    looptrace::Event ev;
    if (looptrace::decode_record(rec.data(), rec.size(), &ev)) {
      if (auto* s = std::get_if<looptrace::SampleEvent>(&ev))
        LT_FUZZ_CHECK(stack_ok(s->stack));
      if (auto* p = std::get_if<looptrace::PointEvent>(&ev))
        LT_FUZZ_CHECK(p->frames.size() <= LT_MAX_STACK &&
                      p->probe_id < LT_MAX_PROBES);
      if (auto* sp = std::get_if<looptrace::SpanEvent>(&ev))
        LT_FUZZ_CHECK(sp->comm.size() <= LT_COMM_LEN &&
                      sp->probe_id < LT_MAX_PROBES);
      if (auto* io = std::get_if<looptrace::IoEvent>(&ev))
        LT_FUZZ_CHECK(io->comm.size() <= LT_COMM_LEN && io->bytes > 0);
      if (auto* b = std::get_if<looptrace::BlockEvent>(&ev))
        LT_FUZZ_CHECK(stack_ok(b->stack) &&
                      b->kframes.size() <= LT_MAX_KSTACK &&
                      b->probe_id < LT_MAX_PROBES);
      // A wakeup from an interrupt has no user stack to unwind.
      if (auto* w = std::get_if<looptrace::WakeEvent>(&ev))
        LT_FUZZ_CHECK(stack_ok(w->stack) &&
                      w->kframes.size() <= LT_MAX_KSTACK &&
                      w->waker_comm.size() <= LT_COMM_LEN &&
                      !(w->from_irq && w->stack.ustack));
    }
    data += len;
    size -= len;
  }
  return 0;
}
