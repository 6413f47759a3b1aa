// An Android-like Looper / MessageQueue / Handler (AOSP android.os), in C++.
//
// This is the loop that looptrace traces in its demo and integration tests.
// The tracer's built-in "refapp" profile depends on two things here, so keep
// them exactly as they are:
//
//   1. The layout of the first 40 bytes of refapp::Message (static_asserts
//      below): the dispatch key expressions read *(arg1+0) (target, whose
//      vtable names the Handler subclass), *(arg1+8) (callback), *(arg1+16)
//      (what), *(arg1+20) (arg1) and *(arg1+24) (when_ns).
//   2. The symbol `refapp::Looper::dispatchMessage(refapp::Message*)`: a
//      non-inline, non-static member (arg0 = this, arg1 = msg) that is the
//      ONLY place a message is dispatched, nested loops included. Its span
//      (uprobe entry to uretprobe return) is one dispatch.
//
// Further probe points (see README.md): MessageQueue::enqueueMessage (every
// message posted), MessageQueue::runIdleHandler (every idle handler run),
// MessageQueue::postSyncBarrier / removeSyncBarrier, and with the input
// channel on (input.h) InputReceiver::consumeEvents and
// InputHandler::handleMessage.
#pragma once

#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

// noinline, and on GCC also no IPA cloning (.constprop/.isra copies would
// take the calls away from the symbol the tracer attaches to).
#if defined(__clang__)
#define REFAPP_NOINLINE __attribute__((noinline))
#else
#define REFAPP_NOINLINE __attribute__((noinline, noipa))
#endif

namespace refapp {

// CLOCK_MONOTONIC in nanoseconds: the time base of every timestamp here, of
// bpf_ktime_get_ns() and of std::chrono::steady_clock on Linux.
inline int64_t monotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The calling thread's run-queue wait so far as the kernel counts it
// (schedstat's run_delay, ns; 0 where the kernel does not say). A clock
// read next to a syscall trails or leads the kernel's own timestamp of that
// syscall by as long as the thread waited for a CPU in between: the ground
// truth logs give that wait for each such timestamp (`*_runq_ns`) so that a
// test can tell a tracer's error from a preempted reader.
int64_t runDelayNs();

class Handler;
class Looper;

struct Message {
  // ---- Part of the tracer's built-in profile: do not reorder. ----
  Handler* target = nullptr;             // @0  nullptr = sync barrier
  void (*callback)(Message*) = nullptr;  // @8  may be null
  int32_t what = 0;                      // @16
  int32_t arg1 = 0;                      // @20 barrier: its token
  int64_t when_ns = 0;                   // @24 CLOCK_MONOTONIC due time
  Message* next = nullptr;               // @32 queue link
  // ---- Private to the app from here on (flags' offset is asserted too:
  // the idle/barrier/enqueue probes may read the asynchronous bit). ----
  int64_t arg2 = 0;     // @40 barrier: CLOCK_MONOTONIC time it was posted
  void* obj = nullptr;  // @48
  uint32_t flags = 0;   // @56 kFlag* bits
  // Written by Looper::dispatchMessage at its very start and end.
  int64_t dispatch_start_ns = 0;
  int64_t dispatch_end_ns = 0;
  // With kFlagMeasureRunq: the thread's run-queue wait from just before
  // the dispatch call to just after dispatch_start_ns was read (it bounds
  // how far that clock read may trail the probe at the function's entry).
  int64_t dispatch_start_runq_ns = 0;

  // Android's FLAG_ASYNCHRONOUS value: not held back by sync barriers.
  static constexpr uint32_t kFlagAsynchronous = 1u << 1;
  // Set by Handler::sendMessageAtFrontOfQueue (Android passes when = 0
  // instead; here when_ns stays the time it was posted).
  static constexpr uint32_t kFlagAtFront = 1u << 2;
  // Fill dispatch_start_runq_ns (a schedstat read on either side of the
  // start of the dispatch: only for messages a ground-truth log times).
  static constexpr uint32_t kFlagMeasureRunq = 1u << 3;

  bool isAsynchronous() const { return (flags & kFlagAsynchronous) != 0; }
  void setAsynchronous(bool async) {
    flags = async ? (flags | kFlagAsynchronous) : (flags & ~kFlagAsynchronous);
  }
  bool isBarrier() const { return target == nullptr; }

  static Message* obtain() { return new Message(); }
  static void recycle(Message* msg) { delete msg; }
};

static_assert(offsetof(Message, target) == 0);
static_assert(offsetof(Message, callback) == 8);
static_assert(offsetof(Message, what) == 16);
static_assert(offsetof(Message, arg1) == 20);
static_assert(offsetof(Message, when_ns) == 24);
static_assert(offsetof(Message, next) == 32);
static_assert(offsetof(Message, arg2) == 40);
static_assert(offsetof(Message, flags) == 56);

class MessageQueue;

// Android's MessageQueue.IdleHandler. queueIdle() runs on the loop thread
// when the queue is empty or its head is due in the future (not while a sync
// barrier holds the head back), at most once per MessageQueue::next() call,
// i.e. once per idle moment. Returning false removes the handler from the
// queue (the queue never deletes it: its owner must outlive its queue's
// use). The first word of the object is its vtable pointer, which names the
// subclass (`vtable for refapp::SlowIdleHandler` + 16).
class IdleHandler {
 public:
  explicit IdleHandler(std::string name);
  virtual ~IdleHandler();
  IdleHandler(const IdleHandler&) = delete;
  IdleHandler& operator=(const IdleHandler&) = delete;

  // Runs inside MessageQueue::runIdleHandler. true = keep the handler.
  virtual bool queueIdle();
  // Runs on the loop thread right after runIdleHandler() returned, outside
  // its span (the idle counterpart of Handler::onDispatched): bookkeeping and
  // ground-truth logging. kept = what queueIdle() returned.
  virtual void onIdleRun(MessageQueue* queue, bool kept);

  const std::string& name() const { return name_; }

  // Written by MessageQueue::runIdleHandler at its very start and end.
  int64_t run_start_ns = 0;
  int64_t run_end_ns = 0;

 private:
  std::string name_;
};

// Android's LooperCallback: watches an fd for MessageQueue::next().
class FdCallback {
 public:
  virtual ~FdCallback();
  // Runs on the loop thread from MessageQueue::next(), outside any dispatch
  // and without the queue lock, when the fd is readable or reports an error
  // or hang-up (revents = poll's revents). Returns false to stop watching
  // the fd (EOF, error).
  virtual bool handleEvent(int fd, int revents) = 0;
};

// Messages ordered by when_ns (FIFO among equal times). One per Looper.
//
// Sync barriers (Android's postSyncBarrier/removeSyncBarrier): a Message
// with target == nullptr, arg1 = token, arg2 = the time it was posted, in
// time order like any message. While one is at the head, next() delivers
// only asynchronous messages (behind it); synchronous ones wait, however
// overdue, and idle handlers do not run.
//
// Fd watching (Android's Looper::addFd / pollOnce), off unless addFd() was
// called: then next() blocks in ppoll() on a wake eventfd plus the watched
// fd instead of the condition variable, polls without blocking at the start
// of every call (Android's nativePollOnce(ptr, 0)), and runs the fd's
// callback from next() when it is readable.
class MessageQueue {
 public:
  MessageQueue() = default;
  ~MessageQueue();
  MessageQueue(const MessageQueue&) = delete;
  MessageQueue& operator=(const MessageQueue&) = delete;

  // The single insertion point of messages (the `enqueue` probe point:
  // arg0 = this, arg1 = msg, arg2 = due time, CLOCK_MONOTONIC ns). Sets
  // msg->when_ns = when_ns and inserts in time order; a message with
  // Message::kFlagAtFront goes ahead of everything (when_ns still says when
  // it was posted). Wakes the loop if it may have to deliver it sooner.
  // Thread-safe. msg->target must be set (barriers are inserted by
  // postSyncBarrier). After quit() the message is recycled and false is
  // returned.
  REFAPP_NOINLINE bool enqueueMessage(Message* msg, int64_t when_ns);

  // Inserts a sync barrier due at when_ns (CLOCK_MONOTONIC) and returns its
  // token (a per-queue counter starting at 1). Does not wake the loop.
  // Thread-safe. Probe point: arg0 = this, arg1 = when_ns, return = token.
  REFAPP_NOINLINE int postSyncBarrier(int64_t when_ns);
  // Removes the barrier with this token and wakes the loop if it was at the
  // head. An unknown token is an error (Android throws): nothing changes,
  // and lastBarrierOp().ok is false. Thread-safe. Probe point: arg0 = this,
  // arg1 = token.
  REFAPP_NOINLINE void removeSyncBarrier(int token);

  // What the calling thread's last postSyncBarrier/removeSyncBarrier did
  // (thread-local, so callers on any thread can log it afterwards).
  struct BarrierOp {
    const MessageQueue* queue = nullptr;
    bool remove = false;  // removeSyncBarrier (else postSyncBarrier)
    bool ok = false;      // remove: the token was found
    int token = 0;
    int64_t start_ns = 0;   // first clock read inside the function
    int64_t when_ns = 0;    // the barrier's due time (unknown token: 0)
    int64_t posted_ns = 0;  // start_ns of its postSyncBarrier (ditto)
  };
  static const BarrierOp& lastBarrierOp();

  // Sync messages held back behind a barrier (see backlog()).
  struct Backlog {
    bool present = false;            // the barrier is still queued
    bool at_head = false;            // ... and at the head
    int64_t when_ns = 0;             // barrier due time
    int64_t posted_ns = 0;           // barrier post time
    uint64_t sync_due = 0;           // sync messages behind it due by now_ns
    int64_t oldest_sync_due_ns = 0;  // smallest when_ns of those (0: none)
    uint64_t sync_queued = 0;        // all sync messages behind it
    uint64_t async_queued = 0;       // all async messages behind it
  };
  Backlog backlog(int token, int64_t now_ns) const;

  // Android's addIdleHandler/removeIdleHandler. Thread-safe; adding does
  // not wake the loop.
  void addIdleHandler(IdleHandler* handler);
  void removeIdleHandler(IdleHandler* handler);

  // Android's Looper::addFd, for one fd: from now on next() waits in ppoll()
  // on a wake eventfd and fd (instead of the condition variable) and calls
  // callback->handleEvent() when fd is readable, until it returns false.
  // Call before the loop thread first runs next() (not thread-safe).
  // Returns false with *error set if the eventfd cannot be created.
  bool addFd(int fd, FdCallback* callback, std::string* error);
  bool isPolling() const { return wake_fd_ >= 0; }

  // Blocks until a message can be delivered and returns it (unlinked), or
  // returns nullptr once quit() was called. Runs the idle handlers (once per
  // call, without the lock) when the queue is empty or its head is due
  // later, then looks again before blocking, as Android does.
  Message* next();

  // Makes next() return nullptr from now on; pending messages stay queued
  // (and are dropped by the destructor).
  void quit();
  bool isQuitting() const;

  struct Counters {
    uint64_t idle_runs = 0;         // runIdleHandler calls
    uint64_t barriers_posted = 0;   // postSyncBarrier calls
    uint64_t barriers_removed = 0;  // successful removeSyncBarrier calls
    uint64_t barrier_errors = 0;    // removeSyncBarrier with unknown token
    uint64_t fd_events = 0;         // FdCallback::handleEvent calls
  };
  Counters counters() const;

 private:
  // The single place an idle handler runs (the `idle` probe point: arg0 =
  // this, arg1 = handler; its span is the handler's run). Records
  // handler->run_start_ns / run_end_ns at its very start and end.
  REFAPP_NOINLINE bool runIdleHandler(IdleHandler* handler);
  // Polling mode: wakes next() (unlocked) from a blocking pollFds().
  void wakePoll();
  // Polling mode, unlocked, loop thread: ppoll() on the wake eventfd and the
  // watched fd for up to timeout_ns (-1 = no timeout, 0 = don't block);
  // drains the eventfd and runs the fd's callback if it fired.
  // noinline so stacks show it (ppoll ← pollFds ← next).
  REFAPP_NOINLINE void pollFds(int64_t timeout_ns);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Message* head_ = nullptr;
  bool quitting_ = false;
  int next_barrier_token_ = 1;
  std::vector<IdleHandler*> idle_handlers_;
  Counters counters_;
  // Polling mode (addFd): the wake eventfd (-1: condition-variable mode),
  // the watched fd and its callback (loop thread only after addFd), and
  // whether next() is blocked in ppoll (guarded by mu_; as Android's
  // mBlocked, enqueues write the eventfd only then).
  int wake_fd_ = -1;
  int watch_fd_ = -1;
  FdCallback* watch_cb_ = nullptr;
  bool blocked_ = false;
};

class Looper {
 public:
  explicit Looper(std::string name);
  ~Looper();
  Looper(const Looper&) = delete;
  Looper& operator=(const Looper&) = delete;

  // Binds a looper to the calling thread (Looper.prepare()).
  static void prepare(Looper* looper);
  // The calling thread's looper, or nullptr.
  static Looper* myLooper();

  const std::string& name() const { return name_; }
  MessageQueue& queue() { return queue_; }

  // Runs until quit().
  void loop();
  // A nested loop on the same looper (re-entrant, called from inside a
  // dispatch): dispatches messages until done() is true after a dispatch, or
  // the looper quits.
  void loopUntil(const std::function<bool()>& done);
  void quit() { queue_.quit(); }

  // Dispatches one message: msg->callback(msg) if set, else
  // msg->target->handleMessage(msg). The only dispatch site. Records
  // msg->dispatch_start_ns / dispatch_end_ns and counts the call.
  REFAPP_NOINLINE void dispatchMessage(Message* msg);

  // dispatchMessage() calls so far; exact from the loop thread or after
  // joining it, a recent value from any other thread (--progress).
  uint64_t dispatchCount() const {
    return dispatches_.load(std::memory_order_relaxed);
  }
  // Of those, messages with Message::kFlagAsynchronous.
  uint64_t asyncDispatchCount() const { return async_dispatches_; }
  int depth() const { return depth_; }

 private:
  // next() + dispatchMessage() + the target's onDispatched(); false on quit.
  bool pollOnce();

  std::string name_;
  MessageQueue queue_;
  // Written by the loop thread only: a relaxed load and store, no locked
  // instruction on the dispatch path.
  std::atomic<uint64_t> dispatches_{0};
  uint64_t async_dispatches_ = 0;
  int depth_ = 0;
};

class Handler {
 public:
  // Binds to the calling thread's looper (may be null: set one before use).
  explicit Handler(std::string name);
  Handler(std::string name, Looper* looper);
  virtual ~Handler();
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

  // Runs inside Looper::dispatchMessage for messages without a callback.
  virtual void handleMessage(Message* msg);
  // Runs on the loop thread right after dispatchMessage() returned (outside
  // the dispatch span) for every message targeting this handler: bookkeeping
  // and ground-truth logging go here so they do not lengthen the span.
  virtual void onDispatched(Message* msg);

  const std::string& name() const { return name_; }
  Looper* looper() const { return looper_; }
  void setLooper(Looper* looper) { looper_ = looper; }
  // Android's Handler(looper, callback, async = true): every message sent
  // through this handler is asynchronous.
  void setAsynchronous(bool async) { async_ = async; }
  bool isAsynchronous() const { return async_; }

  Message* obtainMessage(int32_t what = 0, int32_t arg1 = 0);
  // Sets msg->target = this (and the asynchronous flag if this handler is
  // asynchronous) and enqueues it.
  bool sendMessageAtTime(Message* msg, int64_t when_ns);
  bool sendMessageDelayed(Message* msg, int64_t delay_ns);
  bool sendMessage(Message* msg) { return sendMessageDelayed(msg, 0); }
  // Ahead of everything already queued (nested loops use it).
  bool sendMessageAtFrontOfQueue(Message* msg);
  // A message with msg->callback = callback (Handler.post(Runnable)).
  bool post(void (*callback)(Message*), int32_t what = 0, int32_t arg1 = 0,
            int64_t delay_ns = 0);

 private:
  std::string name_;
  Looper* looper_;
  bool async_ = false;
};

}  // namespace refapp
