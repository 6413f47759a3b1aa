// The ABI header compiles as C++ and its shared helpers agree with their
// definition: every value falls in the slot whose bounds contain it.
#include "looptrace/abi.h"

#include <gtest/gtest.h>
#include <linux/types.h>

#include <cstddef>
#include <cstdint>
#include <random>

namespace {

static_assert(sizeof(lt_rec_header) == 24);
static_assert(sizeof(lt_key_spec) == 24);
static_assert(offsetof(lt_key_spec, op) == 3);
static_assert(sizeof(lt_py_offsets) == 32);
static_assert(offsetof(lt_py_offsets, frame_window) == 26);
static_assert(offsetof(lt_py_offsets, frame_window_len) == 28);
static_assert(sizeof(lt_py_proc) == 96);
static_assert(offsetof(lt_py_proc, off) == 32);
static_assert(offsetof(lt_py_proc, code) == 64);
static_assert(sizeof(lt_py_code_offsets) == 32);
static_assert(sizeof(lt_py_code_key) == 32);
// A code record: the header, then fields 8-byte aligned, then the bytes.
static_assert(offsetof(lt_py_code_rec, qualname) == 48);
static_assert(offsetof(lt_py_code_rec, qualname_bytes) == 80);
static_assert(sizeof(lt_py_code_rec) ==
              80 + LT_PY_NAME_BYTES + LT_PY_FILE_BYTES + LT_PY_TABLE_BYTES);
static_assert(sizeof(lt_span_rec) % 8 == 0);
static_assert(offsetof(lt_span_rec, keys) % 8 == 0);
static_assert(sizeof(lt_sample_rec) == 24 + 16 + 8 * LT_MAX_STACK);
static_assert(sizeof(lt_hist) == 32 + 24 + 8 * LT_HIST_SLOTS);
static_assert(sizeof(lt_exec_rec) == sizeof(lt_rec_header));
// A Wayland read's events follow the call at an 8-byte boundary, 16 bytes
// each (the decoder and the recording codec copy them as they are).
static_assert(sizeof(lt_wl_msg) == 16);
static_assert(offsetof(lt_wl_rec, msgs) == sizeof(lt_io_rec) + 16);
static_assert(sizeof(lt_wl_state) ==
              2 * (8 + 2 * LT_WL_HDR) + 6 * 4 * LT_WL_SLOTS);
// A record with a stack copy is the record, then the copy: the decoder
// tells them apart by hdr.size.
static_assert(sizeof(lt_ucopy) ==
              8 * LT_NREGS + 8 + 8 * LT_MAX_DEPTH + LT_STACK_COPY);
static_assert(sizeof(lt_ustack_rec) ==
              sizeof(lt_sample_rec) + sizeof(lt_ucopy));
static_assert(offsetof(lt_offcpu_copy_rec, u) == sizeof(lt_offcpu_rec));
static_assert(offsetof(lt_wake_copy_rec, u) == sizeof(lt_wake_rec));
static_assert(sizeof(lt_offcpu_rec) ==
              24 + 8 + 16 + 8 * LT_MAX_STACK + 8 * LT_MAX_KSTACK);
static_assert(sizeof(lt_wake_rec) == 24 + 8 + 8 + LT_COMM_LEN + 8 +
                                         8 * LT_MAX_STACK + 8 * LT_MAX_KSTACK);
static_assert(sizeof(lt_woken_rec) == 24 + 8);
static_assert(offsetof(lt_thread, stack) % 8 == 0);

TEST(HistSlot, SmallValuesHaveTheirOwnSlot) {
  for (uint64_t v = 0; v < LT_HIST_SUB; ++v) EXPECT_EQ(lt_hist_slot(v), v);
}

TEST(HistSlot, ValueLiesWithinItsSlotBounds) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100000; ++i) {
    uint64_t v = rng() >> (rng() % 64);
    uint32_t s = lt_hist_slot(v);
    ASSERT_LT(s, static_cast<uint32_t>(LT_HIST_SLOTS));
    EXPECT_LE(lt_hist_slot_low(s), v) << "v=" << v;
    if (s + 1 < LT_HIST_SLOTS) {
      EXPECT_GT(lt_hist_slot_low(s + 1), v);
    }
  }
}

TEST(HistSlot, KnownBounds) {
  // 1 ms = 1000000 ns: msb 19 (524288), sub-bucket (1000000>>17)&3 = 3.
  EXPECT_EQ(lt_hist_slot(1000000), 19u * 4 + 3);
  EXPECT_EQ(lt_hist_slot_low(19 * 4 + 3), 524288u + 3 * 131072u);
  EXPECT_EQ(lt_hist_slot(UINT64_MAX), static_cast<uint32_t>(LT_HIST_SLOTS - 1));
}

}  // namespace
