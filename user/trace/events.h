// The in-memory event stream: typed events decoded from the ring buffer (or
// a recording, or a unit test). Analysers consume these and nothing else.
#pragma once

#include <linux/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "looptrace/abi.h"
#include "model/frame.h"
#include "model/mapping.h"
#include "model/probe.h"
#include "model/thresholds.h"

namespace looptrace {

// A completed span that crossed its slow threshold (or every span with
// --record-all).
struct SpanEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint64_t span_id = 0;
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC
  uint64_t duration_ns = 0;
  uint64_t cpu_ns = 0;    // on a CPU (less hypervisor steal)
  uint64_t runq_ns = 0;   // runnable, waiting for a CPU
  uint64_t steal_ns = 0;  // "on CPU" while the hypervisor ran others
  // Stopped or frozen (SIGSTOP, a ptrace stop, a freezer): not lag the
  // program caused. 0 in recordings older than the field.
  uint64_t stopped_ns = 0;
  // The rest of duration_ns was blocked (sleeping, waiting on a lock, I/O).
  uint64_t blocked_ns() const {
    uint64_t busy = cpu_ns + runq_ns + steal_ns + stopped_ns;
    return duration_ns > busy ? duration_ns - busy : 0;
  }
  uint32_t probe_id = 0;
  uint32_t role = LT_ROLE_DISPATCH;
  uint32_t depth = 0;
  uint32_t key_fault_mask = 0;
  std::array<uint64_t, LT_MAX_KEYS> keys{};
  // The string the probe's str key points to (a GSource's name), as read
  // at the span's end; empty if none.
  std::string key_str;
  uint32_t flags = 0;  // LT_SPAN_*: LT_SPAN_INPUT consumed a raw-channel read
  // Still running when tracing stopped: duration_ns is its age then.
  bool in_flight = false;
  // Cut short (LT_SPAN_EXIT / LT_SPAN_EXEC): the thread exited, was killed
  // or exec'd inside the span; duration_ns runs to that moment.
  bool cut_short() const {
    return (flags & (LT_SPAN_EXIT | LT_SPAN_EXEC)) != 0;
  }
  // Never completed (in flight or cut short): reported if slow, not counted.
  bool unfinished() const { return in_flight || cut_short(); }
};

// What unwinding a sample by CFI needs (--call-graph dwarf): the user
// registers and the top of the user stack, as the kernel copied them.
struct UserStack {
  std::array<uint64_t, LT_NREGS> regs{};  // DWARF order (abi.h)
  std::vector<uint8_t> bytes;             // from regs[7], the stack pointer
  // What the uretprobes of the spans in flight replaced with their
  // trampoline on the stack, innermost first (0: not read).
  std::vector<uint64_t> ret_addrs;
};

// The Python frames the kernel read from a CPython thread (abi.h
// lt_pystack), innermost first.
struct PyStack {
  std::vector<lt_pyframe> frames;
  uint32_t flags = 0;  // LT_PY_*
};

// The JavaScript frames the kernel read from a V8 thread (abi.h
// lt_jsstack), innermost first.
struct JsStack {
  std::vector<lt_jsframe> frames;
  uint32_t flags = 0;  // LT_JS_*
};

// How a sample's frames were found.
enum class Unwind : uint8_t {
  kFramePointer = 0,  // the kernel walked the frame pointers
  kDwarf = 1,         // CFI (.eh_frame, .debug_frame) in userspace
};

// A user stack as an event carries it: its frames and how they were found.
struct Stack {
  std::vector<uint64_t> frames;  // innermost first, raw user addresses
  Unwind unwind = Unwind::kFramePointer;
  // Stopped before the thread's first frame (a frame without CFI, the end
  // of the copied stack, 64 frames).
  bool truncated = false;
  // Its Python frames stopped at LT_MAX_PYFRAMES: the outermost are missing
  // (the native frames around them are as `truncated` says).
  bool python_cut = false;
  // Straight from the kernel with --call-graph dwarf, until unwound; never
  // recorded (the frames are).
  std::shared_ptr<const UserStack> ustack;
  // The same for the Python frames (a sample's, a blocking point's), until
  // named and merged into frames (python/merge.h); never recorded (the
  // frames are).
  std::shared_ptr<const PyStack> py;
  // The same for the JavaScript frames (v8/frames.h).
  std::shared_ptr<const JsStack> js;
};

// A user stack sampled while a span was running.
struct SampleEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
  uint64_t span_id = 0;
  uint32_t probe_id = 0;
  Stack stack;
};

// A traced thread blocked (left the CPU not runnable: sleep, lock, I/O)
// inside a span: where. Its WokenEvent (same pid, tid, seq) says when it
// was woken, and by which WakeEvent.
struct BlockEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;  // when it switched out
  uint64_t span_id = 0;
  uint32_t probe_id = 0;
  uint32_t seq = 0;               // the thread's blocking count
  Stack stack;                    // where it blocked
  std::vector<uint64_t> kframes;  // kernel stack, innermost first
};

// A thread inside a span is being woken, seen in the waker. Which
// blocking point it ends, if any, a WokenEvent says.
struct WakeEvent {
  uint32_t pid = 0;  // the woken thread
  uint32_t tid = 0;
  uint64_t ts_ns = 0;    // the waking
  uint32_t wake_id = 0;  // per woken thread
  // From an interrupt (a timer, a device): no thread woke it; waker_* is
  // whatever ran on that CPU and kframes the interrupt's path.
  bool from_irq = false;
  uint32_t waker_pid = 0;
  uint32_t waker_tid = 0;
  std::string waker_comm;
  Stack stack;                    // the waker's user stack (none from irq)
  std::vector<uint64_t> kframes;  // the waker's kernel stack
};

// A thread's blocking point `seq` (BlockEvent) ended: it is back on a run
// queue, woken by its WakeEvent `wake_id` (0: none seen).
struct WokenEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
  uint32_t seq = 0;
  uint32_t wake_id = 0;
};

// A traced thread was stopped or frozen (SIGSTOP, a ptrace stop, a
// freezer) from start_ns until ts_ns, when it was continued: messages due
// meanwhile waited for that, not for dispatches.
struct StopEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
  uint64_t start_ns = 0;
};

// A span that had samples but ended below its threshold.
struct SpanDropEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t span_id = 0;
};

// A call of a point-role probe: a sync barrier posted or removed.
struct PointEvent {
  std::vector<uint64_t> frames;  // the caller's user stack (barrier.post)
  std::array<uint64_t, LT_MAX_KEYS> keys{};
  uint64_t ts_ns = 0;  // entry of the probed call
  uint64_t ret = 0;    // return value (barrier.post: the token)
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t probe_id = 0;
  uint32_t role = LT_ROLE_BARRIER_POST;
  uint32_t key_fault_mask = 0;
  // The caller's Python frames (a CPython process), until named and merged
  // into frames; never recorded (the frames are).
  std::shared_ptr<const PyStack> py;
};

// A message moved on an input channel (a socket call of a traced process).
struct IoEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint64_t ts_ns = 0;  // when it moved: a receive's return, a send's entry
  uint64_t enter_ns = 0;
  uint64_t exit_ns = 0;
  uint64_t inode = 0;       // this end's socket inode
  uint64_t peer_inode = 0;  // the other end's, 0 if unknown
  int64_t bytes = 0;
  uint32_t fd = 0;
  uint32_t op = 0;             // LT_IO_SEND | LT_IO_MSGHDR bits
  uint32_t chan = 0;           // enum lt_chan_kind
  uint32_t depth = 0;          // spans in flight on the thread
  uint64_t span_start_ns = 0;  // the innermost in-flight span (depth > 0)
  uint64_t span_id = 0;
  uint32_t span_probe = 0;
  std::array<uint8_t, LT_IO_HEAD> head{};  // first bytes of the message
  // An X11 read (chan LT_CHAN_X11): the messages that ended in it, framed
  // in the kernel (header fields only).
  std::vector<lt_x11_msg> x11;
  // A Wayland read (chan LT_CHAN_WAYLAND): its input events, and how many
  // other messages ended in it.
  std::vector<lt_wl_msg> wl;
  uint32_t wl_other = 0;
  // Either's LT_X11_REC_* / LT_WL_REC_* flags (the same bits).
  uint32_t frame_flags = 0;
  bool is_send() const { return (op & LT_IO_SEND) != 0; }
};

// A display server's connection (X11, Wayland), decoded message by message.
inline bool is_display_chan(uint32_t chan) {
  return chan == LT_CHAN_X11 || chan == LT_CHAN_WAYLAND;
}
// The server's end of one: its writes give the events' sends.
inline bool is_display_server_chan(uint32_t chan) {
  return chan == LT_CHAN_X11_SERVER || chan == LT_CHAN_WAYLAND_SERVER;
}

// A traced process exec'd another program: its mappings are new.
struct ExecEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
};

// The first event of every stream: what was traced, how, and where. The
// analysers configure themselves from it; a recording starts with it.
struct SessionEvent {
  uint32_t pid = 0;  // run-wide: 0
  uint32_t tid = 0;
  uint32_t abi_version = LT_ABI_VERSION;
  std::string looptrace_version;
  Thresholds thresholds;
  std::vector<ProbeDef> probes;  // span and point probes, by id
  std::string command_line;      // the traced command, if any
  int32_t target_pid = -1;       // -p or the command; -1 system-wide
  bool has_input = false;
  std::string input_hook;  // "raw syscall tracepoints", ...
  // The ring buffer's size in bytes (0: a recording older than the field),
  // what the count of records lost to a full one is measured against.
  uint32_t ringbuf_bytes = 0;
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC when tracing began
  std::string hostname;
  std::string kernel;  // uname -r
  // Realtime at start_ns (ns since the epoch), to date the recording.
  uint64_t start_realtime_ns = 0;
};

// A process's mappings when it was first seen (or after an exec): what its
// addresses mean.
struct MappingsEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
  std::vector<MapEntry> maps;
};

// What an address of a process is, resolved while the process lived: a
// recording carries the symbols it needs to be read on another machine.
struct SymbolEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  Frame frame;
};

// What waited on a queue behind its sync barriers at ts_ns: synchronous
// messages due and not yet dispatched (from the enqueue probe's map).
struct QueueEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t queue = 0;
  uint64_t ts_ns = 0;
  int64_t waiting = -1;  // -1: unknown (no enqueue probe)
  uint64_t oldest_due_ns = 0;
};

// The tracer's clock at a check: barriers held past the stall threshold
// by now become stalls (after the QueueEvents of the same check).
struct TickEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
};

// Read from the lt_hists map at the end of a run: every span of one thread
// at one probe, fast and slow.
struct ThreadHistogram {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  uint32_t probe_id = 0;
  uint32_t role = LT_ROLE_DISPATCH;
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  uint64_t max_ns = 0;
  std::array<uint64_t, LT_HIST_SLOTS> slots{};
};

// Summed lt_counters plus what userspace itself lost.
struct Counters {
  std::array<uint64_t, LT_CNT_MAX> bpf{};
  uint64_t decode_errors = 0;  // malformed ring-buffer records
  // Runs of looptrace's programs the kernel skipped: a hook that fired
  // while the same program ran on that CPU (an interrupt's wakeup during
  // another wakeup's program); its record is missing (recursion_misses).
  uint64_t hook_misses = 0;
};

// The last event of a complete stream: the kernel's histograms and
// counters, and why and when tracing stopped. A recording cut short has
// none; its replay says so.
struct EndEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t end_ns = 0;  // CLOCK_MONOTONIC when tracing stopped
  std::string stop_reason;
  std::vector<ThreadHistogram> hists;
  Counters counters;
};

// A span still running past --hang, seen while tracing: its identity, age
// (span.duration_ns) and CPU split at that moment. Announced once; the
// span itself comes when it ends, or in flight at the stop.
struct HangEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  SpanEvent span;  // in_flight
};

using Event =
    std::variant<SpanEvent, SampleEvent, SpanDropEvent, PointEvent, IoEvent,
                 ExecEvent, SessionEvent, MappingsEvent, SymbolEvent,
                 QueueEvent, TickEvent, EndEvent, HangEvent, BlockEvent,
                 WakeEvent, WokenEvent, StopEvent>;

// The process and thread an event belongs to (0 for run-wide events).
inline uint32_t event_pid(const Event& ev) {
  return std::visit([](const auto& e) { return e.pid; }, ev);
}
inline uint32_t event_tid(const Event& ev) {
  return std::visit([](const auto& e) { return e.tid; }, ev);
}

}  // namespace looptrace
