// The reference app's scenario: Handler subclasses (their vtables name them
// in looptrace's reports), one LoopThread per loop, and the ground-truth log.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "looper.h"
#include "stalls.h"

namespace refapp {

enum class StallKind { kBusy, kSleep, kLock };

const char* stallKindName(StallKind kind);
// The noinline function that burns the time, as the log names it.
const char* stallFunctionName(StallKind kind);

struct StallSpec {
  StallKind kind = StallKind::kBusy;
  int64_t ms = 0;     // requested stall length
  int64_t at_ms = 0;  // due time after the scenario start
  int thread = 0;     // loop thread index
  int index = 0;      // Message::what: position in time order (0-based)
};

// Fixed before the scenario starts; read by the loop threads.
struct Config {
  bool messages_mode = false;  // --messages given
  int64_t messages = 0;        // triggers per loop thread (messages mode)
  int64_t period_ns = 0;       // 1/rate; 0 = no background / back-to-back
  int64_t t0_ns = 0;           // scenario start (CLOCK_MONOTONIC)
  int64_t end_ns = 0;          // background stops being scheduled here
  int nested = 0;              // NestedHandler outer messages (thread 0)
  int64_t nested_interval_ns = 0;
  uint64_t seed = 1;
  int64_t log_slow_ns = 0;  // log other dispatches at least this long; 0 off
};

// JSON lines, one write + flush per line, shared by all threads.
class GroundTruthLog {
 public:
  GroundTruthLog() = default;
  ~GroundTruthLog();
  GroundTruthLog(const GroundTruthLog&) = delete;
  GroundTruthLog& operator=(const GroundTruthLog&) = delete;

  bool open(const std::string& path, std::string* error);
  bool enabled() const { return file_ != nullptr; }
  void write(const nlohmann::json& line);

 private:
  std::mutex mu_;
  std::FILE* file_ = nullptr;
};

struct LoopStats {
  uint64_t background = 0;  // WorkHandler dispatches
  int64_t max_background_ns = 0;
  uint64_t triggers = 0;      // TriggerHandler dispatches
  uint64_t stalls = 0;        // StallHandler dispatches
  uint64_t nested_outer = 0;  // NestedHandler outer dispatches
  uint64_t nested_inner = 0;  // nestedInnerWork callback dispatches
};

class LoopThread;

// Background work: busy 0.1-2 ms (arg1 = microseconds, what = sequence
// number), re-posts the next one at t0 + k/rate while that is before the end.
class WorkHandler : public Handler {
 public:
  WorkHandler(std::string name, LoopThread& loop);
  ~WorkHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  // Posts background message number k (due t0 + k * period).
  void postWork(int64_t k);

 private:
  LoopThread& loop_;
};

// --messages mode: calls trigger() once (what = sequence number) and posts
// the next trigger until N have been posted.
class TriggerHandler : public Handler {
 public:
  TriggerHandler(std::string name, LoopThread& loop);
  ~TriggerHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postTrigger(int64_t k);

 private:
  LoopThread& loop_;
};

// An injected stall (msg->obj = the StallSpec, what = its index, arg1 = ms).
// Also measures the thread CPU time its handleMessage used.
class StallHandler : public Handler {
 public:
  StallHandler(std::string name, LoopThread& loop);
  ~StallHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postStall(const StallSpec* spec);

 private:
  LoopThread& loop_;
  int64_t cpu_ns_ = 0;  // thread CPU time of the last handleMessage
};

// Each outer message runs a nested loop on the same Looper that dispatches
// exactly 3 inner messages (callback = nestedInnerWork, busy 1 ms each,
// posted at the front of the queue), then returns.
class NestedHandler : public Handler {
 public:
  static constexpr int kInner = 3;
  static constexpr int64_t kInnerWorkNs = 1000000;

  NestedHandler(std::string name, LoopThread& loop);
  ~NestedHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postNested(int index);

 private:
  LoopThread& loop_;
  int inner_done_ = 0;
  int64_t inner_start_ns_[kInner] = {};
  int64_t inner_duration_ns_[kInner] = {};
};

// The callback of NestedHandler's inner messages.
REFAPP_NOINLINE void nestedInnerWork(Message* msg);

// One loop thread ("refapp-loopN") with its own Looper and handlers.
class LoopThread {
 public:
  LoopThread(int index, const Config& config, GroundTruthLog& log,
             bool needs_lock_holder);
  ~LoopThread();
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  void addStall(const StallSpec& spec) { stalls_.push_back(spec); }
  // Starts the thread; returns once it runs its looper. on_exit runs on the
  // loop thread after its loop returned.
  void start(std::function<void()> on_exit);
  // Posts the initial messages (from the main thread, at t0).
  void schedule();
  void quit() { looper_.quit(); }
  void join();

  // A finite (non-background) message finished; in --messages mode the loop
  // quits after the last one.
  void finishOne();

  int index() const { return index_; }
  const std::string& name() const { return name_; }
  pid_t tid() const { return tid_; }
  Looper& looper() { return looper_; }
  const Config& config() const { return config_; }
  GroundTruthLog& log() { return log_; }
  LoopStats& stats() { return stats_; }
  std::mt19937_64& rng() { return rng_; }
  LockHolder* lockHolder() { return holder_.get(); }
  // Messages this thread will dispatch besides background work, if it runs
  // to the end: triggers + stalls + 4 per nested outer message.
  int64_t plannedFinite() const;
  // Writes a "slow" line for a background, trigger or nested-inner dispatch
  // that took at least --log-slow (stalls and nested outers have their own
  // lines).
  void logIfSlow(const Message* msg, const char* target, const char* callback);

 private:
  void run(std::function<void()> on_exit);

  int index_;
  std::string name_;
  const Config& config_;
  GroundTruthLog& log_;
  Looper looper_;
  LoopStats stats_;
  std::mt19937_64 rng_;
  std::vector<StallSpec> stalls_;
  int64_t remaining_ = 0;
  pid_t tid_ = 0;
  std::unique_ptr<LockHolder> holder_;
  WorkHandler work_;
  TriggerHandler trigger_;
  StallHandler stall_;
  NestedHandler nested_;
  std::thread thread_;
};

}  // namespace refapp
