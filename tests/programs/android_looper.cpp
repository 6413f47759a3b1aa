// AOSP's own native Looper (Debian's android-libutils, AOSP 10) running a
// MessageHandler that posts itself a message every 10 ms, a second one a
// poster thread sends a message every 7 ms (due 3 ms later, by
// sendMessageAtTime), and an fd callback on a pipe a writer thread feeds
// every 25 ms, some stalling. Its ground truth, CLOCK_MONOTONIC, one JSON
// line each:
//   {"event":"ready","pid":..}
//   {"event":"post","handler":"tick"|"post","what":N,"due_ns":..}
//   {"event":"dispatch","kind":"message"|"posted"|"fd","what":N|"n":N,
//    "start_ns":..,"end_ns":..,"stall":"busy"|"sleep"|"lock"|null,"tid":..}
//   {"event":"wait","start_ns":..,"end_ns":..,"ready":N,"pipe":bool}
//     each epoll_wait of the loop from its first message on (the library
//     calls it through its PLT: this program's own definition, which
//     times it; ready: the fds it returned, pipe: the pipe's among them)
//   {"event":"done","messages":N,"posted":N,"callbacks":N}
// Usage: android_looper --duration MS --log FILE [--stall KIND:MS@WHAT]...
//   [--fd-stall KIND:MS@N]...: message WHAT (0, 1, ...), or the Nth fd
//   callback, stalls MS ms: busy (spins), sleep, lock (waits for a mutex a
//   helper thread holds that long; the helper logs {"event":"unlock"}).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <utils/Looper.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::mutex g_log_mu;
FILE* g_log = nullptr;
void log_line(const std::string& s) {
  std::lock_guard<std::mutex> g(g_log_mu);
  std::fprintf(g_log, "%s\n", s.c_str());
  std::fflush(g_log);
}

// The loop thread's waits, kept in memory (no lock, no write inside one)
// and logged at the end.
struct Wait {
  int64_t start, end;
  int ready;
  bool pipe;
};
std::vector<Wait> g_waits;
std::atomic<bool> g_timing_waits{false};
int g_pipe_fd = -1;
pid_t g_loop_tid = 0;

struct Stall {
  std::string kind;
  int ms = 0;
};
std::map<int, Stall> g_msg_stalls, g_fd_stalls;
std::mutex g_lock;

// Spins, sleeps, or waits for g_lock held by a helper for `s.ms`.
void stall(const Stall& s) {
  const int64_t ns = int64_t{s.ms} * 1'000'000;
  if (s.kind == "busy") {
    const int64_t end = now_ns() + ns;
    volatile uint64_t x = 0;
    while (now_ns() < end) x = x + 1;
  } else if (s.kind == "sleep") {
    timespec ts{static_cast<time_t>(ns / 1'000'000'000),
                static_cast<long>(ns % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  } else {
    std::atomic<bool> held{false};
    std::thread holder([&] {
      std::lock_guard<std::mutex> g(g_lock);
      held = true;
      timespec ts{static_cast<time_t>(ns / 1'000'000'000),
                  static_cast<long>(ns % 1'000'000'000)};
      nanosleep(&ts, nullptr);
      log_line("{\"event\":\"unlock\",\"tid\":" + std::to_string(gettid()) +
               ",\"at_ns\":" + std::to_string(now_ns()) + "}");
    });
    while (!held) usleep(100);
    { std::lock_guard<std::mutex> g(g_lock); }
    holder.join();
  }
}

std::string dispatch_line(const char* kind, const char* id_name, int id,
                          int64_t start, int64_t end, const Stall* s) {
  return std::string("{\"event\":\"dispatch\",\"kind\":\"") + kind + "\",\"" +
         id_name + "\":" + std::to_string(id) +
         ",\"start_ns\":" + std::to_string(start) +
         ",\"end_ns\":" + std::to_string(end) +
         ",\"stall\":" + (s ? "\"" + s->kind + "\"" : std::string("null")) +
         ",\"tid\":" + std::to_string(gettid()) + "}";
}

class TickHandler : public android::MessageHandler {
 public:
  explicit TickHandler(android::sp<android::Looper> looper)
      : looper_(std::move(looper)) {}
  void handleMessage(const android::Message& message) override {
    const int64_t start = now_ns();
    auto it = g_msg_stalls.find(message.what);
    if (it != g_msg_stalls.end()) stall(it->second);
    const int64_t end = now_ns();
    log_line(dispatch_line("message", "what", message.what, start, end,
                           it != g_msg_stalls.end() ? &it->second : nullptr));
    ++count;
    const int64_t due = now_ns() + 10'000'000;
    log_line("{\"event\":\"post\",\"handler\":\"tick\",\"what\":" +
             std::to_string(message.what + 1) +
             ",\"due_ns\":" + std::to_string(due) + "}");
    looper_->sendMessageAtTime(due, this, android::Message(message.what + 1));
  }
  int count = 0;

 private:
  android::sp<android::Looper> looper_;
};

// The poster thread's messages (what 1000, 1001, ...): never stall.
class PostHandler : public android::MessageHandler {
 public:
  void handleMessage(const android::Message& message) override {
    const int64_t start = now_ns();
    log_line(
        dispatch_line("posted", "what", message.what, start, start, nullptr));
    ++count;
  }
  std::atomic<int> count{0};
};

class PipeCallback : public android::LooperCallback {
 public:
  int handleEvent(int fd, int /*events*/, void* /*data*/) override {
    const int64_t start = now_ns();
    char b;
    if (read(fd, &b, 1) != 1) return 0;
    auto it = g_fd_stalls.find(count);
    if (it != g_fd_stalls.end()) stall(it->second);
    const int64_t end = now_ns();
    log_line(dispatch_line("fd", "n", count, start, end,
                           it != g_fd_stalls.end() ? &it->second : nullptr));
    ++count;
    return 1;
  }
  int count = 0;
};

// "busy:30@4" -> {4, {busy, 30}}
bool parse_stall(const char* arg, std::map<int, Stall>* out) {
  char kind[16];
  int ms = 0, at = 0;
  if (std::sscanf(arg, "%15[a-z]:%d@%d", kind, &ms, &at) != 3) return false;
  (*out)[at] = Stall{kind, ms};
  return true;
}

}  // namespace

// libutils' pollInner calls epoll_wait through its PLT; the executable's
// definition (exported: the library refers to it) comes first.
extern "C" int epoll_wait(int epfd, struct epoll_event* events, int maxevents,
                          int timeout) {
  using Fn = int (*)(int, struct epoll_event*, int, int);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "epoll_wait"));
  const int64_t start = now_ns();
  const int n = real(epfd, events, maxevents, timeout);
  const int64_t end = now_ns();
  if (g_timing_waits && gettid() == g_loop_tid &&
      g_waits.size() < g_waits.capacity()) {
    bool pipe = false;
    for (int i = 0; i < n; ++i) pipe = pipe || events[i].data.fd == g_pipe_fd;
    g_waits.push_back({start, end, n, pipe});
  }
  return n;
}

int main(int argc, char** argv) {
  int duration_ms = 3000;
  const char* log_path = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--duration")
      duration_ms = std::atoi(argv[i + 1]);
    else if (a == "--log")
      log_path = argv[i + 1];
    else if (a == "--stall" && parse_stall(argv[i + 1], &g_msg_stalls))
      continue;
    else if (a == "--fd-stall" && parse_stall(argv[i + 1], &g_fd_stalls))
      continue;
    else {
      std::fprintf(stderr, "android_looper: bad argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!log_path || !(g_log = std::fopen(log_path, "w"))) {
    std::fprintf(stderr, "android_looper: --log FILE needed\n");
    return 2;
  }
  android::sp<android::Looper> looper = android::Looper::prepare(0);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  g_pipe_fd = pipefd[0];
  g_loop_tid = gettid();
  g_waits.reserve(1'000'000);
  android::sp<PipeCallback> cb = new PipeCallback();
  looper->addFd(pipefd[0], 0, android::Looper::EVENT_INPUT, cb, nullptr);
  android::sp<TickHandler> handler = new TickHandler(looper);
  android::sp<PostHandler> posted = new PostHandler();
  // Start once the tracer is in: a second after "ready".
  log_line("{\"event\":\"ready\",\"pid\":" + std::to_string(getpid()) + "}");
  std::fprintf(stderr, "android_looper: ready pid=%d\n", getpid());
  usleep(1'000'000);
  const int64_t end = now_ns() + int64_t{duration_ms} * 1'000'000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (!done) {
      if (write(pipefd[1], "x", 1) != 1) break;
      usleep(25'000);
    }
  });
  std::thread poster([&] {
    for (int what = 1000; !done; ++what) {
      const int64_t due = now_ns() + 3'000'000;
      log_line("{\"event\":\"post\",\"handler\":\"post\",\"what\":" +
               std::to_string(what) + ",\"due_ns\":" + std::to_string(due) +
               "}");
      looper->sendMessageAtTime(due, posted, android::Message(what));
      usleep(7'000);
    }
  });
  g_timing_waits = true;
  const int64_t first = now_ns();
  log_line("{\"event\":\"post\",\"handler\":\"tick\",\"what\":0,\"due_ns\":" +
           std::to_string(first) + "}");
  looper->sendMessageAtTime(first, handler, android::Message(0));
  while (now_ns() < end) looper->pollOnce(100);
  done = true;
  writer.join();
  poster.join();
  // The poster's last messages (due in 3 ms): dispatched before "done".
  const int64_t drained = now_ns() + 100'000'000;
  while (now_ns() < drained) looper->pollOnce(30);
  g_timing_waits = false;
  for (const Wait& w : g_waits)
    log_line("{\"event\":\"wait\",\"start_ns\":" + std::to_string(w.start) +
             ",\"end_ns\":" + std::to_string(w.end) +
             ",\"ready\":" + std::to_string(w.ready) +
             ",\"pipe\":" + (w.pipe ? "true" : "false") + "}");
  log_line(
      "{\"event\":\"done\",\"messages\":" + std::to_string(handler->count) +
      ",\"posted\":" + std::to_string(posted->count) +
      ",\"callbacks\":" + std::to_string(cb->count) + "}");
  std::fclose(g_log);
  return 0;
}
