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

// A timed scenario event other than a dispatch stall.
enum class EventKind {
  kIdleStall,     // --idle-stall: a one-shot SlowIdleHandler is added
  kBarrier,       // --barrier: a sync barrier, removed ms later
  kBarrierLeak,   // --barrier-leak: a sync barrier never removed
  kBurst,         // --burst: count sync messages, all due at once
  kBarrierError,  // --barrier-error: removeSyncBarrier with a stale token
};

const char* eventKindName(EventKind kind);

struct EventSpec {
  EventKind kind = EventKind::kIdleStall;
  StallKind stall_kind = StallKind::kBusy;  // kIdleStall
  int64_t ms = 0;     // kIdleStall: stall length; kBarrier: barrier lifetime
  int64_t count = 0;  // kBurst: messages
  int64_t at_ms = 0;  // due time after the scenario start
  int thread = 0;     // loop thread index
  // Message::what of its messages: the position in time order among the
  // idle stalls, among the bursts, or among all barrier events (--barrier,
  // --barrier-leak and --barrier-error share one numbering).
  int index = 0;
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
  int idle_handlers = 0;    // CheapIdleHandlers per loop thread
  int64_t async_period_ns = 0;    // 1/--async-rate; 0 = no async stream
  int64_t frame_period_ns = 0;    // 1/--barrier-rate (thread 0); 0 = none
  int64_t frame_stall_every = 0;  // --frame-stall-every; 0 = none
  int64_t frame_stall_ns = 0;     // --frame-stall-ms
  int frame_stall_phase = 3;      // --frame-stall-phase (callback type)
  int64_t barrier_report_ns = 3000000000;  // barrier_stalled after this
  int64_t fork_at_ns = -1;  // --fork-at (thread 0), after t0; -1: never
};

// JSON lines, one write(2) per line to a file opened with O_APPEND, shared
// by all threads and by the input dispatcher process (forked with the fd).
class GroundTruthLog {
 public:
  GroundTruthLog() = default;
  ~GroundTruthLog();
  GroundTruthLog(const GroundTruthLog&) = delete;
  GroundTruthLog& operator=(const GroundTruthLog&) = delete;

  bool open(const std::string& path, std::string* error);
  bool enabled() const { return fd_ >= 0; }
  void write(const nlohmann::json& line);

 private:
  std::mutex mu_;
  int fd_ = -1;
};

struct LoopStats {
  uint64_t background = 0;  // WorkHandler dispatches
  int64_t max_background_ns = 0;
  uint64_t triggers = 0;          // TriggerHandler dispatches
  uint64_t stalls = 0;            // StallHandler dispatches
  uint64_t nested_outer = 0;      // NestedHandler outer dispatches
  uint64_t nested_inner = 0;      // nestedInnerWork callback dispatches
  uint64_t idle_setup = 0;        // IdleSetupHandler dispatches
  uint64_t idle_stalls = 0;       // SlowIdleHandler runs (not dispatches)
  uint64_t barrier_control = 0;   // BarrierHandler dispatches
  uint64_t barrier_watch = 0;     // BarrierWatchHandler dispatches
  uint64_t frames = 0;            // FrameHandler dispatches (2 per frame)
  uint64_t burst_posts = 0;       // BurstHandler posting dispatches
  uint64_t burst_items = 0;       // burstWork callback dispatches
  uint64_t async_background = 0;  // AsyncHandler dispatches
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
  // Posts background message number k (due t0 + k * period), unless it was
  // posted already.
  void postWork(int64_t k);
  // Posts every background message due by now_ns that the chain has not
  // posted yet (the chain stops while its messages are held back, e.g. by a
  // sync barrier; the async stream keeps the producer going).
  void catchUp(int64_t now_ns);

 private:
  LoopThread& loop_;
  int64_t next_post_ = 0;  // lowest background number not posted yet
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
  // Its run-queue wait (schedstat), -1 unknown.
  int64_t run_delay_ns_ = -1;
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

// --idle-stall: a one-shot idle handler that stalls (busy/sleep/lock, as
// StallHandler) the first time the queue is idle after it was added, then
// returns false (removed). Logs an "idle" line.
class SlowIdleHandler : public IdleHandler {
 public:
  SlowIdleHandler(LoopThread& loop, const EventSpec* spec);
  ~SlowIdleHandler() override;
  bool queueIdle() override;
  void onIdleRun(MessageQueue* queue, bool kept) override;
  const EventSpec* spec() const { return spec_; }

 private:
  LoopThread& loop_;
  const EventSpec* spec_;
  int64_t cpu_ns_ = 0;
};

// --idle-handlers: a keep-alive idle handler, busy ~20 us per run, kept.
class CheapIdleHandler : public IdleHandler {
 public:
  static constexpr int64_t kWorkNs = 20000;
  explicit CheapIdleHandler(std::string name);
  ~CheapIdleHandler() override;
  bool queueIdle() override;
};

// --idle-stall: its message (what = idle stall index, arg1 = ms, obj = the
// SlowIdleHandler) adds the SlowIdleHandler to the queue.
class IdleSetupHandler : public Handler {
 public:
  IdleSetupHandler(std::string name, LoopThread& loop);
  ~IdleSetupHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postSetup(SlowIdleHandler* idle);

 private:
  LoopThread& loop_;
};

// --barrier / --barrier-leak / --barrier-error. Messages (what = barrier
// index): post (sync, arg1 = 0) posts a barrier due now; remove
// (asynchronous, arg1 = token, due MS after the post) removes it; error
// (sync, arg1 = 0) removes a stale token.
class BarrierHandler : public Handler {
 public:
  BarrierHandler(std::string name, LoopThread& loop);
  ~BarrierHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postEvent(const EventSpec* spec);

 private:
  enum Action : int64_t { kPost = 0, kRemove = 1, kError = 2 };
  LoopThread& loop_;
  MessageQueue::BarrierOp op_;  // of the last handleMessage
};

// An asynchronous message (what = barrier index, arg1 = token) due
// --barrier-report-ms after a barrier was posted: if the barrier is still
// there, logs "barrier_stalled" with the sync messages due behind it.
class BarrierWatchHandler : public Handler {
 public:
  BarrierWatchHandler(std::string name, LoopThread& loop);
  ~BarrierWatchHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postWatch(int index, int token, int64_t when_ns, const char* source);

 private:
  LoopThread& loop_;
  int64_t at_ns_ = 0;
  MessageQueue::Backlog backlog_;
};

// --barrier-rate (thread 0), as a UI toolkit does per frame: frame k's sync
// "schedule" message (what = k, arg1 = 0) posts a barrier and an
// asynchronous "frame" message (what = k, arg1 = token) due at once, which
// removes the barrier and works ~100 us (a traversal).
class FrameHandler : public Handler {
 public:
  static constexpr int64_t kFrameWorkNs = 100000;
  FrameHandler(std::string name, LoopThread& loop);
  ~FrameHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postSchedule(int64_t k);
  // Choreographer.doFrame(frameTimeNanos)'s stand-in: frame k's own work,
  // given the vsync it was scheduled for (frame_time_ns, CLOCK_MONOTONIC)
  // and the display's frame interval (Choreographer's mFrameIntervalNanos,
  // the --barrier-rate period), a function of its own: the refapp
  // profile's frame probe.
  void doFrame(int64_t k, int64_t frame_time_ns, int64_t frame_interval_ns);
  // Choreographer.doCallbacks(callbackType, frameTimeNanos): one phase of
  // a frame, input (0), animation (1) or traversal (3), as Android's
  // Choreographer runs them in doFrame; the refapp profile's phase probe.
  void doCallbacks(int type, int64_t frame_time_ns);
  static constexpr int kCallbackInput = 0, kCallbackAnimation = 1,
                       kCallbackTraversal = 3;

 private:
  LoopThread& loop_;
  MessageQueue::BarrierOp op_;
  // The last doFrame's, logged by onDispatched; k < 0: none.
  struct FrameTimes {
    int64_t k = -1, vsync_ns = 0, start_ns = 0, end_ns = 0;
    // Each phase's [start, end), by callback type (0..3).
    int64_t phase_ns[4][2] = {};
  } frame_;
};

// --burst: the posting message (what = burst index, arg1 = N, callback
// null) posts N sync messages all due at its own dispatch time (what = i,
// arg1 = burst index, callback = burstWork, busy 1 ms each).
class BurstHandler : public Handler {
 public:
  static constexpr int64_t kItemWorkNs = 1000000;
  BurstHandler(std::string name, LoopThread& loop);
  ~BurstHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postBurst(const EventSpec* spec);

 private:
  LoopThread& loop_;
};

// The callback of BurstHandler's items.
REFAPP_NOINLINE void burstWork(Message* msg);

// --async-rate: an asynchronous background stream (an asynchronous Handler:
// every message it sends is asynchronous), what = k, arg1 = work us (100);
// each also lets the sync background producer catch up (see WorkHandler).
class AsyncHandler : public Handler {
 public:
  static constexpr int32_t kWorkUs = 100;
  AsyncHandler(std::string name, LoopThread& loop);
  ~AsyncHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postAsync(int64_t k);

 private:
  LoopThread& loop_;
};

// --fork-at (thread 0): the message (what = 0) forks inside its dispatch.
// The child is the loop thread alone, in the middle of this dispatch: it
// returns into its loop and keeps dispatching its copy of the queue until
// --duration, when a message this handler posts in the child (what = 1)
// quits the loop; then the child logs its own summary and exits 0.
class ForkHandler : public Handler {
 public:
  ForkHandler(std::string name, LoopThread& loop);
  ~ForkHandler() override;
  void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;
  void postFork();
  // In the child: dispatches of this loop since fork() returned.
  uint64_t childDispatches() const;
  bool inChild() const { return child_ == 0; }

 private:
  LoopThread& loop_;
  pid_t child_ = -1;  // in the parent: the child's pid; 0 in the child
  int fork_errno_ = 0;
  int64_t fork_ns_ = 0;  // when fork() returned
  uint64_t dispatches_at_fork_ = 0;
};

// "queue":"0x..." in the log: the MessageQueue's address (arg0 of its
// probe points).
std::string hexAddress(const void* p);

// One loop thread ("refapp-loopN") with its own Looper and handlers.
class LoopThread {
 public:
  LoopThread(int index, const Config& config, GroundTruthLog& log,
             bool needs_lock_holder);
  ~LoopThread();
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  void addStall(const StallSpec& spec) { stalls_.push_back(spec); }
  void addEvent(const EventSpec& spec) { events_.push_back(spec); }
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
  // In a --fork-at child: this thread is the child's only one.
  void noteForked() { tid_ = gettid(); }
  // In a --fork-at child, once its loop returned: its summary, then exit.
  [[noreturn]] void exitForkedChild();

  // CPU time the loop thread has used (its thread CPU clock), 0 if it is
  // not running.
  int64_t cpuNs();
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
  // to the end: triggers + stalls + 4 per nested outer message + the
  // messages of its scenario events (see README.md).
  int64_t plannedFinite() const;
  // Writes a barrier_post / barrier_remove / barrier_error line for op.
  void logBarrierOp(const MessageQueue::BarrierOp& op, const char* source,
                    int index);
  // A scenario barrier (not a frame's) was posted: watched, and reported at
  // exit if it is still there.
  void noteBarrier(int index, int token, bool leak);
  // After join(): a "barrier_leak" line per --barrier-leak barrier still
  // queued.
  void logLeaks(int64_t now_ns);
  WorkHandler& work() { return work_; }
  BarrierWatchHandler& barrierWatch() { return barrier_watch_; }
  int lastRemovedToken() const { return last_removed_token_; }
  // Writes a "slow" line for a background, trigger or nested-inner dispatch
  // that took at least --log-slow (stalls and nested outers have their own
  // lines).
  void logIfSlow(const Message* msg, const char* target, const char* callback);
  // A "frame" line: FrameHandler::doFrame(k) ran [start_ns, end_ns) for
  // the vsync at vsync_ns.
  void logFrame(int64_t k, int64_t vsync_ns, int64_t start_ns, int64_t end_ns,
                const int64_t (&phase_ns)[4][2]);

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
  std::vector<EventSpec> events_;
  struct ScenarioBarrier {
    int index;
    int token;
    bool leak;
  };
  std::vector<ScenarioBarrier> barriers_;
  int last_removed_token_ = 0;
  std::vector<std::unique_ptr<SlowIdleHandler>> slow_idle_;
  std::vector<std::unique_ptr<CheapIdleHandler>> cheap_idle_;
  int64_t remaining_ = 0;
  pid_t tid_ = 0;
  std::unique_ptr<LockHolder> holder_;
  WorkHandler work_;
  TriggerHandler trigger_;
  StallHandler stall_;
  NestedHandler nested_;
  IdleSetupHandler idle_setup_;
  BarrierHandler barrier_;
  BarrierWatchHandler barrier_watch_;
  FrameHandler frame_;
  BurstHandler burst_;
  AsyncHandler async_;
  ForkHandler fork_;
  std::thread thread_;
};

}  // namespace refapp
