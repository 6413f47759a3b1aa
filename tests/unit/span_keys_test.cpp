// A span's keys as its probe declares them: values cut to their size, and
// the code addresses among them, which a recording resolves beforehand
// exactly as naming the span will ask for them.
#include "trace/span_keys.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "pipeline/symbols.h"
#include "report/target.h"

namespace looptrace {
namespace {

// Answers every address with a name, and notes what it was asked.
class NotingSymbolizer : public Symbolizer {
 public:
  Frame symbolize(uint32_t pid, uint64_t addr) override {
    asked.insert({pid, addr});
    Frame f;
    f.addr = addr;
    f.module = "/usr/bin/app";
    f.function = "fn";
    return f;
  }
  std::set<std::pair<uint32_t, uint64_t>> asked;
};

KeyDef key(const char* name, KeyFormat format, uint8_t size = 0) {
  KeyDef k;
  k.name = name;
  k.format = format;
  k.spec.size = size;
  return k;
}

// Both kinds of key that name code, one that does not, and a code pointer
// that may be null or faulted.
ProbeDef probe_with_code_keys() {
  ProbeDef p;
  p.id = 3;
  p.role = LT_ROLE_DISPATCH;
  p.keys = {key("target", KeyFormat::kVtable),
            key("callback", KeyFormat::kSymbol, 4),  // cut to 4 bytes
            key("what", KeyFormat::kInt, 4), key("other", KeyFormat::kSymbol)};
  return p;
}

SpanEvent span_of(const ProbeDef& p, uint64_t other) {
  SpanEvent s;
  s.pid = 77;
  s.tid = 77;
  s.probe_id = p.id;
  s.keys = {0x5010, 0xdead'0000'1000, 0x1234, other};
  return s;
}

TEST(SpanKeys, CutToTheirSize) {
  EXPECT_EQ(key_bits(0xffff'ffff'8000'0001, 4), 0x8000'0001u);
  EXPECT_EQ(key_bits(0x1234'5678, 1), 0x78u);
  EXPECT_EQ(key_bits(0xffff'ffff'8000'0001, 0), 0xffff'ffff'8000'0001u);
  EXPECT_EQ(key_bits(0xffff'ffff'8000'0001, 8), 0xffff'ffff'8000'0001u);
  EXPECT_EQ(key_int(0xdead'0000'ffff'ffff, 4), -1);
  EXPECT_EQ(key_int(0x80, 1), -128);
  EXPECT_EQ(key_int(0x7f, 1), 127);
  EXPECT_EQ(key_int(0xffff'ffff'ffff'fffe, 0), -2);
}

TEST(SpanKeys, CodeKeysAreTheReadNonNullCodeAndVtablePointers) {
  ProbeDef p = probe_with_code_keys();
  EXPECT_EQ(code_keys(span_of(p, 0x9000), p),
            (std::vector<uint64_t>{0x5010, 0x1000, 0x9000}));
  EXPECT_EQ(code_keys(span_of(p, 0), p),
            (std::vector<uint64_t>{0x5010, 0x1000}));
  SpanEvent s = span_of(p, 0x9000);
  s.key_fault_mask = (1u << 0) | (1u << 3);
  EXPECT_EQ(code_keys(s, p), (std::vector<uint64_t>{0x1000}));
}

TEST(SpanKeys, ARecordingResolvesWhatNamingTheSpanAsks) {
  ProbeDef p = probe_with_code_keys();
  for (uint64_t other : {uint64_t{0}, uint64_t{0x9000}})
    for (uint32_t faults : {0u, 1u << 0, 1u << 1, 1u << 3}) {
      SpanEvent s = span_of(p, other);
      s.key_fault_mask = faults;
      NotingSymbolizer naming;
      (void)render_keys(s, p, &naming);

      NotingSymbolizer live;
      CapturingSymbolizer capturing(&live);
      capturing.prepare(Event{s}, {p});
      std::set<std::pair<uint32_t, uint64_t>> recorded;
      for (const SymbolEvent& e : capturing.take())
        recorded.insert({e.pid, e.frame.addr});
      EXPECT_EQ(recorded, naming.asked)
          << "other " << other << ", fault mask " << faults;
      EXPECT_FALSE(recorded.empty());
    }
}

}  // namespace
}  // namespace looptrace
