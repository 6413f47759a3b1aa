#include "watchdog.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>

namespace refapp {

namespace {
const char* const kWatchdogTarget = "refapp::WatchdogHandler";
}  // namespace

WatchdogHandler::WatchdogHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

WatchdogHandler::~WatchdogHandler() = default;

void WatchdogHandler::handleMessage(Message* msg) {
  last_run_.store(msg->what, std::memory_order_release);
}

void WatchdogHandler::onDispatched(Message* msg) {
  ++dispatches_;
  loop_.log().write({{"event", "watchdog_tick"},
                     {"tick", msg->what},
                     {"posted_ns", msg->arg2},
                     {"start_ns", msg->dispatch_start_ns},
                     {"end_ns", msg->dispatch_end_ns},
                     {"target", kWatchdogTarget},
                     {"pid", static_cast<int>(getpid())},
                     {"tid", static_cast<int>(loop_.tid())},
                     {"thread", loop_.index()}});
}

Watchdog::Watchdog(LoopThread& loop, int64_t interval_ns)
    : loop_(loop),
      interval_ns_(interval_ns),
      handler_("watchdog" + std::to_string(loop.index()), loop) {}

Watchdog::~Watchdog() { stop(); }

void Watchdog::start(int64_t t0_ns) {
  thread_ = std::thread([this, t0_ns] { run(t0_ns); });
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run(int64_t t0_ns) {
  pthread_setname_np(pthread_self(), "refapp-watchdog");
  const int tid = static_cast<int>(gettid());
  int64_t waiting = -1;  // the tick posted and not yet run (-1: none)
  int64_t posted_ns = 0;
  bool reported = false;
  for (int64_t k = 0;; ++k) {
    // steady_clock is CLOCK_MONOTONIC on Linux: the log's clock.
    const std::chrono::steady_clock::time_point check(
        std::chrono::nanoseconds(t0_ns + k * interval_ns_));
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (cv_.wait_until(lk, check, [this] { return stopping_; })) return;
    }
    const int64_t now = monotonicNs();
    if (waiting >= 0 && handler_.lastRun() >= waiting) waiting = -1;
    if (waiting >= 0) {
      // The tick posted one interval ago has not run: the loop was busy
      // the whole time. Reported once, as ANR-WatchDog does.
      if (!reported) {
        reported = true;
        ++lags_;
        loop_.log().write({{"event", "watchdog_lag"},
                           {"tick", waiting},
                           {"posted_ns", posted_ns},
                           {"detected_ns", now},
                           {"lag_ns", now - posted_ns},
                           {"interval_ms", interval_ns_ / 1000000},
                           {"pid", static_cast<int>(getpid())},
                           {"tid", tid},
                           {"thread", loop_.index()},
                           {"loop_tid", static_cast<int>(loop_.tid())}});
      }
      continue;
    }
    waiting = static_cast<int64_t>(posted_);
    posted_ns = now;
    reported = false;
    Message* msg =
        handler_.obtainMessage(static_cast<int32_t>(posted_ & 0x7fffffff));
    msg->arg2 = now;
    ++posted_;
    handler_.sendMessageAtTime(msg, now);
  }
}

}  // namespace refapp
