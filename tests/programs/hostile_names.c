// Names a traced process chooses, hostile, for the tests of how looptrace
// shows them: the thread renames itself with prctl(PR_SET_NAME) to bytes
// that are not UTF-8 and hold a terminal escape and a newline, then calls
// hn_dispatch(name) --dispatches times, each busy for --busy-ms, name
// cycling through: invalid UTF-8, a screen clear with a forged report
// line, a GLib source name longer than 32 bytes, and a name longer than
// looptrace reads.
//
// Ground truth (--log, JSON lines written at exit), bytes in hex:
//   {"event":"start","pid","comm_hex"}
//   {"event":"dispatch","index","name_hex"}
// Usage: hostile_names [--dispatches N] [--busy-ms MS] [--log FILE]
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static const char kComm[] = "\xff\xfe\x1b[2J\nhn";

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The probed dispatch: its argument is the name a `str` key reads.
__attribute__((noinline)) void hn_dispatch(const char* name, int64_t ns) {
  int64_t end = now_ns() + ns;
  while (now_ns() < end) {
    __asm__ volatile("" : : "r"(name) : "memory");
  }
}

static void put_hex(FILE* f, const char* s) {
  for (; *s; ++s) fprintf(f, "%02x", (unsigned char)*s);
}

int main(int argc, char** argv) {
  int dispatches = 8;
  int64_t busy_ms = 20;
  const char* log = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dispatches"))
      dispatches = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--busy-ms"))
      busy_ms = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--log"))
      log = argv[i + 1];
  }
  char long_name[201];
  memcpy(long_name, "long-", 5);
  memset(long_name + 5, 'x', sizeof long_name - 6);
  long_name[200] = 0;
  const char* names[] = {"\xff\xfe not UTF-8",
                         "\x1b[2J\nlooptrace: forged line",
                         "[gtk+] gdk_frame_clock_paint_idle", long_name};
  const int nnames = sizeof names / sizeof names[0];
  prctl(PR_SET_NAME, kComm, 0, 0, 0);
  for (int i = 0; i < dispatches; ++i) {
    hn_dispatch(names[i % nnames], busy_ms * 1000000);
    usleep(5000);
  }
  if (log) {
    FILE* f = fopen(log, "w");
    if (!f) return 1;
    fprintf(f, "{\"event\":\"start\",\"pid\":%d,\"comm_hex\":\"", getpid());
    put_hex(f, kComm);
    fprintf(f, "\"}\n");
    for (int i = 0; i < dispatches; ++i) {
      fprintf(f, "{\"event\":\"dispatch\",\"index\":%d,\"name_hex\":\"", i);
      put_hex(f, names[i % nnames]);
      fprintf(f, "\"}\n");
    }
    fclose(f);
  }
  return 0;
}
