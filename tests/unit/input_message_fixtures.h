// Android InputMessages built byte by byte at the offsets documented in
// REFERENCE.md ("Android input channel"), without the code under test: the
// decoder is checked against these, not against itself.
#pragma once

#include <linux/types.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "looptrace/abi.h"

namespace looptrace::fixture {

using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(v));
}

template <typename T>
T get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(v));
  return v;
}

// Current layout (Android 12+): header {u32 type @0, u32 seq @4}.

// KEY: 104 bytes.
inline Bytes key(uint32_t seq, int64_t event_time, int32_t event_id = 0x5a5a,
                 int32_t action = 0, int32_t key_code = 29) {
  Bytes b(104, 0);
  put<uint32_t>(b, 0, 0);  // KEY
  put<uint32_t>(b, 4, seq);
  put<int32_t>(b, 8, event_id);
  put<int64_t>(b, 16, event_time);
  put<int32_t>(b, 24, 3);      // deviceId
  put<int32_t>(b, 28, 0x101);  // source: keyboard
  put<int32_t>(b, 32, 0);      // displayId
  put<int32_t>(b, 68, action);
  put<int32_t>(b, 76, key_code);
  put<int64_t>(b, 96, event_time - 5);  // downTime
  return b;
}

// MOTION: 168 + 144 * pointers bytes; pointerCount @12.
inline Bytes motion(uint32_t seq, int64_t event_time, uint32_t pointers,
                    int32_t event_id = 0x6b6b, int32_t action = 2) {
  Bytes b(168 + 144 * static_cast<size_t>(pointers), 0);
  put<uint32_t>(b, 0, 1);  // MOTION
  put<uint32_t>(b, 4, seq);
  put<int32_t>(b, 8, event_id);
  put<uint32_t>(b, 12, pointers);
  put<int64_t>(b, 16, event_time);
  put<int32_t>(b, 24, 4);       // deviceId
  put<int32_t>(b, 28, 0x1002);  // source: touchscreen
  put<int32_t>(b, 68, action);
  put<int64_t>(b, 96, event_time - 7);  // downTime
  for (uint32_t i = 0; i < pointers; ++i) {
    size_t p = 168 + 144 * static_cast<size_t>(i);
    put<int32_t>(b, p, static_cast<int32_t>(i));  // pointer id
    put<float>(b, p + 16, 100.5f + static_cast<float>(i));
    put<float>(b, p + 20, 200.25f);
  }
  return b;
}

// FINISHED: 24 bytes; handled u8 @8, consumeTime i64 @16.
inline Bytes finished(uint32_t seq, bool handled, int64_t consume_time) {
  Bytes b(24, 0);
  put<uint32_t>(b, 0, 2);  // FINISHED
  put<uint32_t>(b, 4, seq);
  put<uint8_t>(b, 8, handled ? 1 : 0);
  put<int64_t>(b, 16, consume_time);
  return b;
}

// FOCUS: 16 bytes; eventId @8.
inline Bytes focus(uint32_t seq, int32_t event_id = 0x77) {
  Bytes b(16, 0);
  put<uint32_t>(b, 0, 3);  // FOCUS
  put<uint32_t>(b, 4, seq);
  put<int32_t>(b, 8, event_id);
  put<uint8_t>(b, 12, 1);  // hasFocus
  return b;
}

// TIMELINE: 32 bytes; eventId @8, gpuCompletedTime @16, presentTime @24.
inline Bytes timeline(uint32_t seq, int32_t event_id = 0x78) {
  Bytes b(32, 0);
  put<uint32_t>(b, 0, 6);  // TIMELINE
  put<uint32_t>(b, 4, seq);
  put<int32_t>(b, 8, event_id);
  put<int64_t>(b, 16, 123456789);
  put<int64_t>(b, 24, 123999999);
  return b;
}

// Legacy layout (Android 9 era): header {u32 type, u32 padding = 0}, seq @8,
// types from 1.

inline Bytes legacy_key(uint32_t seq, int64_t event_time, size_t size = 96) {
  Bytes b(size, 0);
  put<uint32_t>(b, 0, 1);  // legacy KEY
  put<uint32_t>(b, 4, 0);  // padding
  put<uint32_t>(b, 8, seq);
  put<int64_t>(b, 16, event_time);
  return b;
}

inline Bytes legacy_motion(uint32_t seq, int64_t event_time,
                           size_t size = 264) {
  Bytes b(size, 0);
  put<uint32_t>(b, 0, 2);  // legacy MOTION
  put<uint32_t>(b, 4, 0);  // padding
  put<uint32_t>(b, 8, seq);
  put<int64_t>(b, 16, event_time);
  return b;
}

// Legacy FINISHED: 16 bytes {type 3, pad, seq, u32 handled}.
inline Bytes legacy_finished(uint32_t seq, uint32_t handled) {
  Bytes b(16, 0);
  put<uint32_t>(b, 0, 3);  // legacy FINISHED
  put<uint32_t>(b, 4, 0);  // padding
  put<uint32_t>(b, 8, seq);
  put<uint32_t>(b, 12, handled);
  return b;
}

// What the kernel records of a message: its first LT_IO_HEAD bytes. After a
// shorter message the buffer holds anything (stale bytes of a previous
// receive): filled with junk here.
inline std::array<uint8_t, LT_IO_HEAD> head_of(const Bytes& m) {
  std::array<uint8_t, LT_IO_HEAD> h;
  h.fill(0xee);
  std::memcpy(h.data(), m.data(), std::min(m.size(), h.size()));
  return h;
}

}  // namespace looptrace::fixture
