// The display channel benchmark's traced program (scripts/bench-x11.sh):
// a display server's socket and a client of it in one process, one
// thread. Per iteration the "server" writes a chunk of --chunk bytes of
// key presses and the "client" reads it with recvmsg into a 4 KiB buffer.
// X11: 32-byte KeyPress events (time @4 = CLOCK_MONOTONIC ms) written with
// writev, as Xorg does. --wayland: 24-byte wl_keyboard.key events written
// with sendmsg, as libwayland-server does, after the client's requests
// that make its keyboard (get_registry, bind of the seat the "server"
// announces, get_keyboard), sent once the tracer is attached. The reads
// are what looptrace frames in the kernel; it times slices of iterations
// and reports the median slice's ns per iteration (one write, one read).
//
// Usage: lt_bench_x11 --socket PATH --chunk BYTES --iterations N
//                     [--slices K] [--go-file PATH] [--wayland]
// Start: "lt_bench_x11: pid P waiting" on stderr once the connection is
// made, then it waits for --go-file to exist, so that a tracer can attach.
// Output: one JSON line: {"chunk":..,"iterations":..,"events":..,
// "ns_per_iteration":..,"seconds":..}; `events` = the key presses written
// (chunk / 32, or chunk / 24, per iteration), those a tracer must see.
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

// A Wayland message: object, opcode, 32-bit arguments.
std::vector<uint32_t> wl_msg(uint32_t obj, uint32_t op,
                             std::vector<uint32_t> args) {
  std::vector<uint32_t> m = {
      obj, static_cast<uint32_t>(8 + 4 * args.size()) << 16 | op};
  m.insert(m.end(), args.begin(), args.end());
  return m;
}

// One sendmsg of n bytes, as libwayland-server writes.
void send_bytes(int fd, const void* p, size_t n) {
  iovec v = {const_cast<void*>(p), n};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  if (sendmsg(fd, &m, 0) != static_cast<ssize_t>(n)) die("sendmsg");
}

void send_words(int fd, const std::vector<uint32_t>& w) {
  send_bytes(fd, w.data(), w.size() * 4);
}

// recvmsg into buf (4 KiB, as libxcb and libwayland read) until `want`
// bytes came.
void recv_bytes(int fd, std::vector<unsigned char>& buf, size_t want) {
  for (size_t got = 0; got < want;) {
    iovec rv = {buf.data(), buf.size()};
    msghdr m{};
    m.msg_iov = &rv;
    m.msg_iovlen = 1;
    ssize_t n = recvmsg(fd, &m, 0);
    if (n <= 0) die("recvmsg");
    got += static_cast<size_t>(n);
  }
}

// The client's keyboard, made as libwayland-client makes it: registry 2,
// the seat (global 9) bound as 3, its keyboard 4.
constexpr uint32_t kKeyboard = 4;
void wayland_setup(int server, int client) {
  std::vector<unsigned char> buf(4096);
  send_words(client, wl_msg(1, 1, {2}));  // wl_display.get_registry
  std::vector<uint32_t> global =
      wl_msg(2, 0, {9, 8, 0x735f6c77, 0x00746165, 7});
  send_words(server, global);  // wl_registry.global(9, "wl_seat", 7)
  recv_bytes(client, buf, global.size() * 4);
  std::vector<uint32_t> req =
      wl_msg(2, 0, {9, 8, 0x735f6c77, 0x00746165, 7, 3});  // bind
  std::vector<uint32_t> kb = wl_msg(3, 1, {kKeyboard});    // get_keyboard
  req.insert(req.end(), kb.begin(), kb.end());
  send_words(client, req);
  recv_bytes(server, buf, req.size() * 4);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, go;
  size_t chunk = 1024;
  uint64_t iterations = 100000, slices = 20;
  bool wayland = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--wayland") {
      wayland = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const char* v = argv[++i];
    if (a == "--socket")
      path = v;
    else if (a == "--chunk")
      chunk = std::strtoul(v, nullptr, 10);
    else if (a == "--iterations")
      iterations = std::strtoull(v, nullptr, 10);
    else if (a == "--slices")
      slices = std::strtoull(v, nullptr, 10);
    else if (a == "--go-file")
      go = v;
  }
  const size_t event = wayland ? 24 : 32;
  if (path.empty() || chunk < 32 || chunk > 4096 || chunk % 32 != 0 ||
      slices == 0 || iterations < slices) {
    std::fprintf(stderr,
                 "usage: lt_bench_x11 --socket PATH --chunk 32..4096 "
                 "(a multiple of 32) --iterations N [--slices K] "
                 "[--go-file PATH] [--wayland]\n");
    return 2;
  }
  // Whole events only: a Wayland chunk is the most 24-byte events in it.
  chunk = chunk / event * event;
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
  if (wayland) wayland_setup(server, client);

  std::vector<unsigned char> out(chunk), in(4096);
  std::vector<uint64_t> per_slice;
  const uint64_t per = iterations / slices;
  const uint64_t t0 = now_ns();
  for (uint64_t s = 0; s < slices; ++s) {
    const uint64_t a = now_ns();
    for (uint64_t i = 0; i < per; ++i) {
      const uint32_t ms = static_cast<uint32_t>(now_ns() / 1'000'000);
      for (size_t off = 0; off < chunk; off += event) {
        if (wayland) {
          // wl_keyboard.key(serial, time, key, state): pressed.
          const uint32_t w[6] = {kKeyboard, 24u << 16 | 3, 1, ms, 38, 1};
          std::memcpy(&out[off], w, sizeof w);
          continue;
        }
        out[off] = 2;  // KeyPress
        out[off + 1] = 38;
        std::memcpy(&out[off + 4], &ms, 4);
      }
      iovec wv = {out.data(), chunk};
      if (wayland)
        send_bytes(server, out.data(), chunk);
      else if (writev(server, &wv, 1) != static_cast<ssize_t>(chunk))
        die("writev");
      recv_bytes(client, in, chunk);
    }
    per_slice.push_back((now_ns() - a) / per);
  }
  const double seconds = static_cast<double>(now_ns() - t0) / 1e9;
  std::sort(per_slice.begin(), per_slice.end());
  std::printf(
      "{\"chunk\":%zu,\"iterations\":%llu,\"events\":%llu,"
      "\"ns_per_iteration\":%llu,\"seconds\":%.3f}\n",
      chunk, static_cast<unsigned long long>(per * slices),
      static_cast<unsigned long long>(per * slices * (chunk / event)),
      static_cast<unsigned long long>(per_slice[per_slice.size() / 2]),
      seconds);
  close(client);
  close(server);
  close(listener);
  unlink(path.c_str());
  return 0;
}
