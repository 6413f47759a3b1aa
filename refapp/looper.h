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
#pragma once

#include <time.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

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

class Handler;
class Looper;

struct Message {
  // ---- Part of the tracer's built-in profile: do not reorder. ----
  Handler* target = nullptr;             // @0  (later: nullptr = sync barrier)
  void (*callback)(Message*) = nullptr;  // @8  may be null
  int32_t what = 0;                      // @16
  int32_t arg1 = 0;                      // @20 (later: barrier token)
  int64_t when_ns = 0;                   // @24 CLOCK_MONOTONIC due time
  Message* next = nullptr;               // @32 queue link
  // ---- Private to the app from here on. ----
  int64_t arg2 = 0;
  void* obj = nullptr;
  uint32_t flags = 0;  // reserved: kFlagAsynchronous (async messages, later)
  // Written by Looper::dispatchMessage at its very start and end.
  int64_t dispatch_start_ns = 0;
  int64_t dispatch_end_ns = 0;

  static Message* obtain() { return new Message(); }
  static void recycle(Message* msg) { delete msg; }
};

static_assert(offsetof(Message, target) == 0);
static_assert(offsetof(Message, callback) == 8);
static_assert(offsetof(Message, what) == 16);
static_assert(offsetof(Message, arg1) == 20);
static_assert(offsetof(Message, when_ns) == 24);
static_assert(offsetof(Message, next) == 32);

// Messages ordered by when_ns (FIFO among equal times). One per Looper.
//
// Room for later (not built yet):
//  - sync barriers: postSyncBarrier(when) inserts a Message with target ==
//    nullptr and arg1 = token (from a per-queue counter) and returns the
//    token; removeSyncBarrier(token). While a barrier is at the head, next()
//    only returns messages with kFlagAsynchronous.
//  - idle handlers: next() runs them once per call when the queue is empty
//    or its head is in the future, before blocking.
//  - an input channel: next() also polls an fd (socketpair SOCK_SEQPACKET)
//    and dispatches input as messages.
class MessageQueue {
 public:
  MessageQueue() = default;
  ~MessageQueue();
  MessageQueue(const MessageQueue&) = delete;
  MessageQueue& operator=(const MessageQueue&) = delete;

  // The single insertion point (a future `enqueue` role probe point). Sets
  // msg->when_ns = when_ns and inserts in time order; with at_front, puts the
  // message ahead of everything (when_ns still says when it was posted).
  // Wakes the loop if the head changed. Thread-safe. After quit() the
  // message is recycled and false is returned.
  REFAPP_NOINLINE bool enqueueMessage(Message* msg, int64_t when_ns,
                                      bool at_front = false);

  // Blocks until the head is due and returns it (unlinked), or returns
  // nullptr once quit() was called.
  Message* next();

  // Makes next() return nullptr from now on; pending messages are dropped.
  void quit();
  bool isQuitting() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Message* head_ = nullptr;
  bool quitting_ = false;
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

  // dispatchMessage() calls so far; read it from the loop thread or after
  // joining it.
  uint64_t dispatchCount() const { return dispatches_; }
  int depth() const { return depth_; }

 private:
  // next() + dispatchMessage() + the target's onDispatched(); false on quit.
  bool pollOnce();

  std::string name_;
  MessageQueue queue_;
  uint64_t dispatches_ = 0;
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

  Message* obtainMessage(int32_t what = 0, int32_t arg1 = 0);
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
};

}  // namespace refapp
