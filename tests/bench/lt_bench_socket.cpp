// The input-channel benchmark's traced program (scripts/bench-input.sh):
// one thread moves Android InputMessages over a socket pair in a tight loop
// and reports what one socket call costs, in ns, measured with
// CLOCK_MONOTONIC. Run it untraced and under `looptrace record --input`;
// the difference is the tracing cost per call.
//
// Modes:
//   --pingpong N  an AF_UNIX SOCK_SEQPACKET socketpair (what Android's
//                 InputChannel is). Per iteration: sendto a 104-byte KEY
//                 (type 0 @0, seq @4 counting from 1, eventTime @16 =
//                 CLOCK_MONOTONIC now) on end A, recvfrom it on end B;
//                 sendto a 24-byte FINISHED (type 2, seq, handled=1 @8,
//                 consumeTime @16) on B, recvfrom it on A. 4 socket calls,
//                 2 sendto and 2 recvfrom; a tracer sees one input event.
//   --udp N       the same loop, the same bytes, on two loopback UDP
//                 sockets: calls a SEQPACKET-only filter must turn away.
// N iterations in --slices K equal slices, each timed on its own; the
// result is the median slice's ns per socket call. With --seconds S the
// loop runs as fast as it can for S seconds instead (N is ignored) and the
// result is the rate.
//
// Start: the pid goes to stderr ("lt_bench_socket: pid P waiting"), then
// it waits for --go-file PATH to exist or, with --wait-stdin, for a line
// on stdin, so that a tracer can attach first.
//
// Output: one JSON line on stdout, e.g.
//   {"mode":"pingpong","pid":..,"iterations":..,"calls":..,
//    "ns_per_call":..,"seconds":..,"iterations_per_s":..}
// `iterations` counts every iteration made, i.e. the KEY/FINISHED pairs a
// tracer must have seen; `calls` = 4 x iterations.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kKeySize = 104;       // LT_IM_KEY_SIZE
constexpr size_t kFinishedSize = 24;   // LT_IM_FINISHED_SIZE
constexpr uint32_t kTypeKey = 0;       // LT_IM_KEY
constexpr uint32_t kTypeFinished = 2;  // LT_IM_FINISHED

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "lt_bench_socket: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

[[noreturn]] void usage() {
  std::fprintf(
      stderr,
      "usage: lt_bench_socket (--pingpong N | --udp N) [--slices K]\n"
      "         [--seconds S] [--cpu C] [--go-file PATH | --wait-stdin]\n");
  std::exit(2);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

void put32(unsigned char* b, size_t off, uint32_t v) {
  std::memcpy(b + off, &v, sizeof(v));
}
void put64(unsigned char* b, size_t off, uint64_t v) {
  std::memcpy(b + off, &v, sizeof(v));
}

// The two ends and where to send to (UDP: the other end's address).
struct Pair {
  int a = -1, b = -1;
  sockaddr_in addr_a{}, addr_b{};
  bool udp = false;
};

Pair make_seqpacket() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) die("socketpair");
  Pair p;
  p.a = sv[0];
  p.b = sv[1];
  return p;
}

int bound_udp(sockaddr_in* addr) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr->sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof(*addr)) != 0)
    die("bind");
  socklen_t len = sizeof(*addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0)
    die("getsockname");
  return fd;
}

Pair make_udp() {
  Pair p;
  p.udp = true;
  p.a = bound_udp(&p.addr_a);
  p.b = bound_udp(&p.addr_b);
  return p;
}

// One iteration: KEY A -> B, FINISHED B -> A; 4 socket calls.
class Loop {
 public:
  explicit Loop(const Pair& p) : p_(p) {}

  void iterate() {
    ++seq_;
    std::memset(key_, 0, sizeof(key_));
    put32(key_, 0, kTypeKey);
    put32(key_, 4, seq_);
    put64(key_, 16, now_ns());
    send(p_.a, key_, kKeySize, p_.udp ? &p_.addr_b : nullptr);
    recv(p_.b, kKeySize);
    std::memset(fin_, 0, sizeof(fin_));
    put32(fin_, 0, kTypeFinished);
    put32(fin_, 4, seq_);
    put32(fin_, 8, 1);  // handled
    put64(fin_, 16, now_ns());
    send(p_.b, fin_, kFinishedSize, p_.udp ? &p_.addr_a : nullptr);
    recv(p_.a, kFinishedSize);
  }

  uint64_t iterations() const { return seq_; }

 private:
  static void send(int fd, const unsigned char* buf, size_t n,
                   const sockaddr_in* to) {
    ssize_t r =
        sendto(fd, buf, n, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(to),
               to ? sizeof(*to) : 0);
    if (r != static_cast<ssize_t>(n)) die("sendto");
  }
  void recv(int fd, size_t n) {
    ssize_t r = recvfrom(fd, rbuf_, sizeof(rbuf_), 0, nullptr, nullptr);
    if (r != static_cast<ssize_t>(n)) die("recvfrom");
  }

  const Pair& p_;
  uint32_t seq_ = 0;
  unsigned char key_[kKeySize];
  unsigned char fin_[kFinishedSize];
  unsigned char rbuf_[256];
};

void wait_for_go(const std::string& go_file, bool wait_stdin) {
  std::fprintf(stderr, "lt_bench_socket: pid %d waiting\n",
               static_cast<int>(getpid()));
  if (wait_stdin) {
    char line[64];
    if (!std::fgets(line, sizeof(line), stdin)) {
      std::fprintf(stderr, "lt_bench_socket: stdin closed before go\n");
      std::exit(1);
    }
  } else if (!go_file.empty()) {
    struct stat st;
    while (stat(go_file.c_str(), &st) != 0) usleep(1000);
  }
}

uint64_t parse_u64(const char* s) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || !end || *end || end == s) usage();
  return v;
}

// A run's length in seconds, decimals allowed (a smoke run's 0.2), in ns.
uint64_t parse_seconds_ns(const char* s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno || !end || *end || end == s || !(v > 0) || v > 86400) usage();
  return static_cast<uint64_t>(v * 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = nullptr;
  uint64_t n = 0, slices = 20, seconds_ns = 0;
  int cpu = -1;
  std::string go_file;
  bool wait_stdin = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--pingpong" || a == "--udp") {
      mode = a == "--udp" ? "udp" : "pingpong";
      n = parse_u64(value());
    } else if (a == "--slices") {
      slices = parse_u64(value());
    } else if (a == "--seconds") {
      seconds_ns = parse_seconds_ns(value());
    } else if (a == "--cpu") {
      cpu = static_cast<int>(parse_u64(value()));
    } else if (a == "--go-file") {
      go_file = value();
    } else if (a == "--wait-stdin") {
      wait_stdin = true;
    } else {
      usage();
    }
  }
  if (!mode || slices == 0 || (seconds_ns == 0 && n < slices)) usage();
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) die("sched_setaffinity");
  }

  Pair pair = std::string(mode) == "udp" ? make_udp() : make_seqpacket();
  Loop loop(pair);
  for (int i = 0; i < 3; ++i) loop.iterate();  // page in, before any tracer
  const uint64_t warm = loop.iterations();
  wait_for_go(go_file, wait_stdin);

  double ns_per_call = 0;
  const uint64_t t0 = now_ns();
  if (seconds_ns > 0) {
    const uint64_t end = t0 + seconds_ns;
    uint64_t t = t0;
    while (t < end) {
      for (int i = 0; i < 256; ++i) loop.iterate();
      t = now_ns();
    }
    ns_per_call = static_cast<double>(t - t0) /
                  static_cast<double>(4 * (loop.iterations() - warm));
  } else {
    const uint64_t per_slice = n / slices;
    std::vector<double> ns;
    ns.reserve(slices);
    for (uint64_t s = 0; s < slices; ++s) {
      // The last slice takes the remainder: exactly N iterations in all.
      uint64_t k = s + 1 == slices ? n - per_slice * (slices - 1) : per_slice;
      uint64_t a = now_ns();
      for (uint64_t i = 0; i < k; ++i) loop.iterate();
      ns.push_back(static_cast<double>(now_ns() - a) /
                   static_cast<double>(4 * k));
    }
    std::sort(ns.begin(), ns.end());
    ns_per_call =
        slices % 2 ? ns[slices / 2] : (ns[slices / 2 - 1] + ns[slices / 2]) / 2;
  }
  const double secs = static_cast<double>(now_ns() - t0) / 1e9;
  const uint64_t iters = loop.iterations();
  std::printf(
      "{\"mode\":\"%s\",\"pid\":%d,\"iterations\":%llu,\"calls\":%llu,"
      "\"timed_iterations\":%llu,\"ns_per_call\":%.1f,\"seconds\":%.3f,"
      "\"iterations_per_s\":%.0f}\n",
      mode, static_cast<int>(getpid()), static_cast<unsigned long long>(iters),
      static_cast<unsigned long long>(4 * iters),
      static_cast<unsigned long long>(iters - warm), ns_per_call, secs,
      static_cast<double>(iters - warm) / secs);
  return 0;
}
