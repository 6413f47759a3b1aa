// The plan's probes: a profile's (asked for, or found from the target) and
// the ad-hoc ones of --dispatch, --idle, --barrier-*, --enqueue.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "base/log.h"
#include "plan/steps.h"
#include "profiles/key_expr.h"
#include "profiles/profile.h"

namespace looptrace::plan {
namespace {

bool any_probe_option(const RecordArgs& a) {
  return !a.profile.empty() || !a.dispatch.empty() || !a.idle.empty() ||
         !a.frame.empty() || !a.frame_end.empty() || !a.dispatch_call.empty() ||
         !a.barrier_post.empty() || !a.barrier_remove.empty() ||
         !a.enqueue.empty() || input_wanted(a);
}

// The profile to load: --profile, or with -p and no probe option the one
// its libraries show ("" for none); with -- COMMAND and no probe option,
// the probes of every runtime installed here go straight to `probes`.
Result<std::string> choose_profile(const RecordArgs& a,
                                   std::vector<ProbeDef>* probes,
                                   std::string* note) {
  if (!any_probe_option(a) && (!a.command.empty() || a.every_runtime))
    LT_RETURN_IF_ERROR(command_profiles(a, probes, note));
  // An input option alone still picks the process's runtime: its input is
  // consumed by the loop the profile traces.
  RecordArgs spans_only = a;
  spans_only.input = false;
  spans_only.input_fd.clear();
  spans_only.input_peer.clear();
  if (any_probe_option(spans_only) || a.pid <= 0) return a.profile;
  auto found = detect_profile(static_cast<uint32_t>(a.pid), note);
  if (!found.ok()) return found.status();
  if (found->empty() && !input_wanted(a))
    return Status::Error(
        fmt::format("nothing to trace: pid {} maps no runtime a built-in "
                    "profile knows ({}); give --profile NAME or --dispatch "
                    "BINARY:SYMBOL",
                    a.pid, join_builtin_names()),
        ErrorKind::kUsage);
  return *found;
}

// --key: what ad-hoc spans read at entry.
Result<std::vector<KeyDef>> parse_keys(const std::vector<std::string>& args) {
  std::vector<KeyDef> keys;
  for (const std::string& k : args) {
    auto kd = parse_key_def(k);
    if (!kd.ok()) return kd.status();
    // Two values under one name: the report would show one of them.
    if (std::any_of(keys.begin(), keys.end(),
                    [&](const KeyDef& o) { return o.name == kd->name; }))
      return Status::Error(
          fmt::format("--key {}: two keys named '{}'", log::printable(k, 60),
                      log::printable(kd->name, 40)),
          ErrorKind::kUsage);
    keys.push_back(*kd);
  }
  if (keys.size() > LT_MAX_KEYS)
    return Status::Error(fmt::format("at most {} --key options", LT_MAX_KEYS),
                         ErrorKind::kUsage);
  if (std::count_if(keys.begin(), keys.end(), [](const KeyDef& k) {
        return k.format == KeyFormat::kString;
      }) > 1)
    return Status::Error("--key: at most one of format str", ErrorKind::kUsage);
  return keys;
}

// A point probe's argument: its role, the option that places it, where.
struct ArgKey {
  KeyRole role;
  const char* option;  // "queue": --queue-arg
  int position;
};

// Point probes read their arguments by position, with the key roles the
// kernel side and the barrier analyser act on.
Result<KeyDef> arg_key(const ArgKey& a) {
  if (a.position < 0 || a.position > 5)
    return Status::Error(
        fmt::format("--{}-arg must be 0..5 (got {})", a.option, a.position),
        ErrorKind::kUsage);
  KeyDef k;
  k.name = a.option;
  k.role = a.role;
  k.expr = fmt::format("arg{}", a.position);
  auto spec = parse_key_expr(k.expr);
  if (!spec.ok()) return spec.status();
  k.spec = *spec;
  k.format = a.role == KeyRole::kWhen || a.role == KeyRole::kToken
                 ? KeyFormat::kInt
                 : KeyFormat::kPointer;
  return k;
}

Status add_points(const std::vector<std::string>& list, uint32_t role,
                  const std::vector<ArgKey>& args,
                  std::vector<ProbeDef>* probes) {
  for (const std::string& s : list) {
    auto p = parse_probe_arg(s, role);
    if (!p.ok()) return p.status();
    for (const ArgKey& a : args) {
      auto k = arg_key(a);
      if (!k.ok()) return k.status();
      p->keys.push_back(*k);
    }
    probes->push_back(std::move(*p));
  }
  return Status::Ok();
}

// --dispatch-call BINARY:FUNCTION[+N]: a call probe of every virtual call
// in FUNCTION, or of the one at offset N (decimal or 0x hex) in it.
Result<ProbeDef> parse_call_arg(std::string_view arg) {
  std::string_view fn = arg;
  int64_t at = -1;
  const size_t plus = arg.rfind('+');
  if (plus != std::string_view::npos && plus + 1 < arg.size()) {
    const std::string n(arg.substr(plus + 1));
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(n.c_str(), &end, 0);
    if (end != nullptr && *end == '\0' && errno == 0 && v >= 0 &&
        std::isdigit(static_cast<unsigned char>(n[0]))) {
      fn = arg.substr(0, plus);
      at = v;
    }
  }
  auto p = parse_probe_arg(fn, LT_ROLE_DISPATCH);
  if (!p.ok()) return p.status();
  p->call = ProbeDef::CallMatch{};
  p->call->at = at;
  return p;
}

Status add_adhoc(const RecordArgs& a, std::vector<ProbeDef>* probes) {
  auto keys = parse_keys(a.keys);
  if (!keys.ok()) return keys.status();
  for (auto [list, role] :
       {std::pair{&a.dispatch, LT_ROLE_DISPATCH},
        std::pair{&a.idle, LT_ROLE_IDLE}, std::pair{&a.frame, LT_ROLE_DISPATCH},
        std::pair{&a.frame_end, LT_ROLE_DISPATCH}})
    for (const std::string& s : *list) {
      auto p = parse_probe_arg(s, role);
      if (!p.ok()) return p.status();
      p->keys = *keys;
      if (list == &a.frame) p->frame = ProbeDef::FrameMatch{};
      if (list == &a.frame_end) {
        p->frame = ProbeDef::FrameMatch{};
        p->frame->end = true;
      }
      probes->push_back(std::move(*p));
    }
  for (const std::string& s : a.dispatch_call) {
    auto p = parse_call_arg(s);
    if (!p.ok()) return p.status();
    if (keys->empty()) {
      // The object called: its vtable names its class.
      KeyDef k;
      k.name = "target";
      k.expr = "*(arg0+0)";
      k.format = KeyFormat::kVtable;
      auto spec = parse_key_expr(k.expr);
      if (!spec.ok()) return spec.status();
      k.spec = *spec;
      p->keys = {k};
    } else {
      p->keys = *keys;
    }
    probes->push_back(std::move(*p));
  }
  const ArgKey queue{KeyRole::kQueue, "queue", a.queue_arg};
  LT_RETURN_IF_ERROR(
      add_points(a.barrier_post, LT_ROLE_BARRIER_POST, {queue}, probes));
  LT_RETURN_IF_ERROR(
      add_points(a.barrier_remove, LT_ROLE_BARRIER_REMOVE,
                 {queue, {KeyRole::kToken, "token", a.token_arg}}, probes));
  return add_points(a.enqueue, LT_ROLE_ENQUEUE,
                    {queue,
                     {KeyRole::kMessage, "msg", a.msg_arg},
                     {KeyRole::kWhen, "when", a.when_arg}},
                    probes);
}

}  // namespace

Status build_probes(const RecordArgs& a, std::vector<ProbeDef>* probes,
                    std::string* note) {
  auto profile = choose_profile(a, probes, note);
  if (!profile.ok()) return profile.status();
  if (!profile->empty()) {
    auto prof = load_profile(*profile);
    if (!prof.ok()) return prof.status();
    for (ProbeDef& p : prof->probes) probes->push_back(std::move(p));
  }
  LT_RETURN_IF_ERROR(add_adhoc(a, probes));
  bool profile_io = std::any_of(probes->begin(), probes->end(), [](auto& p) {
    return p.role == LT_ROLE_INPUT_RECV || p.role == LT_ROLE_INPUT_SEND;
  });
  if (probes->empty() && !input_wanted(a) && !profile_io)
    return Status::Error(
        fmt::format("nothing to trace: give --profile NAME ({}) or --dispatch "
                    "BINARY:SYMBOL; with -p PID the profile is found from the "
                    "process's libraries",
                    join_builtin_names()),
        ErrorKind::kUsage);
  return Status::Ok();
}

}  // namespace looptrace::plan
