// Durations as typed on the command line and as printed in reports.
#include "base/duration.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace looptrace {
namespace {

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(*parse_duration("250000ns"), 250000u);
  EXPECT_EQ(*parse_duration("100us"), 100000u);
  EXPECT_EQ(*parse_duration("16ms"), 16000000u);
  EXPECT_EQ(*parse_duration("2s"), 2000000000u);
  EXPECT_EQ(*parse_duration("2m"), 120000000000u);
  EXPECT_EQ(*parse_duration("0ms"), 0u);
}

TEST(ParseDuration, AcceptsFractions) {
  EXPECT_EQ(*parse_duration("1.5s"), 1500000000u);
  EXPECT_EQ(*parse_duration("0.25ms"), 250000u);
  EXPECT_EQ(*parse_duration(".5us"), 500u);
  EXPECT_EQ(*parse_duration("1.000000001s"), 1000000001u);
}

TEST(ParseDuration, RejectsGarbageWithOneClearLine) {
  for (const char* s :
       {"16xs", "", "ms", "16 ms", " 16ms", "16ms ", "+16ms", "1.ms", "1..5ms",
        "16MS", "0x10ms", "abc", "1e3ms", "16msx", "."}) {
    Result<uint64_t> r = parse_duration(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_EQ(r.status().kind(), ErrorKind::kUsage) << s;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
  EXPECT_EQ(parse_duration("16xs").status().message(),
            "bad duration '16xs': expected a number with a unit "
            "(ns, us, ms, s, m)");
}

TEST(ParseDuration, BareNumberHintsAtAUnit) {
  Result<uint64_t> r = parse_duration("16");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kUsage);
  EXPECT_EQ(r.status().hint(), "add a unit: 16ms");
}

TEST(ParseDuration, RejectsNegative) {
  Result<uint64_t> r = parse_duration("-5ms");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "bad duration '-5ms': must not be negative");
}

TEST(ParseDuration, RejectsOverflow) {
  EXPECT_EQ(*parse_duration("18446744073709551615ns"), UINT64_MAX);
  EXPECT_FALSE(parse_duration("18446744073709551616ns").ok());
  EXPECT_FALSE(parse_duration("99999999999999999999999ns").ok());
  EXPECT_FALSE(parse_duration("307445735m").ok());  // > 2^64 ns
  EXPECT_EQ(parse_duration("307445735m").status().message(),
            "bad duration '307445735m': too large");
}

TEST(ParseDuration, RejectsSubNanosecond) {
  EXPECT_FALSE(parse_duration("1.5ns").ok());
  EXPECT_FALSE(parse_duration("0.0001us").ok());
  EXPECT_EQ(*parse_duration("0.001us"), 1u);
}

TEST(FormatDuration, ThreeSignificantDigits) {
  EXPECT_EQ(format_duration(0), "0ns");
  EXPECT_EQ(format_duration(850), "850ns");
  EXPECT_EQ(format_duration(999), "999ns");
  EXPECT_EQ(format_duration(1000), "1.00us");
  EXPECT_EQ(format_duration(12345), "12.3us");
  EXPECT_EQ(format_duration(123456), "123us");
  EXPECT_EQ(format_duration(16000000), "16.0ms");
  EXPECT_EQ(format_duration(1250000000), "1.25s");
  EXPECT_EQ(format_duration(125000000000), "125s");
  EXPECT_EQ(format_duration(999000000000), "999s");
  EXPECT_EQ(format_duration(999499999999), "999s");
  EXPECT_EQ(format_duration(999500000000), "1000s");
  EXPECT_EQ(format_duration(1234567000000), "1235s");
  EXPECT_EQ(format_duration(3600000000000), "3600s");
}

TEST(FormatDuration, RoundsAcrossUnitBoundaries) {
  EXPECT_EQ(format_duration(9995), "10.0us");
  EXPECT_EQ(format_duration(999499), "999us");
  EXPECT_EQ(format_duration(999500), "1.00ms");
  EXPECT_EQ(format_duration(999999999), "1.00s");
  EXPECT_EQ(format_duration(1004), "1.00us");
  EXPECT_EQ(format_duration(1005), "1.01us");
}

TEST(FormatDuration, NeverOverflows) {
  EXPECT_EQ(format_duration(UINT64_MAX), "18446744074s");
}

TEST(FormatDuration, RoundTripsThroughParse) {
  for (uint64_t ns : {1000ull, 16000000ull, 1250000000ull, 850ull}) {
    Result<uint64_t> r = parse_duration(format_duration(ns));
    ASSERT_TRUE(r.ok()) << format_duration(ns);
    EXPECT_EQ(*r, ns);
  }
}

}  // namespace
}  // namespace looptrace
