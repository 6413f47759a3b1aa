// LD_PRELOAD: an independent log of the X11 key events a client reads or
// a server writes (a server: every write, writev or sendmsg to a client it
// accepted on /tmp/.X11-unix/X*, timed right before the call, logged as
// "write_key" with "write_ns"). In a client, every read
// (read, recv, recvfrom, recvmsg) of a socket connected to an X server is
// timed with CLOCK_MONOTONIC right after it returns, and its bytes framed
// here, from the connection's first byte (its setup reply) on: each key
// press and release (core KeyPress/KeyRelease, or XInput 2's in a
// GenericEvent) is one JSON line in $X11_READLOG:
//   {"event":"read_key","type":"key_press","time":MS,"read_ns":NS,"fd":N}
// time is the X server's timestamp; read_ns when the read that held the
// event's last byte returned. The GTK tests compare looptrace's receive
// times with these.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 1024

struct conn {
  int x;       // connected to an X server, or accepted by one
  int server;  // the server's end: its writes are logged
  int setup_done;
  unsigned char hdr[32];
  size_t have;      // header bytes held
  uint64_t rest;    // bytes of the current message past its header
  uint64_t length;  // the current message's whole length
};

static struct conn conns[MAX_FDS];
static int log_fd = -1;

static int is_x_addr(const struct sockaddr* sa, socklen_t len) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  if (sa == NULL || len <= sizeof(sa_family_t) || len > sizeof(a)) return 0;
  memcpy(&a, sa, len);
  if (a.sun_family != AF_UNIX) return 0;
  const char* path = a.sun_path[0] ? a.sun_path : a.sun_path + 1;
  return strncmp(path, "/tmp/.X11-unix/X", 16) == 0;
}

static uint32_t u32(const unsigned char* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static void message_done(struct conn* c, int fd, uint64_t now) {
  unsigned type = c->hdr[0] & 0x7f;
  const char* name = NULL;
  uint32_t time = 0;
  if (type == 2 || type == 3) {
    name = type == 2 ? "key_press" : "key_release";
    time = u32(c->hdr + 4);
  } else if (type == 35 && c->length >= 80) {
    unsigned evtype = (unsigned)c->hdr[8] | (unsigned)c->hdr[9] << 8;
    if (evtype == 2 || evtype == 3) {
      name = evtype == 2 ? "key_press" : "key_release";
      time = u32(c->hdr + 12);
    }
  }
  if (name == NULL || log_fd < 0) return;
  char line[200];
  const char* what = c->server ? "write" : "read";
  int n = snprintf(line, sizeof(line),
                   "{\"event\":\"%s_key\",\"type\":\"%s\",\"time\":%u,"
                   "\"%s_ns\":%llu,\"fd\":%d}\n",
                   what, name, time, what, (unsigned long long)now, fd);
  if (n > 0 && write(log_fd, line, (size_t)n) < 0) {
  }
}

static void feed(int fd, const unsigned char* p, size_t n, uint64_t now) {
  struct conn* c = &conns[fd];
  while (n > 0) {
    if (c->rest > 0) {
      size_t take = n < c->rest ? n : (size_t)c->rest;
      c->rest -= take;
      p += take;
      n -= take;
      if (c->rest == 0) message_done(c, fd, now), c->have = 0;
      continue;
    }
    // The setup reply: 8 bytes, then 4 x (bytes 6-7) more.
    size_t want = c->setup_done ? 32 : 8;
    size_t take = want - c->have;
    if (take > n) take = n;
    memcpy(c->hdr + c->have, p, take);
    c->have += take;
    p += take;
    n -= take;
    if (c->have < want) return;
    if (!c->setup_done) {
      c->setup_done = 1;
      c->rest = 4ull * ((unsigned)c->hdr[6] | (unsigned)c->hdr[7] << 8);
      c->length = 8 + c->rest;
      c->hdr[0] = 0;  // not an event
      if (c->rest == 0) c->have = 0;
      continue;
    }
    unsigned t = c->hdr[0] & 0x7f;
    c->length = 32;
    if (c->hdr[0] == 1 || t == 35) c->length += 4ull * u32(c->hdr + 4);
    c->rest = c->length - 32;
    if (c->rest == 0) {
      message_done(c, fd, now);
      c->have = 0;
    }
  }
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void open_log(void) {
  if (log_fd >= 0) return;
  const char* path = getenv("X11_READLOG");
  if (path)
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

static int x_fd(int fd) { return fd >= 0 && fd < MAX_FDS && conns[fd].x; }
static int server_fd(int fd) { return x_fd(fd) && conns[fd].server; }
static int client_fd(int fd) { return x_fd(fd) && !conns[fd].server; }

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  static int (*real)(int, const struct sockaddr*, socklen_t);
  if (!real) real = dlsym(RTLD_NEXT, "connect");
  int r = real(fd, addr, len);
  if (r == 0 && fd >= 0 && fd < MAX_FDS && is_x_addr(addr, len)) {
    memset(&conns[fd], 0, sizeof(conns[fd]));
    conns[fd].x = 1;
    open_log();
  }
  return r;
}

// A client accepted on an X server's socket: the server's end.
static void accepted(int listener, int fd) {
  struct sockaddr_un a;
  socklen_t len = sizeof(a);
  memset(&a, 0, sizeof(a));
  if (fd < 0 || fd >= MAX_FDS ||
      getsockname(listener, (struct sockaddr*)&a, &len) != 0 ||
      !is_x_addr((struct sockaddr*)&a, len))
    return;
  memset(&conns[fd], 0, sizeof(conns[fd]));
  conns[fd].x = 1;
  conns[fd].server = 1;
  open_log();
}

int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  static int (*real)(int, struct sockaddr*, socklen_t*);
  if (!real) real = dlsym(RTLD_NEXT, "accept");
  int r = real(fd, addr, len);
  accepted(fd, r);
  return r;
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  static int (*real)(int, struct sockaddr*, socklen_t*, int);
  if (!real) real = dlsym(RTLD_NEXT, "accept4");
  int r = real(fd, addr, len, flags);
  accepted(fd, r);
  return r;
}

// What a server wrote, framed as the client will read it (only what the
// call accepted: a short write leaves the rest for the next).
static void feed_iov(int fd, const struct iovec* iov, size_t n, ssize_t r,
                     uint64_t now) {
  size_t left = r > 0 ? (size_t)r : 0;
  for (size_t i = 0; i < n && left > 0; i++) {
    size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
    feed(fd, iov[i].iov_base, k, now);
    left -= k;
  }
}

ssize_t writev(int fd, const struct iovec* iov, int n) {
  static ssize_t (*real)(int, const struct iovec*, int);
  if (!real) real = dlsym(RTLD_NEXT, "writev");
  const uint64_t now = mono_ns();
  ssize_t r = real(fd, iov, n);
  if (server_fd(fd)) feed_iov(fd, iov, (size_t)n, r, now);
  return r;
}

ssize_t write(int fd, const void* buf, size_t len) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = dlsym(RTLD_NEXT, "write");
  const uint64_t now = mono_ns();
  ssize_t r = real(fd, buf, len);
  if (r > 0 && server_fd(fd)) feed(fd, buf, (size_t)r, now);
  return r;
}

ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  static ssize_t (*real)(int, const struct msghdr*, int);
  if (!real) real = dlsym(RTLD_NEXT, "sendmsg");
  const uint64_t now = mono_ns();
  ssize_t r = real(fd, msg, flags);
  if (server_fd(fd)) feed_iov(fd, msg->msg_iov, msg->msg_iovlen, r, now);
  return r;
}

int close(int fd) {
  static int (*real)(int);
  if (!real) real = dlsym(RTLD_NEXT, "close");
  if (fd >= 0 && fd < MAX_FDS) conns[fd].x = 0;
  return real(fd);
}

ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  static ssize_t (*real)(int, struct msghdr*, int);
  if (!real) real = dlsym(RTLD_NEXT, "recvmsg");
  ssize_t r = real(fd, msg, flags);
  if (r > 0 && !(flags & MSG_PEEK) && client_fd(fd)) {
    uint64_t now = mono_ns();
    size_t left = (size_t)r;
    for (size_t i = 0; i < msg->msg_iovlen && left > 0; i++) {
      size_t n =
          msg->msg_iov[i].iov_len < left ? msg->msg_iov[i].iov_len : left;
      feed(fd, msg->msg_iov[i].iov_base, n, now);
      left -= n;
    }
  }
  return r;
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags,
                 struct sockaddr* addr, socklen_t* alen) {
  static ssize_t (*real)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
  if (!real) real = dlsym(RTLD_NEXT, "recvfrom");
  ssize_t r = real(fd, buf, len, flags, addr, alen);
  if (r > 0 && !(flags & MSG_PEEK) && client_fd(fd))
    feed(fd, buf, (size_t)r, mono_ns());
  return r;
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  return recvfrom(fd, buf, len, flags, NULL, NULL);
}

ssize_t read(int fd, void* buf, size_t len) {
  static ssize_t (*real)(int, void*, size_t);
  if (!real) real = dlsym(RTLD_NEXT, "read");
  ssize_t r = real(fd, buf, len);
  if (r > 0 && client_fd(fd)) feed(fd, buf, (size_t)r, mono_ns());
  return r;
}
