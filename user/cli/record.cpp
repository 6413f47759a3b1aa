#include "cli/record.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "analysis/barrier.h"
#include "analysis/dispatch.h"
#include "analysis/input.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/output_file.h"
#include "elf/resolve.h"
#include "loader/tracer.h"
#include "proc/maps.h"
#include "proc/pid.h"
#include "proc/process.h"
#include "proc/sockets.h"
#include "profiles/key_expr.h"
#include "profiles/profile.h"
#include "profiles/resolve.h"
#include "report/barrier_report.h"
#include "report/input_report.h"
#include "report/json_stream.h"
#include "report/report.h"
#include "symbolize/proc_symbolizer.h"

namespace looptrace {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A closed terminal or a dropped ssh session: stop and report, as for
  // Ctrl-C, rather than die with nothing written.
  sigaction(SIGHUP, &sa, nullptr);
  // A reader that went away (a pipe, a FIFO for --events, the terminal's
  // ssh channel) is a write error to report, not a silent death.
  signal(SIGPIPE, SIG_IGN);
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

int fail(const Status& st) {
  log::error("{}", st.message());
  if (!st.hint().empty()) std::fprintf(stderr, "hint: %s\n", st.hint().c_str());
  return st.exit_code();
}

Result<uint32_t> parse_size(const std::string& s) {
  if (s.empty()) return Status::Error("bad size ''", ErrorKind::kUsage);
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::string unit(end);
  if (errno || end == s.c_str())
    return Status::Error(fmt::format("bad size '{}'", s), ErrorKind::kUsage);
  if (unit == "K" || unit == "k")
    v <<= 10;
  else if (unit == "M" || unit == "m")
    v <<= 20;
  else if (unit == "G" || unit == "g")
    v <<= 30;
  else if (!unit.empty())
    return Status::Error(fmt::format("bad size '{}': use K, M or G", s),
                         ErrorKind::kUsage);
  if (v < 4096 || v > (1ull << 30) || (v & (v - 1)))
    return Status::Error(
        fmt::format("bad ring buffer size '{}': a power of two from 4K to 1G",
                    s),
        ErrorKind::kUsage);
  return static_cast<uint32_t>(v);
}

// A command started stopped: it execs only when released, after the probes
// are attached, so its first dispatch is already traced. An exec failure
// comes back through a close-on-exec pipe: EOF means the exec happened.
class Child {
 public:
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (go_fd_ >= 0) close(go_fd_);
    if (exec_fd_ >= 0) close(exec_fd_);
  }

  // `path` is the resolved executable, `argv` what the command sees.
  Status start(const std::string& path, const std::vector<std::string>& argv) {
    int go[2], ex[2];
    if (pipe2(go, O_CLOEXEC) != 0) return Status::Errno("pipe", errno);
    if (pipe2(ex, O_CLOEXEC) != 0) {
      int err = errno;
      close(go[0]);
      close(go[1]);
      return Status::Errno("pipe", err);
    }
    pid_ = fork();
    if (pid_ < 0) return Status::Errno("fork", errno);
    if (pid_ == 0) run_child(path, argv, go[0], ex[1]);
    close(go[0]);
    close(ex[1]);
    go_fd_ = go[1];
    exec_fd_ = ex[0];
    return Status::Ok();
  }
  void release() {
    if (go_fd_ < 0) return;
    if (write(go_fd_, "g", 1) != 1) log::warn("could not release the command");
    close(go_fd_);
    go_fd_ = -1;
  }
  // After release(): waits until the command has exec'd; 0, or the errno
  // of the failed exec.
  int wait_exec() {
    int err = 0;
    ssize_t n;
    do {
      n = read(exec_fd_, &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(exec_fd_);
    exec_fd_ = -1;
    return n == static_cast<ssize_t>(sizeof err) ? err : 0;
  }
  // True once the child has exited (reaps it).
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      status_ = status;
    }
    return reaped_;
  }
  // Ends the command if it still runs; true if it had ended on its own.
  bool terminate() {
    if (exited()) return true;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 300 && !exited(); ++i) usleep(10'000);
    if (!exited()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      reaped_ = true;
    }
    return false;
  }
  pid_t pid() const { return pid_; }
  int status() const { return status_; }

 private:
  [[noreturn]] static void run_child(const std::string& path,
                                     const std::vector<std::string>& argv,
                                     int go_fd, int exec_fd) {
    char c;
    // EOF without a byte: the tracer gave up; do not run the command.
    if (read(go_fd, &c, 1) != 1) _exit(127);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // An ignored signal stays ignored across exec: the tracer's choices
    // are not the command's.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execv(path.c_str(), args.data());
    int err = errno;
    if (write(exec_fd, &err, sizeof err) < 0) _exit(126);
    _exit(127);
  }

  pid_t pid_ = -1;
  int go_fd_ = -1;
  int exec_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_end(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

// As a shell gives it: the exit status, or 128 + the signal.
int shell_status(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

Status command_error(const std::string& name, int err) {
  Status st =
      Status::Errno(fmt::format("cannot run {}", name), err, ErrorKind::kUsage);
  // The file is there: what is missing is its interpreter or loader.
  if (err == ENOENT && access(name.c_str(), F_OK) == 0)
    st.with_hint(
        "its #! interpreter or its ELF loader (PT_INTERP) does not exist");
  return st;
}

// 0 if `path` can be executed (a regular file with an execute bit), else
// the errno execve would give.
int exec_error(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;
  return access(path.c_str(), X_OK) == 0 ? 0 : errno;
}

// The command's file, found as execvp finds it: checked now, before
// anything is attached, so a typo is one line and exit 2, not an empty
// trace.
Result<std::string> find_command(const std::string& name) {
  if (name.empty())
    return Status::Error("empty command name", ErrorKind::kUsage);
  if (name.find('/') != std::string::npos) {
    if (int err = exec_error(name); err != 0) return command_error(name, err);
    return std::filesystem::absolute(name).string();
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  int denied = 0;  // a match that cannot be executed, as shells report it
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(pos, colon - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    int err = exec_error(cand);
    if (err == 0) return std::filesystem::absolute(cand).string();
    if (err != ENOENT && err != ENOTDIR && !denied) denied = err;
    pos = colon + 1;
  }
  if (denied) return command_error(name, denied);
  return Status::Error(fmt::format("command '{}' not found in PATH", name),
                       ErrorKind::kUsage);
}

struct Setup {
  std::vector<ProbeDef> probes;
  std::vector<ProbeDef> input_probes;  // a profile's input.recv/input.send
  TraceOptions opts;
  uint64_t duration_ns = 0;
  uint64_t barrier_stall_ns = 3'000'000'000;
  uint64_t slow_input_ns = 100'000'000;
};

bool input_wanted(const RecordArgs& a) {
  return a.input || !a.input_fd.empty() || !a.input_peer.empty();
}

// The input probes: which calls, where, for which processes. `target` is
// the traced process (-p or the command), -1 system-wide.
Status build_input(const RecordArgs& a, pid_t target,
                   const ResolveContext& rctx,
                   const std::vector<ProbeDef>& profile_io, InputTrace* in) {
  if (!input_wanted(a) && profile_io.empty()) return Status::Ok();
  // A profile's input roles are uprobes on its own functions.
  in->mode = a.input_mode == "uprobe" || (!a.input && !profile_io.empty())
                 ? InputMode::kUprobe
                 : InputMode::kSyscall;
  auto hook = syscall_hook_from_env();
  if (!hook.ok()) return hook.status();
  in->hook = *hook;
  std::vector<std::string> calls = a.input_calls;
  if (calls.empty()) calls = {"recvfrom", "sendto", "recvmsg", "sendmsg"};
  for (std::string& c : calls) {
    // There is no recv or send system call on x86-64: libc's recv is the
    // recvfrom system call.
    if (in->mode == InputMode::kSyscall) {
      if (c == "recv") c = "recvfrom";
      if (c == "send") c = "sendto";
    }
    if (!input_call_op(c))
      return Status::Error(
          fmt::format("--input-calls: unknown call '{}' (recvfrom, sendto, "
                      "recvmsg, sendmsg, read, write)",
                      c),
          ErrorKind::kUsage);
  }
  std::sort(calls.begin(), calls.end());
  calls.erase(std::unique(calls.begin(), calls.end()), calls.end());
  if (in->mode == InputMode::kSyscall) {
    in->syscalls = calls;
  } else if (!profile_io.empty() && a.input_binary.empty()) {
    for (const ProbeDef& p : profile_io) {
      uint32_t op = (p.role == LT_ROLE_INPUT_SEND ? LT_IO_SEND : 0u) |
                    (p.msghdr ? LT_IO_MSGHDR : 0u);
      in->uprobes.push_back({p.path, p.resolved_symbol, p.file_offset, op});
    }
  } else {
    std::vector<std::string> bins = a.input_binary;
    if (bins.empty()) bins = {"libc.so.6"};
    for (const std::string& bin : bins) {
      auto path = resolve_binary(bin, rctx);
      if (!path.ok()) return path.status();
      size_t found = 0;
      for (const std::string& c : calls) {
        // libc's recv and send are functions of their own.
        std::vector<std::string> syms{c};
        if (c == "recvfrom") syms.push_back("recv");
        if (c == "sendto") syms.push_back("send");
        for (const std::string& sym : syms) {
          auto m = elf::resolve_symbol(*path, sym);
          if (!m.ok()) {
            log::debug("resolve", "{}: no {}", *path, sym);
            continue;
          }
          // Past glibc's single-threaded check: a probe on it would be
          // single-stepped in every process calling these functions.
          in->uprobes.push_back({*path, sym,
                                 uprobe_offset(*path, m->file_offset),
                                 *input_call_op(sym)});
          ++found;
        }
      }
      if (found == 0)
        return Status::Error(
            fmt::format("--input-mode uprobe: {} has none of the socket "
                        "functions ({})",
                        *path, fmt::join(calls, ", ")),
            ErrorKind::kUsage);
    }
  }
  if (target > 0) in->tgids.push_back(static_cast<uint32_t>(target));
  if ((!a.input_fd.empty() || !a.input_peer.empty()) && a.pid <= 0)
    return Status::Error("--input-fd and --input-peer need -p PID",
                         ErrorKind::kUsage);
  for (int fd : a.input_fd) {
    auto ino = proc::fd_socket_inode(static_cast<uint32_t>(a.pid), fd);
    if (!ino.ok()) return ino.status();
    in->raw_inodes.push_back(*ino);
  }
  if (a.pid <= 0) return Status::Ok();
  auto all = proc::unix_sockets();
  if (!all.ok()) {
    if (!a.input_peer.empty()) return all.status();
    log::debug("loader", "no unix socket peers: {}", all.status().message());
    return Status::Ok();
  }
  // A running target's channels may lead to processes we do not trace (an
  // InputDispatcher in system_server): watch their ends from the start.
  for (uint64_t ino : proc::socket_inodes(static_cast<uint32_t>(a.pid))) {
    auto it = all->find(ino);
    if (it != all->end() && it->second.peer != 0)
      in->peer_inodes.push_back(it->second.peer);
  }
  for (const std::string& peer : a.input_peer) {
    if (peer == "auto") {
      auto conns =
          proc::display_connections(static_cast<uint32_t>(a.pid), *all);
      if (!conns.ok()) return conns.status();
      for (const proc::PeerSocket& c : *conns) {
        log::info("input channel: socket {} connected to {}", c.inode, c.peer);
        in->raw_inodes.push_back(c.inode);
      }
      continue;
    }
    auto inos =
        proc::sockets_connected_to(static_cast<uint32_t>(a.pid), peer, *all);
    if (!inos.ok()) return inos.status();
    for (uint64_t i : *inos) in->raw_inodes.push_back(i);
  }
  return Status::Ok();
}

Status build_probes(const RecordArgs& a, std::vector<ProbeDef>* probes) {
  if (!a.profile.empty()) {
    auto prof = load_profile(a.profile);
    if (!prof.ok()) return prof.status();
    for (ProbeDef& p : prof->probes) probes->push_back(std::move(p));
  }
  std::vector<KeyDef> keys;
  for (const std::string& k : a.keys) {
    auto kd = parse_key_def(k);
    if (!kd.ok()) return kd.status();
    keys.push_back(*kd);
  }
  if (keys.size() > LT_MAX_KEYS)
    return Status::Error(fmt::format("at most {} --key options", LT_MAX_KEYS),
                         ErrorKind::kUsage);
  auto add = [&](const std::vector<std::string>& list,
                 uint32_t role) -> Status {
    for (const std::string& s : list) {
      auto p = parse_probe_arg(s, role);
      if (!p.ok()) return p.status();
      p->keys = keys;
      probes->push_back(std::move(*p));
    }
    return Status::Ok();
  };
  LT_RETURN_IF_ERROR(add(a.dispatch, LT_ROLE_DISPATCH));
  LT_RETURN_IF_ERROR(add(a.idle, LT_ROLE_IDLE));
  // Point probes read their arguments by position; the names are what the
  // kernel side and the barrier analyser look for.
  auto arg_key = [](const char* name, int pos, KeyFormat f) -> Result<KeyDef> {
    if (pos < 0 || pos > 5)
      return Status::Error(
          fmt::format("--{}-arg must be 0..5 (got {})", name, pos),
          ErrorKind::kUsage);
    auto spec = parse_key_expr(fmt::format("arg{}", pos));
    if (!spec.ok()) return spec.status();
    return KeyDef{name, fmt::format("arg{}", pos), *spec, f};
  };
  auto add_point =
      [&](const std::vector<std::string>& list, uint32_t role,
          std::vector<std::pair<const char*, int>> args) -> Status {
    for (const std::string& s : list) {
      auto p = parse_probe_arg(s, role);
      if (!p.ok()) return p.status();
      for (auto [name, pos] : args) {
        auto k =
            arg_key(name, pos,
                    std::string(name) == "when" || std::string(name) == "token"
                        ? KeyFormat::kInt
                        : KeyFormat::kPointer);
        if (!k.ok()) return k.status();
        p->keys.push_back(*k);
      }
      probes->push_back(std::move(*p));
    }
    return Status::Ok();
  };
  LT_RETURN_IF_ERROR(add_point(a.barrier_post, LT_ROLE_BARRIER_POST,
                               {{"queue", a.queue_arg}}));
  LT_RETURN_IF_ERROR(
      add_point(a.barrier_remove, LT_ROLE_BARRIER_REMOVE,
                {{"queue", a.queue_arg}, {"token", a.token_arg}}));
  LT_RETURN_IF_ERROR(add_point(
      a.enqueue, LT_ROLE_ENQUEUE,
      {{"queue", a.queue_arg}, {"msg", a.msg_arg}, {"when", a.when_arg}}));
  bool profile_io = false;
  for (const ProbeDef& p : *probes)
    profile_io = profile_io || p.role == LT_ROLE_INPUT_RECV ||
                 p.role == LT_ROLE_INPUT_SEND;
  if (probes->empty() && !input_wanted(a) && !profile_io)
    return Status::Error(
        "nothing to trace: give --profile NAME or --dispatch "
        "BINARY:SYMBOL",
        ErrorKind::kUsage);
  return Status::Ok();
}

Status build_options(const RecordArgs& a, Setup* s) {
  auto slow = parse_duration(a.slow);
  if (!slow.ok()) return slow.status();
  if (*slow == 0)
    return Status::Error("--slow must be above 0", ErrorKind::kUsage);
  s->opts.slow_ns[LT_ROLE_DISPATCH] = *slow;
  s->opts.slow_ns[LT_ROLE_IDLE] = *slow;
  auto sd = parse_duration(a.slow_delivery);
  if (!sd.ok()) return sd.status();
  s->opts.slow_ns[LT_ROLE_DELIVERY] = *sd;
  // Android's Looper: after a slow delivery, quiet until the lag is < 10 ms.
  if (a.delivery_hysteresis) s->opts.delivery_drain_ns = 10'000'000;
  if (!a.slow_idle.empty()) {
    auto si = parse_duration(a.slow_idle);
    if (!si.ok()) return si.status();
    s->opts.slow_ns[LT_ROLE_IDLE] = *si;
  }
  uint64_t min_slow = std::min(s->opts.slow_ns[0], s->opts.slow_ns[1]);
  s->opts.sample_after_ns = min_slow / 2;
  if (!a.sample_after.empty()) {
    auto sa = parse_duration(a.sample_after);
    if (!sa.ok()) return sa.status();
    s->opts.sample_after_ns = *sa;
  }
  if (!a.duration.empty()) {
    auto d = parse_duration(a.duration);
    if (!d.ok()) return d.status();
    if (*d == 0)
      return Status::Error("--duration must be above 0", ErrorKind::kUsage);
    s->duration_ns = *d;
  }
  if (a.sample_freq > 100000)
    return Status::Error("--sample-freq: at most 100000 Hz", ErrorKind::kUsage);
  s->opts.sample_hz = a.sample_freq;
  auto rb = parse_size(a.ringbuf_size);
  if (!rb.ok()) return rb.status();
  s->opts.ringbuf_bytes = *rb;
  if (a.hist_max == 0 || a.hist_max > (1u << 20))
    return Status::Error("--max-threads: 1 to 1048576", ErrorKind::kUsage);
  s->opts.hist_max = a.hist_max;
  s->opts.record_all = a.record_all;
  auto bs = parse_duration(a.barrier_stall);
  if (!bs.ok()) return bs.status();
  s->barrier_stall_ns = *bs;
  auto si = parse_duration(a.slow_input);
  if (!si.ok()) return si.status();
  s->slow_input_ns = *si;
  return Status::Ok();
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

// The output files, opened before tracing starts.
struct Outputs {
  std::unique_ptr<OutputFile> json;
  std::unique_ptr<OutputFile> events;  // live events, JSON lines
};

Status open_outputs(const RecordArgs& a, Outputs* out) {
  // One file for both would be moved aside by the second open.
  std::error_code ec1, ec2;
  if (!a.json_path.empty() && !a.events_path.empty() &&
      (a.json_path == a.events_path ||
       std::filesystem::weakly_canonical(a.json_path, ec1) ==
           std::filesystem::weakly_canonical(a.events_path, ec2)))
    return Status::Error(
        fmt::format("--json and --events both name {}", a.json_path),
        ErrorKind::kUsage);
  if (!a.json_path.empty()) {
    auto f = OutputFile::Create("--json", a.json_path);
    if (!f.ok()) return f.status();
    out->json = std::move(*f);
  }
  if (!a.events_path.empty()) {
    auto f = OutputFile::Create("--events", a.events_path);
    if (!f.ok()) return f.status();
    out->events = std::move(*f);
  }
  return Status::Ok();
}

// What the reports show, computed once at the end.
struct Findings {
  DispatchAnalysis analysis;
  BarrierAnalysis barriers;
  InputAnalysis input;
  bool has_barriers = false;
  bool has_input = false;
};

// Writes and closes `f`; the first write error.
Status write_json_report(OutputFile& f, const Findings& found,
                         const ReportContext& ctx) {
  nlohmann::json j = to_json(found.analysis, ctx);
  if (found.has_barriers) {
    nlohmann::json bj = barriers_to_json(found.barriers, ctx);
    j["barrier_summary"] = std::move(bj["summary"]);
    j["barriers"] = std::move(bj["barriers"]);
  }
  // Input events are written one at a time: a long trace can list a
  // hundred thousand of them.
  std::map<std::string, JsonElements> streamed;
  if (found.has_input) {
    nlohmann::json ij = input_summary_to_json(found.input, found.analysis);
    for (auto& [k, v] : ij.items()) j[k] = std::move(v);
    streamed["input_events"] = [&](const auto& emit) {
      for_each_input_event_json(found.input, found.analysis, ctx, emit);
    };
  }
  write_json_object(f.stream(), j, streamed);
  f.stream() << '\n';
  return f.close();
}

void write_text_reports(std::ostream& os, const Findings& found,
                        const ReportContext& ctx) {
  write_text_report(os, found.analysis, ctx);
  if (found.has_barriers) write_barrier_report(os, found.barriers, ctx);
  if (found.has_input) write_input_report(os, found.input, found.analysis, ctx);
}

constexpr const char* kCommandExited = "command exited";

// "looptrace: stopped: command exited with status 3". `command_status` is
// the wait status of a command that ended on its own, else -1. How a
// command ended is said even with -q when it failed: it is the exit code.
void report_stop(const RecordArgs& a, const std::string& reason,
                 int command_status) {
  if (command_status == -1) {
    if (!a.quiet)
      std::fprintf(stderr, "looptrace: stopped: %s\n", reason.c_str());
    return;
  }
  std::string end = "command " + describe_end(command_status);
  bool show = !a.quiet || shell_status(command_status) != 0;
  if (reason == kCommandExited) {
    if (show) std::fprintf(stderr, "looptrace: stopped: %s\n", end.c_str());
    return;
  }
  // It ended on its own just as looptrace stopped for another reason.
  if (!a.quiet)
    std::fprintf(stderr, "looptrace: stopped: %s\n", reason.c_str());
  if (show) std::fprintf(stderr, "looptrace: %s\n", end.c_str());
}

}  // namespace

int run_record(const RecordArgs& a) {
  int targets = (a.pid > 0) + (!a.command.empty()) + a.system_wide;
  if (targets > 1)
    return fail(
        Status::Error("give only one of -p PID, -- COMMAND and "
                      "--system-wide",
                      ErrorKind::kUsage));
  Setup s;
  if (Status st = build_options(a, &s); !st.ok()) return fail(st);
  if (Status st = build_probes(a, &s.probes); !st.ok()) return fail(st);
  if (a.pid > 0)
    if (Status st = proc::check_pid_target(a.pid); !st.ok()) return fail(st);
  ResolveContext rctx;
  rctx.self_dir = a.self_dir;
  rctx.pid = a.pid;
  std::unique_ptr<Child> child;
  if (!a.command.empty()) {
    auto path = find_command(a.command[0]);
    if (!path.ok()) return fail(path.status());
    rctx.command_path = *path;
  }
  if (Status st = check_bpf_environment(); !st.ok()) return fail(st);
  // Before anything is attached: a bad output path fails now, not after
  // the whole run.
  Outputs out;
  if (Status st = open_outputs(a, &out); !st.ok()) return fail(st);
  if (Status st = resolve_probes(&s.probes, rctx); !st.ok()) return fail(st);
  // Input roles are socket-call probes, not spans: they take no slot in the
  // kernel's probe table.
  {
    std::vector<ProbeDef> spans;
    for (ProbeDef& p : s.probes) {
      bool io = p.role == LT_ROLE_INPUT_RECV || p.role == LT_ROLE_INPUT_SEND;
      (io ? s.input_probes : spans).push_back(std::move(p));
    }
    for (size_t i = 0; i < spans.size(); ++i)
      spans[i].id = static_cast<uint32_t>(i);
    s.probes = std::move(spans);
  }
  if (!a.command.empty()) {
    child = std::make_unique<Child>();
    if (Status st = child->start(rctx.command_path, a.command); !st.ok())
      return fail(st);
    s.opts.pid = child->pid();
  } else {
    s.opts.pid = a.pid > 0 ? a.pid : -1;
  }
  s.opts.probes = s.probes;
  if (Status st =
          build_input(a, s.opts.pid, rctx, s.input_probes, &s.opts.input);
      !st.ok())
    return fail(st);
  const bool has_input = s.opts.input.mode != InputMode::kOff;

  install_libbpf_logger();
  install_stop_handlers();
  auto tracer = Tracer::Create(s.opts);
  if (!tracer.ok()) return fail(tracer.status());

  ProcSymbolizer symbolizer;
  std::set<uint32_t> seen_pids;
  std::set<std::pair<uint32_t, uint32_t>> seen_threads;
  DispatchOptions aopts;
  aopts.slow_ns = s.opts.slow_ns;
  // Samples group by function, not by instruction: a busy loop sampled at
  // different instructions is one place.
  aopts.frame_key = [&symbolizer](uint32_t pid, uint64_t addr) {
    Frame f = symbolizer.symbolize(pid, addr);
    return f.known() ? addr - f.offset : addr;
  };
  DispatchAnalyzer analyzer(std::move(aopts));
  InputOptions iopts;
  iopts.blame_ns = s.slow_input_ns;
  // Blame can name only spans that crossed the ring buffer: slow ones.
  iopts.min_span_ns =
      std::min(s.opts.slow_ns[LT_ROLE_DISPATCH], s.opts.slow_ns[LT_ROLE_IDLE]);
  InputAnalyzer inputs(iopts);
  BarrierOptions bopts;
  bopts.stall_ns = s.barrier_stall_ns;
  BarrierAnalyzer barriers(bopts, &s.probes);
  bool has_barriers = false;
  for (const ProbeDef& p : s.probes)
    has_barriers = has_barriers || p.role == LT_ROLE_BARRIER_POST;
  // The context reports share; live announcements use it while tracing.
  ReportContext ctx;
  ctx.probes = &s.probes;
  ctx.symbolizer = &symbolizer;
  ctx.slow_ns = s.opts.slow_ns;
  ctx.barrier_stall_ns = s.barrier_stall_ns;
  ctx.command_line = child ? join_command(a.command) : "";
  // Records come in runs from one thread: the sets are only consulted when
  // the thread changes (a flood of input records is a million a second).
  std::pair<uint32_t, uint32_t> last_thread{0, 0};
  Tracer::Sink sink = [&](Event&& ev) {
    uint32_t pid = std::visit([](const auto& e) { return e.pid; }, ev);
    uint32_t tid = std::visit([](const auto& e) { return e.tid; }, ev);
    if (last_thread != std::make_pair(pid, tid)) {
      last_thread = {pid, tid};
      seen_threads.emplace(pid, tid);
      // Capture mappings while the process is alive, for symbolization at
      // exit.
      if (seen_pids.insert(pid).second) symbolizer.snapshot(pid);
    }
    // A new program in a process seen before: its mappings, while it runs.
    if (std::holds_alternative<ExecEvent>(ev) && seen_pids.count(pid))
      symbolizer.snapshot(pid);
    analyzer.consume(ev);
    barriers.consume(ev);
    if (has_input) inputs.consume(ev);
  };
  // Stalls are announced as they happen, not only at exit.
  auto announce_stalls = [&](uint64_t now) {
    auto waiting = [&](const Barrier& b) {
      Tracer::Waiting w = (*tracer)->sync_waiting(b.pid, b.queue, now);
      return std::make_pair(w.count, w.oldest_due_ns);
    };
    for (const Barrier& b : barriers.check_stalls(now, waiting)) {
      uint64_t held = now - b.posted_ns;
      std::fprintf(stderr, "%s\n", barrier_stall_line(b, held, ctx).c_str());
      // A failed write is reported at the end (OutputFile::close); the
      // trace goes on.
      if (out.events) {
        out.events->stream()
            << barrier_stall_event(b, held, ctx).dump() << '\n';
        out.events->flush();
      }
    }
  };

  uint64_t t0 = monotonic_ns();
  if (child) {
    child->release();
    if (int err = child->wait_exec(); err != 0)
      return fail(command_error(a.command[0], err));
  }
  if (!a.quiet) {
    std::string what =
        child       ? fmt::format("pid {} ({})", child->pid(), a.command[0])
        : a.pid > 0 ? fmt::format("pid {}", a.pid)
                    : std::string("all processes");
    std::string input;
    if (has_input)
      input = fmt::format(" and input channels ({})", (*tracer)->input_hook());
    std::fprintf(stderr,
                 "looptrace: tracing %zu probe%s%s in %s; Ctrl-C to stop\n",
                 s.probes.size(), s.probes.size() == 1 ? "" : "s",
                 input.c_str(), what.c_str());
  }

  // The target lives while any of its processes does: the command, or -p's
  // process even after its main thread exited, and what they forked.
  auto target_alive = [&] {
    bool command_runs = child && !child->exited();
    if (command_runs) return true;
    for (uint32_t tgid : (*tracer)->traced_processes())
      if (proc::pid_running(tgid)) return true;
    return false;
  };
  Status run_status;
  std::string stop_reason;
  uint64_t last_alive_check = 0, last_stall_check = 0;
  while (true) {
    if (g_stop_signal) {
      stop_reason = g_stop_signal == SIGINT   ? "interrupted"
                    : g_stop_signal == SIGHUP ? "hangup"
                                              : "terminated";
      break;
    }
    if (s.duration_ns && monotonic_ns() - t0 >= s.duration_ns) {
      stop_reason = "duration elapsed";
      break;
    }
    // Whether the target lives: at most every 50 ms, not after every
    // wakeup (at a high event rate that would steal the reader's time).
    uint64_t now = monotonic_ns();
    if (now - last_alive_check >= 50'000'000) {
      last_alive_check = now;
      if ((child || a.pid > 0) && !target_alive()) {
        stop_reason = child ? std::string(kCommandExited)
                            : fmt::format("pid {} exited", a.pid);
        break;
      }
    }
    // Input records do not wake us (abi.h io_wakeup_bytes): poll more
    // often, so that a short-lived process's mappings are read while it
    // is alive.
    const int max_wait_ms = has_input ? 25 : 100;
    int timeout = max_wait_ms;
    if (s.duration_ns) {
      uint64_t left =
          s.duration_ns - std::min(s.duration_ns, monotonic_ns() - t0);
      timeout = static_cast<int>(
          std::min<uint64_t>(max_wait_ms, left / 1'000'000 + 1));
    }
    run_status = (*tracer)->poll(timeout, sink);
    if (has_barriers && monotonic_ns() - last_stall_check >= 20'000'000) {
      last_stall_check = monotonic_ns();
      announce_stalls(last_stall_check);
    }
    if (!run_status.ok()) break;
  }
  uint64_t elapsed = monotonic_ns() - t0;
  Status stop_status = (*tracer)->stop(sink);
  std::vector<ThreadHistogram> hists = (*tracer)->read_histograms();
  Counters counters = (*tracer)->read_counters();
  // A leaked barrier: what is waiting behind it now, at the end.
  for (const Barrier& b : barriers.open_barriers()) {
    Tracer::Waiting w = (*tracer)->sync_waiting(b.pid, b.queue, monotonic_ns());
    barriers.note_waiting(b, w.count, w.oldest_due_ns);
  }
  // A loop stuck in a dispatch right now is the most important finding of
  // all: report spans still in flight on every thread we know of.
  for (const ThreadHistogram& h : hists) seen_threads.emplace(h.pid, h.tid);
  for (uint32_t tgid : (*tracer)->traced_processes())
    for (uint32_t tid : proc::thread_ids(tgid)) seen_threads.emplace(tgid, tid);
  for (SpanEvent& ev : (*tracer)->read_in_flight(seen_threads, monotonic_ns()))
    sink(Event(std::move(ev)));
  tracer->reset();
  const bool command_ended = child && child->terminate();
  report_stop(a, stop_reason, command_ended ? child->status() : -1);

  Findings found;
  found.analysis = analyzer.finish(hists, counters);
  found.barriers = barriers.finish(t0 + elapsed);
  found.has_barriers = has_barriers;
  if (has_barriers) ctx.barriers = &found.barriers;
  found.has_input = has_input;
  if (has_input) found.input = inputs.finish();
  ctx.duration_ns = elapsed;
  ctx.start_ns = t0;

  // Every failure is one line; the reports are written whatever failed.
  std::vector<Status> failures{run_status, stop_status};
  if (out.json) failures.push_back(write_json_report(*out.json, found, ctx));
  if (out.events) failures.push_back(out.events->close());
  if (!a.quiet) {
    if (a.json_path == "-") {
      write_text_reports(std::cerr, found, ctx);
    } else {
      auto text = OutputFile::Create("text report", "-");
      write_text_reports((*text)->stream(), found, ctx);
      failures.push_back((*text)->close());
    }
  }
  int rc = 0;
  for (const Status& st : failures) {
    if (st.ok()) continue;
    int code = fail(st);
    if (rc == 0) rc = code;
  }
  if (rc != 0) return rc;
  // A command that ended on its own gives its status, as perf and shells
  // do; one that looptrace stopped (--duration, a signal to looptrace)
  // does not.
  return command_ended ? shell_status(child->status()) : 0;
}

}  // namespace looptrace
