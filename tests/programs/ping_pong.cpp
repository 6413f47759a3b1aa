// Blocking points woken by another thread in quick succession, for the
// off-CPU tests: each call of pp_dispatch() (the span, probed with
// --dispatch BIN:pp_dispatch) hands a token to thread "pp-peer" and waits
// for it back, --pings times (condition variable: futex waits the peer
// wakes, often while the waiter is still on its way to sleep), then sleeps
// --sleep-ms in clock_nanosleep (woken by a timer interrupt).
//
// Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
//   {"event":"start","pid","tid","peer_tid","dispatches","pings","sleep_ms"}
//   {"event":"dispatch","index","start_ns","end_ns","sleep_start_ns",
//    "sleep_end_ns"}    first and last clock reads in pp_dispatch; around
//                       the clock_nanosleep call
// Usage: ping_pong [--dispatches N] [--pings P] [--sleep-ms MS] [--log FILE]
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

std::mutex g_mu;
std::condition_variable g_cv;
int g_turn = 0;  // 0: the loop thread's, 1: the peer's
bool g_stop = false;

int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

struct Record {
  int64_t start_ns, end_ns, sleep_start_ns, sleep_end_ns;
};

extern "C" __attribute__((noinline)) void pp_dispatch(int pings,
                                                      int64_t sleep_ns,
                                                      Record* rec) {
  rec->start_ns = now_ns();
  for (int i = 0; i < pings; ++i) {
    std::unique_lock<std::mutex> lk(g_mu);
    g_turn = 1;
    g_cv.notify_all();
    g_cv.wait(lk, [] { return g_turn == 0; });
  }
  struct timespec ts = {static_cast<time_t>(sleep_ns / 1000000000),
                        static_cast<long>(sleep_ns % 1000000000)};
  rec->sleep_start_ns = now_ns();
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
  }
  rec->sleep_end_ns = now_ns();
  rec->end_ns = now_ns();
}

int main(int argc, char** argv) {
  int dispatches = 100, pings = 6, sleep_ms = 10;
  const char* log_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      fprintf(stderr, "ping_pong: error: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--dispatches")
      dispatches = atoi(argv[++i]);
    else if (a == "--pings")
      pings = atoi(argv[++i]);
    else if (a == "--sleep-ms")
      sleep_ms = atoi(argv[++i]);
    else if (a == "--log")
      log_path = argv[++i];
    else {
      fprintf(stderr, "ping_pong: error: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dispatches < 0 || pings < 0 || sleep_ms <= 0) {
    fprintf(stderr, "ping_pong: error: bad value\n");
    return 2;
  }
  pid_t peer_tid = 0;
  std::thread peer([&peer_tid] {
    pthread_setname_np(pthread_self(), "pp-peer");
    std::unique_lock<std::mutex> lk(g_mu);
    peer_tid = static_cast<pid_t>(syscall(SYS_gettid));
    g_cv.notify_all();
    for (;;) {
      g_cv.wait(lk, [] { return g_turn == 1 || g_stop; });
      if (g_stop) return;
      g_turn = 0;
      g_cv.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lk(g_mu);
    g_cv.wait(lk, [&peer_tid] { return peer_tid != 0; });
  }
  std::vector<Record> recs(static_cast<size_t>(dispatches));
  for (Record& r : recs) pp_dispatch(pings, sleep_ms * 1000000LL, &r);
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_stop = true;
  }
  g_cv.notify_all();
  peer.join();
  if (log_path) {
    FILE* f = fopen(log_path, "w");
    if (!f) {
      fprintf(stderr, "ping_pong: error: %s: %s\n", log_path, strerror(errno));
      return 1;
    }
    fprintf(f,
            "{\"event\":\"start\",\"pid\":%d,\"tid\":%d,\"peer_tid\":%d,"
            "\"dispatches\":%d,\"pings\":%d,\"sleep_ms\":%d}\n",
            getpid(), static_cast<int>(syscall(SYS_gettid)), peer_tid,
            dispatches, pings, sleep_ms);
    for (size_t i = 0; i < recs.size(); ++i)
      fprintf(f,
              "{\"event\":\"dispatch\",\"index\":%zu,\"start_ns\":%lld,"
              "\"end_ns\":%lld,\"sleep_start_ns\":%lld,\"sleep_end_ns\":%lld}"
              "\n",
              i, static_cast<long long>(recs[i].start_ns),
              static_cast<long long>(recs[i].end_ns),
              static_cast<long long>(recs[i].sleep_start_ns),
              static_cast<long long>(recs[i].sleep_end_ns));
    fclose(f);
  }
  return 0;
}
