// The functions that burn or lose time inside a dispatch. All are noinline
// (and not cloned) so a sampled user stack names them, and the spin loops run
// in the function's own frame.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "looper.h"

namespace refapp {

// Background work: spins on the CPU for ns nanoseconds.
REFAPP_NOINLINE void busyWork(int64_t ns);

// Stall kinds. Each returns after about ns nanoseconds.
// busy: spins on the CPU (the spin loop is in busyStall's own frame).
REFAPP_NOINLINE void busyStall(int64_t ns);
// sleep: clock_nanosleep(CLOCK_MONOTONIC) until its entry time + ns.
REFAPP_NOINLINE void sleepStall(int64_t ns);

// A thread that takes a mutex on request and releases it at a given time.
class LockHolder {
 public:
  explicit LockHolder(std::string thread_name);
  ~LockHolder();
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;

  // Asks the holder thread to lock mutex() and returns once it holds it; the
  // holder unlocks it at CLOCK_MONOTONIC unlock_at_ns.
  void holdUntil(int64_t unlock_at_ns);
  std::mutex& mutex() { return mu_; }
  pid_t tid();

 private:
  void run();

  std::string name_;
  std::mutex mu_;  // the contended lock
  std::mutex state_mu_;
  std::condition_variable state_cv_;
  uint64_t requested_ = 0;  // generation asked for
  uint64_t held_ = 0;       // generation the holder has locked for
  int64_t unlock_at_ns_ = 0;
  pid_t tid_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// lock: the holder locks holder.mutex(), then this blocks in lock() until
// the holder releases it at unlock_at_ns.
REFAPP_NOINLINE void lockStall(LockHolder& holder, int64_t unlock_at_ns);

// --messages mode: called exactly once per TriggerHandler dispatch.
REFAPP_NOINLINE void trigger();
// How many times trigger() ran.
uint64_t triggerCount();

}  // namespace refapp
