// Wayland framing (include/looptrace/wayland_wire.h) on byte fixtures built
// to the protocol's wire format (wayland.xml, libwayland's connection.c):
// a client's requests teach it the input objects, its reads give the input
// events, in any cut, and never a key or button code.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#define LT_WL_READ(dst, src, n) (std::memcpy((dst), (src), (n)), 0)
#include "looptrace/wayland_framing.h"

namespace {

using Bytes = std::vector<uint8_t>;

// A message: object id, opcode, then its 32-bit arguments.
Bytes msg(uint32_t obj, uint16_t op, std::vector<uint32_t> args) {
  Bytes b;
  auto put = [&b](uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(obj);
  put(static_cast<uint32_t>(8 + 4 * args.size()) << 16 | op);
  for (uint32_t a : args) put(a);
  return b;
}

// A string argument's words: length with the NUL, the bytes padded to 4.
std::vector<uint32_t> str(const std::string& s) {
  std::vector<uint32_t> w{static_cast<uint32_t>(s.size() + 1)};
  Bytes bytes(s.begin(), s.end());
  bytes.resize((s.size() + 1 + 3) / 4 * 4, 0);
  for (size_t i = 0; i < bytes.size(); i += 4) {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k)
      v |= static_cast<uint32_t>(bytes[i + k]) << (8 * k);
    w.push_back(v);
  }
  return w;
}

std::vector<uint32_t> operator+(std::vector<uint32_t> a,
                                const std::vector<uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The ids a client of this fixture uses.
constexpr uint32_t kRegistry = 2, kSeat = 3, kKeyboard = 4, kPointer = 5,
                   kTouch = 6, kSurface = 7, kSeatName = 9;

// The client's requests that set up its input objects.
Bytes setup_requests() {
  return cat({msg(1, 1, {kRegistry}),  // wl_display.get_registry
              msg(kRegistry, 0,        // wl_registry.bind
                  std::vector<uint32_t>{kSeatName} + str("wl_seat") +
                      std::vector<uint32_t>{7, kSeat}),
              msg(kSeat, 1, {kKeyboard}),  // get_keyboard
              msg(kSeat, 0, {kPointer}),   // get_pointer
              msg(kSeat, 2, {kTouch})});   // get_touch
}

// The server's globals: a compositor, then the seat.
Bytes globals() {
  return cat({msg(kRegistry, 0,
                  std::vector<uint32_t>{1} + str("wl_compositor") +
                      std::vector<uint32_t>{5}),
              msg(kRegistry, 0,
                  std::vector<uint32_t>{kSeatName} + str("wl_seat") +
                      std::vector<uint32_t>{7})});
}

struct Framed {
  std::vector<lt_wl_msg> msgs;
  std::vector<size_t> chunk_of;
  uint32_t other = 0;
  bool lost = false;
};

// One direction's bytes cut at `cuts`, framed chunk by chunk (each chunk
// one read or write).
Framed frame(lt_wl_state* st, int send, const Bytes& stream,
             std::vector<size_t> cuts) {
  cuts.push_back(stream.size());
  Framed f;
  size_t from = 0;
  for (size_t c = 0; c < cuts.size(); ++c) {
    lt_wl_msg out[LT_WL_MAX_MSGS];
    lt_wl_framing fr;
    lt_wl_start(&fr);
    lt_wl_frame(&fr, st, send, stream.data() + from,
                static_cast<uint32_t>(cuts[c] - from), 0, out);
    for (int i = 0; i < fr.count; ++i) {
      f.msgs.push_back(out[i]);
      f.chunk_of.push_back(c);
    }
    f.other += fr.other;
    if ((send ? st->out : st->in).lost) {
      f.lost = true;
      break;
    }
    from = cuts[c];
  }
  return f;
}

// A connection whose client has bound the seat and its three devices.
lt_wl_state ready() {
  lt_wl_state st{};
  Bytes req = setup_requests();
  Bytes first(req.begin(), req.begin() + 12);  // get_registry
  Bytes rest(req.begin() + 12, req.end());
  EXPECT_FALSE(frame(&st, 1, first, {}).lost);
  EXPECT_FALSE(frame(&st, 0, globals(), {}).lost);
  EXPECT_FALSE(frame(&st, 1, rest, {}).lost);
  return st;
}

TEST(WaylandWire, TheRequestsNameTheInputObjects) {
  lt_wl_state st = ready();
  EXPECT_TRUE(lt_wl_has(st.registry, kRegistry));
  EXPECT_TRUE(lt_wl_has(st.seat_name, kSeatName));
  EXPECT_FALSE(lt_wl_has(st.seat_name, 1));  // wl_compositor's global
  EXPECT_TRUE(lt_wl_has(st.seat, kSeat));
  EXPECT_TRUE(lt_wl_has(st.keyboard, kKeyboard));
  EXPECT_TRUE(lt_wl_has(st.pointer, kPointer));
  EXPECT_TRUE(lt_wl_has(st.touch, kTouch));
}

TEST(WaylandWire, ABindOfAnotherGlobalIsNoSeat) {
  lt_wl_state st{};
  frame(&st, 1, msg(1, 1, {kRegistry}), {});
  frame(&st, 0, globals(), {});
  // bind(1, "wl_compositor", 5, 3): not the seat's name.
  frame(&st, 1,
        msg(kRegistry, 0,
            std::vector<uint32_t>{1} + str("wl_compositor") +
                std::vector<uint32_t>{5, kSeat}),
        {});
  EXPECT_FALSE(lt_wl_has(st.seat, kSeat));
  // Its get_keyboard-shaped request then creates nothing.
  frame(&st, 1, msg(kSeat, 1, {kKeyboard}), {});
  EXPECT_FALSE(lt_wl_has(st.keyboard, kKeyboard));
}

// Events of every input kind, and others between them.
Bytes input_events() {
  return cat({
      msg(kKeyboard, 1, {10, kSurface, 4, 30}),  // enter, one key held: 30
      msg(kKeyboard, 3, {11, 1000, 30, 1}),      // key 30 pressed at 1000
      msg(kKeyboard, 4, {12, 0, 0, 0, 0}),       // modifiers
      msg(kKeyboard, 3, {13, 1010, 30, 0}),      // released at 1010
      msg(kPointer, 2, {1020, 256, 512}),        // motion
      msg(kPointer, 5, {}),                      // frame
      msg(kPointer, 3, {14, 1030, 0x110, 1}),    // button pressed
      msg(kPointer, 3, {15, 1040, 0x110, 0}),    // released
      msg(kPointer, 4, {1050, 0, 2560}),         // axis
      msg(kSurface, 3, {2}),                     // another object's opcode 3
      msg(kTouch, 0, {16, 1060, kSurface, 0, 100, 100}),  // down
      msg(kTouch, 2, {1070, 0, 110, 100}),                // motion
      msg(kTouch, 1, {17, 1080, 0}),                      // up
      msg(kTouch, 3, {}),                                 // frame
  });
}

struct Want {
  uint8_t kind;
  uint32_t time;
  uint16_t index;
};
const Want kWant[] = {
    {LT_WL_KEY_PRESS, 1000, 1},      {LT_WL_KEY_RELEASE, 1010, 3},
    {LT_WL_MOTION, 1020, 4},         {LT_WL_BUTTON_PRESS, 1030, 6},
    {LT_WL_BUTTON_RELEASE, 1040, 7}, {LT_WL_AXIS, 1050, 8},
    {LT_WL_TOUCH_DOWN, 1060, 10},    {LT_WL_TOUCH_MOTION, 1070, 11},
    {LT_WL_TOUCH_UP, 1080, 12},
};

TEST(WaylandWire, ABatchedReadIsEveryInputEventInIt) {
  lt_wl_state st = ready();
  Bytes s = input_events();
  Framed f = frame(&st, 0, s, {});
  ASSERT_FALSE(f.lost);
  ASSERT_EQ(f.msgs.size(), std::size(kWant));
  EXPECT_EQ(f.other, 5u);  // enter, modifiers, two frames, the surface's
  uint32_t end = 0;
  size_t w = 0;
  // Each event's end is where its bytes end in the read.
  for (size_t i = 0, off = 0; i < 14; ++i) {
    uint32_t size = static_cast<uint32_t>(s[off + 6] | s[off + 7] << 8);
    off += size;
    if (w < std::size(kWant) && kWant[w].index == i) {
      end = static_cast<uint32_t>(off);
      EXPECT_EQ(f.msgs[w].end, end) << i;
      EXPECT_EQ(f.msgs[w].len, size) << i;
      ++w;
    }
  }
  for (size_t i = 0; i < std::size(kWant); ++i) {
    EXPECT_EQ(f.msgs[i].kind, kWant[i].kind) << i;
    EXPECT_EQ(f.msgs[i].time, kWant[i].time) << i;
    EXPECT_EQ(f.msgs[i].index, kWant[i].index) << i;
    EXPECT_EQ(f.msgs[i].flags, 0) << i;
  }
}

TEST(WaylandWire, EveryCutGivesTheSameEvents) {
  Bytes s = input_events();
  lt_wl_state base = ready();
  Framed whole = frame(&base, 0, s, {});
  ASSERT_EQ(whole.msgs.size(), std::size(kWant));
  for (size_t a = 1; a < s.size(); ++a) {
    for (size_t b = a; b < s.size(); b += 5) {
      lt_wl_state st = ready();
      std::vector<size_t> cuts =
          a == b ? std::vector<size_t>{a} : std::vector<size_t>{a, b};
      Framed f = frame(&st, 0, s, cuts);
      ASSERT_FALSE(f.lost) << a << "," << b;
      ASSERT_EQ(f.msgs.size(), whole.msgs.size()) << a << "," << b;
      EXPECT_EQ(f.other, whole.other) << a << "," << b;
      for (size_t i = 0; i < f.msgs.size(); ++i) {
        const lt_wl_msg& m = f.msgs[i];
        const lt_wl_msg& w = whole.msgs[i];
        EXPECT_EQ(m.kind, w.kind);
        EXPECT_EQ(m.time, w.time);
        EXPECT_EQ(m.len, w.len);
        const size_t chunk_start = f.chunk_of[i] == 0   ? 0
                                   : f.chunk_of[i] == 1 ? a
                                                        : b;
        EXPECT_EQ(chunk_start + m.end, w.end) << a << "," << b << " " << i;
        const bool began_before = w.end - w.len < chunk_start;
        EXPECT_EQ((m.flags & LT_WL_STARTED_BEFORE) != 0, began_before)
            << a << "," << b << " " << i;
      }
    }
  }
}

TEST(WaylandWire, RequestsCutAcrossWritesStillTeach) {
  // get_registry and the globals, then the rest of the setup in two writes
  // cut inside get_keyboard's new_id.
  lt_wl_state st{};
  Bytes req = setup_requests();
  frame(&st, 1, Bytes(req.begin(), req.begin() + 12), {});
  frame(&st, 0, globals(), {});
  Bytes rest(req.begin() + 12, req.end());
  const size_t cut = 32 + 10;  // bind is 32 bytes; into get_keyboard
  ASSERT_FALSE(frame(&st, 1, rest, {cut}).lost);
  EXPECT_TRUE(lt_wl_has(st.seat, kSeat));
  EXPECT_TRUE(lt_wl_has(st.keyboard, kKeyboard));
  EXPECT_TRUE(lt_wl_has(st.pointer, kPointer));
}

TEST(WaylandWire, NoKeyOrButtonCodeLeaves) {
  lt_wl_state st = ready();
  // Codes no time equals: whatever leaves, they are not in it.
  Bytes s = cat({msg(kKeyboard, 3, {11, 1000, 0xabcd01, 1}),
                 msg(kPointer, 3, {12, 1001, 0xabcd02, 1}),
                 msg(kKeyboard, 1, {13, kSurface, 4, 0xabcd03})});
  Framed f = frame(&st, 0, s, {});
  ASSERT_EQ(f.msgs.size(), 2u);
  for (const lt_wl_msg& m : f.msgs) {
    const auto* p = reinterpret_cast<const uint8_t*>(&m);
    for (size_t i = 0; i + 3 <= sizeof(m); ++i)
      EXPECT_FALSE(p[i] <= 0x03 && p[i + 1] == 0xcd && p[i + 2] == 0xab) << i;
  }
}

TEST(WaylandWire, UnknownObjectsAndOpcodesAreCountedNotInput) {
  lt_wl_state st = ready();
  // An object nobody named, a keyboard opcode past the protocol's, a
  // key-sized event of the wrong size.
  Bytes s = cat({msg(40, 3, {1, 2000, 3, 1}), msg(kKeyboard, 9, {1, 2}),
                 msg(kKeyboard, 3, {1, 2010, 3}),
                 msg(kKeyboard, 3, {1, 2020, 3, 1})});
  Framed f = frame(&st, 0, s, {});
  ASSERT_FALSE(f.lost);
  ASSERT_EQ(f.msgs.size(), 1u);
  EXPECT_EQ(f.msgs[0].time, 2020u);
  EXPECT_EQ(f.msgs[0].index, 3);
  EXPECT_EQ(f.other, 3u);
}

TEST(WaylandWire, DeleteIdForgetsTheObject) {
  lt_wl_state st = ready();
  frame(&st, 0, msg(1, 1, {kKeyboard}), {});  // wl_display.delete_id
  EXPECT_FALSE(lt_wl_has(st.keyboard, kKeyboard));
  Framed f = frame(&st, 0, msg(kKeyboard, 3, {1, 3000, 3, 1}), {});
  EXPECT_TRUE(f.msgs.empty());
  EXPECT_EQ(f.other, 1u);
}

TEST(WaylandWire, AnAbsurdSizeLosesTheStream) {
  for (uint32_t bad : {0u, 4u, 10u, 8192u}) {
    lt_wl_state st = ready();
    Bytes s = cat(
        {msg(kKeyboard, 3, {1, 100, 3, 1}), msg(kKeyboard, 3, {1, 110, 3, 1})});
    s[24 + 6] = static_cast<uint8_t>(bad);
    s[24 + 7] = static_cast<uint8_t>(bad >> 8);
    Framed f = frame(&st, 0, s, {});
    EXPECT_TRUE(f.lost) << bad;
    ASSERT_EQ(f.msgs.size(), 1u) << bad;  // what came before, all the same
    EXPECT_EQ(f.msgs[0].time, 100u);
  }
}

TEST(WaylandWire, MoreEventsThanOneChunkHoldsLosesTheStream) {
  lt_wl_state st = ready();
  Bytes s;
  for (uint32_t i = 0; i < LT_WL_MAX_MSGS + 1; ++i)
    s = cat({s, msg(kPointer, 2, {i, 0, 0})});
  Framed f = frame(&st, 0, s, {});
  EXPECT_TRUE(f.lost);
  EXPECT_EQ(f.msgs.size(), static_cast<size_t>(LT_WL_MAX_MSGS));
}

TEST(WaylandWire, SmallMessagesFillAWholeBufferInOneFraming) {
  // 4 KiB of 8-byte messages (wl_pointer.frame): every one framed.
  lt_wl_state st = ready();
  Bytes s;
  for (int i = 0; i < LT_WL_MAX_SIZE / 8; ++i)
    s = cat({s, msg(kPointer, 5, {})});
  Framed f = frame(&st, 0, s, {});
  EXPECT_FALSE(f.lost);
  EXPECT_EQ(f.other, static_cast<uint32_t>(LT_WL_MAX_SIZE / 8));
}

}  // namespace
