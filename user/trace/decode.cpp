#include "trace/decode.h"

#include <linux/types.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include "looptrace/abi.h"

namespace looptrace {
namespace {

template <typename T>
bool read_rec(const void* data, size_t size, T* rec) {
  if (size < sizeof(T)) return false;
  std::memcpy(rec, data, sizeof(T));
  return rec->hdr.size == sizeof(T);
}

std::string comm_string(const char (&comm)[LT_COMM_LEN]) {
  return std::string(comm, strnlen(comm, LT_COMM_LEN));
}

std::shared_ptr<UserStack> user_stack(const lt_ucopy& u) {
  auto out = std::make_shared<UserStack>();
  std::copy(std::begin(u.regs), std::end(u.regs), out->regs.begin());
  out->bytes.assign(u.stack, u.stack + u.stack_len);
  out->ret_addrs.assign(u.ret_addrs, u.ret_addrs + u.nret);
  return out;
}

bool ucopy_ok(const lt_ucopy& u) {
  return u.stack_len <= LT_STACK_COPY && u.nret <= LT_MAX_DEPTH;
}

// A record with a user stack copy after it, or without: `R` alone or
// `C` = {R r; lt_ucopy u}, as hdr.size says, less an lt_pystack after it
// if `py` allows one (py_tail reads it). The big one on the heap.
template <typename R, typename C>
std::unique_ptr<C> read_with_copy(const void* data, size_t size, bool* copy,
                                  bool py = false) {
  static_assert(sizeof(R) + sizeof(lt_pystack) != sizeof(C));
  static_assert(sizeof(R) + sizeof(lt_jsstack) != sizeof(C));
  lt_rec_header hdr;
  std::memcpy(&hdr, data, sizeof(hdr));
  size_t base = hdr.size;
  if (py && (base == sizeof(R) + sizeof(lt_pystack) ||
             base == sizeof(C) + sizeof(lt_pystack)))
    base -= sizeof(lt_pystack);
  else if (py && (base == sizeof(R) + sizeof(lt_jsstack) ||
                  base == sizeof(C) + sizeof(lt_jsstack)))
    base -= sizeof(lt_jsstack);
  auto out = std::make_unique<C>();
  if (base == sizeof(C) && size >= sizeof(C)) {
    std::memcpy(out.get(), data, sizeof(C));
    *copy = true;
  } else if (base == sizeof(R) && size >= sizeof(R)) {
    std::memcpy(&out->r, data, sizeof(R));
    *copy = false;
  } else {
    return nullptr;
  }
  return out;
}

// A framed read's tail (lt_x11_rec, lt_wl_rec: the call, nmsgs, flags,
// then nmsgs messages): the messages into *msgs and the flags; false if
// the record's size is not exactly that.
template <typename Rec, size_t kMax, typename Msg>
bool framed_tail(const char* bytes, size_t size, uint32_t rec_size,
                 std::vector<Msg>* msgs, uint32_t* flags) {
  constexpr size_t kHead = offsetof(Rec, msgs);
  static_assert(sizeof(Msg) == sizeof(Rec::msgs[0]));
  uint32_t n = 0;
  if (rec_size < kHead || size < rec_size) return false;
  std::memcpy(&n, bytes + offsetof(Rec, nmsgs), sizeof(n));
  std::memcpy(flags, bytes + offsetof(Rec, flags), sizeof(*flags));
  if (n > kMax || rec_size != kHead + n * sizeof(Msg)) return false;
  msgs->resize(n);
  if (n) std::memcpy(msgs->data(), bytes + kHead, n * sizeof(Msg));
  return true;
}

// The user stack the kernel walked, with its copy for unwinding if it sent
// one.
Stack stack_of(const __u64* frames, __u32 nframes, const lt_ucopy* copy) {
  Stack s;
  s.frames.assign(frames, frames + nframes);
  if (copy) s.ustack = user_stack(*copy);
  return s;
}

bool decode_span(const void* data, size_t size, Event* out) {
  lt_span_rec r;
  if (!read_rec(data, size, &r) || r.role >= LT_ROLE_MAX ||
      r.probe_id >= LT_MAX_PROBES)
    return false;
  *out = span_event(r);
  return true;
}

SampleEvent sample_event(const lt_sample_rec& r, const lt_ucopy* copy) {
  SampleEvent ev;
  ev.pid = r.hdr.pid;
  ev.tid = r.hdr.tid;
  ev.ts_ns = r.hdr.ts_ns;
  ev.span_id = r.span_id;
  ev.probe_id = r.probe_id;
  ev.stack = stack_of(r.frames, r.nframes, copy);
  return ev;
}

// A sample, blocking point or barrier post of a CPython thread has its
// Python frames after the record of `base` bytes (lt_py_sample_rec,
// lt_py_ustack_rec, ...): into *py. False if hdr.size is neither the
// record's size nor that with them.
bool py_tail(const void* data, size_t size, size_t base,
             std::shared_ptr<const PyStack>* out) {
  lt_rec_header hdr;
  std::memcpy(&hdr, data, sizeof(hdr));
  if (hdr.size == base || hdr.size == base + sizeof(lt_jsstack)) return true;
  if (hdr.size != base + sizeof(lt_pystack) || size < hdr.size) return false;
  const char* at = static_cast<const char*>(data) + base;
  lt_pystack head;
  std::memcpy(&head, at, offsetof(lt_pystack, frames));
  if (head.nframes > LT_MAX_PYFRAMES) return false;
  auto py = std::make_shared<PyStack>();
  py->flags = head.flags;
  py->frames.resize(head.nframes);
  if (head.nframes)
    std::memcpy(py->frames.data(), at + offsetof(lt_pystack, frames),
                head.nframes * sizeof(lt_pyframe));
  *out = std::move(py);
  return true;
}

// A sample or blocking point of a V8 thread has its JavaScript frames
// after the record of `base` bytes, as py_tail's Python frames (the two
// tails differ in size).
static_assert(sizeof(lt_jsstack) != sizeof(lt_pystack));
bool js_tail(const void* data, size_t size, size_t base,
             std::shared_ptr<const JsStack>* out) {
  lt_rec_header hdr;
  std::memcpy(&hdr, data, sizeof(hdr));
  if (hdr.size != base + sizeof(lt_jsstack)) return true;
  if (size < hdr.size) return false;
  const char* at = static_cast<const char*>(data) + base;
  lt_jsstack head;
  std::memcpy(&head, at, offsetof(lt_jsstack, frames));
  if (head.nframes > LT_MAX_JSFRAMES) return false;
  auto js = std::make_shared<JsStack>();
  js->flags = head.flags;
  js->frames.resize(head.nframes);
  if (head.nframes)
    std::memcpy(js->frames.data(), at + offsetof(lt_jsstack, frames),
                head.nframes * sizeof(lt_jsframe));
  *out = std::move(js);
  return true;
}

bool decode_sample(const void* data, size_t size, Event* out) {
  lt_sample_rec r;
  if (size < sizeof(r)) return false;
  std::memcpy(&r, data, sizeof(r));
  if (r.nframes > LT_MAX_STACK) return false;
  SampleEvent ev = sample_event(r, nullptr);
  if (!py_tail(data, size, sizeof(r), &ev.stack.py) ||
      !js_tail(data, size, sizeof(r), &ev.stack.js))
    return false;
  *out = std::move(ev);
  return true;
}

// A sample with the copy of the user stack after it.
bool decode_ustack(const void* data, size_t size, Event* out) {
  // 9 KB: on the heap, not the stack.
  if (size < sizeof(lt_ustack_rec)) return false;
  auto r = std::make_unique<lt_ustack_rec>();
  std::memcpy(r.get(), data, sizeof(lt_ustack_rec));
  if (r->s.nframes > LT_MAX_STACK || !ucopy_ok(r->u)) return false;
  SampleEvent ev = sample_event(r->s, &r->u);
  if (!py_tail(data, size, sizeof(lt_ustack_rec), &ev.stack.py) ||
      !js_tail(data, size, sizeof(lt_ustack_rec), &ev.stack.js))
    return false;
  *out = std::move(ev);
  return true;
}

bool decode_offcpu(const void* data, size_t size, Event* out) {
  bool copy = false;
  auto c = read_with_copy<lt_offcpu_rec, lt_offcpu_copy_rec>(data, size, &copy,
                                                             true);
  if (!c || c->r.nframes > LT_MAX_STACK || c->r.nkframes > LT_MAX_KSTACK ||
      c->r.probe_id >= LT_MAX_PROBES || (copy && !ucopy_ok(c->u)))
    return false;
  const lt_offcpu_rec& r = c->r;
  BlockEvent ev;
  ev.pid = r.hdr.pid;
  ev.tid = r.hdr.tid;
  ev.ts_ns = r.hdr.ts_ns;
  ev.span_id = r.span_id;
  ev.probe_id = r.probe_id;
  ev.seq = r.seq;
  ev.stack = stack_of(r.frames, r.nframes, copy ? &c->u : nullptr);
  ev.kframes.assign(r.kframes, r.kframes + r.nkframes);
  const size_t base = copy ? sizeof(lt_offcpu_copy_rec) : sizeof(r);
  if (!py_tail(data, size, base, &ev.stack.py) ||
      !js_tail(data, size, base, &ev.stack.js))
    return false;
  *out = std::move(ev);
  return true;
}

bool decode_wake(const void* data, size_t size, Event* out) {
  bool copy = false;
  auto c =
      read_with_copy<lt_wake_rec, lt_wake_copy_rec>(data, size, &copy, true);
  if (!c || c->r.nframes > LT_MAX_STACK || c->r.nkframes > LT_MAX_KSTACK ||
      (copy && !ucopy_ok(c->u)))
    return false;
  const lt_wake_rec& r = c->r;
  WakeEvent ev;
  ev.pid = r.hdr.pid;
  ev.tid = r.hdr.tid;
  ev.ts_ns = r.hdr.ts_ns;
  ev.wake_id = r.wake_id;
  ev.from_irq = (r.flags & LT_WAKE_IRQ) != 0;
  ev.waker_pid = r.waker_pid;
  ev.waker_tid = r.waker_tid;
  ev.waker_comm = comm_string(r.waker_comm);
  // A waker from an interrupt has no user stack to unwind.
  bool unwind = copy && !ev.from_irq && c->u.stack_len;
  ev.stack = stack_of(r.frames, r.nframes, unwind ? &c->u : nullptr);
  ev.kframes.assign(r.kframes, r.kframes + r.nkframes);
  if (!py_tail(data, size, copy ? sizeof(lt_wake_copy_rec) : sizeof(r),
               &ev.stack.py))
    return false;
  *out = std::move(ev);
  return true;
}

bool decode_point(const void* data, size_t size, Event* out) {
  lt_point_rec r;
  if (size < sizeof(r)) return false;
  std::memcpy(&r, data, sizeof(r));
  if (r.nframes > LT_MAX_STACK || r.probe_id >= LT_MAX_PROBES ||
      (r.role != LT_ROLE_BARRIER_POST && r.role != LT_ROLE_BARRIER_REMOVE))
    return false;
  PointEvent ev;
  ev.pid = r.hdr.pid;
  ev.tid = r.hdr.tid;
  ev.ts_ns = r.hdr.ts_ns;
  ev.probe_id = r.probe_id;
  ev.role = r.role;
  std::copy(std::begin(r.keys), std::end(r.keys), ev.keys.begin());
  ev.key_fault_mask = r.key_fault_mask;
  ev.ret = r.ret;
  ev.frames.assign(r.frames, r.frames + r.nframes);
  if (!py_tail(data, size, sizeof(r), &ev.py)) return false;
  *out = std::move(ev);
  return true;
}

bool decode_io(const void* data, size_t size, Event* out) {
  lt_io_rec r;
  if (size < sizeof(r)) return false;
  std::memcpy(&r, data, sizeof(r));
  if (r.bytes <= 0 ||
      (r.chan != LT_CHAN_INPUT && r.chan != LT_CHAN_RAW &&
       r.chan != LT_CHAN_X11 && r.chan != LT_CHAN_X11_SERVER &&
       r.chan != LT_CHAN_WAYLAND && r.chan != LT_CHAN_WAYLAND_SERVER))
    return false;
  // An X11 read carries its messages after the call (lt_x11_rec), a
  // Wayland read its input events (lt_wl_rec).
  IoEvent ev;
  const char* bytes = static_cast<const char*>(data);
  if (r.chan == LT_CHAN_WAYLAND) {
    if (!framed_tail<lt_wl_rec, LT_WL_MAX_MSGS>(bytes, size, r.hdr.size, &ev.wl,
                                                &ev.frame_flags))
      return false;
    std::memcpy(&ev.wl_other, bytes + offsetof(lt_wl_rec, other),
                sizeof(ev.wl_other));
  } else if (r.chan == LT_CHAN_X11) {
    if (!framed_tail<lt_x11_rec, LT_X11_MAX_MSGS>(bytes, size, r.hdr.size,
                                                  &ev.x11, &ev.frame_flags))
      return false;
  } else if (r.hdr.size != sizeof(r)) {
    return false;
  }
  ev.pid = r.hdr.pid;
  ev.tid = r.hdr.tid;
  ev.comm = comm_string(r.comm);
  ev.ts_ns = r.hdr.ts_ns;
  ev.enter_ns = r.enter_ns;
  ev.exit_ns = r.exit_ns;
  ev.inode = r.inode;
  ev.peer_inode = r.peer_inode;
  ev.bytes = r.bytes;
  ev.fd = r.fd;
  ev.op = r.op;
  ev.chan = r.chan;
  ev.depth = r.depth;
  ev.span_start_ns = r.span_start_ns;
  ev.span_id = r.span_id;
  ev.span_probe = r.span_probe;
  std::memcpy(ev.head.data(), r.head, LT_IO_HEAD);
  *out = std::move(ev);
  return true;
}

}  // namespace

SpanEvent span_event(const lt_span_rec& r) {
  SpanEvent ev;
  ev.pid = r.hdr.pid;
  ev.tid = r.hdr.tid;
  ev.comm = comm_string(r.comm);
  ev.span_id = r.span_id;
  ev.start_ns = r.start_ns;
  ev.duration_ns = r.duration_ns;
  ev.cpu_ns = r.cpu_ns;
  ev.runq_ns = r.runq_ns;
  ev.steal_ns = r.steal_ns;
  ev.stopped_ns = r.stopped_ns;
  ev.probe_id = r.probe_id;
  ev.role = r.role;
  ev.depth = r.depth;
  ev.key_fault_mask = r.key_fault_mask;
  ev.flags = r.flags;
  std::copy(std::begin(r.keys), std::end(r.keys), ev.keys.begin());
  // The kernel always ends it with a NUL: at most LT_KEY_STR_LEN - 1.
  ev.key_str.assign(r.key_str, strnlen(r.key_str, LT_KEY_STR_LEN - 1));
  return ev;
}

ThreadHistogram thread_histogram(const lt_hist& h) {
  ThreadHistogram t;
  t.pid = h.pid;
  t.tid = h.tid;
  t.comm = comm_string(h.comm);
  t.probe_id = h.probe_id;
  t.role = h.role;
  t.count = h.count;
  t.sum_ns = h.sum_ns;
  t.max_ns = h.max_ns;
  std::copy(std::begin(h.slots), std::end(h.slots), t.slots.begin());
  return t;
}

bool decode_record(const void* data, size_t size, Event* out) {
  lt_rec_header hdr;
  if (size < sizeof(hdr)) return false;
  std::memcpy(&hdr, data, sizeof(hdr));
  switch (hdr.type) {
    case LT_REC_SPAN:
      return decode_span(data, size, out);
    case LT_REC_SAMPLE:
      return decode_sample(data, size, out);
    case LT_REC_USTACK:
      return decode_ustack(data, size, out);
    case LT_REC_OFFCPU:
      return decode_offcpu(data, size, out);
    case LT_REC_WAKE:
      return decode_wake(data, size, out);
    case LT_REC_WOKEN: {
      lt_woken_rec r;
      if (!read_rec(data, size, &r)) return false;
      *out = WokenEvent{r.hdr.pid, r.hdr.tid, r.hdr.ts_ns, r.seq, r.wake_id};
      return true;
    }
    case LT_REC_STOP: {
      lt_stop_rec r;
      if (!read_rec(data, size, &r) || r.start_ns > r.hdr.ts_ns) return false;
      *out = StopEvent{r.hdr.pid, r.hdr.tid, r.hdr.ts_ns, r.start_ns};
      return true;
    }
    case LT_REC_SPAN_DROP: {
      lt_span_drop_rec r;
      if (!read_rec(data, size, &r)) return false;
      *out = SpanDropEvent{r.hdr.pid, r.hdr.tid, r.span_id};
      return true;
    }
    case LT_REC_POINT:
      return decode_point(data, size, out);
    case LT_REC_IO:
      return decode_io(data, size, out);
    case LT_REC_EXEC: {
      lt_exec_rec r;
      if (!read_rec(data, size, &r)) return false;
      *out = ExecEvent{r.hdr.pid, r.hdr.tid, r.hdr.ts_ns};
      return true;
    }
    default:
      return false;
  }
}

}  // namespace looptrace
