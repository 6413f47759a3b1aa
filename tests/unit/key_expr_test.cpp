#include "profiles/key_expr.h"

#include <gtest/gtest.h>

#include <cstring>

namespace looptrace {
namespace {

TEST(KeyExpr, RegisterOnly) {
  auto r = parse_key_expr("arg1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->base, LT_KEY_ARG0 + 1);
  EXPECT_EQ(r->nderef, 0);
  EXPECT_EQ(r->add, 0);
}

TEST(KeyExpr, FieldRead) {
  auto r = parse_key_expr("*(arg1+16)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nderef, 1);
  EXPECT_EQ(r->off[0], 16);
  EXPECT_EQ(r->size, 0);
}

TEST(KeyExpr, VtableChain) {
  auto r = parse_key_expr("*(*(arg1+0))");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->base, LT_KEY_ARG0 + 1);
  EXPECT_EQ(r->nderef, 2);
  EXPECT_EQ(r->off[0], 0);
  EXPECT_EQ(r->off[1], 0);
}

TEST(KeyExpr, NestedOffsetsAndTrailingAdd) {
  auto r = parse_key_expr("*(*(arg0 + 0x10) - 8) + 4");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->base, LT_KEY_ARG0);
  EXPECT_EQ(r->nderef, 2);
  EXPECT_EQ(r->off[0], 16);
  EXPECT_EQ(r->off[1], -8);
  EXPECT_EQ(r->add, 4);
}

TEST(KeyExpr, StarBindsTighterThanPlusWithoutParens) {
  auto r = parse_key_expr("*arg2+8");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nderef, 1);
  EXPECT_EQ(r->off[0], 0);
  EXPECT_EQ(r->add, 8);
}

TEST(KeyExpr, WidthPrefix) {
  auto r = parse_key_expr("u32 *(arg1+16)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size, 4);
  EXPECT_EQ(format_key_expr(*r), "u32 *(arg1+16)");
}

TEST(KeyExpr, RoundTrip) {
  for (const char* e : {"arg0", "sp", "*(arg1+16)", "*(*(arg1))", "*(arg3-8)+4",
                        "u8 *(arg5)"}) {
    auto r = parse_key_expr(e);
    ASSERT_TRUE(r.ok()) << e << ": " << r.status().message();
    auto again = parse_key_expr(format_key_expr(*r));
    ASSERT_TRUE(again.ok()) << format_key_expr(*r);
    EXPECT_EQ(std::memcmp(&*r, &*again, sizeof(lt_key_spec)), 0) << e;
  }
}

TEST(KeyExpr, Errors) {
  for (const char* e : {"", "arg6", "*(arg1", "arg1 arg2", "*(*(*(*(arg1))))",
                        "u32 arg1", "foo", "*(arg1+)", "arg1+99999999999"}) {
    auto r = parse_key_expr(e);
    EXPECT_FALSE(r.ok()) << e;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("bad key expression"),
                std::string::npos);
      EXPECT_EQ(r.status().kind(), ErrorKind::kUsage);
    }
  }
}

TEST(KeyDef, NameExprFormat) {
  auto r = parse_key_def("what=u32 *(arg1+16):int");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->name, "what");
  EXPECT_EQ(r->format, KeyFormat::kInt);
  EXPECT_EQ(r->spec.size, 4);
  EXPECT_FALSE(parse_key_def("=arg1").ok());
  EXPECT_FALSE(parse_key_def("x=arg1:float").ok());
}

}  // namespace
}  // namespace looptrace
