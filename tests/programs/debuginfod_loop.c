// A loop whose dispatches stall in a library (debuginfod_lib.c, which the
// debuginfod test strips), for tests/integration/debuginfod_test.cpp.
//
//   debuginfod_loop LOG RUNS STALL_MS START_DELAY_MS
//
// Says "debuginfod_loop: ready" on stderr, waits START_DELAY_MS (time for
// looptrace to attach), then runs RUNS dispatches, each stalling STALL_MS
// in the library and logged to LOG as {"event":"stall","start_ns":...,
// "end_ns":...} (CLOCK_MONOTONIC), 100 ms apart; then exits 0.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void ltdbg_work(long ms);

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// The probed dispatch.
__attribute__((noinline)) void lt_dbg_dispatch(long ms) {
  ltdbg_work(ms);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s LOG RUNS STALL_MS START_DELAY_MS\n", argv[0]);
    return 2;
  }
  FILE* log = fopen(argv[1], "w");
  if (!log) return 1;
  long runs = atol(argv[2]), stall_ms = atol(argv[3]);
  long delay_ms = atol(argv[4]);
  fprintf(stderr, "debuginfod_loop: ready pid=%d\n", (int)getpid());
  usleep((useconds_t)delay_ms * 1000);
  for (long i = 0; i < runs; i++) {
    uint64_t start = now_ns();
    lt_dbg_dispatch(stall_ms);
    uint64_t end = now_ns();
    fprintf(log,
            "{\"event\":\"stall\",\"start_ns\":\"%llu\",\"end_ns\":\"%llu\"}\n",
            (unsigned long long)start, (unsigned long long)end);
    fflush(log);
    usleep(100000);
  }
  fclose(log);
  return 0;
}
