// Dispatches that never return, for the span pairing tests: a loop calls
// lj_dispatch() --dispatches times, each busy for --busy-ms; every
// --escape-every'th one leaves by longjmp from a nested function back to
// the loop, which calls the next dispatch from the same frame (so at the
// same stack pointer: the kernel drops the uretprobe instance of the one
// that escaped). The last dispatch always returns. Then --tail calls of
// lj_tail_outer(), which tail-calls lj_tail_inner() (a jmp, not a call:
// one return ends both), each part busy for --busy-ms. Then --nests calls
// of lj_nest(), which calls itself until it is --nest deep, the innermost
// busy for --busy-ms (spans nested deeper than looptrace's 8 levels).
//
// Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
//   {"event":"start","pid","tid"}
//   {"event":"dispatch","index","start_ns","end_ns","escaped"}
//        first clock read in lj_dispatch, and the last before it returns
//        or longjmps
//   {"event":"tail","index","start_ns","inner_start_ns","end_ns"}
//        first clock reads in lj_tail_outer and lj_tail_inner, the last
//        before lj_tail_inner returns
//   {"event":"nest","index","depth","start_ns","end_ns"}
//        around the innermost call's busy loop
//   {"event":"summary","run_delay_ns"}
//        the thread's whole wait for a CPU (/proc/thread-self/schedstat),
//        -1 unknown: what a span may hold beyond the clock reads
// Usage: longjmp_loop [--dispatches N] [--busy-ms MS] [--escape-every K]
//                     [--tail N] [--nests N] [--nest DEPTH] [--log FILE]
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct rec {
  int64_t start_ns, inner_start_ns, end_ns;
  int escaped;
};

static jmp_buf g_env;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void busy(int64_t ns) {
  int64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

__attribute__((noinline)) void lj_escape(struct rec* r) {
  r->end_ns = now_ns();
  r->escaped = 1;
  longjmp(g_env, 1);
}

__attribute__((noinline)) void lj_dispatch(int64_t busy_ns, int escape,
                                           struct rec* r) {
  r->start_ns = now_ns();
  busy(busy_ns);
  if (escape) lj_escape(r);
  r->end_ns = now_ns();
  __asm__ volatile("" ::: "memory"); /* no tail call: a real return */
}

__attribute__((noinline)) int lj_tail_inner(int64_t busy_ns, struct rec* r) {
  r->inner_start_ns = now_ns();
  busy(busy_ns);
  r->end_ns = now_ns();
  return 1;
}

__attribute__((noinline)) int lj_tail_outer(int64_t busy_ns, struct rec* r) {
  r->start_ns = now_ns();
  busy(busy_ns);
  return lj_tail_inner(busy_ns, r); /* -O2: a jmp (the test checks) */
}

static long long run_delay_ns(void) {
  long long run = -1, delay = -1;
  FILE* f = fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  if (fscanf(f, "%lld %lld", &run, &delay) != 2) delay = -1;
  fclose(f);
  return delay;
}

/* Calls itself until `depth` is 1 (through a pointer the compiler cannot
 * see through: no recursion turned into a loop); the innermost is busy. */
int lj_nest(int depth, int64_t busy_ns, struct rec* r);
static int (*volatile g_nest)(int, int64_t, struct rec*) = lj_nest;

__attribute__((noinline)) int lj_nest(int depth, int64_t busy_ns,
                                      struct rec* r) {
  int v;
  if (depth > 1) {
    v = g_nest(depth - 1, busy_ns, r);
  } else {
    r->start_ns = now_ns();
    busy(busy_ns);
    r->end_ns = now_ns();
    v = 0;
  }
  __asm__ volatile("" ::: "memory"); /* no tail call: a real return each */
  return v + 1;
}

/* The loop: a longjmp lands at setjmp and goes on with the next one. */
static void run_dispatches(int n, int64_t busy_ns, int escape_every,
                           struct rec* recs) {
  static int s_n, s_every;
  static int64_t s_busy;
  static struct rec* s_recs;
  static volatile int s_i;
  s_n = n;
  s_every = escape_every;
  s_busy = busy_ns;
  s_recs = recs;
  s_i = 0;
  setjmp(g_env);
  while (s_i < s_n) {
    int k = s_i++;
    lj_dispatch(s_busy, (k + 1) % s_every == 0 && k != s_n - 1, &s_recs[k]);
  }
}

int main(int argc, char** argv) {
  int n = 40, escape_every = 4, tails = 10, nests = 0, nest = 10;
  int64_t busy_ns = 8000000;
  const char* log = NULL;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 >= argc) {
      fprintf(stderr, "longjmp_loop: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "--dispatches"))
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--busy-ms"))
      busy_ns = (int64_t)atoi(argv[++i]) * 1000000;
    else if (!strcmp(argv[i], "--escape-every"))
      escape_every = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tail"))
      tails = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nests"))
      nests = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nest"))
      nest = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--log"))
      log = argv[++i];
    else {
      fprintf(stderr, "longjmp_loop: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (n < 1 || escape_every < 1 || tails < 0 || nests < 0 || nest < 1 ||
      nest > 1000) {
    fprintf(stderr, "longjmp_loop: bad counts\n");
    return 2;
  }
  struct rec* recs = calloc((size_t)(n + tails + nests), sizeof(*recs));
  if (!recs) return 1;
  run_dispatches(n, busy_ns, escape_every, recs);
  for (int t = 0; t < tails; ++t) lj_tail_outer(busy_ns, &recs[n + t]);
  for (int k = 0; k < nests; ++k)
    if (lj_nest(nest, busy_ns, &recs[n + tails + k]) != nest) return 1;

  FILE* f = log ? fopen(log, "w") : stdout;
  if (!f) {
    perror("longjmp_loop: --log");
    return 1;
  }
  fprintf(f, "{\"event\":\"start\",\"pid\":%d,\"tid\":%ld}\n", getpid(),
          (long)syscall(SYS_gettid));
  for (int k = 0; k < n; ++k)
    fprintf(f,
            "{\"event\":\"dispatch\",\"index\":%d,\"start_ns\":%lld,"
            "\"end_ns\":%lld,\"escaped\":%s}\n",
            k, (long long)recs[k].start_ns, (long long)recs[k].end_ns,
            recs[k].escaped ? "true" : "false");
  for (int t = 0; t < tails; ++t) {
    const struct rec* r = &recs[n + t];
    fprintf(f,
            "{\"event\":\"tail\",\"index\":%d,\"start_ns\":%lld,"
            "\"inner_start_ns\":%lld,\"end_ns\":%lld}\n",
            t, (long long)r->start_ns, (long long)r->inner_start_ns,
            (long long)r->end_ns);
  }
  for (int k = 0; k < nests; ++k) {
    const struct rec* r = &recs[n + tails + k];
    fprintf(f,
            "{\"event\":\"nest\",\"index\":%d,\"depth\":%d,"
            "\"start_ns\":%lld,\"end_ns\":%lld}\n",
            k, nest, (long long)r->start_ns, (long long)r->end_ns);
  }
  fprintf(f, "{\"event\":\"summary\",\"run_delay_ns\":%lld}\n", run_delay_ns());
  free(recs);
  return fclose(f) == 0 ? 0 : 1;
}
