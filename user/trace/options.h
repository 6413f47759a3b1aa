// What a live run traces and how: the probes, the kernel's thresholds and
// table sizes, the input channels. The plan (plan/) builds it from a
// command line; the tracer (loader/) loads and attaches from it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/probe.h"
#include "model/thresholds.h"
#include "proc/wayland_objects.h"

namespace looptrace {

// Input channels (docs/input.md): which socket calls, probed how, in which
// processes.
enum class InputMode { kOff, kSyscall, kUprobe };

struct InputUprobe {
  std::string path;  // the ELF file (libc, or a static binary)
  std::string symbol;
  uint64_t file_offset = 0;
  uint32_t op = 0;  // LT_IO_*
};

// How kSyscall mode probes the calls: the raw syscall tracepoints
// (sys_enter/sys_exit by BTF, no tracefs), or the per-call syscall
// tracepoints (tracefs, mounted privately when it is not mounted). kAuto
// tries them in that order; LOOPTRACE_SYSCALL_HOOK=raw|tracepoint forces
// one (tests, benchmarks). docs/input.md compares their cost.
enum class SyscallHook { kAuto, kRaw, kTracepoint };

struct InputTrace {
  InputMode mode = InputMode::kOff;
  SyscallHook hook = SyscallHook::kAuto;
  // kSyscall: syscall names (recvfrom, sendto, recvmsg, sendmsg, read, write,
  // readv, writev)
  std::vector<std::string> syscalls;
  std::vector<InputUprobe> uprobes;  // kUprobe
  // Traced processes (their children follow); empty: every process.
  std::vector<uint32_t> tgids;
  // Raw channels the user picked (socket inodes).
  std::vector<uint64_t> raw_inodes;
  // X11 connections (the client's socket inodes): framed message by
  // message in the kernel.
  std::vector<uint64_t> x11_inodes;
  // The X server's ends of those: its writes give each event's send.
  std::vector<uint64_t> x11_server_inodes;
  // Wayland connections (the client's socket inodes), framed both ways in
  // the kernel, and the compositor's ends of them.
  std::vector<uint64_t> wl_inodes;
  std::vector<uint64_t> wl_server_inodes;
  // The input objects of the Wayland clients' connections, read from their
  // memory (set up before tracing; proc/wayland_objects.h).
  proc::WaylandObjects wl_objects;
  // Peer ends of the target's sockets: their processes' calls on them are
  // traced although those processes are not (a dispatcher elsewhere).
  std::vector<uint64_t> peer_inodes;
};

// The hook LOOPTRACE_SYSCALL_HOOK asks for (kAuto when unset); an error for
// a value that is none of raw, tracepoint.
Result<SyscallHook> syscall_hook_from_env();

// LT_IO_* of a socket call by name (recv, recvfrom, send, sendto, recvmsg,
// sendmsg, read, write); nullopt if it is none of them.
std::optional<uint32_t> input_call_op(const std::string& name);

// How user stacks are unwound (--call-graph): frame pointers in the kernel
// only; the CFI of a copy of the stack only; or both, the CFI continued by
// the frame pointers where its copy ends (docs/unwinding.md).
enum class CallGraph : uint8_t { kFramePointer, kDwarf, kAuto };

struct TraceOptions {
  std::vector<ProbeDef> probes;  // resolved: path and file_offset set
  // The target and what it forks from then on; -1: every process that maps
  // the binary.
  pid_t pid = -1;
  Thresholds limits;  // what the kernel filters and samples with
  uint32_t ringbuf_bytes = Thresholds::kRingbufBytes;
  uint32_t hist_max = Thresholds::kHistMax;
  uint32_t pending_max = Thresholds::kPendingMax;
  uint32_t process_max = Thresholds::kProcessMax;
  // Spans only of these threads (--tid) and threads of these names
  // (--comm); both empty: every thread.
  std::vector<uint32_t> tids;
  std::vector<std::string> comms;
  // Bytes of user stack each sample copies for unwinding by CFI
  // (--call-graph dwarf or auto); 0: frame pointers only.
  uint32_t stack_copy = 0;
  CallGraph call_graph = CallGraph::kFramePointer;
  // Where threads in spans block and who wakes them (--no-off-cpu: off).
  bool off_cpu = true;
  // A traced process may run CPython: the kernel walks its frames. False
  // for -p of a process that maps none (the walk is then verified out of
  // the BPF programs, a faster attach); a child of it that execs python
  // later gets native frames only.
  bool python = true;
  // A traced process may run V8 (Node): its JavaScript frames are walked.
  bool v8 = true;
  InputTrace input;
};

}  // namespace looptrace
