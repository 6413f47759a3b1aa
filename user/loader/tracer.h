// The live tracer: configures, loads and attaches the BPF programs, then
// turns ring-buffer records into typed events. The only code that knows
// about the skeleton.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "trace/events.h"
#include "trace/kernel_counts.h"
#include "trace/options.h"

namespace looptrace {

// Checks that this process may load tracing BPF programs and that the
// kernel has BTF; one clear error line otherwise.
Status check_bpf_environment();

// Routes libbpf's messages through our log (shown with -v / --debug=libbpf).
void install_libbpf_logger();

class Tracer : public KernelCounts {
 public:
  using Sink = std::function<void(Event&&)>;

  static Result<std::unique_ptr<Tracer>> Create(const TraceOptions& opts);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Waits up to timeout_ms for records and hands each decoded event to sink.
  Status poll(int timeout_ms, const Sink& sink);
  // Stops recording: the probes stay, and so do the books of spans in
  // flight (read_in_flight), but nothing more reaches the ring buffer.
  void pause();
  // Pauses, then drains what is left in the ring buffer into sink. The
  // probes are removed (the traced processes run on untouched) when the
  // Tracer is destroyed: that takes the kernel about 100 ms a probe.
  Status stop(const Sink& sink);

  std::vector<ThreadHistogram> read_histograms() const override;
  // The keys of a probe that hold a Python code object
  // (LT_KEY_OP_PYCODE), as a bit mask of key indices.
  uint32_t pycode_keys(uint32_t probe_id) const;
  // Spans still in flight on these threads (pid, tid) at now_ns
  // (CLOCK_MONOTONIC): a loop stuck in a dispatch when tracing stops; with
  // min_age_ns, only those running at least that long (a hang check).
  std::vector<SpanEvent> read_in_flight(
      const std::set<std::pair<uint32_t, uint32_t>>& threads, uint64_t now_ns,
      uint64_t min_age_ns = 0) const;
  Counters read_counters() const override;
  // How input calls are probed, for the user: "raw syscall tracepoints",
  // "syscall tracepoints", "uprobes"; empty without input.
  const std::string& input_hook() const;
  // With a target (-p, a command): it and the processes it forked, minus
  // those whose last thread has exited (the kernel keeps this set).
  std::vector<uint32_t> traced_processes() const;
  // Samples of pid read its Python frames where `py` says (nullptr: no
  // more). python/frames.h PyFrames::attach finds it.
  Status set_python(uint32_t pid, const lt_py_proc* py);
  // Samples and blocking points of pid read its JavaScript frames where
  // `v8` says (nullptr: no more). v8/frames.h JsFrames::attach finds it.
  Status set_v8(uint32_t pid, const lt_v8_proc* v8);
  // Where the names of Python code objects the kernel sends go
  // (LT_REC_PYCODE records, in stream order, before the records whose
  // frames need them): not events. `hook` returns false for a malformed
  // one (counted as a decode error). Without a hook they are dropped.
  using RecordHook = std::function<bool(const void* data, size_t size)>;
  void set_pycode_hook(RecordHook hook);

  // Synchronous messages of (pid, queue) enqueued, due by now_ns and not yet
  // dispatched (from the enqueue probe's map); -1 without an enqueue probe.
  struct Waiting {
    int64_t count = -1;
    uint64_t oldest_due_ns = 0;
  };
  Waiting sync_waiting(uint32_t pid, uint64_t queue, uint64_t now_ns) const;

 private:
  struct Impl;
  static Result<std::unique_ptr<Tracer>> CreateWith(const TraceOptions& opts,
                                                    SyscallHook hook);
  explicit Tracer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace looptrace
