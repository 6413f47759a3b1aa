// AOSP's InputMessage (libs/input InputTransport.h), current layout
// (Android 12 and later; the MOTION pointer size of Android 13+), as it goes
// over the input channel's SOCK_SEQPACKET socketpair: exactly wireSize()
// bytes per message, padding zeroed (memset the whole message first).
//
// Offsets are from the start of the message (the header included) and are
// static_asserted below; a tracer decoding the bytes of a sendto/recvfrom on
// the channel relies on them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace refapp {

struct InputMessage {
  // Header.type values.
  enum Type : uint32_t {
    kKey = 0,
    kMotion = 1,
    kFinished = 2,
    kFocus = 3,
    kCapture = 4,
    kDrag = 5,
    kTimeline = 6,
    kTouchMode = 7,
  };

  static constexpr uint32_t kMaxPointers = 16;
  static constexpr uint32_t kMaxAxes = 30;

  struct Header {
    uint32_t type;  // @0 Type
    uint32_t seq;   // @4 per channel, from 1 (0 is invalid)
  } header;

  // AOSP's PointerProperties + PointerCoords: 144 bytes per pointer.
  struct PointerProperties {
    int32_t id;
    int32_t toolType;  // 1 = finger
  };
  struct PointerCoords {
    uint64_t bits;           // bit i set: axis i present; values packed
    float values[kMaxAxes];  // in axis order (AXIS_X=0, Y=1, PRESSURE=2)
    bool isResampled;        // (Android 13+)
    uint8_t empty[7];
  };
  struct Pointer {
    PointerProperties properties;
    PointerCoords coords;
  };

  union Body {
    struct Key {
      int32_t eventId;      // @8
      uint32_t empty1;      // @12
      int64_t eventTime;    // @16 CLOCK_MONOTONIC ns
      int32_t deviceId;     // @24
      int32_t source;       // @28
      int32_t displayId;    // @32
      uint8_t hmac[32];     // @36
      int32_t action;       // @68
      int32_t flags;        // @72
      int32_t keyCode;      // @76
      int32_t scanCode;     // @80
      int32_t metaState;    // @84
      int32_t repeatCount;  // @88
      uint32_t empty2;      // @92
      int64_t downTime;     // @96
    } key;                  // 96 bytes: 104 on the wire

    struct Motion {
      int32_t eventId;         // @8
      uint32_t pointerCount;   // @12
      int64_t eventTime;       // @16 CLOCK_MONOTONIC ns
      int32_t deviceId;        // @24
      int32_t source;          // @28
      int32_t displayId;       // @32
      uint8_t hmac[32];        // @36
      int32_t action;          // @68
      int32_t actionButton;    // @72
      int32_t flags;           // @76
      int32_t metaState;       // @80
      int32_t buttonState;     // @84
      uint8_t classification;  // @88
      uint8_t empty2[3];       // @89
      int32_t edgeFlags;       // @92
      int64_t downTime;        // @96
      float dsdx;              // @104 window transform
      float dtdx;
      float dtdy;
      float dsdy;
      float tx;
      float ty;
      float xPrecision;  // @128
      float yPrecision;
      float xCursorPosition;
      float yCursorPosition;
      float dsdxRaw;  // @144 raw transform
      float dtdxRaw;
      float dtdyRaw;
      float dsdyRaw;
      float txRaw;
      float tyRaw;                     // @164
      Pointer pointers[kMaxPointers];  // @168, pointerCount of them sent
    } motion;  // 168 + 144 * pointerCount bytes on the wire

    struct Finished {
      uint8_t handled;      // @8 bool
      uint8_t empty[7];     // @9
      int64_t consumeTime;  // @16 when the app read the event off the socket
    } finished;             // 24 bytes on the wire

    // Sent by the app (Android 12+) with header.seq 0: when the frame that
    // showed event eventId completed on the GPU and was presented.
    struct Timeline {
      int32_t eventId;           // @8
      uint32_t empty;            // @12
      int64_t gpuCompletedTime;  // @16 GraphicsTimeline::GPU_COMPLETED_TIME
      int64_t presentTime;       // @24 GraphicsTimeline::PRESENT_TIME
    } timeline;                  // 32 bytes on the wire
  } body;
};

// AOSP's MotionEvent / KeyEvent constants used here.
constexpr int32_t kActionDown = 0;
constexpr int32_t kActionUp = 1;
constexpr int32_t kActionMove = 2;
constexpr int32_t kSourceKeyboard = 0x00000101;
constexpr int32_t kSourceTouchscreen = 0x00001002;

static_assert(sizeof(InputMessage::Pointer) == 144);
static_assert(offsetof(InputMessage::Pointer, properties.toolType) == 4);
static_assert(offsetof(InputMessage::Pointer, coords.bits) == 8);
static_assert(offsetof(InputMessage::Pointer, coords.values) == 16);
static_assert(offsetof(InputMessage::Pointer, coords.isResampled) == 136);
static_assert(offsetof(InputMessage, header.type) == 0);
static_assert(offsetof(InputMessage, header.seq) == 4);
static_assert(offsetof(InputMessage, body) == 8);
// KEY
static_assert(offsetof(InputMessage, body.key.eventId) == 8);
static_assert(offsetof(InputMessage, body.key.eventTime) == 16);
static_assert(offsetof(InputMessage, body.key.deviceId) == 24);
static_assert(offsetof(InputMessage, body.key.source) == 28);
static_assert(offsetof(InputMessage, body.key.displayId) == 32);
static_assert(offsetof(InputMessage, body.key.hmac) == 36);
static_assert(offsetof(InputMessage, body.key.action) == 68);
static_assert(offsetof(InputMessage, body.key.flags) == 72);
static_assert(offsetof(InputMessage, body.key.keyCode) == 76);
static_assert(offsetof(InputMessage, body.key.scanCode) == 80);
static_assert(offsetof(InputMessage, body.key.metaState) == 84);
static_assert(offsetof(InputMessage, body.key.repeatCount) == 88);
static_assert(offsetof(InputMessage, body.key.downTime) == 96);
static_assert(sizeof(InputMessage::Header) + sizeof(InputMessage::Body::Key) ==
              104);
// MOTION
static_assert(offsetof(InputMessage, body.motion.eventId) == 8);
static_assert(offsetof(InputMessage, body.motion.pointerCount) == 12);
static_assert(offsetof(InputMessage, body.motion.eventTime) == 16);
static_assert(offsetof(InputMessage, body.motion.deviceId) == 24);
static_assert(offsetof(InputMessage, body.motion.source) == 28);
static_assert(offsetof(InputMessage, body.motion.displayId) == 32);
static_assert(offsetof(InputMessage, body.motion.hmac) == 36);
static_assert(offsetof(InputMessage, body.motion.action) == 68);
static_assert(offsetof(InputMessage, body.motion.actionButton) == 72);
static_assert(offsetof(InputMessage, body.motion.flags) == 76);
static_assert(offsetof(InputMessage, body.motion.metaState) == 80);
static_assert(offsetof(InputMessage, body.motion.buttonState) == 84);
static_assert(offsetof(InputMessage, body.motion.classification) == 88);
static_assert(offsetof(InputMessage, body.motion.edgeFlags) == 92);
static_assert(offsetof(InputMessage, body.motion.downTime) == 96);
static_assert(offsetof(InputMessage, body.motion.dsdx) == 104);
static_assert(offsetof(InputMessage, body.motion.xPrecision) == 128);
static_assert(offsetof(InputMessage, body.motion.dsdxRaw) == 144);
static_assert(offsetof(InputMessage, body.motion.tyRaw) == 164);
static_assert(offsetof(InputMessage, body.motion.pointers) == 168);
static_assert(offsetof(InputMessage, body.motion.pointers[1]) == 168 + 144);
// FINISHED
static_assert(offsetof(InputMessage, body.finished.handled) == 8);
static_assert(offsetof(InputMessage, body.finished.consumeTime) == 16);
static_assert(sizeof(InputMessage::Header) +
                  sizeof(InputMessage::Body::Finished) ==
              24);
// TIMELINE
static_assert(offsetof(InputMessage, body.timeline.eventId) == 8);
static_assert(offsetof(InputMessage, body.timeline.gpuCompletedTime) == 16);
static_assert(offsetof(InputMessage, body.timeline.presentTime) == 24);
// The largest message: MOTION with 16 pointers (the receive buffer size).
static_assert(sizeof(InputMessage) == 168 + 144 * 16);

constexpr size_t kKeyWireSize = 104;
constexpr size_t kFinishedWireSize = 24;
constexpr size_t kTimelineWireSize = 32;
constexpr size_t motionWireSize(uint32_t pointer_count) {
  return 168 + 144 * static_cast<size_t>(pointer_count);
}

// Bytes on the wire for this message (AOSP's InputMessage::size()), or 0 for
// an unknown type or a pointer count outside 1..16. A received message is
// valid only when the byte count equals this.
inline size_t wireSize(const InputMessage& msg) {
  switch (msg.header.type) {
    case InputMessage::kKey:
      return kKeyWireSize;
    case InputMessage::kMotion:
      if (msg.body.motion.pointerCount < 1 ||
          msg.body.motion.pointerCount > InputMessage::kMaxPointers) {
        return 0;
      }
      return motionWireSize(msg.body.motion.pointerCount);
    case InputMessage::kFinished:
      return kFinishedWireSize;
    case InputMessage::kFocus:
    case InputMessage::kCapture:
    case InputMessage::kTouchMode:
      return 16;
    case InputMessage::kDrag:
      return 24;
    case InputMessage::kTimeline:
      return 32;
  }
  return 0;
}

}  // namespace refapp
