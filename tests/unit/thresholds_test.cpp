// The threshold options: one table, one set of rules for record and
// report, and the defaults the manual states.
#include "model/thresholds.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "base/duration.h"
#include "base/size.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

ThresholdArgs one(ThresholdOption o, const std::string& text) {
  ThresholdArgs a;
  a[o] = text;
  return a;
}

// Zero, a bare number, a negative: refused for every option with the same
// words, naming the option (record and report parse with this function).
TEST(ThresholdOptions, EveryOptionRefusesTheSameValuesTheSameWay) {
  for (const ThresholdOptionInfo& o : kThresholdOptions) {
    if (o.unit != ThresholdUnit::kDuration) continue;  // RefreshRate below
    auto zero = parse_thresholds(one(o.id, "0ms"));
    ASSERT_FALSE(zero.ok()) << o.flag;
    EXPECT_EQ(zero.status().kind(), ErrorKind::kUsage);
    EXPECT_EQ(zero.status().message(),
              std::string(o.flag) + ": must be above 0");
    auto bare = parse_thresholds(one(o.id, "10"));
    ASSERT_FALSE(bare.ok()) << o.flag;
    EXPECT_EQ(bare.status().message(),
              std::string(o.flag) +
                  ": bad duration '10': expected a number with a unit (ns, "
                  "us, ms, s, m)");
    EXPECT_EQ(bare.status().hint(), "add a unit: 10ms");
    EXPECT_FALSE(parse_thresholds(one(o.id, "-5ms")).ok()) << o.flag;
    auto fine = parse_thresholds(one(o.id, "1us"));
    EXPECT_TRUE(fine.ok()) << o.flag;
  }
}

TEST(ThresholdOptions, RecordDefaultsAndIdleFollowsSlow) {
  auto none = parse_thresholds({});
  ASSERT_TRUE(none.ok());
  Thresholds t = thresholds_for_record(*none);
  EXPECT_EQ(t.slow_ns[LT_ROLE_DISPATCH], Thresholds::kSlowNs);
  EXPECT_EQ(t.slow_ns[LT_ROLE_IDLE], Thresholds::kSlowNs);
  EXPECT_EQ(t.slow_ns[LT_ROLE_DELIVERY], Thresholds::kSlowNs);
  EXPECT_EQ(t.slow_input_ns, Thresholds::kSlowInputNs);
  EXPECT_EQ(t.barrier_stall_ns, Thresholds::kBarrierStallNs);
  EXPECT_EQ(t.sample_after_ns, Thresholds::kSlowNs / 2);

  auto slow = parse_thresholds(one(ThresholdOption::kSlow, "40ms"));
  ASSERT_TRUE(slow.ok());
  t = thresholds_for_record(*slow);
  EXPECT_EQ(t.slow_ns[LT_ROLE_DISPATCH], 40 * kMs);
  EXPECT_EQ(t.slow_ns[LT_ROLE_IDLE], 40 * kMs);
  EXPECT_EQ(t.slow_ns[LT_ROLE_DELIVERY], Thresholds::kSlowNs);
  EXPECT_EQ(t.sample_after_ns, 20 * kMs);

  ThresholdArgs both = one(ThresholdOption::kSlow, "40ms");
  both[ThresholdOption::kSlowIdle] = "100ms";
  t = thresholds_for_record(*parse_thresholds(both));
  EXPECT_EQ(t.slow_ns[LT_ROLE_IDLE], 100 * kMs);
  EXPECT_EQ(t.sample_after_ns, 20 * kMs);
}

// report --slow alone: the idle threshold follows it up, never below what
// was recorded (which would be refused though the user never asked).
TEST(ThresholdOptions, ReportIdleFollowsSlowOnlyUpwards) {
  Thresholds recorded;
  recorded.slow_ns = {16 * kMs, 100 * kMs, 16 * kMs};
  auto o = parse_thresholds(one(ThresholdOption::kSlow, "20ms"));
  ASSERT_TRUE(o.ok());
  auto t = apply_overrides(recorded, *o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->slow_ns[LT_ROLE_DISPATCH], 20 * kMs);
  EXPECT_EQ(t->slow_ns[LT_ROLE_IDLE], 100 * kMs);
  o = parse_thresholds(one(ThresholdOption::kSlow, "200ms"));
  t = apply_overrides(recorded, *o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->slow_ns[LT_ROLE_IDLE], 200 * kMs);
  // Asked for explicitly, a lower one is refused.
  ThresholdArgs low = one(ThresholdOption::kSlowIdle, "50ms");
  t = apply_overrides(recorded, *parse_thresholds(low));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "--slow-idle 50.0ms is below the recorded 100ms: shorter spans "
            "never reached the recording");
}

// The paragraph of docs/looptrace.md that documents `flag`.
std::string doc_paragraph(const std::string& flag) {
  std::ifstream in(LT_TEST_DATA_DIR "/../../docs/looptrace.md");
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  size_t at = text.find("\n`" + flag + " ");
  if (at == std::string::npos) at = text.find("\n`" + flag + "`");
  if (at == std::string::npos) return "";
  size_t end = text.find("\n\n`", at + 1);
  return text.substr(at, end == std::string::npos ? end : end - at);
}

// Every default the manual states is the one in the code.
TEST(ThresholdOptions, TheManualStatesTheDefaultsOfTheCode) {
  const std::regex kDefault(R"(default:?\s+`?([0-9.]+[a-z]+))");
  auto documented = [&](const std::string& flag) -> uint64_t {
    std::string p = doc_paragraph(flag);
    std::smatch m;
    if (!std::regex_search(p, m, kDefault)) {
      ADD_FAILURE() << flag << ": no default in docs/looptrace.md";
      return 0;
    }
    auto d = parse_duration(m[1].str());
    EXPECT_TRUE(d.ok()) << flag << ": " << m[1].str();
    return d.ok() ? *d : 0;
  };
  for (const ThresholdOptionInfo& o : kThresholdOptions) {
    if (o.unit == ThresholdUnit::kHz) {
      EXPECT_NE(
          doc_paragraph(o.flag).find(
              "default " + std::to_string(Thresholds::kRefreshHz) + " (Hz)"),
          std::string::npos)
          << o.flag;
      EXPECT_EQ(*parse_refresh_rate(std::to_string(Thresholds::kRefreshHz)),
                o.default_ns);
      continue;
    }
    if (o.id == ThresholdOption::kSlowIdle) {
      EXPECT_NE(doc_paragraph(o.flag).find("default: `--slow`"),
                std::string::npos);
      continue;
    }
    EXPECT_EQ(documented(o.flag), o.default_ns) << o.flag;
  }
  EXPECT_EQ(documented("--hang"), Thresholds::kHangNs);
  EXPECT_NE(
      doc_paragraph("--ringbuf-size")
          .find("`" + format_size(Thresholds::kRingbufBytes) + "` default"),
      std::string::npos);
  std::smatch m;
  std::string hysteresis = doc_paragraph("--delivery-hysteresis");
  ASSERT_TRUE(std::regex_search(
      hysteresis, m, std::regex(R"(below ([0-9.]+) ?(ns|us|ms|s)\b)")));
  EXPECT_EQ(*parse_duration(m[1].str() + m[2].str()),
            Thresholds::kDeliveryDrainNs);
}

// --refresh-rate: frames per second, 1 to 1000, as the interval; record
// and report both take any, the default 60 Hz.
TEST(ThresholdOptions, RefreshRate) {
  auto none = parse_thresholds({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(thresholds_for_record(*none).refresh_ns, 16'666'667u);
  EXPECT_EQ(threshold_default_text(ThresholdOption::kRefreshRate), "60Hz");
  auto r = parse_thresholds(one(ThresholdOption::kRefreshRate, "144Hz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(thresholds_for_record(*r).refresh_ns, 6'944'444u);
  EXPECT_EQ(*parse_refresh_rate("59.94"), 16'683'350u);
  EXPECT_EQ(*parse_refresh_rate("1000"), 1'000'000u);
  // A report may time frames at any rate, up or down.
  Thresholds recorded;
  recorded.refresh_ns = 8'333'333;
  auto t = apply_overrides(
      recorded, *parse_thresholds(one(ThresholdOption::kRefreshRate, "30")));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->refresh_ns, 33'333'333u);
  for (const char* bad : {"0", "0.5", "1001", "-60", "60ms", "", "1e2", "inf",
                          "nan", "6.0.0", ".", "Hz", "0x3c"}) {
    auto p = parse_thresholds(one(ThresholdOption::kRefreshRate, bad));
    if (std::string(bad).empty()) {
      EXPECT_TRUE(p.ok());  // not given
      continue;
    }
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().kind(), ErrorKind::kUsage);
    EXPECT_EQ(p.status().message(),
              std::string("--refresh-rate: bad rate '") + bad +
                  "': expected frames per second from 1 to 1000 (60, "
                  "59.94, 144)");
  }
}

TEST(Sizes, FormatReadsBack) {
  for (uint64_t v : {4096ull, 8ull << 20, 512ull << 10, 1ull << 30}) {
    auto back = parse_ringbuf_size(format_size(v));
    ASSERT_TRUE(back.ok()) << format_size(v);
    EXPECT_EQ(*back, v);
  }
  EXPECT_EQ(format_size(8u << 20), "8M");
  EXPECT_EQ(format_size(3u << 19), "1536K");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_FALSE(parse_ringbuf_size("-8M").ok());
  EXPECT_FALSE(parse_ringbuf_size("17179869184G").ok());
  EXPECT_FALSE(parse_ringbuf_size("3M").ok());
}

// --hang: the manual's "0 turns it off", bare or with a unit; any other
// value a duration, refused like one (record's only: a recording keeps the
// announcements made while it was taken).
TEST(HangOption, ZeroTurnsItOff) {
  for (const char* off : {"0", "00", "0ms", "0s"}) {
    auto h = parse_hang(off);
    ASSERT_TRUE(h.ok()) << off << ": " << h.status().message();
    EXPECT_EQ(*h, 0u) << off;
  }
  auto two = parse_hang("2s");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, 2000 * kMs);
  for (const char* bad : {"", "10", "-1s", "0x"}) {
    auto h = parse_hang(bad);
    ASSERT_FALSE(h.ok()) << bad;
    EXPECT_EQ(h.status().kind(), ErrorKind::kUsage) << bad;
    EXPECT_EQ(h.status().message().rfind("--hang: bad duration", 0), 0u)
        << h.status().message();
  }
}

}  // namespace
}  // namespace looptrace
