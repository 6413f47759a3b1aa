// A shared library the debuginfod test strips and serves the debug file of
// (tests/integration/debuginfod_test.cpp). Its busy function is static:
// once stripped, only the debug file names it.
#include <stdint.h>
#include <time.h>

#define LT_NOINLINE __attribute__((noinline, noclone))

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

volatile uint64_t ltdbg_sink;

// Spins on the CPU for ms milliseconds: where the stall's samples land.
LT_NOINLINE static void ltdbg_busy_in_library(long ms) {
  uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
  while (now_ns() < end)
    for (int i = 0; i < 1000; i++) ltdbg_sink += (uint64_t)i;
}

LT_NOINLINE void ltdbg_work(long ms) {
  ltdbg_busy_in_library(ms);
  // Not a tail call: this frame stays on the stack.
  ltdbg_sink++;
}
