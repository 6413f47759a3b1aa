#include "profiles/profile.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiles/key_expr.h"

namespace looptrace {
namespace {

// The reference app (refapp/): Looper::dispatchMessage(Message*) with
// Message { Handler* target @0; callback @8; int32 what @16 }. The target's
// vtable names the handler class, as Android's printer names msg.target.
// Idle handlers run through MessageQueue::runIdleHandler(IdleHandler*).
constexpr std::string_view kRefappProfile = R"json({
  "name": "refapp",
  "description": "looptrace's reference app: an Android-like Looper",
  "probes": [
    {
      "role": "dispatch",
      "binary": "refapp",
      "symbol": "refapp::Looper::dispatchMessage(refapp::Message*)",
      "keys": [
        {"name": "target", "expr": "*(*(arg1+0))", "format": "vtable"},
        {"name": "callback", "expr": "*(arg1+8)", "format": "sym"},
        {"name": "what", "expr": "u32 *(arg1+16)", "format": "int"},
        {"name": "msg", "expr": "arg1", "format": "ptr"}
      ]
    },
    {
      "role": "enqueue",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::enqueueMessage(refapp::Message*, long)",
      "async_mask": 2,
      "keys": [
        {"name": "queue", "expr": "arg0", "format": "ptr"},
        {"name": "msg", "expr": "arg1", "format": "ptr"},
        {"name": "when", "expr": "arg2", "format": "int"},
        {"name": "flags", "expr": "u32 *(arg1+56)", "format": "hex"}
      ]
    },
    {
      "role": "idle",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::runIdleHandler(refapp::IdleHandler*)",
      "keys": [
        {"name": "handler", "expr": "*(arg1+0)", "format": "vtable"}
      ]
    },
    {
      "role": "barrier.post",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::postSyncBarrier(long)",
      "keys": [{"name": "queue", "expr": "arg0", "format": "ptr"}]
    },
    {
      "role": "barrier.remove",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::removeSyncBarrier(int)",
      "keys": [
        {"name": "queue", "expr": "arg0", "format": "ptr"},
        {"name": "token", "expr": "arg1", "format": "int"}
      ]
    }
  ]
})json";

struct Builtin {
  const char* name;
  std::string_view json;
};
constexpr Builtin kBuiltins[] = {{"refapp", kRefappProfile}};

Status profile_error(const std::string& origin, const std::string& what) {
  return Status::Error(fmt::format("profile {}: {}", origin, what),
                       ErrorKind::kUsage);
}

}  // namespace

const char* role_name(uint32_t role) {
  switch (role) {
    case LT_ROLE_DISPATCH:
      return "dispatch";
    case LT_ROLE_IDLE:
      return "idle";
    case LT_ROLE_BARRIER_POST:
      return "barrier.post";
    case LT_ROLE_BARRIER_REMOVE:
      return "barrier.remove";
    case LT_ROLE_ENQUEUE:
      return "enqueue";
    case LT_ROLE_DELIVERY:
      return "delivery";
    case LT_ROLE_INPUT_RECV:
      return "input.recv";
    case LT_ROLE_INPUT_SEND:
      return "input.send";
    default:
      return "unknown";
  }
}

Result<uint32_t> parse_role(std::string_view name) {
  if (name == "dispatch") return static_cast<uint32_t>(LT_ROLE_DISPATCH);
  if (name == "idle") return static_cast<uint32_t>(LT_ROLE_IDLE);
  if (name == "barrier.post")
    return static_cast<uint32_t>(LT_ROLE_BARRIER_POST);
  if (name == "barrier.remove")
    return static_cast<uint32_t>(LT_ROLE_BARRIER_REMOVE);
  if (name == "enqueue") return static_cast<uint32_t>(LT_ROLE_ENQUEUE);
  if (name == "input.recv") return static_cast<uint32_t>(LT_ROLE_INPUT_RECV);
  if (name == "input.send") return static_cast<uint32_t>(LT_ROLE_INPUT_SEND);
  return Status::Error(
      fmt::format("unknown role '{}': expected dispatch, idle, barrier.post, "
                  "barrier.remove, enqueue, input.recv or input.send",
                  name),
      ErrorKind::kUsage);
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> out;
  for (const Builtin& b : kBuiltins) out.emplace_back(b.name);
  return out;
}

Result<Profile> parse_profile(std::string_view text,
                              const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return profile_error(origin, "not valid JSON");
  if (!j.is_object()) return profile_error(origin, "expected a JSON object");
  Profile p;
  p.name = j.value("name", origin);
  p.description = j.value("description", "");
  if (!j.contains("probes") || !j["probes"].is_array() || j["probes"].empty())
    return profile_error(origin, "needs a non-empty \"probes\" array");
  for (const auto& jp : j["probes"]) {
    size_t idx = p.probes.size();
    if (!jp.is_object() || !jp.contains("binary") || !jp.contains("symbol") ||
        !jp["binary"].is_string() || !jp["symbol"].is_string())
      return profile_error(
          origin,
          fmt::format("probe {} needs \"binary\" and \"symbol\" strings", idx));
    ProbeDef def;
    auto role = parse_role(jp.value("role", "dispatch"));
    if (!role.ok())
      return profile_error(
          origin, fmt::format("probe {}: {}", idx, role.status().message()));
    def.role = *role;
    def.binary = jp["binary"].get<std::string>();
    def.symbol = jp["symbol"].get<std::string>();
    if (jp.contains("async_mask")) {
      if (!jp["async_mask"].is_number_unsigned())
        return profile_error(
            origin,
            fmt::format("probe {}: \"async_mask\" must be a number", idx));
      def.async_mask = jp["async_mask"].get<uint32_t>();
    }
    if (jp.contains("buffer")) {
      std::string b = jp["buffer"].is_string() ? jp["buffer"].get<std::string>()
                                               : std::string();
      if (b != "msghdr" && b != "plain")
        return profile_error(
            origin,
            fmt::format("probe {}: \"buffer\" is \"plain\" or \"msghdr\"",
                        idx));
      def.msghdr = b == "msghdr";
    }
    if (jp.contains("keys")) {
      if (!jp["keys"].is_array())
        return profile_error(
            origin, fmt::format("probe {}: \"keys\" must be an array", idx));
      for (const auto& jk : jp["keys"]) {
        if (!jk.is_object() || !jk.contains("name") || !jk.contains("expr") ||
            !jk["name"].is_string() || !jk["expr"].is_string())
          return profile_error(
              origin,
              fmt::format("probe {}: a key needs \"name\" and \"expr\"", idx));
        KeyDef k;
        k.name = jk["name"].get<std::string>();
        k.expr = jk["expr"].get<std::string>();
        auto spec = parse_key_expr(k.expr);
        if (!spec.ok()) return profile_error(origin, spec.status().message());
        k.spec = *spec;
        auto f = parse_key_format(jk.value("format", "hex"));
        if (!f.ok()) return profile_error(origin, f.status().message());
        k.format = *f;
        def.keys.push_back(std::move(k));
      }
      if (def.keys.size() > LT_MAX_KEYS)
        return profile_error(
            origin, fmt::format("probe {}: at most {} keys", idx, LT_MAX_KEYS));
    }
    p.probes.push_back(std::move(def));
  }
  return p;
}

Result<Profile> load_profile(const std::string& name_or_file) {
  for (const Builtin& b : kBuiltins) {
    if (name_or_file == b.name) return parse_profile(b.json, b.name);
  }
  std::ifstream in(name_or_file);
  if (!in) {
    std::string names;
    for (const Builtin& b : kBuiltins)
      names += std::string(names.empty() ? "" : ", ") + b.name;
    return Status::Error(
        fmt::format("profile '{}' is neither a built-in ({}) nor a readable "
                    "file",
                    name_or_file, names),
        ErrorKind::kUsage);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), name_or_file);
}

Result<ProbeDef> parse_probe_arg(std::string_view arg, uint32_t role) {
  // The first ':' that is not part of "::" separates BINARY from SYMBOL.
  size_t sep = std::string_view::npos;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] != ':') continue;
    bool dbl = (i + 1 < arg.size() && arg[i + 1] == ':') ||
               (i > 0 && arg[i - 1] == ':');
    if (!dbl) {
      sep = i;
      break;
    }
  }
  if (sep == std::string_view::npos || sep == 0 || sep + 1 == arg.size())
    return Status::Error(
        fmt::format("bad probe '{}': expected BINARY:SYMBOL (e.g. "
                    "libglib-2.0.so.0:g_main_context_dispatch)",
                    arg),
        ErrorKind::kUsage);
  ProbeDef def;
  def.role = role;
  def.binary = std::string(arg.substr(0, sep));
  def.symbol = std::string(arg.substr(sep + 1));
  return def;
}

}  // namespace looptrace
