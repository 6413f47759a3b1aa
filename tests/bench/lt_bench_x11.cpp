// The X11 channel benchmark's traced program (scripts/bench-x11.sh): an X
// server's socket and a client of it in one process, one thread. Per
// iteration the "server" writes a chunk of --chunk bytes of 32-byte
// KeyPress events (time @4 = CLOCK_MONOTONIC ms) with writev, and the
// "client" reads it with recvmsg into a 4 KiB buffer, as libxcb does. The
// reads are what looptrace frames in the kernel; it times slices of
// iterations and reports the median slice's ns per iteration (one writev
// and one recvmsg).
//
// Usage: lt_bench_x11 --socket /tmp/.X11-unix/XN --chunk BYTES
//                     --iterations N [--slices K] [--go-file PATH]
// Start: "lt_bench_x11: pid P waiting" on stderr once the connection is
// made, then it waits for --go-file to exist, so that a tracer can attach.
// Output: one JSON line: {"chunk":..,"iterations":..,"events":..,
// "ns_per_iteration":..,"seconds":..}; `events` = chunk / 32 x iterations,
// the key presses a tracer must have seen.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
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

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "lt_bench_x11: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, go;
  size_t chunk = 1024;
  uint64_t iterations = 100000, slices = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--socket")
      path = argv[i + 1];
    else if (a == "--chunk")
      chunk = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--iterations")
      iterations = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--slices")
      slices = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--go-file")
      go = argv[i + 1];
  }
  if (path.empty() || chunk < 32 || chunk > 4096 || chunk % 32 != 0 ||
      slices == 0 || iterations < slices) {
    std::fprintf(stderr,
                 "usage: lt_bench_x11 --socket PATH --chunk 32..4096 "
                 "(a multiple of 32) --iterations N [--slices K] "
                 "[--go-file PATH]\n");
    return 2;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  unlink(path.c_str());
  int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    die("bind");
  if (listen(listener, 1) != 0) die("listen");
  int client = socket(AF_UNIX, SOCK_STREAM, 0);
  if (client < 0) die("socket");
  if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    die("connect");
  int server = accept(listener, nullptr, nullptr);
  if (server < 0) die("accept");
  std::fprintf(stderr, "lt_bench_x11: pid %d waiting\n",
               static_cast<int>(getpid()));
  struct stat st;
  while (!go.empty() && stat(go.c_str(), &st) != 0) usleep(10000);

  std::vector<unsigned char> out(chunk), in(4096);
  std::vector<uint64_t> per_slice;
  const uint64_t per = iterations / slices;
  const uint64_t t0 = now_ns();
  for (uint64_t s = 0; s < slices; ++s) {
    const uint64_t a = now_ns();
    for (uint64_t i = 0; i < per; ++i) {
      const uint32_t ms = static_cast<uint32_t>(now_ns() / 1'000'000);
      for (size_t off = 0; off < chunk; off += 32) {
        out[off] = 2;  // KeyPress
        out[off + 1] = 38;
        std::memcpy(&out[off + 4], &ms, 4);
      }
      iovec wv = {out.data(), chunk};
      if (writev(server, &wv, 1) != static_cast<ssize_t>(chunk)) die("writev");
      size_t got = 0;
      while (got < chunk) {
        iovec rv = {in.data(), in.size()};
        msghdr m{};
        m.msg_iov = &rv;
        m.msg_iovlen = 1;
        ssize_t n = recvmsg(client, &m, 0);
        if (n <= 0) die("recvmsg");
        got += static_cast<size_t>(n);
      }
    }
    per_slice.push_back((now_ns() - a) / per);
  }
  const double seconds = static_cast<double>(now_ns() - t0) / 1e9;
  std::sort(per_slice.begin(), per_slice.end());
  std::printf(
      "{\"chunk\":%zu,\"iterations\":%llu,\"events\":%llu,"
      "\"ns_per_iteration\":%llu,\"seconds\":%.3f}\n",
      chunk, static_cast<unsigned long long>(per * slices),
      static_cast<unsigned long long>(per * slices * (chunk / 32)),
      static_cast<unsigned long long>(per_slice[per_slice.size() / 2]),
      seconds);
  close(client);
  close(server);
  close(listener);
  unlink(path.c_str());
  return 0;
}
