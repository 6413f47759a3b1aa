#include "looper.h"

#include <chrono>
#include <utility>

namespace refapp {

namespace {

thread_local Looper* t_looper = nullptr;

// libstdc++'s steady_clock is CLOCK_MONOTONIC with a zero epoch, and
// condition_variable::wait_until(steady_clock) waits on CLOCK_MONOTONIC.
std::chrono::steady_clock::time_point steadyFromNs(int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

}  // namespace

// ---- MessageQueue ----------------------------------------------------------

MessageQueue::~MessageQueue() {
  while (head_ != nullptr) {
    Message* m = head_;
    head_ = m->next;
    Message::recycle(m);
  }
}

bool MessageQueue::enqueueMessage(Message* msg, int64_t when_ns,
                                  bool at_front) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (quitting_) {
      Message::recycle(msg);
      return false;
    }
    msg->when_ns = when_ns;
    if (at_front || head_ == nullptr || when_ns < head_->when_ns) {
      msg->next = head_;
      head_ = msg;
      wake = true;
    } else {
      Message* prev = head_;
      while (prev->next != nullptr && prev->next->when_ns <= when_ns) {
        prev = prev->next;
      }
      msg->next = prev->next;
      prev->next = msg;
    }
  }
  if (wake) cv_.notify_one();
  return true;
}

Message* MessageQueue::next() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (quitting_) return nullptr;
    // Later: if head_ is a sync barrier (target == nullptr), look past it for
    // the first asynchronous message instead.
    if (head_ != nullptr) {
      if (head_->when_ns <= monotonicNs()) {
        Message* msg = head_;
        head_ = msg->next;
        msg->next = nullptr;
        return msg;
      }
      // Later: idle handlers run here (head in the future), unlocked.
      cv_.wait_until(lk, steadyFromNs(head_->when_ns));
    } else {
      // Later: idle handlers run here too (queue empty).
      cv_.wait(lk);
    }
  }
}

void MessageQueue::quit() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    quitting_ = true;
  }
  cv_.notify_all();
}

bool MessageQueue::isQuitting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return quitting_;
}

// ---- Looper ----------------------------------------------------------------

Looper::Looper(std::string name) : name_(std::move(name)) {}

Looper::~Looper() {
  if (t_looper == this) t_looper = nullptr;
}

void Looper::prepare(Looper* looper) { t_looper = looper; }

Looper* Looper::myLooper() { return t_looper; }

void Looper::dispatchMessage(Message* msg) {
  // Keep the work between the probe points and these two clock reads tiny:
  // the ground-truth log compares them with the uprobe/uretprobe times.
  msg->dispatch_start_ns = monotonicNs();
  if (msg->callback != nullptr) {
    msg->callback(msg);
  } else {
    msg->target->handleMessage(msg);
  }
  msg->dispatch_end_ns = monotonicNs();
  ++dispatches_;
}

bool Looper::pollOnce() {
  Message* msg = queue_.next();
  if (msg == nullptr) return false;
  dispatchMessage(msg);
  // Outside the dispatch span: bookkeeping and logging.
  if (msg->target != nullptr) msg->target->onDispatched(msg);
  Message::recycle(msg);
  return true;
}

void Looper::loop() {
  ++depth_;
  while (pollOnce()) {
  }
  --depth_;
}

void Looper::loopUntil(const std::function<bool()>& done) {
  ++depth_;
  while (!done() && pollOnce()) {
  }
  --depth_;
}

// ---- Handler ---------------------------------------------------------------

Handler::Handler(std::string name)
    : name_(std::move(name)), looper_(Looper::myLooper()) {}

Handler::Handler(std::string name, Looper* looper)
    : name_(std::move(name)), looper_(looper) {}

Handler::~Handler() = default;

void Handler::handleMessage(Message* /*msg*/) {}

void Handler::onDispatched(Message* /*msg*/) {}

Message* Handler::obtainMessage(int32_t what, int32_t arg1) {
  Message* msg = Message::obtain();
  msg->target = this;
  msg->what = what;
  msg->arg1 = arg1;
  return msg;
}

bool Handler::sendMessageAtTime(Message* msg, int64_t when_ns) {
  msg->target = this;
  return looper_->queue().enqueueMessage(msg, when_ns);
}

bool Handler::sendMessageDelayed(Message* msg, int64_t delay_ns) {
  if (delay_ns < 0) delay_ns = 0;
  return sendMessageAtTime(msg, monotonicNs() + delay_ns);
}

bool Handler::sendMessageAtFrontOfQueue(Message* msg) {
  msg->target = this;
  return looper_->queue().enqueueMessage(msg, monotonicNs(), /*at_front=*/true);
}

bool Handler::post(void (*callback)(Message*), int32_t what, int32_t arg1,
                   int64_t delay_ns) {
  Message* msg = obtainMessage(what, arg1);
  msg->callback = callback;
  return sendMessageDelayed(msg, delay_ns);
}

}  // namespace refapp
