#include "stalls.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

namespace refapp {

namespace {

std::atomic<uint64_t> g_triggers{0};
std::atomic<uint64_t> g_sink{0};

void sleepUntilNs(int64_t deadline_ns) {
  struct timespec ts;
  ts.tv_sec = deadline_ns / 1000000000;
  ts.tv_nsec = deadline_ns % 1000000000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
         EINTR) {
  }
}

}  // namespace

// The two spinners are written out separately (not a shared helper) so the
// hot loop sits in each function's own frame. The clock is read every 4096
// rounds (a few microseconds): samples rarely land in clock_gettime, whose
// libc/vDSO code has no frame pointer and would hide the spinner's frame.
void busyWork(int64_t ns) {
  const int64_t deadline = monotonicNs() + ns;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  do {
    for (int i = 0; i < 4096; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      asm volatile("" : "+r"(x));
    }
  } while (monotonicNs() < deadline);
  g_sink.store(x, std::memory_order_relaxed);
}

void busyStall(int64_t ns) {
  const int64_t deadline = monotonicNs() + ns;
  uint64_t x = 0x2545f4914f6cdd1dull;
  do {
    for (int i = 0; i < 4096; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      asm volatile("" : "+r"(x));
    }
  } while (monotonicNs() < deadline);
  g_sink.store(x, std::memory_order_relaxed);
}

// The clock_nanosleep syscall is issued from sleepStall's own frame (inline
// asm on x86-64), so a user stack captured while the thread is blocked has
// its IP in refapp::sleepStall and an intact frame-pointer chain; glibc's
// clock_nanosleep has no frame pointer and hides the caller.
void sleepStall(int64_t ns) {
  const int64_t deadline_ns = monotonicNs() + ns;
  struct timespec ts;
  ts.tv_sec = deadline_ns / 1000000000;
  ts.tv_nsec = deadline_ns % 1000000000;
#if defined(__x86_64__)
  long ret;
  do {
    register long r10 asm("r10") = 0;  // no remaining-time output
    asm volatile("syscall"
                 : "=a"(ret)
                 : "0"(static_cast<long>(SYS_clock_nanosleep)),
                   "D"(static_cast<long>(CLOCK_MONOTONIC)),
                   "S"(static_cast<long>(TIMER_ABSTIME)), "d"(&ts), "r"(r10)
                 : "rcx", "r11", "memory");
  } while (ret == -EINTR);
#else
  sleepUntilNs(deadline_ns);
#endif
  g_sink.fetch_add(1, std::memory_order_relaxed);
}

// ---- LockHolder ------------------------------------------------------------

LockHolder::LockHolder(std::string thread_name)
    : name_(std::move(thread_name)) {
  thread_ = std::thread([this] { run(); });
}

LockHolder::~LockHolder() {
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    stop_ = true;
  }
  state_cv_.notify_all();
  thread_.join();
}

pid_t LockHolder::tid() {
  std::unique_lock<std::mutex> lk(state_mu_);
  state_cv_.wait(lk, [this] { return tid_ != 0; });
  return tid_;
}

void LockHolder::run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  std::unique_lock<std::mutex> lk(state_mu_);
  tid_ = gettid();
  state_cv_.notify_all();
  for (;;) {
    state_cv_.wait(lk, [this] { return stop_ || requested_ != held_; });
    if (stop_) return;
    const uint64_t gen = requested_;
    const int64_t unlock_at = unlock_at_ns_;
    mu_.lock();
    held_ = gen;
    lk.unlock();
    state_cv_.notify_all();
    sleepUntilNs(unlock_at);
    mu_.unlock();
    lk.lock();
  }
}

void LockHolder::holdUntil(int64_t unlock_at_ns) {
  std::unique_lock<std::mutex> lk(state_mu_);
  const uint64_t gen = ++requested_;
  unlock_at_ns_ = unlock_at_ns;
  state_cv_.notify_all();
  state_cv_.wait(lk, [this, gen] { return held_ == gen; });
}

void lockStall(LockHolder& holder, int64_t unlock_at_ns) {
  holder.holdUntil(unlock_at_ns);
  std::mutex& mu = holder.mutex();
  mu.lock();  // blocks (futex wait) until the holder unlocks
  mu.unlock();
  g_sink.fetch_add(1, std::memory_order_relaxed);
}

// ---- trigger ---------------------------------------------------------------

void trigger() { g_triggers.fetch_add(1, std::memory_order_relaxed); }

uint64_t triggerCount() { return g_triggers.load(std::memory_order_relaxed); }

}  // namespace refapp
