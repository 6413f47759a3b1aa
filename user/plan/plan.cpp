// The plan: parse_plan, resolve_plan and plan_input in order (plan.h); each
// step's work is in a file of its own (steps.h).
#include "plan/plan.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/log.h"
#include "plan/steps.h"
#include "proc/maps.h"
#include "proc/sockets.h"
#include "profiles/profile.h"
#include "python/interpreter.h"

namespace looptrace {
namespace plan {

bool input_wanted(const RecordArgs& a) {
  return a.input || !a.input_fd.empty() || !a.input_peer.empty();
}

std::string join_builtin_names() {
  std::string out;
  for (const std::string& n : builtin_profile_names())
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A probe in looptrace's own executable would fire in the very code that
// reads its records (with --record-all, a record per record): refused.
Status refuse_self_probes(const std::vector<ProbeDef>& probes) {
  struct stat self {};
  if (stat("/proc/self/exe", &self) != 0) return Status::Ok();
  for (const ProbeDef& probe : probes) {
    struct stat st {};
    if (stat(probe.path.c_str(), &st) == 0 && st.st_dev == self.st_dev &&
        st.st_ino == self.st_ino)
      return Status::Error(
          fmt::format("{}:{}: {} is looptrace itself; it cannot trace the "
                      "code that reads its own trace",
                      probe.binary, probe.symbol, probe.path),
          ErrorKind::kUsage);
  }
  return Status::Ok();
}

}  // namespace plan

using plan::add_custom_gsources;
using plan::build_input;
using plan::build_options;
using plan::build_probes;
using plan::custom_gsource_model;
using plan::input_wanted;

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

Status resolve_plan(const ResolveContext& rctx, Plan* p) {
  LT_RETURN_IF_ERROR(resolve_probes(&p->probes, rctx));
  LT_RETURN_IF_ERROR(plan::refuse_self_probes(p->probes));
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

namespace {

// What a display connection needs read: libxcb reads with recvmsg, and the
// rest of a long reply with recv (recvfrom); Xlib without xcb, with read.
// Every byte must be seen: the framing follows the stream. The server
// writes with writev (Xorg, Xvfb) or sendmsg (with file descriptors);
// libwayland reads and writes with recvmsg and sendmsg. With an input
// option, the calls of Android's InputChannels (the default --input-calls)
// too.
std::vector<std::string> display_calls(const RecordArgs& a) {
  if (!a.input_calls.empty()) return a.input_calls;
  std::vector<std::string> calls = {"recvmsg", "recvfrom", "read", "writev",
                                    "sendmsg"};
  if (input_wanted(a)) calls.push_back("sendto");
  return calls;
}

bool peer_auto(const RecordArgs& a) {
  return std::find(a.input_peer.begin(), a.input_peer.end(), "auto") !=
         a.input_peer.end();
}

// The "looptrace:   input X11: socket N connected to PATH" lines.
std::string display_note(const std::vector<proc::PeerSocket>& conns) {
  std::string note;
  for (const proc::PeerSocket& c : conns)
    note += fmt::format(
        "{}looptrace:   input {}: socket {} connected to {}, decoded "
        "message by message",
        note.empty() ? "" : "\n",
        proc::is_x11_server_name(c.peer) ? "X11" : "Wayland", c.inode, c.peer);
  return note;
}

}  // namespace

Status plan_input(const RecordArgs& a, const ResolveContext& rctx, pid_t target,
                  Plan* p) {
  p->opts.pid = target;
  // -p of a process that runs no CPython: no Python walk in the kernel.
  if (a.pid > 0 && a.command.empty()) {
    auto maps = proc::read_maps(static_cast<uint32_t>(a.pid));
    auto in =
        maps.ok()
            ? python::find_interpreter(static_cast<uint32_t>(a.pid), *maps)
            : Result<std::optional<python::Interpreter>>(maps.status());
    p->opts.python = !in.ok() || in->has_value();
  }
  // A profile whose dispatch handles display input (gtk3) brings the
  // process's X11 and Wayland connections along, with --input or with no
  // input option at all: the same channels either way. --input-peer and
  // --input-fd pick channels themselves.
  const bool display = std::any_of(p->probes.begin(), p->probes.end(),
                                   [](const ProbeDef& d) { return d.input; });
  if (!display || a.pid <= 0 || !a.input_peer.empty() || !a.input_fd.empty()) {
    // --input-peer auto: display connections, read as the profile's are.
    RecordArgs with = a;
    if (peer_auto(a)) with.input_calls = display_calls(a);
    return build_input(with, target, rctx, p->input_probes, &p->opts.input);
  }
  auto all = proc::unix_sockets();
  auto conns =
      all.ok() ? proc::display_connections(static_cast<uint32_t>(a.pid), *all)
               : Result<std::vector<proc::PeerSocket>>(all.status());
  if (!conns.ok() || conns->empty()) {
    if (input_wanted(a))
      log::info(
          "input: pid {} has no X11 or Wayland connection: only Android "
          "InputChannels (AF_UNIX SOCK_SEQPACKET) are looked for",
          a.pid);
    else
      log::info(
          "input: pid {} has no X11 or Wayland connection: input not traced",
          a.pid);
    return build_input(a, target, rctx, p->input_probes, &p->opts.input);
  }
  p->input_note = display_note(*conns);
  RecordArgs with = a;
  with.input_calls = display_calls(a);
  with.input = true;
  with.input_peer = {"auto"};
  return build_input(with, target, rctx, p->input_probes, &p->opts.input);
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
