// The pure parts of JavaScript frames (v8/frames.h): V8's source position
// tables decoded from tables built here with V8's encoding and from one
// captured from Node 20, a raw SourcePosition's parts, the line of a script
// offset, the interleaving of JavaScript and native frames, and what the
// kernel is given of the installed /usr/bin/node's layout (and what it is
// refused).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "v8/frames.h"
#include "v8/metadata.h"

namespace looptrace::v8 {
namespace {

constexpr char kNode[] = "/usr/bin/node";

bool have_node() { return access(kNode, X_OK) == 0; }

// V8's VLQ of a zigzag-encoded value: 7 bits a byte, low first, 0x80 when
// more follow.
void put_vlq(int64_t v, std::string* out) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  do {
    uint8_t b = z & 0x7f;
    z >>= 7;
    if (z) b |= 0x80;
    out->push_back(static_cast<char>(b));
  } while (z);
}

// A raw SourcePosition: the script offset above the external bit, the
// inlining id plus one (0: not inlined) from bit 31.
int64_t raw_position(int64_t script_offset, int inlining = -1,
                     bool external = false) {
  return (script_offset << 1) | (external ? 1 : 0) |
         (static_cast<int64_t>(inlining + 1) << 31);
}

struct Entry {
  int code_offset;
  int64_t raw;
  bool statement = true;
};

// A source position table as V8 writes it: per entry the bytecode
// offset's delta (-delta-1 for an expression), then the raw position's.
std::string encode(const std::vector<Entry>& entries) {
  std::string out;
  int64_t code = 0, raw = 0;
  for (const Entry& e : entries) {
    const int64_t delta = e.code_offset - code;
    put_vlq(e.statement ? delta : -delta - 1, &out);
    put_vlq(e.raw - raw, &out);
    code = e.code_offset;
    raw = e.raw;
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A function's table as Node 20 (V8 11.3) holds it, and its entries
// (bytecode offset, raw position).
const char kNode20Table[] = "013c02380440041405000a2805140e230b5f0890010424";
const std::vector<Entry> kNode20Entries = {
    {0, 30, false},  {1, 58},   {3, 90},          {5, 100},
    {7, 100, false}, {12, 120}, {14, 130, false}, {21, 112},
    {26, 64, false}, {30, 136}, {32, 154}};

// The encoder here writes the captured table byte for byte: it is V8's.
TEST(V8Frames, EncoderWritesWhatNodeWrote) {
  EXPECT_EQ(encode(kNode20Entries), from_hex(kNode20Table));
}

// A frame at an entry's bytecode offset is at that entry's script offset.
TEST(V8Frames, SourcePositionAtEntries) {
  const std::string t = encode({{0, raw_position(5)},
                                {4, raw_position(17), false},
                                {9, raw_position(3)},
                                {200, raw_position(100000)},
                                {100000, raw_position(42), false}});
  EXPECT_EQ(source_position(t, 0), 5);
  EXPECT_EQ(source_position(t, 4), 17);
  EXPECT_EQ(source_position(t, 9), 3);
  EXPECT_EQ(source_position(t, 200), 100000);
  EXPECT_EQ(source_position(t, 100000), 42);
}

// Between entries (and beyond the last) the last entry at or before the
// offset holds; before the first there is none.
TEST(V8Frames, SourcePositionBetweenBeforeAndBeyond) {
  const std::string t = encode(
      {{3, raw_position(10)}, {8, raw_position(30)}, {20, raw_position(25)}});
  EXPECT_EQ(source_position(t, 0), std::nullopt);
  EXPECT_EQ(source_position(t, 2), std::nullopt);
  EXPECT_EQ(source_position(t, -1), std::nullopt);
  EXPECT_EQ(source_position(t, 3), 10);
  EXPECT_EQ(source_position(t, 7), 10);
  EXPECT_EQ(source_position(t, 8), 30);
  EXPECT_EQ(source_position(t, 19), 30);
  EXPECT_EQ(source_position(t, 20), 25);
  EXPECT_EQ(source_position(t, 21), 25);
  EXPECT_EQ(source_position(t, 1 << 30), 25);
}

// Two entries at one offset (a statement, then an expression in it): the
// later one, as V8's own lookup.
TEST(V8Frames, SourcePositionTakesTheLastEntryAtAnOffset) {
  const std::string t = encode({{0, raw_position(1)},
                                {4, raw_position(20)},
                                {4, raw_position(24), false},
                                {6, raw_position(30)}});
  EXPECT_EQ(source_position(t, 4), 24);
  EXPECT_EQ(source_position(t, 5), 24);
}

TEST(V8Frames, SourcePositionOfAnEmptyTable) {
  EXPECT_EQ(source_position("", 0), std::nullopt);
  EXPECT_EQ(source_position("", 100), std::nullopt);
  EXPECT_EQ(source_position_raw("", 0), std::nullopt);
}

// A table cut inside a number (a last byte saying more follows) gives what
// its whole entries say, and reads nothing past its end.
TEST(V8Frames, SourcePositionOfATruncatedTable) {
  const std::string whole =
      encode({{0, raw_position(15)}, {5, raw_position(300)}});
  // Cut in the second entry's bytecode delta, then in its position.
  std::string cut_code = encode({{0, raw_position(15)}});
  cut_code.push_back('\x80');
  EXPECT_EQ(source_position(cut_code, 0), 15);
  EXPECT_EQ(source_position(cut_code, 100), 15);

  std::string cut_pos = encode({{0, raw_position(15)}});
  put_vlq(5, &cut_pos);
  cut_pos.push_back('\x80');
  EXPECT_EQ(source_position(cut_pos, 5), 15);
  EXPECT_EQ(source_position(cut_pos, 100), 15);

  // Every prefix of a table: no crash, and never a position it lacks.
  for (size_t n = 0; n <= whole.size(); ++n) {
    std::optional<int> p = source_position(whole.substr(0, n), 10);
    if (p) {
      EXPECT_TRUE(*p == 15 || *p == 300) << n << ": " << *p;
    }
  }
  EXPECT_EQ(source_position(whole, 10), 300);

  EXPECT_EQ(source_position(std::string(1, '\x80'), 0), std::nullopt);
  // More continuation bytes than a 64-bit number has.
  EXPECT_EQ(source_position(std::string(20, '\x80'), 0), std::nullopt);
  EXPECT_EQ(source_position(std::string(20, '\xff'), 0), std::nullopt);
}

// The table a Node 20 function holds: its entries' script offsets at and
// between them.
TEST(V8Frames, SourcePositionOfATableFromNode20) {
  const std::string t = from_hex(kNode20Table);
  for (const Entry& e : kNode20Entries) {
    std::optional<int64_t> raw = source_position_raw(t, e.code_offset);
    ASSERT_TRUE(raw) << e.code_offset;
    // (7, 100) follows (5, 100): the same value either way.
    EXPECT_EQ(*raw, e.raw) << e.code_offset;
  }
  EXPECT_EQ(source_position(t, 0), 15);
  EXPECT_EQ(source_position(t, 2), 29);   // (1, 58)
  EXPECT_EQ(source_position(t, 13), 60);  // (12, 120)
  EXPECT_EQ(source_position(t, 21), 56);  // 112 >> 1
  EXPECT_EQ(source_position(t, 25), 56);
  EXPECT_EQ(source_position(t, 26), 32);
  EXPECT_EQ(source_position(t, 32), 77);
  EXPECT_EQ(source_position(t, 100), 77);  // 154 >> 1
  EXPECT_EQ(source_position(t, -1), std::nullopt);
}

// A compiled code's table: the raw position keeps the inlining id.
TEST(V8Frames, SourcePositionRawKeepsTheInliningId) {
  const std::string t = encode({{0, raw_position(10)},
                                {5, raw_position(200, 5)},
                                {9, raw_position(40, 0)},
                                {30, raw_position(7, -1, true)}});
  std::optional<int64_t> raw = source_position_raw(t, 6);
  ASSERT_TRUE(raw);
  EXPECT_EQ(*raw, raw_position(200, 5));
  EXPECT_EQ(script_offset(*raw), 200);
  EXPECT_EQ(inlining_id(*raw), 5);
  EXPECT_EQ(source_position(t, 6), 200);

  raw = source_position_raw(t, 9);
  ASSERT_TRUE(raw);
  EXPECT_EQ(script_offset(*raw), 40);
  EXPECT_EQ(inlining_id(*raw), 0);

  raw = source_position_raw(t, 4);
  ASSERT_TRUE(raw);
  EXPECT_EQ(script_offset(*raw), 10);
  EXPECT_EQ(inlining_id(*raw), -1);

  raw = source_position_raw(t, 31);
  ASSERT_TRUE(raw);
  EXPECT_EQ(script_offset(*raw), 7);
  EXPECT_EQ(inlining_id(*raw), -1);
}

// A raw SourcePosition's parts: the external bit is neither; the script
// offset's 30 bits do not reach into the inlining id.
TEST(V8Frames, ScriptOffsetAndInliningId) {
  EXPECT_EQ(script_offset(raw_position(0)), 0);
  EXPECT_EQ(inlining_id(raw_position(0)), -1);
  EXPECT_EQ(script_offset(raw_position(123)), 123);
  EXPECT_EQ(inlining_id(raw_position(123)), -1);
  EXPECT_EQ(script_offset(raw_position(123, -1, true)), 123);
  EXPECT_EQ(inlining_id(raw_position(123, -1, true)), -1);

  EXPECT_EQ(script_offset(raw_position(77, 0)), 77);
  EXPECT_EQ(inlining_id(raw_position(77, 0)), 0);
  EXPECT_EQ(raw_position(77, 0), (int64_t{77} << 1) | (int64_t{1} << 31));

  EXPECT_EQ(script_offset(raw_position(4096, 5, true)), 4096);
  EXPECT_EQ(inlining_id(raw_position(4096, 5, true)), 5);
  EXPECT_EQ(raw_position(4096, 5), (int64_t{4096} << 1) | (int64_t{6} << 31));

  const int max_offset = (1 << 30) - 1;
  EXPECT_EQ(script_offset(raw_position(max_offset, 65534, true)), max_offset);
  EXPECT_EQ(inlining_id(raw_position(max_offset, 65534, true)), 65534);
  EXPECT_EQ(inlining_id(raw_position(max_offset)), -1);
}

// Lines from line ends: a line's '\n' is on it; past the last end is the
// last line, one with no '\n'.
TEST(V8Frames, LineOf) {
  const std::vector<int32_t> ends = {10, 20, 30};
  EXPECT_EQ(line_of(ends, 0), 1);
  EXPECT_EQ(line_of(ends, 9), 1);
  EXPECT_EQ(line_of(ends, 10), 1);
  EXPECT_EQ(line_of(ends, 11), 2);
  EXPECT_EQ(line_of(ends, 20), 2);
  EXPECT_EQ(line_of(ends, 21), 3);
  EXPECT_EQ(line_of(ends, 30), 3);
  EXPECT_EQ(line_of(ends, 31), 4);
  EXPECT_EQ(line_of(ends, 1000), 4);
  EXPECT_EQ(line_of(ends, -1), 0);
  EXPECT_EQ(line_of({}, 0), 1);
  EXPECT_EQ(line_of({}, 500), 1);
  EXPECT_EQ(line_of({}, -3), 0);
}

// Native frames and JavaScript frames' addresses for place().
constexpr uint64_t A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000, E = 0x5000,
                   X = 0x9000, Y = 0x9100, Z = 0x9200;
constexpr uint64_t J0 = kJsFrameTag | 0, J1 = kJsFrameTag | 1,
                   J2 = kJsFrameTag | 2, J3 = kJsFrameTag | 3,
                   J4 = kJsFrameTag | 4, J5 = kJsFrameTag | 5;

bool never(uint64_t) { return false; }
bool always(uint64_t) { return true; }

using Frames = std::vector<uint64_t>;

// JS frames found at native frames take their places, each with all the
// frames it stands for (an optimized function and those it inlined).
TEST(V8Frames, PlaceReplacesTheNativeFramesOfTheSamePc) {
  EXPECT_EQ(place({A, B, C, D}, {B, D}, {{J0}, {J1, J2}}, never),
            (Frames{A, J0, C, J1, J2}));
  EXPECT_EQ(place({A, B, C, D}, {B, D}, {{J0, J1, J2}, {J3}}, never),
            (Frames{A, J0, J1, J2, C, J3}));
  // No JS frame: the native frames as they are.
  EXPECT_EQ(place({A, B, C}, {}, {}, never), (Frames{A, B, C}));
}

// The sampled pc (native frame 0): in a file's code (a builtin) it stays
// and the JS frame follows; in JIT code the JS frame replaces it.
TEST(V8Frames, PlaceTheInnermostFrame) {
  EXPECT_EQ(place({A, B, C}, {A, C}, {{J0}, {J1}}, always),
            (Frames{A, J0, B, J1}));
  EXPECT_EQ(place({A, B, C}, {A, C}, {{J0}, {J1}}, never), (Frames{J0, B, J1}));
  // Only frame 0 is asked about: the others are replaced whatever it says.
  std::vector<uint64_t> asked;
  auto record = [&](uint64_t pc) {
    asked.push_back(pc);
    return true;
  };
  EXPECT_EQ(place({A, B, C}, {B, C}, {{J0}, {J1}}, record),
            (Frames{A, J0, J1}));
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(place({A, B, C}, {A, C}, {{J0, J1}, {J2}}, record),
            (Frames{A, J0, J1, B, J2}));
  EXPECT_EQ(asked, (std::vector<uint64_t>{A}));
}

// A JS frame whose pc is in no native frame goes just before the next one
// placed, after the last one placed, or at the end when none was placed.
TEST(V8Frames, PlaceJsFramesFoundInNoNativeFrame) {
  EXPECT_EQ(place({A, B, C, D, E}, {X, B, Y, D, Z},
                  {{J0}, {J1}, {J2}, {J3}, {J4}}, never),
            (Frames{A, J0, J1, C, J2, J3, J4, E}));
  // Several outer ones after the last placed, in order.
  EXPECT_EQ(place({A, B, C}, {B, X, Y}, {{J0}, {J1, J2}, {J3}}, never),
            (Frames{A, J0, J1, J2, J3, C}));
  // None placed.
  EXPECT_EQ(place({A, B}, {X, Y}, {{J0}, {J1}}, never), (Frames{A, B, J0, J1}));
  EXPECT_EQ(place({}, {X}, {{J0, J1}}, never), (Frames{J0, J1}));
  // Before a JS frame placed after a kept innermost frame.
  EXPECT_EQ(place({A, B}, {X, A}, {{J0}, {J1}}, always),
            (Frames{A, J0, J1, B}));
}

// A JS frame with no address is skipped: it takes no native frame.
TEST(V8Frames, PlaceSkipsAJsFrameWithNoAddress) {
  EXPECT_EQ(place({A, B, C}, {B, C}, {{}, {J1}}, never), (Frames{A, B, J1}));
  EXPECT_EQ(place({A, B, C}, {B, B}, {{}, {J1}}, never), (Frames{A, J1, C}));
  EXPECT_EQ(place({A, B, C}, {X, B}, {{}, {J1}}, never), (Frames{A, J1, C}));
  EXPECT_EQ(place({A, B}, {X}, {{}}, never), (Frames{A, B}));
}

// Matching only goes outward: two JS frames of one pc (recursion) take two
// successive native frames of that pc; one whose pc is only inner to the
// last placed is not found.
TEST(V8Frames, PlaceMatchesForwardOnly) {
  EXPECT_EQ(place({A, B, C, B, D}, {B, B}, {{J0}, {J1}}, never),
            (Frames{A, J0, C, J1, D}));
  EXPECT_EQ(place({A, B, C, B, D}, {B, B, B}, {{J0}, {J1}, {J2}}, never),
            (Frames{A, J0, C, J1, J2, D}));
  EXPECT_EQ(place({A, B, C, D}, {D, B}, {{J0}, {J1}}, never),
            (Frames{A, B, C, J0, J1}));
  // More addrs than pcs (or the reverse): only the pairs.
  EXPECT_EQ(place({A, B}, {B}, {{J0}, {J5}}, never), (Frames{A, J0}));
}

// What the kernel gets of the installed node: an 8-byte-slot window below
// the frame pointer holding its saved fp, return address, marker, function
// and bytecode slots, and how to find a JSFunction's SharedFunctionInfo.
TEST(V8Frames, KernelLayoutOfTheInstalledNode) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  Result<V8Layout> l = read_v8_layout(kNode);
  ASSERT_TRUE(l.ok()) << l.status().message();
  Result<lt_v8_proc> k = kernel_layout(*l);
  ASSERT_TRUE(k.ok()) << k.status().message();

  const FrameOffsets& f = l->frame;
  EXPECT_EQ(k->window, -40);
  EXPECT_EQ(k->window_len, 56);
  EXPECT_LE(k->window_len, LT_JS_WINDOW);
  // The window runs from its lowest slot to the return address.
  EXPECT_EQ(k->window, std::min({f.function, f.context_or_frame_type,
                                 f.bytecode_array, f.bytecode_offset}));
  EXPECT_EQ(k->window + k->window_len, 16);
  auto slot = [&](int32_t off) { return (off - k->window) / 8; };
  EXPECT_EQ(k->slot_saved_fp, slot(0));
  EXPECT_EQ(k->slot_ret, slot(8));
  EXPECT_EQ(k->slot_marker, slot(f.context_or_frame_type));
  EXPECT_EQ(k->slot_function, slot(f.function));
  EXPECT_EQ(k->slot_bytecode_array, slot(f.bytecode_array));
  EXPECT_EQ(k->slot_bytecode_offset, slot(f.bytecode_offset));
  EXPECT_EQ(k->slot_saved_fp, 5);
  EXPECT_EQ(k->slot_ret, 6);
  EXPECT_EQ(k->slot_marker, 4);
  EXPECT_EQ(k->slot_function, 3);
  EXPECT_EQ(k->slot_bytecode_array, 1);
  EXPECT_EQ(k->slot_bytecode_offset, 0);

  EXPECT_EQ(k->js_function_shared, l->objects.js_function_shared);
  EXPECT_EQ(k->js_function_shared, 24);
  EXPECT_EQ(k->heap_object_tag, 1u);
  EXPECT_EQ(k->heap_object_tag_mask, 3u);
}

// A V8 with pointer compression, or whose frame slots lie beyond what the
// kernel copies, is refused in one line naming why.
TEST(V8Frames, KernelLayoutRefusesWhatItCannotRead) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  Result<V8Layout> l = read_v8_layout(kNode);
  ASSERT_TRUE(l.ok()) << l.status().message();

  V8Layout compressed = *l;
  compressed.tagging.tagged_size = 4;
  Result<lt_v8_proc> k = kernel_layout(compressed);
  ASSERT_FALSE(k.ok());
  const std::string m = k.status().message();
  EXPECT_NE(m.find("pointer compression"), std::string::npos) << m;
  EXPECT_NE(m.find(kNode), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;

  V8Layout far = *l;
  far.frame.function = -200;
  k = kernel_layout(far);
  ASSERT_FALSE(k.ok());
  const std::string w = k.status().message();
  EXPECT_NE(w.find(kNode), std::string::npos) << w;
  EXPECT_NE(w.find("216 bytes"), std::string::npos) << w;  // 16 - -200
  EXPECT_EQ(w.find('\n'), std::string::npos) << w;
}

}  // namespace
}  // namespace looptrace::v8
