// Python frames from outside: CPython 3.11's location table decoded from
// byte fixtures (the tables and the lines are CPython's own: co_linetable
// and co_lines() of the functions quoted), the layout table against the
// interpreter's headers, the version check, the code object reader on a
// fake process memory, the interleaving of Python and native frames, and
// the sample record's Python tail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "python/frames.h"
#include "python/interpreter.h"
#include "python/layout.h"
#include "python/linetable.h"
#include "trace/decode.h"

namespace looptrace::python {
namespace {

using Ranges = std::vector<std::tuple<int, int, int>>;  // start, end, line

// Every instruction of every range has the range's line (0: none).
void expect_lines(std::string_view table, int first, const Ranges& ranges) {
  for (auto [start, end, line] : ranges)
    for (int off = start; off < end; off += 2)
      EXPECT_EQ(line_at(table, first, off), line == 0 ? -1 : line)
          << "offset " << off;
  EXPECT_EQ(line_at(table, first, std::get<1>(ranges.back())), -1);
}

// def f(x):            # line 2
//     y = x + 1
//     if y:
//
//
//         z = [i
//              for i in range(3)]
//     for k in range(2):
//         y += k
//     return (y,
//             z)
TEST(PyLineTable, LinesOfAFunctionAsCPythonGivesThem) {
  const std::string_view t(
      "\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41\xd8\x07\x08\xf0\x00\x04"
      "\x05\x20\xf0\x06\x01\x0d\x20\xf0\x00\x01\x0d\x20\xdd\x16\x1b\x98\x41"
      "\x91\x68\x94\x68\xf0\x03\x01\x0d\x20\xf1\x00\x01\x0d\x20\xf4\x00\x01"
      "\x0d\x20\x88\x01\xe5\x0d\x12\x90\x31\x89\x58\x8c\x58\xf0\x00\x01\x05"
      "\x0f\xf0\x00\x01\x05\x0f\x88\x01\xd8\x08\x09\x88\x51\x89\x06\x88\x01"
      "\x88\x01\xd8\x0c\x0d\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05"
      "\x0f",
      103);
  expect_lines(t, 2,
               {{0, 2, 2},
                {2, 12, 3},
                {12, 16, 4},
                {16, 20, 7},
                {20, 48, 8},
                {48, 66, 7},
                {66, 100, 9},
                {100, 112, 10},
                {112, 114, 11},
                {114, 116, 12},
                {116, 120, 11}});
}

// def g(a):            # line 2
//     try:
//         a()
//     except ValueError:
//         pass
// (no line for the exception table's cleanup code)
TEST(PyLineTable, CodeWithoutALineHasNone) {
  const std::string_view t(
      "\x80\x00\xf0\x02\x03\x05\x0d\xd8\x08\x09\x88\x01\x89\x03\x8c\x03\x88"
      "\x03\x88\x03\x88\x03\xf8\xdd\x0b\x15\xf0\x00\x01\x05\x0d\xf0\x00\x01"
      "\x05\x0d\xf0\x00\x01\x05\x0d\xd8\x08\x0c\x88\x04\x88\x04\xf0\x03\x01"
      "\x05\x0d\xf8\xf8\xf8",
      56);
  expect_lines(t, 2,
               {{0, 2, 2},
                {2, 4, 3},
                {4, 28, 4},
                {28, 30, 0},
                {30, 48, 5},
                {48, 54, 6},
                {54, 56, 5},
                {56, 62, 0}});
}

// Objects/locations.md: code 13 is a line delta alone (a signed varint),
// and varints continue in 6-bit chunks.
TEST(PyLineTable, NoColumnsEntryAndLongVarints) {
  // +3 over 2 units, then -70 as a 2-chunk svarint (141 = 0b10001101:
  // chunks 0b001101 | 0x40, 0b10) over 1 unit.
  const std::string_view t("\xe9\x06\xe8\x4d\x02", 5);
  EXPECT_EQ(line_at(t, 100, 0), 103);
  EXPECT_EQ(line_at(t, 100, 2), 103);
  EXPECT_EQ(line_at(t, 100, 4), 33);
  EXPECT_EQ(line_at(t, 100, 6), -1);
}

TEST(PyLineTable, MalformedTablesEndTheWalk) {
  // A varint that never ends, a continuation byte first, nothing at all.
  EXPECT_EQ(line_at(std::string_view("\xe8\x7f\x7f", 3), 1, 0), -1);
  EXPECT_EQ(line_at(std::string_view("\x01\x80", 2), 1, 0), -1);
  EXPECT_EQ(line_at(std::string_view(), 1, 0), -1);
  // Every prefix of a real table reads within itself.
  const std::string t("\x80\x00\xf0\x02\x03\x05\x0d\xd8\x08\x09", 10);
  for (size_t n = 0; n <= t.size(); ++n)
    for (uint64_t off = 0; off < 40; off += 2)
      (void)line_at(std::string_view(t.data(), n), 1, off);
}

// The committed table is what the generator prints from the installed
// headers (python3.11-dev).
TEST(PyLayout, TableMatchesTheInterpretersHeaders) {
  const std::string gen =
      std::string(LT_TEST_PROGRAMS_DIR) + "/python_offsets_311";
  if (access(gen.c_str(), X_OK) != 0)
    GTEST_SKIP() << "python3.11-dev is not installed";
  FILE* p = popen(gen.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0);
  std::ifstream in(std::string(LT_SOURCE_DIR) + "/user/python/layout_311.inc");
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(out, committed.str())
      << "regenerate with scripts/python-offsets.sh 3.11";
}

TEST(PyLayout, OnlyKnownVersionsHaveOne) {
  const Layout* l = layout_for(0x030b02f0);  // 3.11.2
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->minor, 11u);
  EXPECT_EQ(layout_for(0x030b0af0), l);  // any 3.11.x
  EXPECT_EQ(layout_for(0x030c00f0), nullptr);
  EXPECT_EQ(layout_for(0x030a0cf0), nullptr);
  EXPECT_EQ(layout_for(0x020700f0), nullptr);
  EXPECT_EQ(version_string(0x030c01f0), "3.12.1");
}

// The kernel reads each interpreter frame with one copy: a window that
// holds the frame's code, previous frame, instruction and entry byte. A
// CPython 3.11 frame as bytes, its fields where the layout puts them (the
// table matches the headers, above): the window the kernel copies gives
// them back at the offsets it takes them from (bpf/python.h py_frame).
TEST(PyLayout, KernelReadsEachFrameInOneWindow) {
  const Layout* l = layout_for(0x030b02f0);
  ASSERT_NE(l, nullptr);
  auto k = kernel_offsets(*l);
  ASSERT_TRUE(k.ok()) << k.status().message();
  const lt_py_offsets& f = l->frames;
  EXPECT_EQ(k->frame_window, f.frame_code);  // f_code is the first
  EXPECT_EQ(k->frame_window_len, f.frame_is_entry + 1 - f.frame_code);
  EXPECT_LE(k->frame_window_len, LT_PY_FRAME_WINDOW);
  // Everything but the window is as the table says.
  lt_py_offsets rest = *k;
  rest.frame_window = rest.frame_window_len = 0;
  EXPECT_EQ(std::memcmp(&rest, &f, sizeof(rest)), 0);

  uint8_t frame[128] = {};
  const uint64_t code = 0x7f0000101230, prev = 0x7f0000202340,
                 instr = 0x7f00003034b6;
  std::memcpy(frame + f.frame_code, &code, 8);
  std::memcpy(frame + f.frame_previous, &prev, 8);
  std::memcpy(frame + f.frame_prev_instr, &instr, 8);
  frame[f.frame_is_entry] = 1;
  uint8_t w[LT_PY_FRAME_WINDOW] = {};
  std::memcpy(w, frame + k->frame_window, k->frame_window_len);
  auto at = [&](uint16_t off) {
    uint64_t v = 0;
    EXPECT_EQ(off % 8, 0) << off;
    EXPECT_LE(off - k->frame_window + 8, k->frame_window_len) << off;
    std::memcpy(&v, w + (off - k->frame_window), 8);
    return v;
  };
  EXPECT_EQ(at(f.frame_code), code);
  EXPECT_EQ(at(f.frame_previous), prev);
  EXPECT_EQ(at(f.frame_prev_instr), instr);
  EXPECT_EQ(w[f.frame_is_entry - k->frame_window], 1);

  // CPython 3.12's and 3.13's frames (no entry byte; f_code or
  // f_executable first, previous next, prev_instr or instr_ptr at 56, from
  // their pycore_frame.h) fit too.
  Layout later = *l;
  later.minor = 12;
  later.frames.frame_code = 0;
  later.frames.frame_previous = 8;
  later.frames.frame_prev_instr = 56;
  later.frames.frame_is_entry = LT_PY_NONE;
  k = kernel_offsets(later);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->frame_window, 0);
  EXPECT_EQ(k->frame_window_len, 64);
  EXPECT_EQ(k->frame_is_entry, LT_PY_NONE);
}

// The kernel keys a code object by its first line, qualname and line
// table pointers, read in one window; it takes them back with the masks of
// bpf/python.h py_code_key (indices masked by the window's size, a power
// of two).
TEST(PyLayout, KernelKeysEachCodeObjectFromOneWindow) {
  static_assert((LT_PY_CODE_WINDOW & (LT_PY_CODE_WINDOW - 1)) == 0);
  const Layout* l = layout_for(0x030b02f0);
  ASSERT_NE(l, nullptr);
  auto k = code_offsets(*l);
  ASSERT_TRUE(k.ok()) << k.status().message();
  const CodeLayout& c = l->code;
  EXPECT_EQ(k->key_window, c.co_firstlineno);  // 72: the first of them
  EXPECT_EQ(k->key_window_len, c.co_linetable + 8 - c.co_firstlineno);
  EXPECT_LE(k->key_window_len, LT_PY_CODE_WINDOW);
  EXPECT_EQ(k->qualname, c.co_qualname);
  EXPECT_EQ(k->filename, c.co_filename);
  EXPECT_EQ(k->compact_size, c.compact_size);

  uint8_t code[256] = {};
  const uint64_t qualname = 0x7f0000101230, table = 0x7f0000202340;
  const int32_t first = 1234;
  std::memcpy(code + c.co_qualname, &qualname, 8);
  std::memcpy(code + c.co_linetable, &table, 8);
  std::memcpy(code + c.co_firstlineno, &first, 4);
  uint64_t w[LT_PY_CODE_WINDOW / 8] = {};
  std::memcpy(w, code + k->key_window, k->key_window_len);
  auto word = [&](uint16_t off) {
    return w[((off - k->key_window) >> 3) & (LT_PY_CODE_WINDOW / 8 - 1)];
  };
  EXPECT_EQ(word(k->qualname), qualname);
  EXPECT_EQ(word(k->linetable), table);
  int32_t got = 0;
  std::memcpy(&got,
              reinterpret_cast<const int32_t*>(w) +
                  (((k->firstlineno - k->key_window) >> 2) &
                   (LT_PY_CODE_WINDOW / 4 - 1)),
              4);
  EXPECT_EQ(got, first);

  // Fields too far apart, or unaligned: refused in one line.
  Layout wide = *l;
  wide.code.co_linetable = 72 + 200;
  auto bad = code_offsets(wide);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("208 bytes"), std::string::npos)
      << bad.status().message();
  Layout unaligned = *l;
  unaligned.code.co_qualname = 124;
  bad = code_offsets(unaligned);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("aligned"), std::string::npos);
}

// A layout whose frame the kernel could not read in one window is refused
// in one line (the interpreter then keeps its native frames only).
TEST(PyLayout, AFrameTheWindowCannotHoldIsRefusedInOneLine) {
  const Layout* l = layout_for(0x030b02f0);
  ASSERT_NE(l, nullptr);
  auto refused = [](const Layout& bad) {
    auto k = kernel_offsets(bad);
    EXPECT_FALSE(k.ok());
    if (k.ok()) return std::string();
    const std::string msg = k.status().message();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find("CPython 3.11"), std::string::npos) << msg;
    return msg;
  };
  Layout wide = *l;
  wide.frames.frame_prev_instr = 96;  // 32 .. 104: 72 bytes
  EXPECT_NE(refused(wide).find("72 bytes"), std::string::npos);
  Layout byte_wide = *l;
  byte_wide.frames.frame_is_entry = 96;  // 32 .. 97
  EXPECT_NE(refused(byte_wide).find("65 bytes"), std::string::npos);
  Layout unaligned = *l;
  unaligned.frames.frame_previous = 44;
  EXPECT_NE(refused(unaligned).find("aligned"), std::string::npos);
  Layout missing = *l;
  missing.frames.frame_code = LT_PY_NONE;
  EXPECT_NE(refused(missing).find("aligned"), std::string::npos);
  // 64 bytes exactly is read.
  Layout full = *l;
  full.frames.frame_prev_instr = 88;  // 32 .. 96
  auto k = kernel_offsets(full);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->frame_window_len, 64);
}

TEST(PyInterpreter, UnknownVersionIsRefusedInOneLine) {
  const std::string fake = std::string(LT_TEST_PROGRAMS_DIR) + "/python3_fake";
  MapEntry m;
  m.start = 0x400000;
  m.end = 0x500000;
  m.perms = "r-xp";
  m.path = fake;
  auto in = find_interpreter(getpid(), {m});
  ASSERT_FALSE(in.ok());
  const std::string& msg = in.status().message();
  EXPECT_NE(msg.find("CPython 3.12.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3.11"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(PyInterpreter, NoPythonMappedIsNoInterpreter) {
  MapEntry m;
  m.path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  auto in = find_interpreter(getpid(), {m});
  ASSERT_TRUE(in.ok());
  EXPECT_FALSE(in->has_value());
}

// A process's memory, page-less: blocks at addresses.
struct FakeMemory {
  std::map<uint64_t, std::string> blocks;
  void put(uint64_t addr, const void* p, size_t n) {
    blocks[addr] = std::string(static_cast<const char*>(p), n);
  }
  template <typename T>
  void put_at(uint64_t addr, T v) {
    put(addr, &v, sizeof(v));
  }
  MemoryReader reader() const {
    return [this](uint32_t, uint64_t addr, void* out, size_t len) {
      for (const auto& [at, bytes] : blocks)
        if (addr >= at && addr + len <= at + bytes.size()) {
          std::memcpy(out, bytes.data() + (addr - at), len);
          return true;
        }
      return false;
    };
  }
};

// A compact str at addr: ASCII (kind 1, ascii) or UCS-2 (kind 2).
void put_str(FakeMemory* mem, const CodeLayout& l, uint64_t addr,
             const std::u16string& s, bool ascii) {
  std::string obj(ascii ? l.ascii_size : l.compact_size, '\0');
  int64_t len = static_cast<int64_t>(s.size());
  uint32_t state = (ascii ? 1u : 2u) << 2 | 1u << 5 | (ascii ? 1u << 6 : 0);
  std::memcpy(&obj[l.unicode_length], &len, 8);
  std::memcpy(&obj[l.unicode_state], &state, 4);
  for (char16_t c : s) {
    if (ascii)
      obj += static_cast<char>(c);
    else
      obj.append(reinterpret_cast<const char*>(&c), 2);
  }
  mem->put(addr, obj.data(), obj.size());
}

TEST(PyCode, ReadsNamesFileAndLineTable) {
  const Layout& lay = *layout_for(0x030b02f0);
  const CodeLayout& l = lay.code;
  FakeMemory mem;
  const uint64_t code = 0x10000, type = 0x5000;
  std::string obj(l.co_code_adaptive, '\0');
  auto set = [&](uint16_t off, uint64_t v, size_t n) {
    std::memcpy(&obj[off], &v, n);
  };
  set(l.ob_type, type, 8);
  set(l.co_qualname, 0x20000, 8);
  set(l.co_filename, 0x30000, 8);
  set(l.co_linetable, 0x40000, 8);
  set(l.co_firstlineno, 17, 4);
  mem.put(code, obj.data(), obj.size());
  put_str(&mem, l, 0x20000, u"Loop.on_timeout", true);
  put_str(&mem, l, 0x30000, u"/tmp/caf\u00e9\n.py", false);
  std::string table(l.bytes_sval, '\0');
  int64_t n = 3;
  std::memcpy(&table[l.bytes_size], &n, 8);
  table += std::string("\x80\x00\xd8", 3);
  mem.put(0x40000, table.data(), table.size());

  CodeInfo c = read_code(mem.reader(), 1, lay, type, code);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(c.qualname, "Loop.on_timeout");
  EXPECT_EQ(c.filename, "/tmp/caf\xc3\xa9\\x0a.py");  // UTF-8, escaped
  EXPECT_EQ(c.firstlineno, 17);
  EXPECT_EQ(c.linetable, std::string("\x80\x00\xd8", 3));
  // Not a code object (freed, reused): not read.
  EXPECT_FALSE(read_code(mem.reader(), 1, lay, type + 8, code).ok);
  EXPECT_FALSE(read_code(mem.reader(), 1, lay, type, code + 0x100000).ok);
}

lt_pyframe pyf(uint64_t code, bool entry) {
  return lt_pyframe{code | (entry ? LT_PYFRAME_ENTRY : 0), 0};
}

TEST(PyInterleave, EachEvalCallTakesItsRun) {
  const uint64_t E = 0xe0;  // an address in the eval loop
  auto is_eval = [&](uint64_t a) { return a == E; };
  // Two eval calls: the inner runs p1 p2, the outer p3.
  std::vector<lt_pyframe> py{pyf(8, false), pyf(16, true), pyf(24, true)};
  std::vector<uint64_t> addrs{101, 102, 103};
  EXPECT_EQ(interleave({1, E, 2, E, 3}, py, addrs, is_eval),
            (std::vector<uint64_t>{1, 101, 102, E, 2, 103, E, 3}));
  // A native walk that lost the outer eval call: its run follows the inner.
  EXPECT_EQ(interleave({1, E, 0x666}, py, addrs, is_eval),
            (std::vector<uint64_t>{1, 101, 102, E, 103, 0x666}));
  // None found: the Python frames end the stack.
  EXPECT_EQ(interleave({1, 2}, py, addrs, is_eval),
            (std::vector<uint64_t>{1, 2, 101, 102, 103}));
  // More eval calls than runs: the outer ones stay native.
  EXPECT_EQ(interleave({1, E, E}, {pyf(8, true)}, {101}, is_eval),
            (std::vector<uint64_t>{1, 101, E, E}));
}

TEST(PyDecode, SampleCarriesItsPythonFrames) {
  lt_py_sample_rec r{};
  r.s.hdr.type = LT_REC_SAMPLE;
  r.s.hdr.size = sizeof(r);
  r.s.hdr.pid = 7;
  r.s.nframes = 1;
  r.s.frames[0] = 0x401000;
  r.py.nframes = 2;
  r.py.flags = LT_PY_CUT;
  r.py.frames[0] = {0x1000 | LT_PYFRAME_ENTRY, 0x10b8};
  r.py.frames[1] = {0x2000, 0x20c0};
  Event ev;
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  const auto& s = std::get<SampleEvent>(ev);
  ASSERT_NE(s.stack.py, nullptr);
  ASSERT_EQ(s.stack.py->frames.size(), 2u);
  EXPECT_EQ(s.stack.py->frames[0].code, 0x1000 | LT_PYFRAME_ENTRY);
  EXPECT_EQ(s.stack.py->frames[1].instr, 0x20c0u);
  EXPECT_EQ(s.stack.py->flags, LT_PY_CUT);
  // Too many frames, or a size that is neither: refused.
  r.py.nframes = LT_MAX_PYFRAMES + 1;
  EXPECT_FALSE(decode_record(&r, sizeof(r), &ev));
  r.py.nframes = 2;
  r.s.hdr.size = sizeof(r) - 8;
  EXPECT_FALSE(decode_record(&r, sizeof(r), &ev));
  // Without the tail: no Python frames.
  r.s.hdr.size = sizeof(lt_sample_rec);
  ASSERT_TRUE(decode_record(&r, sizeof(lt_sample_rec), &ev));
  EXPECT_EQ(std::get<SampleEvent>(ev).stack.py, nullptr);
}

// Python frames as the kernel writes them: two, the innermost an entry.
void fill_py(lt_pystack* py) {
  py->nframes = 2;
  py->frames[0] = {0x1000 | LT_PYFRAME_ENTRY, 0x10b8};
  py->frames[1] = {0x2000, 0x20c0};
}

void expect_py(const std::shared_ptr<const PyStack>& py) {
  ASSERT_NE(py, nullptr);
  ASSERT_EQ(py->frames.size(), 2u);
  EXPECT_EQ(py->frames[0].code, 0x1000 | LT_PYFRAME_ENTRY);
  EXPECT_EQ(py->frames[1].instr, 0x20c0u);
}

TEST(PyDecode, BlockingPointCarriesItsPythonFrames) {
  struct {
    lt_offcpu_rec r;
    lt_pystack py;
  } b{};
  static_assert(sizeof(b) == sizeof(lt_offcpu_rec) + sizeof(lt_pystack));
  b.r.hdr.type = LT_REC_OFFCPU;
  b.r.hdr.size = sizeof(b);
  b.r.nframes = 1;
  b.r.frames[0] = 0x401000;
  fill_py(&b.py);
  Event ev;
  ASSERT_TRUE(decode_record(&b, sizeof(b), &ev));
  expect_py(std::get<BlockEvent>(ev).stack.py);
  EXPECT_EQ(std::get<BlockEvent>(ev).stack.frames.size(), 1u);
  // Too many frames, a size that is neither, a tail cut short: refused.
  b.py.nframes = LT_MAX_PYFRAMES + 1;
  EXPECT_FALSE(decode_record(&b, sizeof(b), &ev));
  b.py.nframes = 2;
  b.r.hdr.size = sizeof(b) - 8;
  EXPECT_FALSE(decode_record(&b, sizeof(b), &ev));
  b.r.hdr.size = sizeof(b);
  EXPECT_FALSE(decode_record(&b, sizeof(b) - 8, &ev));
  // Without the tail: no Python frames.
  b.r.hdr.size = sizeof(lt_offcpu_rec);
  ASSERT_TRUE(decode_record(&b, sizeof(lt_offcpu_rec), &ev));
  EXPECT_EQ(std::get<BlockEvent>(ev).stack.py, nullptr);

  // After the copy of the user stack (--call-graph dwarf, auto).
  struct WithCopy {
    lt_offcpu_copy_rec c;
    lt_pystack py;
  };
  auto w = std::make_unique<WithCopy>();
  w->c.r.hdr.type = LT_REC_OFFCPU;
  w->c.r.hdr.size = sizeof(WithCopy);
  w->c.u.stack_len = 16;
  fill_py(&w->py);
  ASSERT_TRUE(decode_record(w.get(), sizeof(WithCopy), &ev));
  expect_py(std::get<BlockEvent>(ev).stack.py);
  EXPECT_NE(std::get<BlockEvent>(ev).stack.ustack, nullptr);
}

TEST(PyDecode, BarrierPostCarriesItsPythonFrames) {
  struct {
    lt_point_rec p;
    lt_pystack py;
  } r{};
  r.p.hdr.type = LT_REC_POINT;
  r.p.hdr.size = sizeof(r);
  r.p.role = LT_ROLE_BARRIER_POST;
  r.p.nframes = 1;
  fill_py(&r.py);
  Event ev;
  ASSERT_TRUE(decode_record(&r, sizeof(r), &ev));
  expect_py(std::get<PointEvent>(ev).py);
  r.p.hdr.size = sizeof(r) + 8;
  EXPECT_FALSE(decode_record(&r, sizeof(r), &ev));
  r.p.hdr.size = sizeof(lt_point_rec);
  ASSERT_TRUE(decode_record(&r, sizeof(lt_point_rec), &ev));
  EXPECT_EQ(std::get<PointEvent>(ev).py, nullptr);
}

TEST(PyDecode, WakerCarriesItsPythonFrames) {
  struct {
    lt_wake_rec r;
    lt_pystack py;
  } w{};
  w.r.hdr.type = LT_REC_WAKE;
  w.r.hdr.size = sizeof(w);
  w.r.waker_pid = 7;
  w.r.nframes = 1;
  w.r.frames[0] = 0x401000;
  fill_py(&w.py);
  Event ev;
  ASSERT_TRUE(decode_record(&w, sizeof(w), &ev));
  expect_py(std::get<WakeEvent>(ev).stack.py);
  w.py.nframes = LT_MAX_PYFRAMES + 1;
  EXPECT_FALSE(decode_record(&w, sizeof(w), &ev));
  w.r.hdr.size = sizeof(lt_wake_rec);
  ASSERT_TRUE(decode_record(&w, sizeof(lt_wake_rec), &ev));
  EXPECT_EQ(std::get<WakeEvent>(ev).stack.py, nullptr);
}

// A str as the kernel copies it into LT_REC_PYCODE: the str's length and
// state, and its characters as stored, at most `max` bytes of them.
void put_kernel_str(lt_py_str* s, uint8_t* bytes, size_t max,
                    const std::u16string& text, bool ascii) {
  const uint32_t kind = ascii ? 1 : 2;
  s->length = static_cast<int64_t>(text.size());
  s->state = kind << 2 | 1u << 5 | (ascii ? 1u << 6 : 0);
  std::string b;
  for (char16_t c : text) {
    if (ascii)
      b += static_cast<char>(c);
    else
      b.append(reinterpret_cast<const char*>(&c), 2);
  }
  s->nbytes = static_cast<uint32_t>(std::min(b.size(), max));
  std::memcpy(bytes, b.data(), s->nbytes);
}

std::unique_ptr<lt_py_code_rec> code_rec(uint64_t code, const char16_t* name,
                                         int first) {
  auto r = std::make_unique<lt_py_code_rec>();
  std::memset(r.get(), 0, sizeof(*r));
  r->hdr.type = LT_REC_PYCODE;
  r->hdr.size = sizeof(*r);
  r->hdr.pid = 1;
  r->code = code;
  r->firstlineno = first;
  put_kernel_str(&r->qualname, r->qualname_bytes, LT_PY_NAME_BYTES, name, true);
  put_kernel_str(&r->filename, r->filename_bytes, LT_PY_FILE_BYTES,
                 u"/tmp/caf\u00e9\n.py", false);
  // f's table above: line 2 at offset 0, line 3 from offset 2.
  const std::string table("\x80\x00\xd8\x02", 4);
  r->table_size = r->table_nbytes = table.size();
  std::memcpy(r->table, table.data(), table.size());
  return r;
}

TEST(PyCodeRecord, DecodesNamesFileAndLineTable) {
  auto r = code_rec(0x10000, u"Loop.on_timeout", 2);
  auto k = decode_code_record(r.get(), sizeof(*r));
  ASSERT_TRUE(k);
  EXPECT_EQ(k->pid, 1u);
  EXPECT_EQ(k->code, 0x10000u);
  ASSERT_TRUE(k->info.ok);
  EXPECT_EQ(k->info.qualname, "Loop.on_timeout");
  EXPECT_EQ(k->info.filename, "/tmp/caf\xc3\xa9\\x0a.py");  // UTF-8, escaped
  EXPECT_EQ(k->info.firstlineno, 2);
  EXPECT_EQ(k->info.linetable, std::string("\x80\x00\xd8\x02", 4));
  EXPECT_EQ(line_at(k->info.linetable, 2, 2), 3);
}

TEST(PyCodeRecord, LongNamesAndTablesAreCut) {
  auto r = code_rec(0x10000, u"f", 2);
  // 300 characters, of which the kernel copied its 256 bytes.
  put_kernel_str(&r->qualname, r->qualname_bytes, LT_PY_NAME_BYTES,
                 std::u16string(300, u'q'), true);
  // A table of 10 KiB of which 4 KiB came: the lines it has are read.
  r->table_size = 10240;
  r->table_nbytes = LT_PY_TABLE_BYTES;
  auto k = decode_code_record(r.get(), sizeof(*r));
  ASSERT_TRUE(k && k->info.ok);
  EXPECT_EQ(k->info.qualname, std::string(256, 'q') + "...");
  EXPECT_EQ(k->info.linetable.size(), size_t{LT_PY_TABLE_BYTES});
  // UCS-2: 128 characters in the 256 bytes.
  put_kernel_str(&r->qualname, r->qualname_bytes, LT_PY_NAME_BYTES,
                 std::u16string(200, u'\u00e9'), false);
  k = decode_code_record(r.get(), sizeof(*r));
  ASSERT_TRUE(k && k->info.ok);
  EXPECT_EQ(k->info.qualname.size(), 128u * 2 + 3);
}

TEST(PyCodeRecord, HostileRecordsAreRefused) {
  auto r = code_rec(0x10000, u"f", 2);
  auto decodes = [&] {
    return decode_code_record(r.get(), sizeof(*r)).has_value();
  };
  ASSERT_TRUE(decodes());
  EXPECT_FALSE(decode_code_record(r.get(), sizeof(*r) - 1));
  r->hdr.size = sizeof(*r) + 8;
  EXPECT_FALSE(decodes());
  r = code_rec(0x10000, u"f", 2);
  r->table_nbytes = LT_PY_TABLE_BYTES + 1;
  r->table_size = 1 << 20;
  EXPECT_FALSE(decodes());
  r = code_rec(0x10000, u"f", 2);
  r->table_nbytes = 4;
  r->table_size = 3;  // more read than there is
  EXPECT_FALSE(decodes());
  r = code_rec(0, u"f", 2);
  EXPECT_FALSE(decodes());
  // A str the kernel could not read (not compact, more bytes than it
  // holds, a negative length): decoded, but its names are not trusted.
  for (auto spoil : std::vector<std::function<void(lt_py_str*)>>{
           [](lt_py_str* s) { s->state &= ~(1u << 5); },
           [](lt_py_str* s) { s->nbytes = LT_PY_NAME_BYTES + 1; },
           [](lt_py_str* s) { s->length = -1; },
           [](lt_py_str* s) { s->nbytes = 0; }}) {
    r = code_rec(0x10000, u"f", 2);
    spoil(&r->qualname);
    auto k = decode_code_record(r.get(), sizeof(*r));
    ASSERT_TRUE(k);
    EXPECT_FALSE(k->info.ok);
  }
}

// A PyFrames whose process 1 runs a 3.11 interpreter over `mem`.
struct Named {
  FakeMemory mem;
  PyFrames py{mem.reader()};
  static constexpr uint64_t kEval = 0xe0, kType = 0x5000;
  Named() {
    Interpreter in;
    in.layout = layout_for(0x030b02f0);
    in.code_type = kType;
    in.eval_start = in.eval_end = kEval;
    py.add(1, in);
  }
  // The name of the Python frame of code `code` in a one-frame stack; the
  // stack's flags as merge leaves them.
  std::string name(uint64_t code, uint32_t flags = 0, Stack* out = nullptr) {
    Stack st;
    st.frames = {1, kEval, 2};
    auto ps = std::make_shared<PyStack>();
    ps->frames = {{code | LT_PYFRAME_ENTRY, 0}};
    ps->flags = flags;
    st.py = ps;
    py.merge(1, &st);
    if (out) *out = st;
    return st.frames.size() == 4 ? py.frame(st.frames[1]).function : "";
  }
};

TEST(PyFramesNames, TheKernelsRecordBeatsTheMemoryAndAReusedAddressIsRenamed) {
  Named n;
  // What the memory now holds at 0x10000 (another code object since).
  const CodeLayout& l = layout_for(0x030b02f0)->code;
  std::string obj(l.co_code_adaptive, '\0');
  uint64_t v = Named::kType;
  std::memcpy(&obj[l.ob_type], &v, 8);
  v = 0x20000;
  std::memcpy(&obj[l.co_qualname], &v, 8);
  std::memcpy(&obj[l.co_filename], &v, 8);
  v = 0x40000;
  std::memcpy(&obj[l.co_linetable], &v, 8);
  n.mem.put(0x10000, obj.data(), obj.size());
  put_str(&n.mem, l, 0x20000, u"now_there", true);
  std::string table(l.bytes_sval, '\0');
  n.mem.put(0x40000, table.data(), table.size());

  auto k = decode_code_record(code_rec(0x10000, u"cb_1", 2).get(),
                              sizeof(lt_py_code_rec));
  ASSERT_TRUE(k);
  n.py.learn(*k);
  EXPECT_EQ(n.name(0x10000), "cb_1 (caf\xc3\xa9\\x0a.py:2)");
  // Another code object at the same address, sent by the kernel: its
  // frames get its name, the frames named before keep theirs.
  Stack before;
  n.name(0x10000, 0, &before);
  k = decode_code_record(code_rec(0x10000, u"cb_2", 3).get(),
                         sizeof(lt_py_code_rec));
  n.py.learn(*k);
  EXPECT_EQ(n.name(0x10000), "cb_2 (caf\xc3\xa9\\x0a.py:3)");
  EXPECT_EQ(n.py.frame(before.frames[1]).function,
            "cb_1 (caf\xc3\xa9\\x0a.py:2)");
  EXPECT_EQ(n.py.kernel_names(), 2u);
  EXPECT_EQ(n.py.late_reads(), 0u);
  // No record: read from the memory after the fact, and counted.
  EXPECT_EQ(n.name(0x10000 + 0x1000), "(unknown)");
  EXPECT_EQ(n.py.late_reads(), 1u);
  // A record of a process not attached is not kept.
  k->pid = 2;
  n.py.learn(*k);
  EXPECT_EQ(n.py.kernel_names(), 2u);
}

TEST(PyFramesNames, ACutPythonStackIsMarkedPythonCutNotTruncated) {
  Named n;
  n.py.learn(*decode_code_record(code_rec(0x10000, u"f", 2).get(),
                                 sizeof(lt_py_code_rec)));
  Stack st;
  n.name(0x10000, LT_PY_CUT, &st);
  EXPECT_TRUE(st.python_cut);
  EXPECT_FALSE(st.truncated);  // the native walk's own
  n.name(0x10000, 0, &st);
  EXPECT_FALSE(st.python_cut);
}

}  // namespace
}  // namespace looptrace::python
