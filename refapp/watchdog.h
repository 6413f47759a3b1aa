// --watchdog MS: the in-app poller of the first seed article ("WatchDog",
// the ANR-WatchDog / early BlockCanary design), built into the reference app
// so that a lab run can set it side by side with looptrace on the same
// stalls (scripts/lab/watchdog.sh, docs/lab.md).
//
// A thread `refapp-watchdog` posts a tick message to loop thread 0 and, one
// interval later, checks whether the tick has run. If not, the loop is
// "blocked": it logs a `watchdog_lag` line (once per tick, as ANR-WatchDog
// reports once) and posts no new tick until the old one ran. Checks are at
// t0 + k * interval exactly (absolute deadlines, no drift), so a stall's
// phase against the poller is its AT_MS modulo the interval.
//
// What it can see: a tick posted at check k-1 is still waiting at check k
// only if the loop was busy for the whole interval between them, so a stall
// of length D is caught iff a whole interval [t(k-1), t(k)] lies inside it:
// with a random phase, with probability (D - T) / T for T <= D <= 2T (0
// below T, 1 from 2T on). The article's 4.5 s poller and 5 s stalls: 11 %.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "looper.h"
#include "scenario.h"

namespace refapp {

// The tick's target (`vtable for refapp::WatchdogHandler`): what = tick
// number k (from 0), arg1 = 0. Its dispatch only records that it ran.
class WatchdogHandler : public Handler {
 public:
  WatchdogHandler(std::string name, LoopThread& loop);
  ~WatchdogHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;

  // Highest tick number that has run (-1: none); any thread.
  int64_t lastRun() const { return last_run_.load(std::memory_order_acquire); }
  // Tick dispatches (loop thread, or after join).
  uint64_t dispatches() const { return dispatches_; }

 private:
  LoopThread& loop_;
  std::atomic<int64_t> last_run_{-1};
  uint64_t dispatches_ = 0;
};

class Watchdog {
 public:
  Watchdog(LoopThread& loop, int64_t interval_ns);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the thread: the first tick is posted at t0_ns, the first check
  // is at t0_ns + interval.
  void start(int64_t t0_ns);
  // Stops and joins the thread (before the loops quit: a loop that stopped
  // is not a blocked one).
  void stop();

  // For the summary, after stop().
  uint64_t ticksPosted() const { return posted_; }
  uint64_t lags() const { return lags_; }
  uint64_t ticksRun() const { return handler_.dispatches(); }
  int64_t intervalNs() const { return interval_ns_; }

 private:
  void run(int64_t t0_ns);

  LoopThread& loop_;
  int64_t interval_ns_;
  WatchdogHandler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  uint64_t posted_ = 0;
  uint64_t lags_ = 0;
};

}  // namespace refapp
