#include "trace/input_message.h"

#include <linux/types.h>

#include <cstring>

#include "looptrace/abi.h"

namespace looptrace {
namespace {

template <typename T>
T load(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(v));
  return v;
}

}  // namespace

std::string_view input_type_name(InputType t) {
  switch (t) {
    case InputType::kKey:
      return "key";
    case InputType::kMotion:
      return "motion";
    case InputType::kFinished:
      return "finished";
    case InputType::kFocus:
      return "focus";
    case InputType::kCapture:
      return "capture";
    case InputType::kDrag:
      return "drag";
    case InputType::kTimeline:
      return "timeline";
    case InputType::kTouchMode:
      return "touch_mode";
    case InputType::kBytes:
      return "bytes";
    case InputType::kKeyPress:
      return "key_press";
    case InputType::kKeyRelease:
      return "key_release";
    case InputType::kButtonPress:
      return "button_press";
    case InputType::kButtonRelease:
      return "button_release";
    case InputType::kTouchBegin:
      return "touch_begin";
    case InputType::kTouchUpdate:
      return "touch_update";
    case InputType::kTouchEnd:
      return "touch_end";
    case InputType::kScroll:
      return "scroll";
  }
  return "unknown";
}

std::optional<InputType> display_input_type(std::string_view name) {
  for (InputType t :
       {InputType::kKeyPress, InputType::kKeyRelease, InputType::kButtonPress,
        InputType::kButtonRelease, InputType::kMotion, InputType::kTouchBegin,
        InputType::kTouchUpdate, InputType::kTouchEnd, InputType::kScroll})
    if (input_type_name(t) == name) return t;
  return std::nullopt;
}

std::optional<InputMessageInfo> decode_input_message(const uint8_t* head,
                                                     size_t head_len,
                                                     int64_t bytes) {
  // Every field looptrace reads lies in the first LT_IO_HEAD bytes; a
  // message shorter than that is zero-padded here (FOCUS is 16 bytes).
  uint8_t buf[LT_IO_HEAD] = {};
  if (head_len < 16 || bytes < 16) return std::nullopt;
  std::memcpy(buf, head, head_len < sizeof(buf) ? head_len : sizeof(buf));
  if (bytes < static_cast<int64_t>(sizeof(buf)))
    std::memset(buf + bytes, 0, sizeof(buf) - static_cast<size_t>(bytes));
  uint32_t w0 = load<uint32_t>(buf, 0), w1 = load<uint32_t>(buf, 4),
           w2 = load<uint32_t>(buf, 8), w3 = load<uint32_t>(buf, 12);
  uint32_t layout = lt_input_layout(w0, w1, w2, w3, bytes);
  if (layout == LT_LAYOUT_NONE) return std::nullopt;
  InputMessageInfo m;
  m.layout = layout;
  if (layout == LT_LAYOUT_CURRENT) {
    m.seq = w1;
    m.type = static_cast<InputType>(w0);  // 0..7, checked by the layout test
    switch (m.type) {
      case InputType::kKey:
        m.event_id = static_cast<int32_t>(w2);
        m.event_time_ns = load<int64_t>(buf, 16);
        break;
      case InputType::kMotion:
        m.event_id = static_cast<int32_t>(w2);
        m.pointer_count = w3;
        m.event_time_ns = load<int64_t>(buf, 16);
        break;
      case InputType::kTimeline:  // {eventId, empty, gpuCompleted, present}
        m.event_id = static_cast<int32_t>(w2);
        m.gpu_completed_ns = load<int64_t>(buf, 16);
        m.present_ns = load<int64_t>(buf, 24);
        break;
      case InputType::kFinished:
        m.handled = buf[8] != 0;
        m.consume_time_ns = load<int64_t>(buf, 16);
        m.has_consume_time = true;
        break;
      default:
        break;
    }
    return m;
  }
  // Legacy: {type, padding}, then seq as the first body field.
  m.seq = w2;
  switch (w0) {
    case LT_IM_LEGACY_KEY:
      m.type = InputType::kKey;
      m.event_time_ns = load<int64_t>(buf, 16);
      break;
    case LT_IM_LEGACY_MOTION:
      m.type = InputType::kMotion;
      m.event_time_ns = load<int64_t>(buf, 16);
      break;
    default:  // LT_IM_LEGACY_FINISHED: {type, pad, seq, handled}
      m.type = InputType::kFinished;
      m.handled = w3 != 0;
      break;
  }
  return m;
}

}  // namespace looptrace
