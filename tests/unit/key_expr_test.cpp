#include "profiles/key_expr.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

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
  // An enum's names come only from a profile.
  auto e = parse_key_def("type=u16 *(arg1+16):enum");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("only a profile gives"),
            std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// 30000 nested '*' or parentheses overflowed the stack (a segfault); the
// depth is bounded with a clear error and a message of bounded length.
TEST(KeyExpr, DeepNestingIsRefused) {
  const std::string stars = std::string(30000, '*') + "arg1";
  const std::string parens =
      std::string(30000, '(') + "arg1" + std::string(30000, ')');
  const std::string derefs = [] {
    std::string s = "arg1";
    for (int i = 0; i < 30000; ++i) s = "*(" + s + ")";
    return s;
  }();
  for (const std::string& e : {stars, parens, derefs}) {
    auto r = parse_key_expr(e);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kUsage);
    EXPECT_NE(r.status().message().find("nested deeper than"),
              std::string::npos)
        << r.status().message();
    EXPECT_LT(r.status().message().size(), 200u);
    auto d = parse_key_def("x=" + e);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("nested deeper than"),
              std::string::npos);
  }
  // Redundant parentheses within the bound still parse.
  auto ok = parse_key_expr("((((*((((arg1+8))))))))");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->off[0], 8);
}

// Offsets are __s32 fields of lt_key_spec: a sum outside that range is an
// error, never a wrapped value ("*((arg0+0x7fffffff)+0x7fffffff)" read at
// offset -2).
TEST(KeyExpr, OffsetsAreRangeCheckedAgainstTheAbiField) {
  static_assert(sizeof(lt_key_spec::off[0]) == 4);
  static_assert(sizeof(lt_key_spec::add) == 4);
  for (const char* e :
       {"*((arg0+0x7fffffff)+0x7fffffff)", "*((arg0+0x7fffffff)+1)",
        "((arg0-0x7fffffff)-0x7fffffff)", "*(arg0+0x80000000)",
        "arg0+99999999999999999999999", "*(arg1+0x1ffffffffffffffffff)"}) {
    auto r = parse_key_expr(e);
    ASSERT_FALSE(r.ok()) << e << " parsed, off[0]=" << r->off[0];
    EXPECT_NE(r.status().message().find("out of range"), std::string::npos)
        << e << ": " << r.status().message();
  }
  auto max = parse_key_expr("*((arg0+0x7ffffff0)+0xf)");
  ASSERT_TRUE(max.ok()) << max.status().message();
  EXPECT_EQ(max->off[0], 0x7fffffff);
  auto min = parse_key_expr("(arg0-0x7fffffff)");
  ASSERT_TRUE(min.ok()) << min.status().message();
  EXPECT_EQ(min->add, -0x7fffffff);
  // The smallest __s32 itself, as format_key_expr writes it: it must parse
  // back (the key_expr fuzzer found "...-4)-2147483644" printed as
  // "...-2147483648" and refused).
  auto lowest = parse_key_expr("*(*(*(arg5+8)+4))-2147483648");
  ASSERT_TRUE(lowest.ok()) << lowest.status().message();
  EXPECT_EQ(lowest->add, INT32_MIN);
  auto again = parse_key_expr(format_key_expr(*lowest));
  ASSERT_TRUE(again.ok()) << format_key_expr(*lowest);
  EXPECT_EQ(again->add, INT32_MIN);
  EXPECT_FALSE(parse_key_expr("arg0-2147483649").ok());
  EXPECT_FALSE(parse_key_expr("arg0+2147483648").ok());
}

}  // namespace
}  // namespace looptrace
