// lt_bench_recording: what recording and replaying cost (docs/benchmarks.md,
// "Recording and replay"; scripts/bench-record.sh runs it).
//
// Writes N events of a busy run's mix through RecordingWriter to a file on
// disk, the way `looptrace record -o` does (the same writer, the same
// OutputFile): mostly input-channel socket calls (an Android-style channel
// at 1 kHz: the dispatcher's send, the app's receive, its FINISHED and the
// dispatcher's read of it), and between them slow dispatches with keys and
// stack samples of 20 frames. Then it reads the file back and checks that
// every event is there with its fields (counts and sums per type), and
// replays it through replay() + Analysis, as `looptrace report` does.
//
//   lt_bench_recording [--events N] [--dir DIR] [--keep] [--rounds R]
//
//   --events N   events to write (default 2000000; suffixes k and M)
//   --dir DIR    where the file goes (default /tmp); it is removed at the
//                end unless --keep
//   --rounds R   record and replay R times, print the median (default 3)
//
// The record time includes making the events (the caller's work: the
// tracer's decoding); "generate_events_per_s" is that alone.
//
// Prints "key value" lines (scripts/bench-record.sh reads them). Exit 0;
// 1 when an event was lost or differs after the round trip.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/input_message_fixtures.h"
#include "base/output_file.h"
#include "pipeline/analysis.h"
#include "pipeline/replay.h"
#include "pipeline/symbols.h"
#include "record/recording.h"
#include "trace/events.h"

namespace looptrace {
namespace {

constexpr uint32_t kAppPid = 4242, kAppTid = 4242, kDispPid = 4300;
constexpr uint64_t kAppInode = 91001, kDispInode = 91002;
constexpr uint64_t kExeBase = 0x55d0c0a00000, kLibcBase = 0x7f3a11200000;
constexpr int kFrames = 20;
constexpr int kStacks = 8;  // distinct call chains the samples land in
static_assert(LT_IO_HEAD >= 24, "heads carry seq @4 and a time @16");

// A small deterministic PRNG: jitter, so that the stream compresses like a
// real one (perfectly regular numbers compress far better).
class Rng {
 public:
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t s_ = 0x9e3779b97f4a7c15ull;
};

// What was written, to be found again when reading back.
struct Tally {
  uint64_t io = 0, spans = 0, samples = 0, other = 0;
  uint64_t io_ts = 0, span_ts = 0, sample_frames = 0;
  uint32_t max_seq = 0;  // input events: seqs 1..max_seq
  bool operator==(const Tally& o) const {
    return io == o.io && spans == o.spans && samples == o.samples &&
           other == o.other && io_ts == o.io_ts && span_ts == o.span_ts &&
           sample_frames == o.sample_frames && max_seq == o.max_seq;
  }
  uint64_t total() const { return io + spans + samples + other; }
  void count(const Event& ev) {
    if (const auto* io_ev = std::get_if<IoEvent>(&ev)) {
      ++io;
      io_ts += io_ev->ts_ns ^ io_ev->head[4];
      uint32_t seq;
      std::memcpy(&seq, io_ev->head.data() + 4, 4);
      max_seq = std::max(max_seq, seq);
    } else if (const auto* sp = std::get_if<SpanEvent>(&ev)) {
      ++spans;
      span_ts += sp->start_ns + sp->keys[2];
    } else if (const auto* sa = std::get_if<SampleEvent>(&ev)) {
      ++samples;
      for (uint64_t f : sa->stack.frames) sample_frames += f;
    } else {
      ++other;
    }
  }
};

ProbeDef dispatch_probe() {
  ProbeDef p;
  p.id = 0;
  p.role = LT_ROLE_DISPATCH;
  p.binary = "refapp";
  p.symbol = "refapp::Looper::dispatchMessage";
  p.path = "/opt/app/refapp";
  p.resolved_symbol = "refapp::Looper::dispatchMessage(refapp::Message*)";
  p.file_offset = 0x2f3a0;
  auto key = [](const char* name, const char* expr, KeyFormat f) {
    KeyDef k;
    k.name = name;
    k.expr = expr;
    k.format = f;
    k.spec.size = 8;
    return k;
  };
  p.keys = {key("target", "*(*(arg1+0))", KeyFormat::kVtable),
            key("callback", "*(arg1+8)", KeyFormat::kSymbol),
            key("what", "*(arg1+16)", KeyFormat::kInt)};
  return p;
}

// The events before the stream proper: the session, the mappings, the
// symbols of every frame and key the samples and spans carry.
std::vector<Event> preamble(const std::vector<std::vector<uint64_t>>& stacks) {
  std::vector<Event> out;
  SessionEvent s;
  s.looptrace_version = "bench";
  s.probes = {dispatch_probe()};
  s.command_line = "refapp --input-rate 1000";
  s.target_pid = kAppPid;
  s.has_input = true;
  s.input_hook = "raw syscall tracepoints";
  s.start_ns = 1'000'000'000;
  s.hostname = "bench";
  s.kernel = "6.1";
  out.emplace_back(std::move(s));
  MappingsEvent m;
  m.pid = kAppPid;
  m.tid = kAppTid;
  m.ts_ns = 1'000'000'000;
  MapEntry exe{kExeBase, kExeBase + 0x100000, 0,    "r-xp", "fe:01",
               77,       "/opt/app/refapp",   false};
  MapEntry libc{kLibcBase,
                kLibcBase + 0x200000,
                0,
                "r-xp",
                "fe:01",
                78,
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                false};
  m.maps = {exe, libc};
  out.emplace_back(std::move(m));
  std::vector<uint64_t> addrs;
  for (const auto& st : stacks) addrs.insert(addrs.end(), st.begin(), st.end());
  addrs.push_back(kExeBase + 0x9000);  // the vtable key
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  for (uint64_t a : addrs) {
    SymbolEvent sym;
    sym.pid = kAppPid;
    bool lib = a >= kLibcBase;
    uint64_t base = lib ? kLibcBase : kExeBase;
    uint64_t fn = (a - base) & ~0xfffull;  // a function per 4 KiB
    sym.frame = {
        a, lib ? "/usr/lib/x86_64-linux-gnu/libc.so.6" : "/opt/app/refapp",
        fmt::format("{}::function_{:x}(long)", lib ? "libc" : "refapp", fn),
        a - base - fn};
    out.emplace_back(std::move(sym));
  }
  return out;
}

// The stream: cycles of 4 input events (16 socket calls) then one slow
// dispatch with 2 stack samples of 20 frames: 84 % socket calls, 5 %
// spans, 11 % samples.
class Generator {
 public:
  Generator() {
    for (int s = 0; s < kStacks; ++s) {
      std::vector<uint64_t> st;
      for (int f = 0; f < kFrames; ++f) {
        bool lib = f < 3 && s % 2 == 0;  // some stacks end in libc
        uint64_t base = lib ? kLibcBase : kExeBase;
        st.push_back(base + 0x1000 * (1 + f + 3 * s) + 0x40 + 4 * s);
      }
      stacks_.push_back(std::move(st));
    }
    IoEvent io;
    io.chan = LT_CHAN_INPUT;
    io_ = Event(io);
    SpanEvent sp;
    sp.pid = kAppPid;
    sp.tid = kAppTid;
    sp.comm = "refapp-loop0";
    sp.probe_id = 0;
    span_ = Event(sp);
    SampleEvent sa;
    sa.pid = kAppPid;
    sa.tid = kAppTid;
    sample_ = Event(sa);
  }

  const std::vector<std::vector<uint64_t>>& stacks() const { return stacks_; }

  // The next event; valid until the next call.
  const Event& next() {
    if (step_ < 16) return io_event();
    int i = step_++ - 16;
    if (step_ == 19) step_ = 0;
    if (i < 2) return sample(i);
    return span();
  }

  uint64_t now() const { return t_; }

 private:
  const Event& io_event() {
    int k = step_ / 4, call = step_ % 4;
    ++step_;
    uint32_t seq = seq_ + static_cast<uint32_t>(k) + 1;
    uint64_t due = t_ + static_cast<uint64_t>(k) * 1'000'000;
    IoEvent& e = std::get<IoEvent>(io_);
    bool app = call == 1 || call == 2;
    e.pid = app ? kAppPid : kDispPid;
    e.tid = e.pid;
    e.comm = app ? "refapp-loop0" : "refapp-dispatch";
    e.inode = app ? kAppInode : kDispInode;
    e.peer_inode = app ? kDispInode : kAppInode;
    e.fd = app ? 5 : 4;
    e.op = call == 0 || call == 2 ? LT_IO_SEND : 0;
    uint64_t at = due + 2'000 + rng_.below(3'000) +
                  static_cast<uint64_t>(call) * (20'000 + rng_.below(40'000));
    e.enter_ns = at - 1'500 - rng_.below(500);
    e.exit_ns = at + 700 + rng_.below(300);
    e.ts_ns = e.is_send() ? e.enter_ns : e.exit_ns;
    e.depth = call == 2 ? 1 : 0;
    e.span_start_ns = call == 2 ? at - 55'000 : 0;
    e.span_id = call == 2 ? ++span_id_ : 0;
    e.span_probe = 0;
    // The message's first bytes: a template with its seq and time.
    const Head& h = call < 2 ? (k == 3 ? key_ : motion_) : finished_;
    e.bytes = h.size;
    std::memcpy(e.head.data(), h.bytes.data(), e.head.size());
    int64_t time = call < 2 ? static_cast<int64_t>(due)
                            : static_cast<int64_t>(due) + 30'000;
    std::memcpy(e.head.data() + 4, &seq, 4);
    std::memcpy(e.head.data() + 16, &time, 8);
    return io_;
  }

  const Event& sample(int i) {
    SampleEvent& e = std::get<SampleEvent>(sample_);
    e.ts_ns =
        t_ + 4'000'000 + 10'000'000 + static_cast<uint64_t>(i) * 5'000'000;
    e.span_id = span_id_ + 1;
    e.stack.frames = stacks_[(cycle_ + static_cast<uint64_t>(i)) % kStacks];
    e.stack.frames[0] +=
        4 * rng_.below(16);  // a busy loop: its instructions vary
    return sample_;
  }

  const Event& span() {
    SpanEvent& e = std::get<SpanEvent>(span_);
    e.span_id = ++span_id_;
    e.start_ns = t_ + 4'000'000;
    e.duration_ns = 17'000'000 + rng_.below(8'000'000);
    e.cpu_ns = e.duration_ns - 200'000 - rng_.below(100'000);
    e.runq_ns = rng_.below(150'000);
    e.keys = {kExeBase + 0x9000, 0, cycle_ % 1000,
              0x55d0c1000000 + 64 * cycle_};
    t_ = e.start_ns + e.duration_ns + 1'000'000;
    seq_ += 4;
    ++cycle_;
    return span_;
  }

  struct Head {
    explicit Head(const fixture::Bytes& b)
        : size(static_cast<int64_t>(b.size())) {
      // A message shorter than the head (FINISHED: 24 bytes) is
      // zero-padded, as the kernel leaves it.
      std::memcpy(bytes.data(), b.data(), std::min(bytes.size(), b.size()));
    }
    std::array<uint8_t, LT_IO_HEAD> bytes{};
    int64_t size;
  };
  // Seq @4 and eventTime (consumeTime) @16 are patched per event.
  const Head key_{fixture::key(1, 0)};
  const Head motion_{fixture::motion(1, 0, 1)};
  const Head finished_{fixture::finished(1, true, 0)};
  std::vector<std::vector<uint64_t>> stacks_;
  Event io_, span_, sample_;
  Rng rng_;
  int step_ = 0;
  uint64_t t_ = 1'001'000'000;
  uint32_t seq_ = 0;
  uint64_t span_id_ = 0;
  uint64_t cycle_ = 0;
};

EndEvent end_event(uint64_t end_ns, uint64_t spans) {
  EndEvent e;
  e.end_ns = end_ns;
  e.stop_reason = "command exited";
  ThreadHistogram h;
  h.pid = kAppPid;
  h.tid = kAppTid;
  h.comm = "refapp-loop0";
  h.count = spans * 5;
  h.sum_ns = spans * 21'000'000;
  h.max_ns = 25'000'000;
  h.slots[100] = spans * 4;
  h.slots[200] = spans;
  e.hists = {h};
  return e;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

struct RoundResult {
  double generate_s = 0, record_s = 0, read_s = 0, replay_s = 0, finish_s = 0;
  uint64_t events = 0, bytes = 0, raw_bytes = 0, lost = 0;
  bool ok = true;
};

RoundResult one_round(const std::string& path, uint64_t n) {
  RoundResult r;
  unlink(path.c_str());
  auto f = OutputFile::Create("bench recording", path);
  if (!f.ok()) {
    std::fprintf(stderr, "lt_bench_recording: %s\n",
                 f.status().message().c_str());
    std::exit(2);
  }
  // The generator alone: part of what the record time includes.
  {
    Generator g;
    Tally t;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < n; ++i) t.count(g.next());
    r.generate_s = seconds_since(t0);
    if (t.total() != n) std::abort();
  }
  Generator gen;
  std::vector<Event> pre = preamble(gen.stacks());
  Tally wrote;
  auto t0 = std::chrono::steady_clock::now();
  RecordingWriter w(std::move(*f));
  for (const Event& ev : pre) {
    w.write(ev);
    wrote.count(ev);
  }
  for (uint64_t i = pre.size(); i + 1 < n; ++i) {
    const Event& ev = gen.next();
    w.write(ev);
    wrote.count(ev);
  }
  Event end(end_event(gen.now(), wrote.spans));
  w.write(end);
  wrote.count(end);
  Status st = w.close();
  r.record_s = seconds_since(t0);
  r.events = w.events();
  r.bytes = w.bytes_written();
  r.raw_bytes = w.raw_bytes();
  r.lost = w.lost();
  if (!st.ok() || r.lost != 0 || r.events != wrote.total()) {
    std::fprintf(stderr, "lt_bench_recording: %s; %llu lost, %llu of %llu\n",
                 st.ok() ? "written" : st.message().c_str(),
                 static_cast<unsigned long long>(r.lost),
                 static_cast<unsigned long long>(r.events),
                 static_cast<unsigned long long>(wrote.total()));
    r.ok = false;
  }

  // Read back: every event, every field summed, in the file.
  {
    auto rd = RecordingReader::Open(path);
    if (!rd.ok()) {
      std::fprintf(stderr, "lt_bench_recording: %s\n",
                   rd.status().message().c_str());
      r.ok = false;
      return r;
    }
    Tally got;
    Event ev;
    t0 = std::chrono::steady_clock::now();
    while ((*rd)->next(&ev)) got.count(ev);
    r.read_s = seconds_since(t0);
    if (!(got == wrote) || !(*rd)->damage().empty()) {
      std::fprintf(stderr,
                   "lt_bench_recording: read back %llu of %llu events, "
                   "damage '%s', sums %s\n",
                   static_cast<unsigned long long>(got.total()),
                   static_cast<unsigned long long>(wrote.total()),
                   (*rd)->damage().c_str(), got == wrote ? "equal" : "differ");
      r.ok = false;
    }
  }

  // Replay: reader -> analysers, as `looptrace report` does.
  {
    auto rd = RecordingReader::Open(path);
    RecordedSymbols symbols;
    Analysis analysis(&symbols);
    t0 = std::chrono::steady_clock::now();
    auto info = replay(**rd, analysis, symbols);
    r.replay_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const Findings& found = analysis.finish();
    r.finish_s = seconds_since(t0);
    if (!info.ok() || info->events != r.events || !info->ended ||
        found.input.total != wrote.max_seq ||
        found.analysis.slow.size() != wrote.spans) {
      std::fprintf(
          stderr,
          "lt_bench_recording: replay %s: %llu events, %llu input "
          "events (want %llu), %zu slow spans (want %llu)\n",
          info.ok() ? "ok" : info.status().message().c_str(),
          static_cast<unsigned long long>(info.ok() ? info->events : 0),
          static_cast<unsigned long long>(found.input.total),
          static_cast<unsigned long long>(wrote.max_seq),
          found.analysis.slow.size(),
          static_cast<unsigned long long>(wrote.spans));
      r.ok = false;
    }
  }
  return r;
}

uint64_t parse_count(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end && (*end == 'k' || *end == 'K')) v *= 1e3;
  if (end && (*end == 'm' || *end == 'M')) v *= 1e6;
  return static_cast<uint64_t>(v);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace looptrace

int main(int argc, char** argv) {
  using namespace looptrace;
  uint64_t n = 2'000'000;
  std::string dir = "/tmp";
  bool keep = false;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--events" && i + 1 < argc) {
      n = parse_count(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: lt_bench_recording [--events N] [--dir DIR] "
                   "[--rounds R] [--keep]\n");
      return 2;
    }
  }
  if (n < 100) n = 100;
  std::string path =
      dir + "/lt_bench_recording." + std::to_string(getpid()) + ".lt";
  std::vector<double> gen_eps, rec_eps, read_eps, replay_eps, finish_s;
  RoundResult last;
  bool ok = true;
  for (int i = 0; i < rounds; ++i) {
    last = one_round(path, n);
    ok = ok && last.ok;
    double ev = static_cast<double>(last.events);
    gen_eps.push_back(ev / last.generate_s);
    rec_eps.push_back(ev / last.record_s);
    read_eps.push_back(ev / last.read_s);
    replay_eps.push_back(ev / last.replay_s);
    finish_s.push_back(last.finish_s);
    std::fprintf(stderr,
                 "round %d: record %.2f M/s, read %.2f M/s, replay %.2f M/s\n",
                 i + 1, rec_eps.back() / 1e6, read_eps.back() / 1e6,
                 replay_eps.back() / 1e6);
  }
  double ev = static_cast<double>(last.events);
  std::printf("events %llu\n", static_cast<unsigned long long>(last.events));
  std::printf("rounds %d\n", rounds);
  std::printf("file_bytes %llu\n", static_cast<unsigned long long>(last.bytes));
  std::printf("bytes_per_event %.2f\n", static_cast<double>(last.bytes) / ev);
  std::printf("raw_bytes_per_event %.2f\n",
              static_cast<double>(last.raw_bytes) / ev);
  std::printf("lost %llu\n", static_cast<unsigned long long>(last.lost));
  std::printf("record_events_per_s %.0f\n", median(rec_eps));
  std::printf("generate_events_per_s %.0f\n", median(gen_eps));
  std::printf("read_events_per_s %.0f\n", median(read_eps));
  std::printf("replay_events_per_s %.0f\n", median(replay_eps));
  std::printf("finish_s %.3f\n", median(finish_s));
  std::printf("round_trip %s\n", ok ? "ok" : "FAILED");
  if (!keep) unlink(path.c_str());
  return ok ? 0 : 1;
}
