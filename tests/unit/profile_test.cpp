// Profile files: roles (input roles included), and clear errors.
#include "profiles/profile.h"

#include <gtest/gtest.h>

#include <string>

namespace looptrace {
namespace {

TEST(Profile, BuiltinRefappHasEveryLoopRole) {
  auto p = load_profile("refapp");
  ASSERT_TRUE(p.ok()) << p.status().message();
  bool dispatch = false, idle = false, enqueue = false;
  for (const ProbeDef& d : p->probes) {
    dispatch = dispatch || d.role == LT_ROLE_DISPATCH;
    idle = idle || d.role == LT_ROLE_IDLE;
    enqueue = enqueue || d.role == LT_ROLE_ENQUEUE;
  }
  EXPECT_TRUE(dispatch && idle && enqueue);
}

TEST(Profile, InputRolesWithTheirBufferKind) {
  auto p = parse_profile(R"({"name": "static", "probes": [
      {"role": "input.recv", "binary": "./app", "symbol": "my_recv"},
      {"role": "input.send", "binary": "./app", "symbol": "my_sendmsg",
       "buffer": "msghdr"}]})",
                         "test.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->probes.size(), 2u);
  EXPECT_EQ(p->probes[0].role, static_cast<uint32_t>(LT_ROLE_INPUT_RECV));
  EXPECT_FALSE(p->probes[0].msghdr);
  EXPECT_EQ(p->probes[1].role, static_cast<uint32_t>(LT_ROLE_INPUT_SEND));
  EXPECT_TRUE(p->probes[1].msghdr);
  EXPECT_STREQ(role_name(LT_ROLE_INPUT_RECV), "input.recv");
  EXPECT_STREQ(role_name(LT_ROLE_INPUT_SEND), "input.send");
}

TEST(Profile, BadRoleAndBadBufferAreOneLineErrors) {
  auto bad_role = parse_profile(
      R"({"probes": [{"role": "input.ack", "binary": "a", "symbol": "f"}]})",
      "p.json");
  ASSERT_FALSE(bad_role.ok());
  EXPECT_NE(bad_role.status().message().find("input.recv"), std::string::npos)
      << bad_role.status().message();
  auto bad_buffer = parse_profile(
      R"({"probes": [{"role": "input.recv", "binary": "a", "symbol": "f",
                      "buffer": "iovec"}]})",
      "p.json");
  ASSERT_FALSE(bad_buffer.ok());
  EXPECT_NE(bad_buffer.status().message().find("msghdr"), std::string::npos)
      << bad_buffer.status().message();
  EXPECT_EQ(bad_buffer.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace looptrace
