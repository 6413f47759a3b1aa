// decode_record on the records of a process's lifecycle: an exec record,
// and a span cut short by its thread's exit.
#include "trace/decode.h"

#include <gtest/gtest.h>

#include <cstring>
#include <variant>

namespace looptrace {
namespace {

lt_rec_header header(uint32_t type, uint32_t size) {
  lt_rec_header h{};
  h.type = type;
  h.size = size;
  h.ts_ns = 123456789;
  h.pid = 42;
  h.tid = 43;
  return h;
}

TEST(Decode, ExecRecordIsAnExecEvent) {
  lt_exec_rec r{};
  r.hdr = header(LT_REC_EXEC, sizeof(r));
  Event ev;
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  const auto* e = std::get_if<ExecEvent>(&ev);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->pid, 42u);
  EXPECT_EQ(e->tid, 43u);
  EXPECT_EQ(e->ts_ns, 123456789u);
}

TEST(Decode, ExecRecordOfTheWrongSizeIsRefused) {
  lt_exec_rec r{};
  r.hdr = header(LT_REC_EXEC, sizeof(r) + 8);
  Event ev;
  EXPECT_FALSE(decode_record(&r, sizeof(r), &ev));
  EXPECT_FALSE(decode_record(&r, sizeof(r) - 1, &ev));
}

TEST(Decode, SpanCutShortByExitKeepsItsFlag) {
  lt_span_rec r{};
  r.hdr = header(LT_REC_SPAN, sizeof(r));
  r.duration_ns = 1'300'000'000;
  r.flags = LT_SPAN_EXIT;
  Event ev;
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  const auto* s = std::get_if<SpanEvent>(&ev);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->cut_short());
  EXPECT_TRUE(s->unfinished());
  EXPECT_FALSE(s->in_flight);
  r.flags = LT_SPAN_INPUT;
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  EXPECT_FALSE(std::get<SpanEvent>(ev).cut_short());
}

// A str key's string: up to its NUL, and never more than the kernel can
// write (31 bytes and the NUL), even from a damaged record.
TEST(Decode, SpanKeyStringStopsAtItsNul) {
  lt_span_rec r{};
  r.hdr = header(LT_REC_SPAN, sizeof(r));
  std::memcpy(r.key_str, "stall-0\0garbage", 15);
  Event ev;
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  EXPECT_EQ(std::get<SpanEvent>(ev).key_str, "stall-0");
  std::memset(r.key_str, 'x', sizeof(r.key_str));
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  EXPECT_EQ(std::get<SpanEvent>(ev).key_str,
            std::string(LT_KEY_STR_LEN - 1, 'x'));
}

}  // namespace
}  // namespace looptrace
