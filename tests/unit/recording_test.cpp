// The recording format: every event survives a round trip; a recording cut
// or damaged anywhere replays the events of its complete blocks and says
// what is wrong, never crashes.
#include "record/recording.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/output_file.h"
#include "record/codec.h"

namespace looptrace {
namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/lt_rec_" + std::to_string(getpid()) + "_" +
         name;
}

std::vector<Event> sample_events() {
  SessionEvent s;
  s.looptrace_version = "9.9";
  s.thresholds.slow_ns = {20'000'000, 30'000'000, 40'000'000};
  s.thresholds.barrier_stall_ns = 1'000'000'000;
  s.thresholds.refresh_ns = 8'333'333;
  s.command_line = "refapp --stall busy:100@500";
  s.target_pid = 42;
  s.has_input = true;
  s.input_hook = "raw syscall tracepoints";
  s.start_ns = 1000;
  s.ringbuf_bytes = 16u << 20;
  ProbeDef p;
  p.id = 0;
  p.binary = "refapp";
  p.symbol = "dispatch";
  p.label = "refapp dispatch";
  p.profile = "refapp";
  p.path = "/x/refapp";
  p.resolved_symbol = "refapp::Looper::dispatchMessage(refapp::Message*)";
  p.file_offset = 0x1234;
  KeyDef k;
  k.name = "target";
  k.expr = "*(arg1+0)";
  k.format = KeyFormat::kVtable;
  k.spec.size = 8;
  p.keys.push_back(k);
  KeyDef type;
  type.name = "type";
  type.expr = "u16 *(arg1+16)";
  type.format = KeyFormat::kEnum;
  type.names = {{1, "Timer"}, {-3, "Minus"}, {1000, "User"}};
  p.keys.push_back(type);
  p.outermost = true;
  p.input = ProbeDef::InputMatch{2, 0, {{1, "key_press"}}};
  p.frame = ProbeDef::FrameMatch{{"[gtk+] gdk_frame_clock_paint_idle"}};
  s.probes.push_back(p);

  SpanEvent sp;
  sp.pid = 42;
  sp.tid = 43;
  sp.comm = "loop";
  sp.span_id = 7;
  sp.start_ns = 2000;
  sp.duration_ns = 25'000'000;
  sp.cpu_ns = 1;
  sp.runq_ns = 2;
  sp.steal_ns = 3;
  sp.stopped_ns = 4;
  sp.keys = {1, 2, 3, 4};
  sp.key_str = "stall-0";
  sp.flags = LT_SPAN_EXIT;
  sp.in_flight = true;
  SampleEvent sa;
  sa.pid = 42;
  sa.tid = 43;
  sa.ts_ns = 3000;
  sa.span_id = 7;
  sa.stack.frames = {0x1000, 0x2000, 0x3000};
  sa.stack.unwind = Unwind::kDwarf;
  sa.stack.truncated = true;
  sa.stack.python_cut = true;
  PointEvent pt;
  pt.frames = {0x10, 0x20};
  pt.keys = {9, 8, 7, 6};
  pt.ts_ns = 4000;
  pt.ret = 77;
  pt.pid = 42;
  pt.tid = 44;
  pt.role = LT_ROLE_BARRIER_REMOVE;
  IoEvent io;
  io.pid = 42;
  io.tid = 43;
  io.comm = "loop";
  io.ts_ns = 5000;
  io.inode = 99;
  io.bytes = -11;
  io.head[0] = 0xab;
  io.head[LT_IO_HEAD - 1] = 0xcd;
  MappingsEvent m;
  m.pid = 42;
  m.ts_ns = 6000;
  MapEntry e;
  e.start = 0x400000;
  e.end = 0x401000;
  e.perms = "r-xp";
  e.dev = "fe:01";
  e.inode = 12;
  e.path = "/x/refapp";
  m.maps.push_back(e);
  SymbolEvent sym;
  sym.pid = 42;
  sym.frame = {0x1000, "/x/refapp", "main", 0x10};
  QueueEvent q{42, 0, 0xfeed, 7000, 3, 6500};
  EndEvent end;
  end.end_ns = 9000;
  end.stop_reason = "interrupted";
  ThreadHistogram h;
  h.pid = 42;
  h.tid = 43;
  h.comm = "loop";
  h.count = 5;
  h.slots[3] = 5;
  end.hists.push_back(h);
  end.counters.bpf[LT_CNT_RB_FULL] = 4;
  end.counters.decode_errors = 1;
  end.counters.hook_misses = 2;
  BlockEvent bl;
  bl.pid = 42;
  bl.tid = 43;
  bl.ts_ns = 3500;
  bl.span_id = 7;
  bl.probe_id = 1;
  bl.seq = 5;
  bl.stack.frames = {0x1100, 0x2200};
  bl.kframes = {0xffffffff81000000, 0xffffffff81000100};
  bl.stack.unwind = Unwind::kDwarf;
  bl.stack.python_cut = true;
  WakeEvent wk;
  wk.pid = 42;
  wk.tid = 43;
  wk.ts_ns = 3900;
  wk.wake_id = 6;
  wk.from_irq = true;
  wk.waker_pid = 50;
  wk.waker_tid = 51;
  wk.waker_comm = "holder";
  wk.stack.frames = {0x3300};
  wk.kframes = {0xffffffff81000200};
  wk.stack.truncated = true;
  return {Event(s),
          Event(sp),
          Event(sa),
          Event(SpanDropEvent{42, 43, 8}),
          Event(pt),
          Event(io),
          Event(ExecEvent{42, 42, 5500}),
          Event(m),
          Event(sym),
          Event(q),
          Event(TickEvent{0, 0, 8000}),
          Event(end),
          Event(HangEvent{sp.pid, sp.tid, sp}),
          Event(bl),
          Event(wk),
          Event(WokenEvent{42, 43, 3950, 5, 6}),
          Event(StopEvent{42, 43, 9000, 4000})};
}

// Re-encoding the decoded event gives the same bytes: every field survived.
std::string bytes_of(const Event& ev) {
  std::string out;
  rec::encode_event(ev, &out);
  return out;
}

TEST(RecordingCodec, EveryEventTypeRoundTrips) {
  for (const Event& ev : sample_events()) {
    std::string b = bytes_of(ev);
    ASSERT_GE(b.size(), 5u);
    Event back;
    ASSERT_TRUE(rec::decode_event(
        static_cast<uint8_t>(b[0]),
        reinterpret_cast<const uint8_t*>(b.data()) + 5, b.size() - 5, &back))
        << "type " << int(b[0]);
    EXPECT_EQ(back.index(), ev.index());
    EXPECT_EQ(bytes_of(back), b) << "type " << int(b[0]);
  }
  // Spot checks that the bytes mean what they should.
  std::vector<Event> evs = sample_events();
  std::string b = bytes_of(evs[0]);
  Event back;
  ASSERT_TRUE(rec::decode_event(b[0],
                                reinterpret_cast<const uint8_t*>(b.data()) + 5,
                                b.size() - 5, &back));
  const auto& s = std::get<SessionEvent>(back);
  EXPECT_EQ(s.thresholds.slow_ns[2], 40'000'000u);
  EXPECT_EQ(s.thresholds.barrier_stall_ns, 1'000'000'000u);
  EXPECT_EQ(s.thresholds.refresh_ns, 8'333'333u);
  EXPECT_EQ(s.command_line, "refapp --stall busy:100@500");
  EXPECT_EQ(s.target_pid, 42);
  EXPECT_EQ(s.ringbuf_bytes, 16u << 20);
  ASSERT_EQ(s.probes.size(), 1u);
  EXPECT_EQ(s.probes[0].keys[0].format, KeyFormat::kVtable);
  EXPECT_EQ(s.probes[0].keys[0].spec.size, 8);
  EXPECT_TRUE(s.probes[0].outermost);
  EXPECT_EQ(s.probes[0].profile, "refapp");
  ASSERT_TRUE(s.probes[0].frame);
  EXPECT_EQ(s.probes[0].frame->names,
            std::vector<std::string>{"[gtk+] gdk_frame_clock_paint_idle"});
  ASSERT_EQ(s.probes[0].keys.size(), 2u);
  EXPECT_EQ(s.probes[0].keys[1].format, KeyFormat::kEnum);
  EXPECT_EQ(s.probes[0].keys[1].names,
            (std::map<int64_t, std::string>{
                {-3, "Minus"}, {1, "Timer"}, {1000, "User"}}));
}

TEST(RecordingCodec, ShortOrLongPayloadsAreRefused) {
  for (const Event& ev : sample_events()) {
    std::string b = bytes_of(ev);
    const auto* p = reinterpret_cast<const uint8_t*>(b.data()) + 5;
    Event back;
    // A sample's and a blocking point's last byte (the Python cut) is one
    // older recordings lack (OlderPayloadsStillDecode): one more short.
    const uint8_t t = static_cast<uint8_t>(b[0]);
    const size_t flag = t == rec::kSample || t == rec::kBlock ? 1 : 0;
    EXPECT_FALSE(rec::decode_event(b[0], p, b.size() - 6 - flag, &back))
        << "type " << int(b[0]) << " one byte short";
    std::string longer = b + "x";
    EXPECT_FALSE(rec::decode_event(
        b[0], reinterpret_cast<const uint8_t*>(longer.data()) + 5,
        longer.size() - 5, &back))
        << "type " << int(b[0]) << " one byte long";
  }
  Event back;
  EXPECT_FALSE(rec::decode_event(0, nullptr, 0, &back));
  EXPECT_FALSE(rec::decode_event(200, nullptr, 0, &back));
}

// A document record (a session header) nested 100 000 arrays deep is
// refused, not parsed by recursion until the stack overflows (the
// record_decode fuzzer); one nested as deep as records ever are still
// reads as far as its shape allows.
TEST(RecordingCodec, DeeplyNestedDocumentsAreRefused) {
  std::string deep(100000, '\x81');  // CBOR: an array of one item, ...
  deep += '\x01';
  Event back;
  EXPECT_FALSE(rec::decode_event(rec::kSession,
                                 reinterpret_cast<const uint8_t*>(deep.data()),
                                 deep.size(), &back));
  for (const Event& ev : sample_events()) {
    std::string b = bytes_of(ev);
    if (static_cast<uint8_t>(b[0]) != rec::kSession) continue;
    EXPECT_TRUE(
        rec::decode_event(b[0], reinterpret_cast<const uint8_t*>(b.data()) + 5,
                          b.size() - 5, &back));
  }
}

// Payloads as older releases wrote them, before fields were appended: a
// span without its str key, a sample without how it was unwound, a probe
// without label, outermost, enum names or input match, an end without
// hook_misses. They still decode, with those fields at their defaults.
bool decode_payload(uint8_t type, const std::string& payload, Event* out) {
  return rec::decode_event(type,
                           reinterpret_cast<const uint8_t*>(payload.data()),
                           payload.size(), out);
}

TEST(RecordingCodec, OlderPayloadsStillDecode) {
  std::vector<Event> evs = sample_events();
  const auto& span = std::get<SpanEvent>(evs[1]);
  ASSERT_FALSE(span.key_str.empty());
  // The str key is the last field but one (its length, u32, and its
  // bytes), then the stopped time (u64).
  size_t key_str_bytes = 4 + span.key_str.size() + 8;
  for (uint8_t type : {rec::kSpan, rec::kHang}) {
    std::string b = bytes_of(type == rec::kSpan ? evs[1] : evs[12]);
    ASSERT_EQ(static_cast<uint8_t>(b[0]), type);
    Event back;
    ASSERT_TRUE(
        decode_payload(type, b.substr(5, b.size() - 5 - key_str_bytes), &back))
        << "type " << int(type);
    const SpanEvent& s = type == rec::kSpan ? std::get<SpanEvent>(back)
                                            : std::get<HangEvent>(back).span;
    EXPECT_EQ(s.key_str, "");
    EXPECT_EQ(s.stopped_ns, 0u);
    EXPECT_EQ(s.span_id, span.span_id);
    EXPECT_EQ(s.keys, span.keys);
    EXPECT_EQ(s.flags, span.flags);
    EXPECT_TRUE(s.in_flight);
  }

  // Before the stopped time: the str key is there, stopped_ns 0, and the
  // split still adds up (blocked takes the rest).
  {
    std::string b = bytes_of(evs[1]);
    Event back;
    ASSERT_TRUE(
        decode_payload(rec::kSpan, b.substr(5, b.size() - 5 - 8), &back));
    const auto& s = std::get<SpanEvent>(back);
    EXPECT_EQ(s.key_str, span.key_str);
    EXPECT_EQ(s.stopped_ns, 0u);
    EXPECT_EQ(s.blocked_ns(), span.duration_ns - 1 - 2 - 3);
    // Part of it is malformed.
    EXPECT_FALSE(
        decode_payload(rec::kSpan, b.substr(5, b.size() - 5 - 4), &back));
  }

  // How a sample was unwound: two bytes at the end, then whether its
  // Python frames were cut: one more.
  std::string b = bytes_of(evs[2]);
  Event back;
  ASSERT_TRUE(
      decode_payload(rec::kSample, b.substr(5, b.size() - 5 - 3), &back));
  const auto& sa = std::get<SampleEvent>(back);
  EXPECT_EQ(sa.stack.frames, std::get<SampleEvent>(evs[2]).stack.frames);
  EXPECT_EQ(sa.stack.unwind, Unwind::kFramePointer);
  EXPECT_FALSE(sa.stack.truncated);
  EXPECT_FALSE(sa.stack.python_cut);
  // One byte of them is malformed.
  EXPECT_FALSE(
      decode_payload(rec::kSample, b.substr(5, b.size() - 5 - 2), &back));
  // Before the Python cut's flag: unwound and cut as written, not cut in
  // Python.
  ASSERT_TRUE(
      decode_payload(rec::kSample, b.substr(5, b.size() - 5 - 1), &back));
  EXPECT_EQ(std::get<SampleEvent>(back).stack.unwind, Unwind::kDwarf);
  EXPECT_TRUE(std::get<SampleEvent>(back).stack.truncated);
  EXPECT_FALSE(std::get<SampleEvent>(back).stack.python_cut);
  // A blocking point likewise.
  std::string bb = bytes_of(evs[13]);
  ASSERT_EQ(static_cast<uint8_t>(bb[0]), rec::kBlock);
  ASSERT_TRUE(
      decode_payload(rec::kBlock, bb.substr(5, bb.size() - 5 - 1), &back));
  EXPECT_EQ(std::get<BlockEvent>(back).stack.frames,
            std::get<BlockEvent>(evs[13]).stack.frames);
  EXPECT_FALSE(std::get<BlockEvent>(back).stack.python_cut);

  // The CBOR documents, with the newer keys taken out.
  using nlohmann::json;
  auto without = [](const Event& ev, auto&& strip) {
    std::string b = bytes_of(ev);
    json j = json::from_cbor(b.substr(5));
    strip(j);
    std::vector<uint8_t> cbor = json::to_cbor(j);
    return std::string(cbor.begin(), cbor.end());
  };
  ASSERT_TRUE(decode_payload(rec::kSession,
                             without(evs[0],
                                     [](json& j) {
                                       json& p = j["probes"][0];
                                       p.erase("label");
                                       p.erase("profile");
                                       p.erase("outermost");
                                       p.erase("input");
                                       p.erase("frame");
                                       p["keys"][1].erase("names");
                                       j.erase("ringbuf_bytes");
                                       j["thresholds"].erase("refresh_ns");
                                     }),
                             &back));
  // Before the ring buffer's size was recorded: unknown.
  EXPECT_EQ(std::get<SessionEvent>(back).ringbuf_bytes, 0u);
  const ProbeDef& p = std::get<SessionEvent>(back).probes.at(0);
  EXPECT_EQ(p.label, "");
  EXPECT_EQ(p.profile, "");  // before the monitor's metrics
  EXPECT_FALSE(p.outermost);
  EXPECT_FALSE(p.input.has_value());
  // Before frames: none, timed at 60 Hz if any.
  EXPECT_FALSE(p.frame.has_value());
  EXPECT_EQ(std::get<SessionEvent>(back).thresholds.refresh_ns,
            Thresholds::kRefreshNs);
  EXPECT_TRUE(p.keys.at(1).names.empty());
  EXPECT_EQ(p.keys.at(1).format, KeyFormat::kEnum);
  EXPECT_EQ(p.resolved_symbol,
            std::get<SessionEvent>(evs[0]).probes[0].resolved_symbol);

  ASSERT_TRUE(decode_payload(
      rec::kEnd, without(evs[11], [](json& j) { j.erase("hook_misses"); }),
      &back));
  const auto& end = std::get<EndEvent>(back);
  EXPECT_EQ(end.counters.hook_misses, 0u);
  EXPECT_EQ(end.counters.decode_errors, 1u);
  ASSERT_EQ(end.hists.size(), 1u);
  EXPECT_EQ(end.hists[0].slots[3], 5u);
}

// A recording of `blocks` blocks, each holding every sample event.
std::string write_recording(const std::string& path, int blocks) {
  unlink(path.c_str());
  unlink((path + ".old").c_str());
  auto f = OutputFile::Create("-o", path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  RecordingWriter w(std::move(*f));
  for (int b = 0; b < blocks; ++b) {
    for (const Event& ev : sample_events()) w.write(ev);
    EXPECT_TRUE(w.flush().ok());
  }
  EXPECT_TRUE(w.close().ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Replayed {
  size_t events = 0;
  std::string damage;
};

Replayed read_all(const std::string& path) {
  auto r = RecordingReader::Open(path);
  if (!r.ok()) return {0, "open: " + r.status().message()};
  Replayed out;
  Event ev;
  while ((*r)->next(&ev)) ++out.events;
  out.damage = (*r)->damage();
  return out;
}

TEST(Recording, WrittenAndReadBack) {
  std::string path = temp_path("rt.lt");
  write_recording(path, 3);
  auto r = RecordingReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<Event> want = sample_events();
  Event ev;
  for (int b = 0; b < 3; ++b)
    for (const Event& w : want) {
      ASSERT_TRUE((*r)->next(&ev));
      EXPECT_EQ(bytes_of(ev), bytes_of(w));
    }
  EXPECT_FALSE((*r)->next(&ev));
  EXPECT_EQ((*r)->damage(), "");
  EXPECT_EQ((*r)->blocks(), 3u);
  unlink(path.c_str());
}

TEST(Recording, CutAtEveryByteReplaysItsCompleteBlocks) {
  std::string path = temp_path("full.lt");
  std::string full = write_recording(path, 4);
  const size_t per_block = sample_events().size();
  // Block boundaries, from reading the whole file.
  std::string cut = temp_path("cut.lt");
  size_t header = 16;
  std::vector<size_t> ends;  // file offsets where a block ends
  {
    size_t off = header;
    while (off + 20 <= full.size()) {
      uint32_t clen;
      std::memcpy(&clen, full.data() + off + 8, 4);
      off += 20 + clen;
      ends.push_back(off);
    }
    ASSERT_EQ(ends.size(), 4u);
    ASSERT_EQ(ends.back(), full.size());
  }
  for (size_t len = 0; len <= full.size(); ++len) {
    {
      std::ofstream o(cut, std::ios::binary | std::ios::trunc);
      o.write(full.data(), static_cast<std::streamsize>(len));
    }
    Replayed got = read_all(cut);
    if (len < header) {
      EXPECT_NE(got.damage.find("open:"), std::string::npos) << len;
      continue;
    }
    size_t complete = 0;
    bool at_boundary = len == header;
    for (size_t e : ends) {
      if (e <= len) ++complete;
      if (e == len) at_boundary = true;
    }
    ASSERT_EQ(got.events, complete * per_block) << "cut at " << len;
    EXPECT_EQ(got.damage.empty(), at_boundary) << "cut at " << len;
  }
  unlink(path.c_str());
  unlink(cut.c_str());
}

TEST(Recording, RandomDamageNeverCrashes) {
  std::string path = temp_path("dmg.lt");
  std::string full = write_recording(path, 3);
  std::mt19937 rng(12345);
  std::string bad = temp_path("bad.lt");
  for (int i = 0; i < 300; ++i) {
    std::string b = full;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      char x = static_cast<char>(1 + rng() % 255);
      b[16 + rng() % (b.size() - 16)] ^= x;
    }
    {
      std::ofstream o(bad, std::ios::binary | std::ios::trunc);
      o.write(b.data(), static_cast<std::streamsize>(b.size()));
    }
    Replayed got = read_all(bad);
    // Every damaged block is found by its checksum (or framing): the
    // events before it are all there, nothing after it is invented. A flip
    // of the unused bits after a deflate stream's end damages nothing:
    // then every event is read back.
    EXPECT_TRUE(!got.damage.empty() || got.events == 3 * sample_events().size())
        << i;
    EXPECT_EQ(got.events % sample_events().size(), 0u) << i;
  }
  unlink(path.c_str());
  unlink(bad.c_str());
}

// A disk that fills: the writer's thread finds the failed write; every
// event of the blocks that could not be written, and every event written
// after, is counted as lost; close() says why, and nothing hangs.
TEST(Recording, WriteErrorsCountEveryLostEvent) {
  auto f = OutputFile::Create("-o", "/dev/full");
  ASSERT_TRUE(f.ok()) << f.status().message();
  RecordingWriter w(std::move(*f));
  const std::vector<Event> evs = sample_events();
  // Enough for several full blocks, handed to the thread without a flush
  // (events after the first failure are not even encoded).
  std::string one;
  for (const Event& ev : evs) rec::encode_event(ev, &one);
  uint64_t written = 0;
  for (size_t bytes = 0; bytes < 4 * rec::kBlockBytes; bytes += one.size()) {
    for (const Event& ev : evs) w.write(ev);
    written += evs.size();
  }
  Status st = w.flush();
  EXPECT_FALSE(st.ok());
  for (const Event& ev : evs) w.write(ev);
  written += evs.size();
  Status closed = w.close();
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("No space left on device"), std::string::npos)
      << closed.message();
  EXPECT_EQ(w.lost(), written);
  EXPECT_EQ(w.bytes_written(), 16u) << "only the header counted";
}

// Strings a recording supplies are bounded where they are read: a span's
// comm past any the kernel writes is a malformed record; a symbol's name
// past a few KiB is cut and says so.
TEST(RecordingCodec, LongStringsAreRefusedOrCut) {
  SpanEvent sp;
  sp.comm = std::string(200, 'c');
  std::string b = bytes_of(Event(sp));
  Event back;
  EXPECT_FALSE(decode_payload(b[0], b.substr(5), &back));
  sp.comm = std::string(LT_COMM_LEN - 1, 'c');
  sp.key_str = std::string(LT_KEY_STR_LEN - 1, 'k');
  b = bytes_of(Event(sp));
  ASSERT_TRUE(decode_payload(b[0], b.substr(5), &back));
  EXPECT_EQ(std::get<SpanEvent>(back).key_str, sp.key_str);

  SymbolEvent sym;
  sym.frame.module = std::string(100'000, 'm');
  sym.frame.function = "f" + std::string(100'000, 'x');
  b = bytes_of(Event(sym));
  ASSERT_TRUE(decode_payload(b[0], b.substr(5), &back));
  const Frame& f = std::get<SymbolEvent>(back).frame;
  EXPECT_EQ(f.function.size(), 4096u);
  EXPECT_TRUE(f.function.starts_with("fxxx"));
  EXPECT_TRUE(f.function.ends_with("\u2026"));
  EXPECT_EQ(f.module.size(), 4096u);
}

// A hostile recording: symbol records compress hundreds to one and a
// replay kept every one (5.5 MB took `report` to 1.3 GB; 22 MB to
// bad_alloc and an abort). Past rec::kMaxSymbolBytes they are skipped and
// counted, and what follows them still reads.
TEST(Recording, SymbolFloodIsBoundedNotFatal) {
  std::string path = temp_path("flood.lt");
  unlink(path.c_str());
  unlink((path + ".old").c_str());
  const size_t kName = 4096;
  const uint64_t cost = 2 * kName + rec::kSymbolCost;
  const uint64_t fit = rec::kMaxSymbolBytes / cost;
  const uint64_t total = fit + 500;
  {
    auto file = OutputFile::Create("-o", path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    RecordingWriter w(std::move(*file));
    SymbolEvent sym;
    sym.pid = 42;
    sym.frame.module = std::string(kName, 'm');
    sym.frame.function = std::string(kName, 'f');
    for (uint64_t i = 0; i < total; ++i) {
      sym.frame.addr = 0x1000 + i;
      w.write(Event(sym));
    }
    SpanEvent sp;
    sp.comm = "after";
    w.write(Event(sp));
    ASSERT_TRUE(w.close().ok());
  }
  auto r = RecordingReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Event ev;
  uint64_t symbols = 0;
  std::string last_comm;
  while ((*r)->next(&ev)) {
    if (std::holds_alternative<SymbolEvent>(ev)) ++symbols;
    if (const auto* s = std::get_if<SpanEvent>(&ev)) last_comm = s->comm;
  }
  EXPECT_EQ((*r)->damage(), "");
  EXPECT_EQ(symbols, fit);
  EXPECT_EQ((*r)->symbols_dropped(), total - fit);
  EXPECT_EQ(last_comm, "after");
  unlink(path.c_str());
}

TEST(Recording, NotARecordingIsOneClearError) {
  std::string path = temp_path("junk");
  {
    std::ofstream o(path);
    o << "hello, this is not a recording at all";
  }
  auto r = RecordingReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a looptrace recording"),
            std::string::npos);
  EXPECT_EQ(r.status().exit_code(), 2);
  auto missing = RecordingReader::Open(path + ".nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().exit_code(), 2);
  unlink(path.c_str());
}

// A directory, a FIFO (with no writer: the open must not wait for one), a
// header of format 0 (damage, not "newer"): each one clear line, exit 2.
TEST(Recording, WhatIsNotARecordingFileSaysWhatItIs) {
  auto dir = RecordingReader::Open(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory, not a looptrace "
                                        "recording"),
            std::string::npos)
      << dir.status().message();
  EXPECT_EQ(dir.status().exit_code(), 2);

  std::string fifo = temp_path("fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto f = RecordingReader::Open(fifo);  // returns: no writer is awaited
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("is not a regular file"),
            std::string::npos)
      << f.status().message();
  EXPECT_EQ(f.status().exit_code(), 2);
  unlink(fifo.c_str());

  std::string path = temp_path("v0.lt");
  write_recording(path, 1);
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(8);  // after the 8-byte magic: the format version
    const char zero[4] = {};
    io.write(zero, 4);
  }
  auto v0 = RecordingReader::Open(path);
  ASSERT_FALSE(v0.ok());
  EXPECT_EQ(v0.status().message(),
            path + ": damaged recording header: format version 0");
  EXPECT_EQ(v0.status().exit_code(), 2);
  unlink(path.c_str());
}

}  // namespace
}  // namespace looptrace
