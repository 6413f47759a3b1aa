// The plan's input probes and channels (docs/input.md): which socket calls,
// probed how, in which processes, on which sockets.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "base/log.h"
#include "elf/resolve.h"
#include "plan/steps.h"
#include "proc/sockets.h"

namespace looptrace::plan {
namespace {

// --input-calls, checked, sorted, each once.
Result<std::vector<std::string>> input_calls(const RecordArgs& a,
                                             InputMode mode) {
  std::vector<std::string> calls = a.input_calls;
  if (calls.empty()) calls = {"recvfrom", "sendto", "recvmsg", "sendmsg"};
  for (std::string& c : calls) {
    // There is no recv or send system call on x86-64: libc's recv is the
    // recvfrom system call.
    if (mode == InputMode::kSyscall) {
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
  return calls;
}

// --input-mode uprobe: the socket functions of libc (or --input-binary).
Status libc_uprobes(const RecordArgs& a, const ResolveContext& rctx,
                    const std::vector<std::string>& calls, InputTrace* in) {
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
        in->uprobes.push_back({*path, sym, uprobe_offset(*path, m->file_offset),
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
  return Status::Ok();
}

// The calls and how they are probed.
Status input_probes(const RecordArgs& a, const ResolveContext& rctx,
                    const std::vector<ProbeDef>& profile_io, InputTrace* in) {
  // A profile's input roles are uprobes on its own functions.
  in->mode = a.input_mode == "uprobe" || (!a.input && !profile_io.empty())
                 ? InputMode::kUprobe
                 : InputMode::kSyscall;
  auto hook = syscall_hook_from_env();
  if (!hook.ok()) return hook.status();
  in->hook = *hook;
  auto calls = input_calls(a, in->mode);
  if (!calls.ok()) return calls.status();
  if (in->mode == InputMode::kSyscall) {
    in->syscalls = *calls;
    return Status::Ok();
  }
  if (profile_io.empty() || !a.input_binary.empty())
    return libc_uprobes(a, rctx, *calls, in);
  for (const ProbeDef& p : profile_io) {
    uint32_t op = (p.role == LT_ROLE_INPUT_SEND ? LT_IO_SEND : 0u) |
                  (p.msghdr ? LT_IO_MSGHDR : 0u);
    in->uprobes.push_back({p.path, p.resolved_symbol, p.file_offset, op});
  }
  return Status::Ok();
}

// The sockets of -p PID that are channels: raw, X11 or Wayland, with the
// server's end of each display connection (its writes are the events'
// sends) and, once, the Wayland input objects made before tracing began.
class Channels {
 public:
  Channels(uint32_t pid, const std::map<uint64_t, proc::UnixSocket>& all,
           InputTrace* in)
      : pid_(pid), all_(all), in_(in) {}

  void add(uint64_t ino, const std::string& peer) {
    if (proc::is_x11_server_name(peer)) {
      in_->x11_inodes.push_back(ino);
      add_peer(ino, &in_->x11_server_inodes);
    } else if (proc::is_wayland_server_name(peer)) {
      in_->wl_inodes.push_back(ino);
      add_peer(ino, &in_->wl_server_inodes);
      scan_wayland_objects();
    } else {
      in_->raw_inodes.push_back(ino);
    }
  }

  // --input-peer PATH, or 'auto': the display connections.
  Status add_peer_option(const std::string& peer) {
    if (peer != "auto") {
      auto inos = proc::sockets_connected_to(pid_, peer, all_);
      if (!inos.ok()) return inos.status();
      for (uint64_t i : *inos) add(i, peer);
      return Status::Ok();
    }
    auto conns = proc::display_connections(pid_, all_);
    if (!conns.ok()) return conns.status();
    for (const proc::PeerSocket& c : *conns) {
      log::info(
          "input channel: socket {} connected to {} ({}, decoded message by "
          "message)",
          c.inode, c.peer,
          proc::is_x11_server_name(c.peer) ? "X11" : "Wayland");
      add(c.inode, c.peer);
    }
    return Status::Ok();
  }

 private:
  void add_peer(uint64_t ino, std::vector<uint64_t>* into) {
    auto it = all_.find(ino);
    if (it != all_.end() && it->second.peer != 0)
      into->push_back(it->second.peer);
  }
  void scan_wayland_objects() {
    if (wl_scanned_) return;
    wl_scanned_ = true;
    auto objs = proc::find_wayland_objects(pid_);
    if (!objs.ok()) {
      log::info(
          "input: pid {}: its Wayland input objects are not known ({}): only "
          "those it makes from now on are decoded",
          pid_, objs.status().message());
      return;
    }
    in_->wl_objects = *objs;
    log::debug("loader",
               "pid {}: Wayland keyboards {}, pointers {}, touches {} (from "
               "its memory)",
               pid_, objs->keyboard.size(), objs->pointer.size(),
               objs->touch.size());
  }

  uint32_t pid_;
  const std::map<uint64_t, proc::UnixSocket>& all_;
  InputTrace* in_;
  bool wl_scanned_ = false;
};

// The channels of -p PID: by fd, by peer, and the peers of all its sockets.
Status input_channels(const RecordArgs& a, InputTrace* in) {
  if ((!a.input_fd.empty() || !a.input_peer.empty()) && a.pid <= 0)
    return Status::Error("--input-fd and --input-peer need -p PID",
                         ErrorKind::kUsage);
  const uint32_t pid = static_cast<uint32_t>(a.pid);
  for (int fd : a.input_fd) {
    auto ino = proc::fd_socket_inode(pid, fd);
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
  for (uint64_t ino : proc::socket_inodes(pid)) {
    auto it = all->find(ino);
    if (it != all->end() && it->second.peer != 0)
      in->peer_inodes.push_back(it->second.peer);
  }
  Channels channels(pid, *all, in);
  for (const std::string& peer : a.input_peer)
    LT_RETURN_IF_ERROR(channels.add_peer_option(peer));
  return Status::Ok();
}

}  // namespace

Status build_input(const RecordArgs& a, pid_t target,
                   const ResolveContext& rctx,
                   const std::vector<ProbeDef>& profile_io, InputTrace* in) {
  if (!input_wanted(a) && profile_io.empty()) return Status::Ok();
  LT_RETURN_IF_ERROR(input_probes(a, rctx, profile_io, in));
  if (target > 0) in->tgids.push_back(static_cast<uint32_t>(target));
  return input_channels(a, in);
}

}  // namespace looptrace::plan
