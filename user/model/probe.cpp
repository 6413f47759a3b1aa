#include "model/probe.h"

#include <utility>

namespace looptrace {

KeyRole key_role_for(std::string_view name) {
  static constexpr std::pair<std::string_view, KeyRole> kNames[] = {
      {"queue", KeyRole::kQueue},
      {"msg", KeyRole::kMessage},
      {"when", KeyRole::kWhen},
      {"flags", KeyRole::kFlags},
      {"token", KeyRole::kToken},
      {"due_us", KeyRole::kDueUs},
      {"due_ns", KeyRole::kDueNs},
      {"msg_tag", KeyRole::kMsgTag},
      {"refresh_ns", KeyRole::kRefreshNs},
  };
  for (auto [n, role] : kNames)
    if (n == name) return role;
  return KeyRole::kShown;
}

}  // namespace looptrace
