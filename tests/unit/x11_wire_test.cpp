// X11 framing (include/looptrace/x11_wire.h) on byte fixtures built to the
// protocol's wire format: what a client's reads of its connection give,
// in any cut, and what leaves (never a key event's keycode).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#define LT_X11_READ(dst, src, n) (std::memcpy((dst), (src), (n)), 0)
#include "looptrace/x11_framing.h"

namespace {

using Bytes = std::vector<uint8_t>;

void put32(Bytes* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put16(Bytes* b, size_t at, uint16_t v) {
  (*b)[at] = static_cast<uint8_t>(v);
  (*b)[at + 1] = static_cast<uint8_t>(v >> 8);
}

// A core event: type, detail (a key's keycode), sequence, time, the rest
// filled with a marker byte.
Bytes event(uint8_t type, uint8_t detail, uint16_t seq, uint32_t time) {
  Bytes b(32, 0xee);
  b[0] = type;
  b[1] = detail;
  put16(&b, 2, seq);
  put32(&b, 4, time);
  return b;
}

Bytes reply(uint16_t seq, uint32_t units) {
  Bytes b(32 + 4 * units, 0xdd);
  b[0] = 1;
  put16(&b, 2, seq);
  put32(&b, 4, units);
  return b;
}

// An XInput 2 event: GenericEvent, extension opcode, event type, time.
Bytes generic(uint8_t ext, uint16_t evtype, uint16_t seq, uint32_t time,
              uint32_t units) {
  Bytes b(32 + 4 * units, 0xcc);
  b[0] = 35;
  b[1] = ext;
  put16(&b, 2, seq);
  put32(&b, 4, units);
  put16(&b, 8, evtype);
  put32(&b, 12, time);
  return b;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct Framed {
  std::vector<lt_x11_msg> msgs;
  std::vector<size_t> chunk_of;  // which chunk each message ended in
  bool lost = false;
};

// The stream cut at `cuts` (offsets), framed chunk by chunk.
Framed frame(const Bytes& stream, std::vector<size_t> cuts) {
  cuts.push_back(stream.size());
  lt_x11_state st{};
  Framed f;
  size_t from = 0;
  for (size_t c = 0; c < cuts.size(); ++c) {
    lt_x11_msg out[LT_X11_MAX_MSGS];
    int n = lt_x11_frame(&st, stream.data() + from,
                         static_cast<uint32_t>(cuts[c] - from), out);
    for (int i = 0; i < n; ++i) {
      f.msgs.push_back(out[i]);
      f.chunk_of.push_back(c);
    }
    if (st.lost) {
      f.lost = true;
      break;
    }
    from = cuts[c];
  }
  return f;
}

TEST(X11Wire, ABatchedReadIsEveryMessageInIt) {
  // A key release and the next press in one read, with a reply between.
  Bytes s = cat({event(3, 38, 7, 1000), reply(8, 3), event(2, 39, 8, 1005)});
  Framed f = frame(s, {});
  ASSERT_FALSE(f.lost);
  ASSERT_EQ(f.msgs.size(), 3u);
  EXPECT_EQ(f.msgs[0].type, 3);
  EXPECT_EQ(f.msgs[0].time, 1000u);
  EXPECT_EQ(f.msgs[0].seq, 7);
  EXPECT_EQ(f.msgs[0].end, 32u);
  EXPECT_EQ(f.msgs[1].type, 1);
  EXPECT_EQ(f.msgs[1].len, 44u);
  EXPECT_EQ(f.msgs[1].time, 0u);
  EXPECT_EQ(f.msgs[1].end, 76u);
  EXPECT_EQ(f.msgs[2].type, 2);
  EXPECT_EQ(f.msgs[2].time, 1005u);
  EXPECT_EQ(f.msgs[2].end, 108u);
  for (const lt_x11_msg& m : f.msgs) EXPECT_EQ(m.flags, 0);
}

TEST(X11Wire, EveryCutGivesTheSameMessages) {
  Bytes s = cat({event(2, 38, 1, 500), generic(131, 2, 2, 510, 5),
                 event(6, 0, 3, 520), reply(4, 1), event(3, 38, 5, 530)});
  Framed whole = frame(s, {});
  // Uncut, the messages as built: type, seq, time, extension, event type,
  // length, end.
  struct Want {
    int type, seq;
    uint32_t time;
    int ext, evtype;
    uint32_t len, end;
  };
  const Want want[] = {{2, 1, 500, 0, 0, 32, 32},
                       {35, 2, 510, 131, 2, 52, 84},
                       {6, 3, 520, 0, 0, 32, 116},
                       {1, 4, 0, 0, 0, 36, 152},
                       {3, 5, 530, 0, 0, 32, 184}};
  ASSERT_EQ(whole.msgs.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    const lt_x11_msg& m = whole.msgs[i];
    EXPECT_EQ(m.type, want[i].type) << i;
    EXPECT_EQ(m.seq, want[i].seq) << i;
    EXPECT_EQ(m.time, want[i].time) << i;
    EXPECT_EQ(m.ext, want[i].ext) << i;
    EXPECT_EQ(m.evtype, want[i].evtype) << i;
    EXPECT_EQ(m.len, want[i].len) << i;
    EXPECT_EQ(m.end, want[i].end) << i;
  }
  // One cut anywhere, and two cuts in every pair of places (header split
  // inside its length field, body split, a cut at a boundary).
  for (size_t a = 1; a < s.size(); ++a) {
    for (size_t b = a; b < s.size(); b += 7) {
      Framed f =
          frame(s, a == b ? std::vector<size_t>{a} : std::vector<size_t>{a, b});
      ASSERT_FALSE(f.lost) << a << "," << b;
      ASSERT_EQ(f.msgs.size(), whole.msgs.size()) << a << "," << b;
      size_t done = 0;  // bytes before the chunk a message ended in
      for (size_t i = 0; i < f.msgs.size(); ++i) {
        const lt_x11_msg& m = f.msgs[i];
        const lt_x11_msg& w = whole.msgs[i];
        EXPECT_EQ(m.type, w.type);
        EXPECT_EQ(m.seq, w.seq);
        EXPECT_EQ(m.time, w.time);
        EXPECT_EQ(m.len, w.len);
        EXPECT_EQ(m.ext, w.ext);
        EXPECT_EQ(m.evtype, w.evtype);
        // Emitted in the chunk holding its last byte, at that byte.
        size_t chunk_start = f.chunk_of[i] == 0   ? 0
                             : f.chunk_of[i] == 1 ? a
                                                  : b;
        done = chunk_start;
        EXPECT_EQ(done + m.end, w.end) << a << "," << b << " msg " << i;
        bool began_before = w.end - w.len < chunk_start;
        EXPECT_EQ((m.flags & LT_X11_STARTED_BEFORE) != 0, began_before)
            << a << "," << b << " msg " << i;
      }
    }
  }
}

TEST(X11Wire, GenericEventsCarryTheirExtensionTypeAndTime) {
  Bytes s = cat({generic(131, 13, 9, 4242, 2), generic(131, 6, 9, 4243, 0)});
  Framed f = frame(s, {});
  ASSERT_EQ(f.msgs.size(), 2u);
  EXPECT_EQ(f.msgs[0].type, 35);
  EXPECT_EQ(f.msgs[0].ext, 131);
  EXPECT_EQ(f.msgs[0].evtype, 13);
  EXPECT_EQ(f.msgs[0].time, 4242u);
  EXPECT_EQ(f.msgs[0].len, 40u);
  EXPECT_EQ(f.msgs[1].evtype, 6);
  EXPECT_EQ(f.msgs[1].end, 72u);
}

TEST(X11Wire, NoKeycodeLeaves) {
  // The keycode, 0x5a, is in byte 1 of every key event: nothing framed
  // holds it, however it is cut.
  Bytes s = cat({event(2, 0x5a, 1, 0x01020304), event(3, 0x5a, 2, 0x01020305)});
  for (size_t a = 0; a < s.size(); ++a) {
    Framed f = frame(s, a ? std::vector<size_t>{a} : std::vector<size_t>{});
    ASSERT_EQ(f.msgs.size(), 2u);
    for (const lt_x11_msg& m : f.msgs) {
      EXPECT_EQ(m.ext, 0);
      const uint8_t* p = reinterpret_cast<const uint8_t*>(&m);
      for (size_t i = 0; i < sizeof m; ++i)
        EXPECT_NE(p[i], 0x5a) << "byte " << i << " of a message, cut at " << a;
    }
  }
}

TEST(X11Wire, SentEventsAndUnknownCodesAreFramedAsEvents) {
  // A SendEvent'ed key press (bit 7) and an event code no core event has:
  // 32 bytes each; the flag says which was sent.
  Bytes s =
      cat({event(0x80 | 2, 10, 1, 77), event(99, 0, 2, 0), event(0, 0, 3, 0)});
  Framed f = frame(s, {});
  ASSERT_EQ(f.msgs.size(), 3u);
  EXPECT_EQ(f.msgs[0].type, 2);
  EXPECT_EQ(f.msgs[0].flags, LT_X11_SENT);
  EXPECT_EQ(f.msgs[0].time, 77u);
  EXPECT_EQ(f.msgs[1].type, 99);
  EXPECT_EQ(f.msgs[1].time, 0u);
  EXPECT_EQ(f.msgs[2].type, 0);  // an error
  EXPECT_EQ(f.msgs[2].end, 96u);
}

TEST(X11Wire, AnAbsurdLengthLosesTheStreamForGood) {
  Bytes bad = reply(1, LT_X11_MAX_UNITS + 1);
  bad.resize(32);
  Bytes s = cat({event(2, 1, 1, 5), bad, event(2, 1, 2, 6)});
  lt_x11_state st{};
  lt_x11_msg out[LT_X11_MAX_MSGS];
  EXPECT_EQ(lt_x11_frame(&st, s.data(), static_cast<uint32_t>(s.size()), out),
            1);  // what came before it was framed
  EXPECT_EQ(st.lost, 1);
  EXPECT_EQ(out[0].time, 5u);
  EXPECT_EQ(lt_x11_frame(&st, s.data(), 32, out), 0);
}

TEST(X11Wire, MoreMessagesThanOneChunkHoldsLosesTheStream) {
  Bytes s;
  for (int i = 0; i <= LT_X11_MAX_MSGS; ++i)
    s = cat({s, event(6, 0, static_cast<uint16_t>(i), 100u + i)});
  Framed f = frame(s, {});
  EXPECT_TRUE(f.lost);
  EXPECT_EQ(f.msgs.size(), static_cast<size_t>(LT_X11_MAX_MSGS));
  // In two reads they all fit.
  Framed two = frame(s, {32 * 10});
  EXPECT_FALSE(two.lost);
  EXPECT_EQ(two.msgs.size(), static_cast<size_t>(LT_X11_MAX_MSGS + 1));
}

}  // namespace
