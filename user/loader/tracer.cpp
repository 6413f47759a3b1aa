#include "loader/tracer.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/log.h"
#include "looptrace.skel.h"
#include "looptrace/wayland_framing.h"
#include "proc/pidns.h"
#include "proc/process.h"
#include "proc/sockets.h"
#include "symbolize/kernel_symbols.h"
#include "trace/decode.h"

namespace looptrace {
namespace {

struct SkelDeleter {
  void operator()(looptrace_bpf* s) const { looptrace_bpf::destroy(s); }
};
struct LinkDeleter {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};
struct RingBufferDeleter {
  void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
};
using LinkPtr = std::unique_ptr<bpf_link, LinkDeleter>;

class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(ScopedFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ScopedFd& operator=(ScopedFd&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int libbpf_print(enum libbpf_print_level level, const char* fmt_str,
                 va_list args) {
  if (!log::debug_enabled("libbpf")) return 0;
  (void)level;
  char* buf = nullptr;
  int n = vasprintf(&buf, fmt_str, args);  // verifier logs can be long
  if (n < 0) return 0;
  std::string line(buf);
  free(buf);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  // Even libbpf's warnings go to debug: it warns while probing features,
  // and every real failure comes back to us as an error we report.
  log::debug("libbpf", "{}", line);
  return n;
}

// With paravirtual steal-time accounting the scheduler excludes time the
// hypervisor stole from a thread's CPU time; so do we. /proc/stat's steal
// column is nonzero only where the kernel accounts it.
bool kernel_accounts_steal() {
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return false;
  unsigned long long v[8] = {};
  int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                      &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  return n == 8 && v[7] > 0;
}

// Whether the running kernel has the kfunc `name` (in its BTF).
bool kernel_has_kfunc(const char* name) {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  bool found = btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) > 0;
  btf__free(vmlinux);
  return found;
}

// A system call's number on this architecture (the one looptrace is built
// for, as the kernel's); nullopt for one it does not have.
std::optional<long> syscall_nr(const std::string& call) {
  if (call == "recvfrom") return SYS_recvfrom;
  if (call == "sendto") return SYS_sendto;
  if (call == "recvmsg") return SYS_recvmsg;
  if (call == "sendmsg") return SYS_sendmsg;
  if (call == "read") return SYS_read;
  if (call == "write") return SYS_write;
  if (call == "readv") return SYS_readv;
  if (call == "writev") return SYS_writev;
  return std::nullopt;
}

constexpr const char* kTracefs = "/sys/kernel/tracing";

// libbpf finds a tracepoint's id in tracefs, at /sys/kernel/tracing or under
// debugfs. A machine that mounted neither (a fresh Debian, a container) gets
// one mounted in a mount namespace of our own: the system's mounts stay as
// they were, and it goes away with us. (perf's tools mount it for good.)
Status ensure_tracefs() {
  if (access("/sys/kernel/tracing/events", F_OK) == 0 ||
      access("/sys/kernel/debug/tracing/events", F_OK) == 0)
    return Status::Ok();
  const std::string hint = fmt::format(
      "mount it (mount -t tracefs nodev {}), or leave "
      "LOOPTRACE_SYSCALL_HOOK unset",
      kTracefs);
  if (unshare(CLONE_NEWNS) != 0)
    return Status::Errno(
               "tracefs is not mounted, and no private mount namespace "
               "could be made to mount it in",
               errno)
        .with_hint(hint);
  // Slave, not private: mounts made later elsewhere still reach us.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0 ||
      mount("tracefs", kTracefs, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            nullptr) != 0)
    return Status::Errno(fmt::format("tracefs is not mounted, and mounting "
                                     "it on {} failed",
                                     kTracefs),
                         errno)
        .with_hint(hint);
  log::info("mounted tracefs on {} in looptrace's own mount namespace",
            kTracefs);
  return Status::Ok();
}

}  // namespace

void install_libbpf_logger() { libbpf_set_print(libbpf_print); }

Status check_bpf_environment() {
  if (geteuid() != 0) {
    // Without root we would need CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (for
    // uprobes via perf_event_open on other processes); keep the rule simple.
    return Status::Error(
        "looptrace needs root to load BPF programs "
        "(run it with sudo)",
        ErrorKind::kPermission);
  }
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    return Status::Error(
               "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing); "
               "looptrace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")
        .with_hint(
            "Debian's and most distributions' kernels have it; a custom "
            "kernel needs CONFIG_DEBUG_INFO_BTF=y (and pahole to build it)");
  }
  // libbpf attaches uprobes through the uprobe PMU (perf_event_open); without
  // it, it would fall back to tracefs's uprobe_events, which leaves probes
  // behind if we are killed.
  if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) != 0) {
    return Status::Error(
               "this kernel has no uprobe PMU "
               "(/sys/bus/event_source/devices/uprobe is missing); looptrace "
               "attaches every probe through it")
        .with_hint("a kernel built with CONFIG_UPROBE_EVENTS=y has it");
  }
  // Lockdown in confidentiality mode forbids reading kernel memory from BPF,
  // which every program here does; integrity mode allows it.
  std::ifstream lockdown("/sys/kernel/security/lockdown");
  std::string modes;
  if (lockdown && std::getline(lockdown, modes) &&
      modes.find("[confidentiality]") != std::string::npos) {
    return Status::Error(
               "kernel lockdown is in confidentiality mode "
               "(/sys/kernel/security/lockdown), which forbids the BPF "
               "tracing looptrace does",
               ErrorKind::kPermission)
        .with_hint(
            "boot with lockdown=integrity or without lockdown=: integrity "
            "mode allows BPF tracing");
  }
  return Status::Ok();
}

struct Tracer::Impl {
  std::unique_ptr<looptrace_bpf, SkelDeleter> skel;
  std::vector<LinkPtr> links;
  std::vector<ScopedFd> perf_fds;
  std::unique_ptr<ring_buffer, RingBufferDeleter> rb;
  const Sink* sink = nullptr;
  RecordHook pycode_hook;
  uint64_t decode_errors = 0;
  int ncpus = 0;
  // The input entry programs loaded: typed loads where the kernel has
  // bpf_rdonly_cast (6.2 and later), bpf_probe_read_kernel before.
  bpf_program* io_tpentry = nullptr;
  bpf_program* io_uentry = nullptr;
  bpf_program* io_sys_enter = nullptr;
  // kSyscall mode: the hook in use.
  SyscallHook hook = SyscallHook::kAuto;
  std::string input_hook;
  // Task storage is keyed by a pidfd: those of the threads read_in_flight
  // reads again and again (a hang check every 50 ms), kept open (an open
  // and a close each time were a tenth of an idle monitor's CPU).
  static constexpr size_t kMaxPidfds = 256;
  std::map<std::pair<uint32_t, uint32_t>, ScopedFd> pidfds;

  // One poll hands over a bounded batch: a ring buffer that never empties
  // (a flood, or looptrace's own calls probed) must still let the run check
  // its stop conditions (-d, SIGINT, SIGTERM) between batches. libbpf
  // 1.1.2 has no ring_buffer__consume_n, but its ringbuf_process_ring
  // stops at a record whose callback returns a negative value, that record
  // consumed, and returns the value: kBatchFull ends a batch.
  static constexpr int kBatchFull = -ECANCELED;
  static constexpr uint32_t kBatchRecords = 65536;
  static constexpr uint64_t kBatchNs = 50'000'000;
  uint32_t batch_records = 0;
  uint64_t batch_end_ns = 0;

  static uint64_t clock_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
           static_cast<uint64_t>(ts.tv_nsec);
  }
  void start_batch() {
    batch_records = 0;
    batch_end_ns = clock_ns() + kBatchNs;
  }
  bool batch_full() {
    ++batch_records;
    if (batch_records >= kBatchRecords) return true;
    return batch_records % 256 == 0 && clock_ns() >= batch_end_ns;
  }

  static int on_record(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    Event ev;
    lt_rec_header hdr{};
    if (size >= sizeof(hdr)) std::memcpy(&hdr, data, sizeof(hdr));
    if (hdr.type == LT_REC_PYCODE) {
      if (self->pycode_hook && !self->pycode_hook(data, size))
        ++self->decode_errors;
    } else if (!decode_record(data, size, &ev))
      ++self->decode_errors;
    else if (self->sink)
      (*self->sink)(std::move(ev));
    return self->batch_full() ? kBatchFull : 0;
  }

  // In every process: the kernel's per-process uprobe filter follows the
  // memory of the task attached to, which a process loses when its main
  // thread exits (its other threads would run on untraced), and it follows
  // neither forks nor an exec from another thread. lt_tgids filters in BPF
  // instead (span_tgid_filter).
  Status attach_probe(const ProbeDef& p) {
    for (bool ret : {false, true}) {
      // Removals and enqueues are complete at entry: no return probe.
      if (ret &&
          (p.role == LT_ROLE_BARRIER_REMOVE || p.role == LT_ROLE_ENQUEUE))
        continue;
      // A call site's exit is a plain uprobe at its return address.
      const bool call_site = p.return_offset != 0;
      LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = p.id,
                  .retprobe = ret && !call_site);
      bpf_program* prog =
          ret ? skel->progs.lt_span_return : skel->progs.lt_span_entry;
      bpf_link* link = bpf_program__attach_uprobe_opts(
          prog, -1, p.path.c_str(),
          ret && call_site ? p.return_offset : p.file_offset, &uo);
      if (!link) {
        int err = errno;
        return Status::Errno(
            fmt::format(
                "attaching {} to {}:{} (offset {:#x})",
                ret ? "uretprobe" : "uprobe", p.path,
                p.resolved_symbol.empty() ? p.symbol : p.resolved_symbol,
                p.file_offset),
            err);
      }
      links.emplace_back(link);
    }
    return Status::Ok();
  }

  // The raw tracepoints' table of traced calls. Before load.
  Status fill_sys_ops(const InputTrace& in, lt_config* cfg) {
    for (const std::string& call : in.syscalls) {
      std::optional<uint32_t> op = input_call_op(call);
      std::optional<long> nr = syscall_nr(call);
      if (!op || !nr || *nr < 0 || *nr >= LT_NR_SYSCALLS)
        return Status::Error(fmt::format("unknown system call {}", call));
      cfg->sys_op[*nr] = static_cast<uint8_t>(*op | LT_IO_TRACED);
    }
    return Status::Ok();
  }

  // Threads that exit or exec (their spans cut short) and processes that
  // fork (children followed, spans in flight handed over); then the target,
  // if any, joins the traced set: its forks are followed from the start.
  Status choose_input_programs(const TraceOptions& opts, SyscallHook how,
                               lt_config& cfg);
  Status attach_all(const TraceOptions& opts, bool input_on);
  Status attach_lifecycle(pid_t target) {
    const std::pair<bpf_program*, const char*> hooks[] = {
        {skel->progs.lt_exit, "sched_process_exit"},
        {skel->progs.lt_exec, "sched_process_exec"},
        {skel->progs.lt_fork, "sched_process_fork"}};
    for (const auto& [prog, name] : hooks) {
      bpf_link* l = bpf_program__attach(prog);
      if (!l) return Status::Errno(fmt::format("attaching to {}", name), errno);
      links.emplace_back(l);
    }
    if (target <= 0) return Status::Ok();
    uint32_t tgid = static_cast<uint32_t>(target), one = 1;
    if (bpf_map_update_elem(bpf_map__fd(skel->maps.lt_tgids), &tgid, &one,
                            BPF_ANY) != 0)
      return Status::Errno("filling lt_tgids", errno);
    return Status::Ok();
  }

  Status attach_input(const InputTrace& in) {
    if (in.mode == InputMode::kSyscall && hook == SyscallHook::kRaw) {
      for (bpf_program* p : {io_sys_enter, skel->progs.lt_io_sys_exit}) {
        bpf_link* l = bpf_program__attach(p);
        if (!l)
          return Status::Errno(fmt::format("attaching to the raw tracepoint {}",
                                           bpf_program__section_name(p)),
                               errno);
        links.emplace_back(l);
      }
    } else if (in.mode == InputMode::kSyscall) {
      LT_RETURN_IF_ERROR(ensure_tracefs());
      for (const std::string& call : in.syscalls) {
        std::optional<uint32_t> op = input_call_op(call);
        if (!op) return Status::Error(fmt::format("unknown call {}", call));
        LIBBPF_OPTS(bpf_tracepoint_opts, to, .bpf_cookie = *op);
        std::string enter = "sys_enter_" + call, exit = "sys_exit_" + call;
        bpf_link* l = bpf_program__attach_tracepoint_opts(
            io_tpentry, "syscalls", enter.c_str(), &to);
        if (!l)
          return Status::Errno(
              fmt::format("attaching to tracepoint syscalls:{}", enter), errno);
        links.emplace_back(l);
        l = bpf_program__attach_tracepoint(skel->progs.lt_io_tpexit, "syscalls",
                                           exit.c_str());
        if (!l)
          return Status::Errno(
              fmt::format("attaching to tracepoint syscalls:{}", exit), errno);
        links.emplace_back(l);
      }
    } else if (in.mode == InputMode::kUprobe) {
      // Every process that maps the library: peers of a traced channel may
      // be anywhere; the kernel filter decides (docs/input.md).
      for (const InputUprobe& u : in.uprobes) {
        for (bool ret : {false, true}) {
          LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = u.op, .retprobe = ret);
          bpf_link* l = bpf_program__attach_uprobe_opts(
              ret ? skel->progs.lt_io_ureturn : io_uentry, -1, u.path.c_str(),
              u.file_offset, &uo);
          if (!l)
            return Status::Errno(
                fmt::format("attaching {} to {}:{} (offset {:#x})",
                            ret ? "uretprobe" : "uprobe", u.path, u.symbol,
                            u.file_offset),
                errno);
          links.emplace_back(l);
        }
      }
    }
    return Status::Ok();
  }

  Status fill_input_maps(const InputTrace& in) {
    int tfd = bpf_map__fd(skel->maps.lt_tgids);
    uint32_t one = 1;
    for (uint32_t tgid : in.tgids)
      if (bpf_map_update_elem(tfd, &tgid, &one, BPF_ANY) != 0)
        return Status::Errno("filling lt_tgids", errno);
    int cfd = bpf_map__fd(skel->maps.lt_chans);
    uint32_t raw = LT_WATCH_RAW;
    for (uint64_t ino : in.raw_inodes)
      if (bpf_map_update_elem(cfd, &ino, &raw, BPF_ANY) != 0)
        return Status::Errno("filling lt_chans", errno);
    uint32_t x11 = LT_WATCH_X11;
    for (uint64_t ino : in.x11_inodes)
      if (bpf_map_update_elem(cfd, &ino, &x11, BPF_ANY) != 0)
        return Status::Errno("filling lt_chans", errno);
    uint32_t x11_server = LT_WATCH_X11_SERVER;
    for (uint64_t ino : in.x11_server_inodes)
      if (bpf_map_update_elem(cfd, &ino, &x11_server, BPF_ANY) != 0)
        return Status::Errno("filling lt_chans", errno);
    uint32_t wl = LT_WATCH_WAYLAND;
    for (uint64_t ino : in.wl_inodes)
      if (bpf_map_update_elem(cfd, &ino, &wl, BPF_ANY) != 0)
        return Status::Errno("filling lt_chans", errno);
    uint32_t wl_server = LT_WATCH_WAYLAND_SERVER;
    for (uint64_t ino : in.wl_server_inodes)
      if (bpf_map_update_elem(cfd, &ino, &wl_server, BPF_ANY) != 0)
        return Status::Errno("filling lt_chans", errno);
    uint32_t peer = LT_WATCH_PEER;
    for (uint64_t ino : in.peer_inodes)
      if (bpf_map_update_elem(cfd, &ino, &peer, BPF_NOEXIST) != 0 &&
          errno != EEXIST)
        return Status::Errno("filling lt_chans", errno);
    skel->bss->lt_nwatch = static_cast<uint32_t>(
        in.raw_inodes.size() + in.x11_inodes.size() +
        in.x11_server_inodes.size() + in.wl_inodes.size() +
        in.wl_server_inodes.size() + in.peer_inodes.size());
    return Status::Ok();
  }

  // An X11 connection's framing starts out of step (a read may begin
  // inside a message) until a read drains the socket. One found empty
  // now, with the probes live, starts in step: its next byte begins a
  // message. Unless a read came first and the kernel's state exists
  // (BPF_NOEXIST): then that one knows better.
  void sync_x11(const InputTrace& in) {
    if (in.x11_inodes.empty() && in.wl_inodes.empty()) return;
    auto all = proc::unix_sockets();
    if (!all.ok()) return;
    sync_wayland(in, *all);
    int fd = bpf_map__fd(skel->maps.lt_x11_states);
    for (uint64_t ino : in.x11_inodes) {
      auto it = all->find(ino);
      if (it == all->end() || it->second.queued != 0) continue;
      lt_x11_state st{};
      if (bpf_map_update_elem(fd, &ino, &st, BPF_NOEXIST) == 0)
        log::debug("loader", "X11 socket {}: empty, framed from its next read",
                   ino);
    }
  }

  // A Wayland connection's state: the input objects its client's memory
  // holds, and its events' framing in step if the socket is empty now. A
  // state the kernel made first (a call came before) gets the objects.
  void sync_wayland(const InputTrace& in,
                    const std::map<uint64_t, proc::UnixSocket>& all) {
    int fd = bpf_map__fd(skel->maps.lt_wl_states);
    for (uint64_t ino : in.wl_inodes) {
      auto it = all.find(ino);
      lt_wl_state st{};
      st.in.lost = it == all.end() || it->second.queued != 0;
      const bool made = bpf_map_lookup_elem(fd, &ino, &st) == 0;
      const proc::WaylandObjects& o = in.wl_objects;
      for (uint32_t id : o.registry) lt_wl_add(st.registry, id);
      for (uint32_t id : o.seat) lt_wl_add(st.seat, id);
      for (uint32_t id : o.keyboard) lt_wl_add(st.keyboard, id);
      for (uint32_t id : o.pointer) lt_wl_add(st.pointer, id);
      for (uint32_t id : o.touch) lt_wl_add(st.touch, id);
      if (bpf_map_update_elem(fd, &ino, &st, made ? BPF_EXIST : BPF_NOEXIST) ==
          0)
        log::debug("loader",
                   "Wayland socket {}: {} keyboard(s), {} pointer(s), {} "
                   "touch(es) known{}",
                   ino, o.keyboard.size(), o.pointer.size(), o.touch.size(),
                   st.in.lost ? "" : "; empty, framed from its next read");
    }
  }

  Status attach_sampler(uint32_t hz) {
    ncpus = libbpf_num_possible_cpus();
    if (ncpus <= 0) return Status::Errno("counting CPUs", -ncpus);
    for (int cpu = 0; cpu < ncpus; ++cpu) {
      perf_event_attr attr{};
      attr.type = PERF_TYPE_SOFTWARE;
      attr.size = sizeof(attr);
      attr.config = PERF_COUNT_SW_CPU_CLOCK;
      attr.freq = 1;
      attr.sample_freq = hz;
      int fd = static_cast<int>(syscall(__NR_perf_event_open, &attr, -1, cpu,
                                        -1, PERF_FLAG_FD_CLOEXEC));
      if (fd < 0) {
        if (errno == ENODEV) continue;  // possible but offline CPU
        return Status::Errno(
            fmt::format("perf_event_open(cpu-clock, cpu {})", cpu), errno);
      }
      perf_fds.emplace_back(fd);
      bpf_link* link =
          bpf_program__attach_perf_event(skel->progs.lt_sample, fd);
      if (!link)
        return Status::Errno(
            fmt::format("attaching the stack sampler on cpu {}", cpu), errno);
      links.emplace_back(link);
    }
    return Status::Ok();
  }
};

Tracer::Tracer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tracer::~Tracer() = default;

Result<std::unique_ptr<Tracer>> Tracer::Create(const TraceOptions& opts) {
  const InputTrace& in = opts.input;
  if (in.mode != InputMode::kSyscall || in.hook != SyscallHook::kAuto)
    return CreateWith(opts, in.hook);
  // The raw tracepoints need only BTF, which looptrace needs anyway; the
  // per-call ones remain where a kernel refuses them. A failure of the first
  // is only logged: the second's error, if it fails too, is the one to show.
  auto raw = CreateWith(opts, SyscallHook::kRaw);
  if (raw.ok()) return raw;
  log::info(
      "the raw syscall tracepoints failed ({}); trying the syscall "
      "tracepoints",
      raw.status().message());
  auto tp = CreateWith(opts, SyscallHook::kTracepoint);
  if (tp.ok()) return tp;
  Status st = tp.status();
  return Status::Error(fmt::format("{} (raw tracepoints: {})", st.message(),
                                   raw.status().message()),
                       st.kind())
      .with_hint(st.hint());
}

namespace {

// What each probe's kernel side reads and how: its keys, the keys the
// kernel itself uses (by role), its input match.
// A frame probe's names for the kernel to match (profiles check their
// count and length; a recording's are not loaded).
void set_frame_names(lt_probe_cfg& pc, const ProbeDef::FrameMatch& m) {
  pc.frame_all = m.names.empty() ? 1 : 0;
  for (const std::string& n : m.names) {
    if (pc.frame_nnames >= LT_FRAME_NAMES || n.size() >= LT_FRAME_NAME_LEN)
      continue;
    std::memcpy(pc.frame_names[pc.frame_nnames++], n.data(), n.size());
  }
  for (size_t i = 0; i < m.by.size() && i < LT_FRAME_BY; ++i)
    if (m.by[i] <= LT_MAX_KEYS) pc.frame_by[i] = m.by[i];
}

Status configure_probes(const TraceOptions& opts, lt_config& cfg) {
  for (const ProbeDef& p : opts.probes) {
    if (p.id >= LT_MAX_PROBES || p.keys.size() > LT_MAX_KEYS)
      return Status::Error(fmt::format("probe {} is malformed", p.symbol));
    lt_probe_cfg& pc = cfg.probes[p.id];
    pc.role = p.role;
    pc.nkeys = static_cast<uint32_t>(p.keys.size());
    for (size_t k = 0; k < p.keys.size(); ++k) {
      pc.keys[k] = p.keys[k].spec;
      // Keys the kernel itself uses, by role (index + 1).
      const KeyRole role = p.keys[k].role;
      uint32_t idx = static_cast<uint32_t>(k + 1);
      if (role == KeyRole::kMessage) pc.msg_key = idx;
      if (role == KeyRole::kMsgTag) pc.tag_key = idx;
      if (role == KeyRole::kWhen) pc.when_key = idx;
      if (role == KeyRole::kQueue) pc.queue_key = idx;
      if (role == KeyRole::kFlags) pc.flags_key = idx;
      if (uint32_t scale = due_scale(role)) {
        pc.due_key = idx;
        pc.due_scale = scale;
      }
      if (p.keys[k].format == KeyFormat::kString && pc.str_key == 0)
        pc.str_key = idx;
      if (p.keys[k].format == KeyFormat::kPyFunc)
        pc.keys[k].op = LT_KEY_OP_PYCODE;
    }
    if (p.input && p.role == LT_ROLE_DISPATCH) {
      pc.input_key = p.input->type_key;
      for (const auto& [v, kind] : p.input->kinds)
        if (v >= 0 && v < 64) pc.input_types |= 1ull << v;
    }
    if (p.frame && (p.role == LT_ROLE_DISPATCH || p.role == LT_ROLE_IDLE))
      set_frame_names(pc, *p.frame);
    // A phase is recorded as every frame is (the kernel's frame test; the
    // analysis tells them apart by the probe).
    if (p.phase && (p.role == LT_ROLE_DISPATCH || p.role == LT_ROLE_IDLE))
      pc.frame_all = 1;
    pc.async_mask = p.async_mask;
    pc.flags = p.outermost ? LT_PROBE_OUTERMOST : 0;
    if (p.return_offset && (p.role == LT_ROLE_DISPATCH ||
                            p.role == LT_ROLE_IDLE || p.role == LT_ROLE_WAIT))
      pc.flags |= LT_PROBE_CALL_SITE;
    if (p.role == LT_ROLE_DISPATCH || p.role == LT_ROLE_IDLE)
      pc.only_key = p.only_if;
    if (p.role != LT_ROLE_DISPATCH && p.role != LT_ROLE_ENQUEUE)
      pc.msg_key = pc.tag_key = 0;
    if (p.role != LT_ROLE_DISPATCH) pc.due_key = 0;
  }
  return Status::Ok();
}

// The ring buffer and the maps sized at load.
Status size_maps(looptrace_bpf* skel, const TraceOptions& opts) {
  int err = bpf_map__set_max_entries(skel->maps.lt_events, opts.ringbuf_bytes);
  if (!err) err = bpf_map__set_max_entries(skel->maps.lt_hists, opts.hist_max);
  if (!err)
    err = bpf_map__set_max_entries(skel->maps.lt_pending, opts.pending_max);
  if (!err)
    err = bpf_map__set_max_entries(skel->maps.lt_tgids, opts.process_max);
  if (err)
    return Status::Errno(
        "sizing BPF maps (--ringbuf-size must be a power "
        "of two multiple of the page size)",
        -err);
  return Status::Ok();
}

// Stack samples and the off-CPU hooks.
void configure_sched(looptrace_bpf* skel, const TraceOptions& opts,
                     lt_config& cfg) {
  if (opts.limits.sample_hz == 0)
    bpf_program__set_autoload(skel->progs.lt_sample, false);
  cfg.stack_copy = std::min<uint32_t>(opts.stack_copy, LT_STACK_COPY);
  cfg.offcpu_on = opts.off_cpu;
  if (opts.off_cpu) {
    // Where the interrupt entry code lies: wakeups from interrupts are told
    // apart by their kernel stack passing through it.
    std::vector<uint64_t> at =
        KernelSymbols::find({"__irqentry_text_start", "__irqentry_text_end"});
    cfg.irqentry_start = at[0];
    cfg.irqentry_end = at[1];
    if (cfg.irqentry_end <= cfg.irqentry_start)
      cfg.irqentry_start = cfg.irqentry_end = 0;
  }
  if (!opts.off_cpu)
    bpf_program__set_autoload(skel->progs.lt_sched_waking, false);
}

// Spans only of the target's processes and of the threads asked for. In a
// container, pids are its PID namespace's: the user's, /proc's and the
// kernel's records alike (lt_config.pidns_ino).
Status configure_filters(const TraceOptions& opts, lt_config& cfg) {
  Result<proc::PidNamespace> ns = proc::own_pid_namespace();
  if (!ns.ok()) return ns.status();
  if (!ns->initial()) cfg.pidns_ino = ns->ino;
  cfg.span_tgid_filter = opts.pid > 0;
  cfg.thread_filter = !opts.tids.empty() || !opts.comms.empty();
  for (size_t i = 0; i < opts.tids.size() && i < LT_MAX_FILTER_TIDS; ++i)
    cfg.filter_tids[i] = opts.tids[i];
  for (size_t i = 0; i < opts.comms.size() && i < LT_MAX_FILTER_COMMS; ++i)
    std::snprintf(cfg.filter_comms[i], LT_COMM_LEN, "%s",
                  opts.comms[i].c_str());
  return Status::Ok();
}

}  // namespace

// Which input programs load: uprobes, the per-call or the raw syscall
// tracepoints, with typed loads where the kernel has them.
Status Tracer::Impl::choose_input_programs(const TraceOptions& opts,
                                           SyscallHook how, lt_config& cfg) {
  const InputTrace& in = opts.input;
  looptrace_bpf* bpf = skel.get();
  cfg.input_on = in.mode != InputMode::kOff;
  cfg.input_tgid_filter = !in.tgids.empty();
  cfg.io_wakeup_bytes = opts.ringbuf_bytes / 16;
  const bool uprobes = in.mode == InputMode::kUprobe,
             syscalls = in.mode == InputMode::kSyscall,
             tps = syscalls && how == SyscallHook::kTracepoint,
             raw = syscalls && how == SyscallHook::kRaw;
  hook = how;
  if (raw) LT_RETURN_IF_ERROR(fill_sys_ops(in, &cfg));
  // LOOPTRACE_NO_TYPED_LOADS=1 takes the older kernels' path anywhere (the
  // tests keep it working).
  const char* no_typed = std::getenv("LOOPTRACE_NO_TYPED_LOADS");
  const bool typed = (uprobes || syscalls) &&
                     !(no_typed && std::string_view(no_typed) == "1") &&
                     kernel_has_kfunc("bpf_rdonly_cast");
  io_uentry = typed ? bpf->progs.lt_io_uentry_typed : bpf->progs.lt_io_uentry;
  io_tpentry =
      typed ? bpf->progs.lt_io_tpentry_typed : bpf->progs.lt_io_tpentry;
  io_sys_enter =
      typed ? bpf->progs.lt_io_sys_enter_typed : bpf->progs.lt_io_sys_enter;
  for (bpf_program* p :
       {bpf->progs.lt_io_uentry, bpf->progs.lt_io_uentry_typed,
        bpf->progs.lt_io_tpentry, bpf->progs.lt_io_tpentry_typed,
        bpf->progs.lt_io_sys_enter, bpf->progs.lt_io_sys_enter_typed})
    bpf_program__set_autoload(p, false);
  bpf_program__set_autoload(io_uentry, uprobes);
  bpf_program__set_autoload(io_tpentry, tps);
  bpf_program__set_autoload(io_sys_enter, raw);
  bpf_program__set_autoload(bpf->progs.lt_io_ureturn, uprobes);
  bpf_program__set_autoload(bpf->progs.lt_io_tpexit, tps);
  bpf_program__set_autoload(bpf->progs.lt_io_sys_exit, raw);
  if (uprobes || syscalls) {
    input_hook = uprobes ? "uprobes"
                 : raw   ? "raw syscall tracepoints"
                         : "syscall tracepoints";
    log::debug(
        "loader", "input entry programs: {}, {}", input_hook,
        typed ? "typed loads (bpf_rdonly_cast)" : "bpf_probe_read_kernel");
  }
  return Status::Ok();
}

// Every hook, in the order the kernel side needs them.
Status Tracer::Impl::attach_all(const TraceOptions& opts, bool input_on) {
  looptrace_bpf* bpf = skel.get();
  const InputTrace& in = opts.input;
  // CPU accounting first, so spans never see a thread without it.
  bpf_link* sw = bpf_program__attach(bpf->progs.lt_sched_switch);
  if (!sw) return Status::Errno("attaching to sched_switch", errno);
  links.emplace_back(sw);
  bpf_link* wk = bpf_program__attach(bpf->progs.lt_sched_wakeup);
  if (!wk) return Status::Errno("attaching to sched_wakeup", errno);
  links.emplace_back(wk);
  if (opts.off_cpu) {
    bpf_link* wg = bpf_program__attach(bpf->progs.lt_sched_waking);
    if (!wg) return Status::Errno("attaching to sched_waking", errno);
    links.emplace_back(wg);
  }
  LT_RETURN_IF_ERROR(attach_lifecycle(opts.pid));
  if (input_on) {
    LT_RETURN_IF_ERROR(fill_input_maps(in));
    LT_RETURN_IF_ERROR(attach_input(in));
  }
  for (const ProbeDef& p : opts.probes) LT_RETURN_IF_ERROR(attach_probe(p));
  if (opts.limits.sample_hz)
    LT_RETURN_IF_ERROR(attach_sampler(opts.limits.sample_hz));

  return Status::Ok();
}

Result<std::unique_ptr<Tracer>> Tracer::CreateWith(const TraceOptions& opts,
                                                   SyscallHook hook) {
  const InputTrace& in = opts.input;
  if (opts.probes.empty() && in.mode == InputMode::kOff)
    return Status::Error("nothing to trace: give --profile or --dispatch",
                         ErrorKind::kUsage);
  if (opts.probes.size() > LT_MAX_PROBES)
    return Status::Error(fmt::format("too many probes ({}; at most {})",
                                     opts.probes.size(), LT_MAX_PROBES),
                         ErrorKind::kUsage);
  auto impl = std::make_unique<Impl>();
  impl->skel.reset(looptrace_bpf::open());
  if (!impl->skel) return Status::Errno("opening the BPF object", errno);
  looptrace_bpf* skel = impl->skel.get();

  lt_config& cfg = const_cast<lt_config&>(skel->rodata->lt_cfg);
  for (int r = 0; r < LT_ROLE_MAX; ++r) cfg.slow_ns[r] = opts.limits.slow_ns[r];
  cfg.sample_after_ns = opts.limits.sample_after_ns;
  cfg.record_all = opts.limits.record_all ? 1 : 0;
  cfg.python_on = opts.python ? 1 : 0;
  cfg.v8_on = opts.v8 ? 1 : 0;
  cfg.nprobes = static_cast<uint32_t>(opts.probes.size());
  cfg.hist_max = opts.hist_max;
  cfg.use_steal = kernel_accounts_steal() ? 1 : 0;
  cfg.delivery_drain_ns = opts.limits.delivery_drain_ns;
  LT_RETURN_IF_ERROR(configure_probes(opts, cfg));
  LT_RETURN_IF_ERROR(size_maps(skel, opts));
  configure_sched(skel, opts, cfg);
  LT_RETURN_IF_ERROR(impl->choose_input_programs(opts, hook, cfg));
  LT_RETURN_IF_ERROR(configure_filters(opts, cfg));
  int err = looptrace_bpf::load(skel);
  if (err)
    return Status::Errno(
        "loading the BPF programs (run with --debug=libbpf "
        "for the verifier log)",
        -err);

  LT_RETURN_IF_ERROR(impl->attach_all(opts, cfg.input_on));
  impl->rb.reset(ring_buffer__new(bpf_map__fd(skel->maps.lt_events),
                                  &Impl::on_record, impl.get(), nullptr));
  if (!impl->rb) return Status::Errno("creating the ring buffer", errno);

  skel->bss->lt_ready = 1;
  if (cfg.input_on) impl->sync_x11(in);
  return std::unique_ptr<Tracer>(new Tracer(std::move(impl)));
}

Status Tracer::poll(int timeout_ms, const Sink& sink) {
  impl_->sink = &sink;
  impl_->start_batch();
  int n = ring_buffer__poll(impl_->rb.get(), timeout_ms);
  // Input records are submitted without a wakeup (lt_config.io_wakeup_bytes)
  // and records behind them do not wake us either: after a timeout, read
  // whatever is there.
  if (n == 0) n = ring_buffer__consume(impl_->rb.get());
  impl_->sink = nullptr;
  // A full batch: the rest waits for the next poll, which returns at once.
  if (n < 0 && n != -EINTR && n != Impl::kBatchFull)
    return Status::Errno("polling the ring buffer", -n);
  return Status::Ok();
}

void Tracer::pause() { impl_->skel->bss->lt_ready = 0; }

Status Tracer::stop(const Sink& sink) {
  pause();
  // The probes stay until the Tracer goes: removing a uprobe waits for an
  // RCU grace period (about 100 ms each on 6.18, one after the other even
  // from several threads), and the report should not wait for them.
  // Paused, nothing more comes: what is there, batch after batch (at most
  // about 10 s of them, should something still write).
  impl_->sink = &sink;
  int n = Impl::kBatchFull;
  for (int batch = 0; batch < 200 && n == Impl::kBatchFull; ++batch) {
    impl_->start_batch();
    n = ring_buffer__consume(impl_->rb.get());
  }
  impl_->sink = nullptr;
  if (n < 0 && n != Impl::kBatchFull)
    return Status::Errno("draining the ring buffer", -n);
  return Status::Ok();
}

std::vector<ThreadHistogram> Tracer::read_histograms() const {
  std::vector<ThreadHistogram> out;
  const looptrace_bpf* skel = impl_->skel.get();
  uint32_t used = skel->bss->lt_hist_next;
  uint32_t max = skel->rodata->lt_cfg.hist_max;
  if (used > max) used = max;
  int fd = bpf_map__fd(skel->maps.lt_hists);
  lt_hist h;
  for (uint32_t i = 0; i < used; ++i) {
    if (bpf_map_lookup_elem(fd, &i, &h) != 0 || h.count == 0) continue;
    out.push_back(thread_histogram(h));
  }
  return out;
}

namespace {

// CPU + run queue + steal + stopped is a span's wall time at most (books
// read while the thread runs on may hold a little past the span's end).
void fit_to_wall(lt_span_rec* r) {
  r->runq_ns = std::min(r->runq_ns, r->duration_ns - r->stopped_ns);
  r->steal_ns =
      std::min(r->steal_ns, r->duration_ns - r->stopped_ns - r->runq_ns);
  r->cpu_ns = std::min(
      r->cpu_ns, r->duration_ns - r->stopped_ns - r->runq_ns - r->steal_ns);
}

}  // namespace

uint32_t Tracer::pycode_keys(uint32_t probe_id) const {
  const auto& cfg = impl_->skel->rodata->lt_cfg;
  if (probe_id >= LT_MAX_PROBES || probe_id >= cfg.nprobes) return 0;
  uint32_t mask = 0;
  for (uint32_t k = 0; k < cfg.probes[probe_id].nkeys && k < LT_MAX_KEYS; ++k)
    if (cfg.probes[probe_id].keys[k].op == LT_KEY_OP_PYCODE) mask |= 1u << k;
  return mask;
}

std::vector<SpanEvent> Tracer::read_in_flight(
    const std::set<std::pair<uint32_t, uint32_t>>& threads, uint64_t now_ns,
    uint64_t min_age_ns) const {
  std::vector<SpanEvent> out;
  const looptrace_bpf* skel = impl_->skel.get();
  int fd = bpf_map__fd(skel->maps.lt_threads);
  auto& pidfds = impl_->pidfds;
  std::erase_if(pidfds,
                [&](const auto& kv) { return !threads.count(kv.first); });
  for (const auto& key : threads) {
    const auto [pid, tid] = key;
    auto cached = pidfds.find(key);
    std::optional<ScopedFd> once;
    int pidfd = -1;
    if (cached != pidfds.end()) {
      pidfd = cached->second.get();
    } else {
      // PIDFD_THREAD (O_EXCL) names a thread.
      ScopedFd opened(static_cast<int>(syscall(SYS_pidfd_open, tid, O_EXCL)));
      if (opened.get() < 0) continue;  // exited
      pidfd = opened.get();
      if (pidfds.size() < Impl::kMaxPidfds)
        cached = pidfds.emplace(key, std::move(opened)).first;
      else
        once.emplace(std::move(opened));
    }
    lt_thread st;
    int err = bpf_map_lookup_elem(fd, &pidfd, &st);
    // Exited (its storage went with it; the tid may come back as another).
    if (err != 0 && cached != pidfds.end()) pidfds.erase(cached);
    if (err != 0 || st.depth == 0) continue;
    uint32_t depth = std::min<uint32_t>(st.depth, LT_MAX_DEPTH);
    // Only the spans old enough are wanted (a hang check): nothing else
    // of the thread is read.
    bool old_enough = false;
    for (uint32_t d = 0; d < depth && !old_enough; ++d)
      old_enough = now_ns >= st.stack[d].start_ns &&
                   now_ns - st.stack[d].start_ns >= min_age_ns;
    if (!old_enough) continue;
    // The thread runs on while this is read: a run that began before now
    // and ended after it was booked whole; its part past now is not the
    // span's (what the books got past now otherwise is trimmed below).
    uint64_t cpu = st.cpu_acc;
    if (st.off_since == 0 && now_ns > st.oncpu_since)
      cpu += now_ns - st.oncpu_since;
    else if (st.off_since > now_ns && st.off_since > st.oncpu_since)
      cpu -= std::min<uint64_t>(
          cpu, st.off_since - std::max<uint64_t>(now_ns, st.oncpu_since));
    const uint64_t off =
        st.off_since && now_ns > st.off_since ? now_ns - st.off_since : 0;
    uint64_t runq = st.runq_acc + (st.off_runnable ? off : 0);
    uint64_t stop =
        st.stop_acc + (!st.off_runnable && st.off_stopped ? off : 0);
    std::string comm = proc::comm(pid, tid);
    for (uint32_t d = 0; d < depth; ++d) {
      const lt_frame& f = st.stack[d];
      if (f.probe_id >= LT_MAX_PROBES || now_ns < f.start_ns ||
          now_ns - f.start_ns < min_age_ns)
        continue;
      // Only spans can be in flight; a barrier post is a point.
      if (skel->rodata->lt_cfg.probes[f.probe_id].role >= LT_ROLE_MAX) continue;
      // The record the kernel would send if the span ended now.
      lt_span_rec r{};
      r.hdr = {LT_REC_SPAN, sizeof(r), now_ns, pid, tid};
      comm.copy(r.comm, sizeof(r.comm));
      r.span_id = f.span_id;
      r.start_ns = f.start_ns;
      r.duration_ns = now_ns - f.start_ns;
      r.cpu_ns = cpu > f.cpu_at_start ? cpu - f.cpu_at_start : 0;
      r.runq_ns = runq > f.runq_at_start ? runq - f.runq_at_start : 0;
      r.steal_ns =
          st.steal_acc > f.steal_at_start ? st.steal_acc - f.steal_at_start : 0;
      r.stopped_ns = std::min<uint64_t>(
          stop > f.stop_at_start ? stop - f.stop_at_start : 0, r.duration_ns);
      fit_to_wall(&r);
      r.probe_id = f.probe_id;
      r.role = skel->rodata->lt_cfg.probes[f.probe_id].role;
      r.depth = d;
      r.key_fault_mask = f.key_fault_mask;
      std::copy(std::begin(f.keys), std::end(f.keys), r.keys);
      SpanEvent ev = span_event(r);
      if (st.sched_unseen != f.unseen_at_start) {
        // The books missed a switch: the kernel's counters of the thread,
        // now (schedstat: CPU ns, run-queue wait ns).
        unsigned long long kcpu = 0, kdelay = 0;
        std::ifstream in(fmt::format("/proc/{}/task/{}/schedstat", pid, tid));
        if (in >> kcpu >> kdelay) {
          ev.cpu_ns = std::min<uint64_t>(
              kcpu > f.kcpu_at_start ? kcpu - f.kcpu_at_start : 0,
              ev.duration_ns - ev.stopped_ns);
          ev.runq_ns = std::min<uint64_t>(
              kdelay > f.kdelay_at_start ? kdelay - f.kdelay_at_start : 0,
              ev.duration_ns -
                  std::min(ev.duration_ns, ev.cpu_ns + ev.stopped_ns));
          // The books' steal (the kernel's CPU time leaves it out).
          ev.steal_ns = std::min<uint64_t>(
              ev.steal_ns,
              ev.duration_ns - std::min(ev.duration_ns, ev.cpu_ns + ev.runq_ns +
                                                            ev.stopped_ns));
          ev.flags |= LT_SPAN_SPLIT_KERNEL;
        }
      }
      ev.in_flight = true;
      out.push_back(std::move(ev));
    }
  }
  return out;
}

Tracer::Waiting Tracer::sync_waiting(uint32_t pid, uint64_t queue,
                                     uint64_t now_ns) const {
  Waiting w;
  const looptrace_bpf* skel = impl_->skel.get();
  bool has_enqueue = false;
  for (uint32_t i = 0; i < skel->rodata->lt_cfg.nprobes && i < LT_MAX_PROBES;
       ++i)
    has_enqueue =
        has_enqueue || skel->rodata->lt_cfg.probes[i].role == LT_ROLE_ENQUEUE;
  if (!has_enqueue) return w;
  w.count = 0;
  int fd = bpf_map__fd(skel->maps.lt_pending);
  lt_pending_key key{}, next{};
  lt_pending_val val{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (key.pid != pid || bpf_map_lookup_elem(fd, &key, &val) != 0) continue;
    if (val.queue != queue || val.async || val.when_ns > now_ns) continue;
    ++w.count;
    if (w.oldest_due_ns == 0 || val.when_ns < w.oldest_due_ns)
      w.oldest_due_ns = val.when_ns;
  }
  return w;
}

const std::string& Tracer::input_hook() const { return impl_->input_hook; }

std::vector<uint32_t> Tracer::traced_processes() const {
  bpf_map* map = impl_->skel->maps.lt_tgids;
  int fd = bpf_map__fd(map);
  // The kernel deletes entries meanwhile; a walk whose key was deleted
  // starts over, so it is bounded and its keys deduplicated.
  std::set<uint32_t> seen;
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  for (uint32_t n = 0; n < 2 * bpf_map__max_entries(map) &&
                       bpf_map_get_next_key(fd, prev, &next) == 0;
       ++n) {
    seen.insert(next);
    key = next;
    prev = &key;
  }
  return {seen.begin(), seen.end()};
}

Status Tracer::set_python(uint32_t pid, const lt_py_proc* py) {
  int fd = bpf_map__fd(impl_->skel->maps.lt_py_procs);
  if (py == nullptr) {
    bpf_map_delete_elem(fd, &pid);
    return Status::Ok();
  }
  if (bpf_map_update_elem(fd, &pid, py, BPF_ANY) != 0)
    return Status::Errno("filling lt_py_procs", errno);
  // After the entry: a thread that cached its process's absence looks
  // again (one that just exec'd into python3, say).
  __atomic_fetch_add(&impl_->skel->bss->lt_py_gen, 1u, __ATOMIC_RELEASE);
  return Status::Ok();
}

Status Tracer::set_v8(uint32_t pid, const lt_v8_proc* v8) {
  int fd = bpf_map__fd(impl_->skel->maps.lt_v8_procs);
  if (v8 == nullptr) {
    bpf_map_delete_elem(fd, &pid);
    return Status::Ok();
  }
  if (bpf_map_update_elem(fd, &pid, v8, BPF_ANY) != 0)
    return Status::Errno("filling lt_v8_procs", errno);
  return Status::Ok();
}

void Tracer::set_pycode_hook(RecordHook hook) {
  impl_->pycode_hook = std::move(hook);
}

Counters Tracer::read_counters() const {
  Counters c;
  int fd = bpf_map__fd(impl_->skel->maps.lt_counters);
  int ncpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> vals(ncpus > 0 ? ncpus : 1);
  for (uint32_t k = 0; k < LT_CNT_MAX; ++k) {
    if (bpf_map_lookup_elem(fd, &k, vals.data()) != 0) continue;
    for (uint64_t v : vals) c.bpf[k] += v;
  }
  c.decode_errors = impl_->decode_errors;
  bpf_program* prog;
  bpf_object__for_each_program(prog, impl_->skel->obj) {
    int pfd = bpf_program__fd(prog);
    if (pfd < 0) continue;  // not loaded
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(pfd, &info, &len) == 0)
      c.hook_misses += info.recursion_misses;
  }
  return c;
}

}  // namespace looptrace
