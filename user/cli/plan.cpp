#include "cli/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "base/duration.h"
#include "base/log.h"
#include "elf/resolve.h"
#include "proc/gsources.h"
#include "proc/sockets.h"
#include "profiles/key_expr.h"
#include "profiles/profile.h"

namespace looptrace {
namespace {

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

std::string join_builtin_names() {
  std::string out;
  for (const std::string& n : builtin_profile_names())
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

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
                      "recvmsg, sendmsg, read, write, readv, writev)",
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
  // An X11 connection, and the server's end of it: the server's writes
  // there are traced although it is not.
  auto add_x11 = [&](uint64_t ino) {
    in->x11_inodes.push_back(ino);
    auto it = all->find(ino);
    if (it != all->end() && it->second.peer != 0)
      in->x11_server_inodes.push_back(it->second.peer);
  };
  // A Wayland connection, the compositor's end, and (once) the input
  // objects the client made before tracing began, from its memory.
  bool wl_scanned = false;
  auto add_wayland = [&](uint64_t ino) {
    in->wl_inodes.push_back(ino);
    auto it = all->find(ino);
    if (it != all->end() && it->second.peer != 0)
      in->wl_server_inodes.push_back(it->second.peer);
    if (wl_scanned) return;
    wl_scanned = true;
    auto objs = proc::find_wayland_objects(static_cast<uint32_t>(a.pid));
    if (!objs.ok()) {
      log::info(
          "input: pid {}: its Wayland input objects are not known ({}): only "
          "those it makes from now on are decoded",
          a.pid, objs.status().message());
      return;
    }
    in->wl_objects = *objs;
    log::debug("loader",
               "pid {}: Wayland keyboards {}, pointers {}, touches {} (from "
               "its memory)",
               a.pid, objs->keyboard.size(), objs->pointer.size(),
               objs->touch.size());
  };
  auto add = [&](uint64_t ino, const std::string& peer) {
    if (proc::is_x11_server_name(peer))
      add_x11(ino);
    else if (proc::is_wayland_server_name(peer))
      add_wayland(ino);
    else
      in->raw_inodes.push_back(ino);
  };
  for (const std::string& peer : a.input_peer) {
    if (peer == "auto") {
      auto conns =
          proc::display_connections(static_cast<uint32_t>(a.pid), *all);
      if (!conns.ok()) return conns.status();
      for (const proc::PeerSocket& c : *conns) {
        log::info(
            "input channel: socket {} connected to {} ({}, decoded "
            "message by message)",
            c.inode, c.peer,
            proc::is_x11_server_name(c.peer) ? "X11" : "Wayland");
        add(c.inode, c.peer);
      }
      continue;
    }
    auto inos =
        proc::sockets_connected_to(static_cast<uint32_t>(a.pid), peer, *all);
    if (!inos.ok()) return inos.status();
    for (uint64_t i : *inos) add(i, peer);
  }
  return Status::Ok();
}

// Runtimes a built-in profile knows, by a library the process maps.
struct Detector {
  const char* profile;
  const char* library;  // as find_mapped_file matches it
};
// In order: GTK 3 and Qt run on GLib's loop (Qt by default), and their
// events say more than GLib's sources do.
constexpr Detector kDetectors[] = {{"node", "node"},
                                   {"gtk3", "libgtk-3.so.0"},
                                   {"qt6", "libQt6Core.so.6"},
                                   {"qt5", "libQt5Core.so.5"},
                                   {"glib", "libglib-2.0.so"}};

// With -p PID and no probe given: the profile of the runtime its libraries
// show, and a line saying so; "" when none is known.
Result<std::string> detect_profile(uint32_t pid, std::string* note) {
  auto maps = proc::read_maps(pid);
  if (!maps.ok()) return maps.status();
  for (const Detector& d : kDetectors) {
    const proc::MapEntry* m = proc::find_mapped_file(*maps, d.library);
    if (m == nullptr) continue;
    *note = fmt::format("looptrace: profile {}: pid {} maps {}", d.profile, pid,
                        m->path);
    return std::string(d.profile);
  }
  return std::string();
}

// With -- COMMAND and no probe given: what the command will run is not
// mapped yet (a wrapper such as xvfb-run, an interpreter that loads GLib
// later), so every built-in runtime profile whose code is on this machine
// is probed, each probe once; node only when the command line names it
// (its 110 MB binary takes 0.5 s to read). The probes fire only in the
// command and what it starts (the kernel filters by process).
Status command_profiles(const RecordArgs& a, std::vector<ProbeDef>* probes,
                        std::string* note) {
  bool names_node = false;
  for (const std::string& arg : a.command) {
    std::string base = arg.substr(arg.rfind('/') + 1);
    names_node = names_node || base == "node" || base == "nodejs";
  }
  std::vector<std::string> chosen;
  std::map<std::string, bool> installed;  // by binary: each looked up once
  for (const Detector& d : kDetectors) {
    if (std::string_view(d.profile) == "node" && !names_node) continue;
    auto prof = load_profile(d.profile);
    if (!prof.ok()) return prof.status();
    bool here = true;
    for (const ProbeDef& p : prof->probes) {
      auto [it, added] = installed.try_emplace(p.binary, false);
      if (added) it->second = resolve_binary(p.binary, ResolveContext{}).ok();
      here = here && it->second;
    }
    if (!here) continue;
    chosen.push_back(d.profile);
    for (ProbeDef& p : prof->probes) {
      bool dup =
          std::any_of(probes->begin(), probes->end(), [&](const ProbeDef& q) {
            return q.binary == p.binary && q.symbol == p.symbol;
          });
      if (!dup) probes->push_back(std::move(p));
    }
  }
  if (chosen.empty())
    return Status::Error(
        fmt::format("nothing to trace: no runtime a built-in profile knows "
                    "({}) is installed here; give --profile FILE or "
                    "--dispatch BINARY:SYMBOL",
                    join_builtin_names()),
        ErrorKind::kUsage);
  *note = fmt::format(
      "looptrace: no probe given: the runtimes installed here, in what {} "
      "starts: {}",
      a.command[0], fmt::join(chosen, ", "));
  return Status::Ok();
}

bool any_probe_option(const RecordArgs& a) {
  return !a.profile.empty() || !a.dispatch.empty() || !a.idle.empty() ||
         !a.barrier_post.empty() || !a.barrier_remove.empty() ||
         !a.enqueue.empty() || input_wanted(a);
}

Status build_probes(const RecordArgs& a, std::vector<ProbeDef>* probes,
                    std::string* note) {
  std::string profile = a.profile;
  if (!any_probe_option(a) && !a.command.empty())
    LT_RETURN_IF_ERROR(command_profiles(a, probes, note));
  // An input option alone still picks the process's runtime: its input is
  // consumed by the loop the profile traces.
  RecordArgs spans_only = a;
  spans_only.input = false;
  spans_only.input_fd.clear();
  spans_only.input_peer.clear();
  if (!any_probe_option(spans_only) && a.pid > 0) {
    auto found = detect_profile(static_cast<uint32_t>(a.pid), note);
    if (!found.ok()) return found.status();
    if (found->empty() && !input_wanted(a))
      return Status::Error(
          fmt::format("nothing to trace: pid {} maps no runtime a built-in "
                      "profile knows ({}); give --profile NAME or --dispatch "
                      "BINARY:SYMBOL",
                      a.pid, join_builtin_names()),
          ErrorKind::kUsage);
    profile = *found;
  }
  if (!profile.empty()) {
    auto prof = load_profile(profile);
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
  if (std::count_if(keys.begin(), keys.end(), [](const KeyDef& k) {
        return k.format == KeyFormat::kString;
      }) > 1)
    return Status::Error("--key: at most one of format str", ErrorKind::kUsage);
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
    return KeyDef{name, fmt::format("arg{}", pos), *spec, f, {}};
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
        fmt::format("nothing to trace: give --profile NAME ({}) or --dispatch "
                    "BINARY:SYMBOL; with -p PID the profile is found from the "
                    "process's libraries",
                    join_builtin_names()),
        ErrorKind::kUsage);
  return Status::Ok();
}

Status build_options(const RecordArgs& a, Plan* s) {
  auto slow = parse_duration(a.slow);
  if (!slow.ok()) return slow.status();
  if (*slow == 0)
    return Status::Error("--slow must be above 0", ErrorKind::kUsage);
  s->opts.limits.slow_ns[LT_ROLE_DISPATCH] = *slow;
  s->opts.limits.slow_ns[LT_ROLE_IDLE] = *slow;
  auto sd = parse_duration(a.slow_delivery);
  if (!sd.ok()) return sd.status();
  s->opts.limits.slow_ns[LT_ROLE_DELIVERY] = *sd;
  // Android's Looper: after a slow delivery, quiet until the lag is < 10 ms.
  if (a.delivery_hysteresis) s->opts.limits.delivery_drain_ns = 10'000'000;
  if (!a.slow_idle.empty()) {
    auto si = parse_duration(a.slow_idle);
    if (!si.ok()) return si.status();
    s->opts.limits.slow_ns[LT_ROLE_IDLE] = *si;
  }
  uint64_t min_slow =
      std::min(s->opts.limits.slow_ns[0], s->opts.limits.slow_ns[1]);
  s->opts.limits.sample_after_ns = min_slow / 2;
  if (!a.sample_after.empty()) {
    auto sa = parse_duration(a.sample_after);
    if (!sa.ok()) return sa.status();
    s->opts.limits.sample_after_ns = *sa;
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
  s->opts.limits.sample_hz = a.sample_freq;
  if (a.call_graph == "fp") {
    s->opts.stack_copy = 0;
  } else if (a.call_graph.rfind("dwarf", 0) == 0) {
    s->opts.stack_copy = LT_STACK_COPY;
    // The kernel copies 8, 4, 2 or 1 KiB: the most that is mapped.
    const std::string rest = a.call_graph.substr(5);
    if (!rest.empty()) {
      uint32_t n = 0;
      for (uint32_t v : {1024u, 2048u, 4096u, 8192u})
        if (rest == "," + std::to_string(v) ||
            rest == "," + std::to_string(v / 1024) + "K")
          n = v;
      if (n == 0)
        return Status::Error(
            fmt::format("--call-graph {}: dwarf,BYTES with BYTES 1024, 2048, "
                        "4096 or 8192 (1K..8K)",
                        a.call_graph),
            ErrorKind::kUsage);
      s->opts.stack_copy = n;
    }
  } else {
    return Status::Error(
        fmt::format("--call-graph {}: fp or dwarf[,BYTES]", a.call_graph),
        ErrorKind::kUsage);
  }
  s->opts.off_cpu = !a.no_off_cpu;
  auto rb = parse_size(a.ringbuf_size);
  if (!rb.ok()) return rb.status();
  s->opts.ringbuf_bytes = *rb;
  if (a.hist_max == 0 || a.hist_max > (1u << 20))
    return Status::Error("--max-threads: 1 to 1048576", ErrorKind::kUsage);
  s->opts.hist_max = a.hist_max;
  if (a.tids.size() > LT_MAX_FILTER_TIDS)
    return Status::Error(
        fmt::format("--tid: at most {} threads", LT_MAX_FILTER_TIDS),
        ErrorKind::kUsage);
  for (uint32_t t : a.tids)
    if (t == 0 || t > (1u << 22))
      return Status::Error(fmt::format("--tid {}: not a thread id", t),
                           ErrorKind::kUsage);
  if (a.comms.size() > LT_MAX_FILTER_COMMS)
    return Status::Error(
        fmt::format("--comm: at most {} names", LT_MAX_FILTER_COMMS),
        ErrorKind::kUsage);
  for (const std::string& c : a.comms)
    if (c.empty() || c.size() >= LT_COMM_LEN ||
        c.find('\0') != std::string::npos)
      return Status::Error(
          fmt::format("--comm '{}': a thread name is 1 to {} bytes (the "
                      "kernel's comm)",
                      log::printable(c, 40), LT_COMM_LEN - 1),
          ErrorKind::kUsage);
  s->opts.tids = a.tids;
  s->opts.comms = a.comms;
  if (a.pending_max == 0 || a.pending_max > (1u << 24))
    return Status::Error("--max-pending: 1 to 16777216", ErrorKind::kUsage);
  s->opts.pending_max = a.pending_max;
  if (a.process_max == 0 || a.process_max > (1u << 22))
    return Status::Error("--max-processes: 1 to 4194304", ErrorKind::kUsage);
  s->opts.process_max = a.process_max;
  s->opts.limits.record_all = a.record_all;
  auto hang = parse_duration(a.hang);
  if (!hang.ok()) return hang.status();
  s->hang_ns = *hang;
  auto bs = parse_duration(a.barrier_stall);
  if (!bs.ok()) return bs.status();
  s->opts.limits.barrier_stall_ns = *bs;
  auto si = parse_duration(a.slow_input);
  if (!si.ok()) return si.status();
  s->opts.limits.slow_input_ns = *si;
  return Status::Ok();
}

}  // namespace

Result<std::vector<Budget>> parse_budgets(
    const std::vector<std::string>& exprs) {
  std::vector<Budget> out;
  for (const std::string& e : exprs) {
    auto b = parse_budget(e);
    if (!b.ok()) return b.status();
    out.push_back(std::move(*b));
  }
  return out;
}

Status parse_plan(const RecordArgs& a, Plan* p) {
  LT_RETURN_IF_ERROR(build_options(a, p));
  auto budgets = parse_budgets(a.fail_if);
  if (!budgets.ok()) return budgets.status();
  p->budgets = std::move(*budgets);
  return build_probes(a, &p->probes, &p->profile_note);
}

namespace {

// The glib profile's GIOWatch dispatch probe, the model of a custom
// source's probe (the same keys); null when no such probe is resolved.
const ProbeDef* custom_gsource_model(const std::vector<ProbeDef>& probes) {
  auto model =
      std::find_if(probes.begin(), probes.end(), [](const ProbeDef& d) {
        return d.symbol == "*(g_io_watch_funcs+16)" && !d.path.empty();
      });
  return model == probes.end() ? nullptr : &*model;
}

// GLib sources of a program's own kinds (-p with the glib profile): a
// probe at each one's dispatch function, found in the process's memory
// (proc/gsources.h), keyed as GLib's own kinds are.
void add_custom_gsources(pid_t pid, std::vector<ProbeDef>* probes) {
  const ProbeDef* model = custom_gsource_model(*probes);
  if (!model) return;
  const ProbeDef base = *model;
  auto found = proc::find_custom_gsources(static_cast<uint32_t>(pid));
  if (!found.ok()) {
    log::info("glib: pid {}: its own source kinds are not known ({})", pid,
              found.status().message());
    return;
  }
  for (const proc::CustomGSource& c : *found) {
    // The file as the process sees it (its mount namespace), as the
    // profile's other probes are resolved.
    const std::string path = fmt::format("/proc/{}/root{}", pid, c.path);
    const bool have =
        std::any_of(probes->begin(), probes->end(), [&](const ProbeDef& d) {
          return (d.path == path || d.path == c.path) &&
                 d.file_offset == c.file_offset;
        });
    if (have) continue;
    if (probes->size() >= LT_MAX_PROBES) {
      log::info(
          "glib: pid {}: more source kinds than the {} probes the "
          "kernel's table holds: {} not traced",
          pid, LT_MAX_PROBES, c.path);
      continue;
    }
    ProbeDef d = base;
    d.binary = c.path;
    d.symbol = fmt::format("{:#x}", c.file_offset);
    d.label = "GLib custom";
    d.path = path;
    d.file_offset = c.file_offset;
    d.resolved_symbol =
        fmt::format("dispatch of the GSourceFuncs at {:#x}", c.funcs);
    d.gate.reset();
    d.version.clear();
    probes->push_back(std::move(d));
  }
}

}  // namespace

Status resolve_plan(const ResolveContext& rctx, Plan* p) {
  LT_RETURN_IF_ERROR(resolve_probes(&p->probes, rctx));
  if (rctx.pid > 0)
    add_custom_gsources(rctx.pid, &p->probes);
  else if (custom_gsource_model(p->probes))
    p->gsource_note =
        "looptrace: glib: sources of a program's own kinds (GDK's event "
        "source, GLib.Source subclasses) are found in a running process "
        "(-p) only: not traced";
  // Input roles are socket-call probes, not spans: they take no slot in the
  // kernel's probe table.
  std::vector<ProbeDef> spans;
  for (ProbeDef& probe : p->probes) {
    bool io =
        probe.role == LT_ROLE_INPUT_RECV || probe.role == LT_ROLE_INPUT_SEND;
    (io ? p->input_probes : spans).push_back(std::move(probe));
  }
  for (size_t i = 0; i < spans.size(); ++i)
    spans[i].id = static_cast<uint32_t>(i);
  p->probes = std::move(spans);
  p->opts.probes = p->probes;
  return Status::Ok();
}

Status plan_input(const RecordArgs& a, const ResolveContext& rctx, pid_t target,
                  Plan* p) {
  p->opts.pid = target;
  // A profile whose dispatch handles display input (gtk3) brings the
  // process's X11 and Wayland connections along, with no input option
  // given.
  const bool display = std::any_of(p->probes.begin(), p->probes.end(),
                                   [](const ProbeDef& d) { return d.input; });
  if (display && !input_wanted(a) && a.pid > 0) {
    auto all = proc::unix_sockets();
    auto conns =
        all.ok() ? proc::display_connections(static_cast<uint32_t>(a.pid), *all)
                 : Result<std::vector<proc::PeerSocket>>(all.status());
    if (!conns.ok() || conns->empty()) {
      log::info(
          "input: pid {} has no X11 or Wayland connection: input not "
          "traced",
          a.pid);
    } else {
      for (const proc::PeerSocket& c : *conns)
        p->input_note += fmt::format(
            "{}looptrace:   input {}: socket {} connected to {}, decoded "
            "message by message",
            p->input_note.empty() ? "" : "\n",
            proc::is_x11_server_name(c.peer) ? "X11" : "Wayland", c.inode,
            c.peer);
      RecordArgs with = a;
      with.input = true;
      with.input_peer = {"auto"};
      // libxcb reads with recvmsg, and the rest of a long reply with recv
      // (recvfrom); Xlib without xcb, with read. Every byte must be seen:
      // the framing follows the stream. The server writes with writev
      // (Xorg, Xvfb) or sendmsg (with file descriptors); libwayland reads
      // and writes with recvmsg and sendmsg.
      with.input_calls = {"recvmsg", "recvfrom", "read", "writev", "sendmsg"};
      return build_input(with, target, rctx, p->input_probes, &p->opts.input);
    }
  }
  return build_input(a, target, rctx, p->input_probes, &p->opts.input);
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

}  // namespace looptrace
