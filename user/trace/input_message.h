// Android's InputMessage (AOSP libs/input InputTransport.h), decoded from
// the first LT_IO_HEAD bytes of a message and its size on the wire. Both
// layouts: current (Android 12+) and legacy (Android 9 era); see
// docs/input.md and abi.h (lt_input_layout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace looptrace {

enum class InputType {
  kKey,
  kMotion,
  kFinished,
  kFocus,
  kCapture,
  kDrag,
  kTimeline,
  kTouchMode,
  kBytes,  // a raw channel's read: no message structure
  // A display server's input events (X11; a dispatch's own event type):
  // press and release apart.
  kKeyPress,
  kKeyRelease,
  kButtonPress,
  kButtonRelease,
  kTouchBegin,
  kTouchUpdate,
  kTouchEnd,
  kScroll,  // Wayland's wl_pointer.axis
};

std::string_view input_type_name(InputType t);
// The display-event type of a name ("key_press"); nullopt for others.
std::optional<InputType> display_input_type(std::string_view name);

struct InputMessageInfo {
  uint32_t layout = 0;  // LT_LAYOUT_CURRENT or LT_LAYOUT_LEGACY
  InputType type = InputType::kKey;
  uint32_t seq = 0;
  int64_t event_time_ns = 0;    // KEY, MOTION
  uint32_t pointer_count = 0;   // MOTION (current layout)
  bool handled = false;         // FINISHED
  int64_t consume_time_ns = 0;  // FINISHED, current layout only
  bool has_consume_time = false;
  // Current layout: KEY's and MOTION's eventId (@8), and the one a
  // TIMELINE reports on, with its graphics timeline (Android 12+): when
  // the GPU finished the frame that showed the event, and when it was
  // presented (@16, @24; CLOCK_MONOTONIC ns, 0 or less: not known).
  int32_t event_id = 0;
  int64_t gpu_completed_ns = 0;  // TIMELINE
  int64_t present_ns = 0;        // TIMELINE
  bool is_event() const {
    return type == InputType::kKey || type == InputType::kMotion;
  }
};

// `head` holds the message's first `head_len` bytes (at most LT_IO_HEAD are
// needed); `bytes` is the whole message's size (the call's byte count).
// nullopt when it is not an InputMessage of either layout.
std::optional<InputMessageInfo> decode_input_message(const uint8_t* head,
                                                     size_t head_len,
                                                     int64_t bytes);

}  // namespace looptrace
