// Writes the seeds of fuzz_record_decode and fuzz_recording: one record of
// each type of a recording (docs/recording.md), encoded by the recording's
// own encoder (user/record/codec.cpp), so they follow its layout (rerun
// make_seeds.sh when it changes).
//
//   RECORD_DIR/typeN-NAME  the type byte, then the payload (as
//                          fuzz_record_decode reads them)
//   RECORDING              a recording of one block holding all of them,
//                          and a record of a type this build does not know
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "looptrace/abi.h"
#include "record/codec.h"
#include "record/recording.h"
#include "trace/events.h"

namespace {

using namespace looptrace;

bool save(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

template <typename T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

SpanEvent span() {
  SpanEvent e;
  e.pid = 1234;
  e.tid = 1235;
  e.comm = "refapp";
  e.span_id = 7;
  e.start_ns = 900'000'000;
  e.duration_ns = 100'000'000;
  e.cpu_ns = 60'000'000;
  e.runq_ns = 10'000'000;
  e.probe_id = 1;
  e.keys[0] = 0x55550000;
  return e;
}

std::vector<std::pair<std::string, Event>> events() {
  std::vector<std::pair<std::string, Event>> out;

  SessionEvent session;
  session.looptrace_version = "0.1.0";
  ProbeDef probe;
  probe.id = 0;
  probe.binary = "refapp";
  probe.symbol = "dispatch";
  probe.path = "/usr/bin/refapp";
  probe.resolved_symbol = "dispatch(Message*)";
  probe.file_offset = 0x1000;
  KeyDef key;
  key.name = "target";
  key.expr = "*(arg1+8)";
  key.spec.base = LT_KEY_ARG0 + 1;
  key.spec.nderef = 1;
  key.spec.off[0] = 8;
  key.format = KeyFormat::kSymbol;
  probe.keys.push_back(key);
  session.probes.push_back(probe);
  session.command_line = "refapp";
  session.target_pid = 1234;
  session.start_ns = 500'000'000;
  session.hostname = "host";
  session.kernel = "6.1.0";
  out.emplace_back("session", session);

  MappingsEvent maps;
  maps.pid = 1234;
  maps.ts_ns = 500'000'000;
  MapEntry m;
  m.start = 0x400000;
  m.end = 0x402000;
  m.perms = "r-xp";
  m.dev = "08:01";
  m.inode = 42;
  m.path = "/usr/bin/refapp";
  maps.maps.push_back(m);
  m.start = 0x7f0000000000;
  m.end = 0x7f0000001000;
  m.perms = "rw-p";
  m.dev = "00:00";
  m.inode = 0;
  m.path = "[heap]";
  maps.maps.push_back(m);
  out.emplace_back("mappings", maps);

  SymbolEvent sym;
  sym.pid = 1234;
  sym.frame.addr = 0x401000;
  sym.frame.module = "refapp";
  sym.frame.function = "dispatch(Message*)";
  sym.frame.offset = 0x10;
  out.emplace_back("symbol", sym);

  out.emplace_back("span", span());

  SampleEvent sample;
  sample.pid = 1234;
  sample.tid = 1235;
  sample.ts_ns = 950'000'000;
  sample.span_id = 7;
  sample.probe_id = 1;
  sample.stack.frames = {0x401000, 0x401100};
  sample.stack.unwind = Unwind::kDwarf;
  sample.stack.truncated = true;
  out.emplace_back("sample_dwarf", sample);

  out.emplace_back("span_drop", SpanDropEvent{1234, 1235, 8});

  PointEvent point;
  point.pid = 1234;
  point.tid = 1235;
  point.ts_ns = 960'000'000;
  point.ret = 42;
  point.probe_id = 3;
  point.role = LT_ROLE_BARRIER_POST;
  point.frames = {0x401200};
  out.emplace_back("point", point);

  IoEvent io;
  io.pid = 1234;
  io.tid = 1235;
  io.comm = "refapp";
  io.ts_ns = 970'000'000;
  io.enter_ns = 969'000'000;
  io.exit_ns = 970'000'000;
  io.inode = 99;
  io.bytes = 24;
  io.fd = 5;
  io.chan = LT_CHAN_INPUT;
  io.head[4] = 1;
  out.emplace_back("io", io);
  // Display reads: their framed messages follow the call.
  IoEvent x11 = io;
  x11.chan = LT_CHAN_X11;
  x11.head.fill(0);
  x11.frame_flags = LT_X11_REC_DRAINED;
  x11.x11 = {{32, 32, 1000, 7, 0, 2, 0, 0, 0}, {76, 44, 0, 8, 0, 1, 0, 0, 0}};
  out.emplace_back("io_x11", x11);
  IoEvent wl = io;
  wl.chan = LT_CHAN_WAYLAND;
  wl.head.fill(0);
  wl.frame_flags = LT_WL_REC_DRAINED;
  wl.wl_other = 1;
  wl.wl = {{52, 1000, 24, 1, LT_WL_KEY_PRESS, 0, {0, 0}},
           {76, 1005, 24, 2, LT_WL_BUTTON_RELEASE, 0, {0, 0}}};
  out.emplace_back("io_wayland", wl);

  out.emplace_back("exec", ExecEvent{1234, 1234, 980'000'000});

  QueueEvent queue;
  queue.pid = 1234;
  queue.tid = 1235;
  queue.queue = 0x55560000;
  queue.ts_ns = 990'000'000;
  queue.waiting = 2;
  queue.oldest_due_ns = 980'000'000;
  out.emplace_back("queue", queue);

  out.emplace_back("tick", TickEvent{0, 0, 990'000'000});

  HangEvent hang;
  hang.span = span();
  hang.span.in_flight = true;
  hang.pid = hang.span.pid;
  hang.tid = hang.span.tid;
  out.emplace_back("hang", hang);

  BlockEvent block;
  block.pid = 1234;
  block.tid = 1235;
  block.ts_ns = 920'000'000;
  block.span_id = 7;
  block.probe_id = 1;
  block.seq = 1;
  block.stack.frames = {0x7f0000002000, 0x401000};
  block.kframes = {0xffffffff81000000, 0xffffffff81000100};
  out.emplace_back("block", block);

  WakeEvent wake;
  wake.pid = 1234;
  wake.tid = 1235;
  wake.ts_ns = 930'000'000;
  wake.wake_id = 1;
  wake.waker_pid = 1234;
  wake.waker_tid = 1236;
  wake.waker_comm = "worker";
  wake.stack.frames = {0x401400};
  wake.kframes = {0xffffffff81000200};
  out.emplace_back("wake", wake);

  out.emplace_back("woken", WokenEvent{1234, 1235, 931'000'000, 1, 1});

  EndEvent end;
  end.end_ns = 1'000'000'000;
  end.stop_reason = "target exited";
  ThreadHistogram h;
  h.pid = 1234;
  h.tid = 1235;
  h.comm = "refapp";
  h.probe_id = 1;
  h.count = 1;
  h.sum_ns = h.max_ns = 100'000'000;
  h.slots[lt_hist_slot(h.max_ns)] = 1;
  end.hists.push_back(h);
  end.counters.bpf[LT_CNT_SAMPLES] = 1;
  out.emplace_back("end", end);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RECORD_DIR RECORDING\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::string block;  // records back to back
  uint32_t records = 0;
  for (const auto& [name, ev] : events()) {
    std::string one;
    rec::encode_event(ev, &one);
    block += one;
    ++records;
    // fuzz_record_decode's input: the type, then the payload.
    std::string seed = one.substr(0, 1) + one.substr(5);
    std::string path =
        dir + "/type" + std::to_string(uint8_t(one[0])) + "-" + name;
    if (!save(path, seed)) {
      std::perror(path.c_str());
      return 1;
    }
  }
  // A type from a newer build: skipped, not damage.
  block += std::string(1, char(rec::kLastType + 1));
  put<uint32_t>(&block, 4);
  put<uint32_t>(&block, 0xfeedf00d);
  ++records;

  // docs/recording.md, "File format": the header, then one block, a zlib
  // stream as compress2() writes it.
  std::string file(rec::kMagic, sizeof rec::kMagic);
  put<uint32_t>(&file, rec::kFormatVersion);
  put<uint32_t>(&file, 16);
  std::vector<Bytef> z(compressBound(block.size()));
  uLongf zlen = z.size();
  if (compress2(z.data(), &zlen, reinterpret_cast<const Bytef*>(block.data()),
                block.size(), 1) != Z_OK) {
    std::fprintf(stderr, "compress2 failed\n");
    return 1;
  }
  put<uint32_t>(&file, 0x4b42544c);  // "LTBK"
  put<uint32_t>(&file, uint32_t(block.size()));
  put<uint32_t>(&file, uint32_t(zlen));
  put<uint32_t>(&file,
                uint32_t(crc32(0, reinterpret_cast<const Bytef*>(block.data()),
                               block.size())));
  put<uint32_t>(&file, records);
  file.append(reinterpret_cast<const char*>(z.data()), zlen);
  if (!save(argv[2], file)) {
    std::perror(argv[2]);
    return 1;
  }
  return 0;
}
