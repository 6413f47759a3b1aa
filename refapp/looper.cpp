#include "looper.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace refapp {

namespace {

thread_local Looper* t_looper = nullptr;
thread_local MessageQueue::BarrierOp t_barrier_op;

// libstdc++'s steady_clock is CLOCK_MONOTONIC with a zero epoch, and
// condition_variable::wait_until(steady_clock) waits on CLOCK_MONOTONIC.
std::chrono::steady_clock::time_point steadyFromNs(int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

}  // namespace

int64_t runDelayNs() {
  // Opened by each thread for itself (/proc/thread-self names the opener),
  // again in a forked child: one pread per call after that.
  struct Stat {
    pid_t tid = -1;
    int fd = -1;
  };
  thread_local Stat st;
  const pid_t tid = gettid();
  if (st.tid != tid) {
    if (st.fd >= 0) close(st.fd);
    st.fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    st.tid = tid;
  }
  if (st.fd < 0) return 0;
  char buf[96];
  const ssize_t n = pread(st.fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoull(buf, &end, 10);  // time on a CPU
  return static_cast<int64_t>(std::strtoull(end, nullptr, 10));
}

// ---- MessageQueue ----------------------------------------------------------

MessageQueue::~MessageQueue() {
  while (head_ != nullptr) {
    Message* m = head_;
    head_ = m->next;
    Message::recycle(m);
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool MessageQueue::enqueueMessage(Message* msg, int64_t when_ns) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (quitting_ || msg->target == nullptr) {
      Message::recycle(msg);
      return false;
    }
    msg->when_ns = when_ns;
    if ((msg->flags & Message::kFlagAtFront) != 0 || head_ == nullptr ||
        when_ns < head_->when_ns) {
      msg->next = head_;
      head_ = msg;
      wake = true;
    } else {
      // Behind a barrier at the head, an asynchronous message may be the
      // next one to deliver: wake the loop to look (a spurious wake-up at
      // worst).
      wake = head_->isBarrier() && msg->isAsynchronous();
      Message* prev = head_;
      while (prev->next != nullptr && prev->next->when_ns <= when_ns) {
        prev = prev->next;
      }
      msg->next = prev->next;
      prev->next = msg;
    }
    // Polling mode: only a next() blocked in ppoll needs the eventfd (as
    // Android's mBlocked); otherwise it looks at the queue before blocking.
    if (wake_fd_ >= 0) wake = wake && blocked_;
  }
  if (wake) {
    if (wake_fd_ >= 0) {
      wakePoll();
    } else {
      cv_.notify_one();
    }
  }
  return true;
}

int MessageQueue::postSyncBarrier(int64_t when_ns) {
  const int64_t start = monotonicNs();
  int token;
  {
    std::lock_guard<std::mutex> lk(mu_);
    token = next_barrier_token_++;
    Message* msg = Message::obtain();
    msg->arg1 = token;
    msg->arg2 = start;
    msg->when_ns = when_ns;
    // Behind every message due at or before when_ns; no wake-up (Android).
    Message* prev = nullptr;
    Message* p = head_;
    while (p != nullptr && p->when_ns <= when_ns) {
      prev = p;
      p = p->next;
    }
    msg->next = p;
    if (prev != nullptr) {
      prev->next = msg;
    } else {
      head_ = msg;
    }
    ++counters_.barriers_posted;
  }
  t_barrier_op = {this, false, true, token, start, when_ns, start};
  return token;
}

void MessageQueue::removeSyncBarrier(int token) {
  const int64_t start = monotonicNs();
  BarrierOp op{this, true, false, token, start, 0, 0};
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    Message* prev = nullptr;
    Message* p = head_;
    while (p != nullptr && !(p->isBarrier() && p->arg1 == token)) {
      prev = p;
      p = p->next;
    }
    if (p == nullptr) {
      ++counters_.barrier_errors;
    } else {
      if (prev != nullptr) {
        prev->next = p->next;
      } else {
        head_ = p->next;
        // Android wakes unless another barrier is now at the head.
        wake = !quitting_ && (head_ == nullptr || !head_->isBarrier()) &&
               (wake_fd_ < 0 || blocked_);
      }
      op.ok = true;
      op.when_ns = p->when_ns;
      op.posted_ns = p->arg2;
      Message::recycle(p);
      ++counters_.barriers_removed;
    }
  }
  t_barrier_op = op;
  if (wake) {
    if (wake_fd_ >= 0) {
      wakePoll();
    } else {
      cv_.notify_one();
    }
  }
}

const MessageQueue::BarrierOp& MessageQueue::lastBarrierOp() {
  return t_barrier_op;
}

MessageQueue::Backlog MessageQueue::backlog(int token, int64_t now_ns) const {
  Backlog b;
  std::lock_guard<std::mutex> lk(mu_);
  const Message* p = head_;
  while (p != nullptr && !(p->isBarrier() && p->arg1 == token)) p = p->next;
  if (p == nullptr) return b;
  b.present = true;
  b.at_head = p == head_;
  b.when_ns = p->when_ns;
  b.posted_ns = p->arg2;
  for (const Message* m = p->next; m != nullptr; m = m->next) {
    if (m->isBarrier()) continue;
    if (m->isAsynchronous()) {
      ++b.async_queued;
      continue;
    }
    ++b.sync_queued;
    if (m->when_ns <= now_ns) {
      ++b.sync_due;
      if (b.oldest_sync_due_ns == 0 || m->when_ns < b.oldest_sync_due_ns) {
        b.oldest_sync_due_ns = m->when_ns;
      }
    }
  }
  return b;
}

void MessageQueue::addIdleHandler(IdleHandler* handler) {
  std::lock_guard<std::mutex> lk(mu_);
  idle_handlers_.push_back(handler);
}

void MessageQueue::removeIdleHandler(IdleHandler* handler) {
  std::lock_guard<std::mutex> lk(mu_);
  idle_handlers_.erase(
      std::remove(idle_handlers_.begin(), idle_handlers_.end(), handler),
      idle_handlers_.end());
}

bool MessageQueue::runIdleHandler(IdleHandler* handler) {
  // As in dispatchMessage: the clock reads are the first and last thing, so
  // the log's start/end match a uprobe/uretprobe on this function.
  handler->run_start_ns = monotonicNs();
  const bool keep = handler->queueIdle();
  handler->run_end_ns = monotonicNs();
  return keep;
}

bool MessageQueue::addFd(int fd, FdCallback* callback, std::string* error) {
  if (wake_fd_ < 0) {
    const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) {
      *error = std::string("eventfd: ") + std::strerror(errno);
      return false;
    }
    wake_fd_ = efd;
  }
  watch_fd_ = fd;
  watch_cb_ = callback;
  return true;
}

void MessageQueue::wakePoll() {
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void MessageQueue::pollFds(int64_t timeout_ns) {
  struct pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {watch_fd_, POLLIN, 0}};
  const nfds_t n = watch_fd_ >= 0 ? 2 : 1;
  struct timespec ts;
  struct timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
    tsp = &ts;
  }
  if (ppoll(fds, n, tsp, nullptr) <= 0) return;  // timeout, EINTR
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t count;
    while (read(wake_fd_, &count, sizeof count) < 0 && errno == EINTR) {
    }
  }
  if (n == 2 && fds[1].revents != 0) {
    const bool keep = watch_cb_->handleEvent(watch_fd_, fds[1].revents);
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++counters_.fd_events;
    }
    if (!keep) {
      watch_fd_ = -1;
      watch_cb_ = nullptr;
    }
  }
}

Message* MessageQueue::next() {
  // Android: -1 until the queue is first seen idle in this call; the idle
  // handlers run at most once per call.
  int pending_idle = -1;
  std::vector<IdleHandler*> idlers;
  // Polling mode: like Android's first nativePollOnce(ptr, 0) of each
  // next(), handle a readable fd before picking a message, so input is
  // read even while due messages are waiting.
  const bool polling = wake_fd_ >= 0;
  if (polling) pollFds(0);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (quitting_) return nullptr;
    const int64_t now = monotonicNs();
    Message* prev = nullptr;
    Message* msg = head_;
    if (msg != nullptr && msg->isBarrier()) {
      // Held back by a barrier: the first asynchronous message behind it.
      do {
        prev = msg;
        msg = msg->next;
      } while (msg != nullptr && !msg->isAsynchronous());
    }
    if (msg != nullptr && msg->when_ns <= now) {
      if (prev != nullptr) {
        prev->next = msg->next;
      } else {
        head_ = msg->next;
      }
      msg->next = nullptr;
      return msg;
    }
    // Idle handlers run if the queue is empty or its head (possibly a
    // barrier) is due later; not while a due barrier holds messages back.
    if (pending_idle < 0 && (head_ == nullptr || now < head_->when_ns)) {
      pending_idle = static_cast<int>(idle_handlers_.size());
    }
    if (pending_idle > 0) {
      idlers = idle_handlers_;
      pending_idle = 0;
      lk.unlock();
      for (IdleHandler* h : idlers) {
        const bool keep = runIdleHandler(h);
        h->onIdleRun(this, keep);
        lk.lock();
        ++counters_.idle_runs;
        if (!keep) {
          idle_handlers_.erase(
              std::remove(idle_handlers_.begin(), idle_handlers_.end(), h),
              idle_handlers_.end());
        }
        lk.unlock();
      }
      lk.lock();
      // A message may have arrived (or come due) meanwhile: look again
      // before blocking.
      continue;
    }
    if (polling) {
      // Blocks in ppoll() until the head is due, a wake-up (enqueue from
      // another thread, quit) or the watched fd fires; its callback runs
      // there, unlocked.
      const int64_t timeout =
          msg != nullptr ? std::max<int64_t>(msg->when_ns - now, 0) : -1;
      blocked_ = true;
      lk.unlock();
      pollFds(timeout);
      lk.lock();
      blocked_ = false;
      continue;
    }
    if (msg != nullptr) {
      cv_.wait_until(lk, steadyFromNs(msg->when_ns));
    } else {
      cv_.wait(lk);
    }
  }
}

void MessageQueue::quit() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    quitting_ = true;
  }
  if (wake_fd_ >= 0) {
    wakePoll();
  } else {
    cv_.notify_all();
  }
}

bool MessageQueue::isQuitting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return quitting_;
}

MessageQueue::Counters MessageQueue::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

// ---- FdCallback ------------------------------------------------------------

FdCallback::~FdCallback() = default;

// ---- IdleHandler -----------------------------------------------------------

IdleHandler::IdleHandler(std::string name) : name_(std::move(name)) {}

IdleHandler::~IdleHandler() = default;

bool IdleHandler::queueIdle() { return false; }

void IdleHandler::onIdleRun(MessageQueue* /*queue*/, bool /*kept*/) {}

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
  if ((msg->flags & Message::kFlagMeasureRunq) != 0)
    msg->dispatch_start_runq_ns = runDelayNs() - msg->dispatch_start_runq_ns;
  if (msg->callback != nullptr) {
    msg->callback(msg);
  } else {
    msg->target->handleMessage(msg);
  }
  msg->dispatch_end_ns = monotonicNs();
  dispatches_.store(dispatches_.load(std::memory_order_relaxed) + 1,
                    std::memory_order_relaxed);
}

bool Looper::pollOnce() {
  Message* msg = queue_.next();
  if (msg == nullptr) return false;
  if ((msg->flags & Message::kFlagMeasureRunq) != 0)
    msg->dispatch_start_runq_ns = runDelayNs();
  dispatchMessage(msg);
  // Outside the dispatch span: bookkeeping and logging.
  if (msg->isAsynchronous()) ++async_dispatches_;
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
  if (async_) msg->setAsynchronous(true);
  return looper_->queue().enqueueMessage(msg, when_ns);
}

bool Handler::sendMessageDelayed(Message* msg, int64_t delay_ns) {
  if (delay_ns < 0) delay_ns = 0;
  return sendMessageAtTime(msg, monotonicNs() + delay_ns);
}

bool Handler::sendMessageAtFrontOfQueue(Message* msg) {
  msg->target = this;
  if (async_) msg->setAsynchronous(true);
  msg->flags |= Message::kFlagAtFront;
  return looper_->queue().enqueueMessage(msg, monotonicNs());
}

bool Handler::post(void (*callback)(Message*), int32_t what, int32_t arg1,
                   int64_t delay_ns) {
  Message* msg = obtainMessage(what, arg1);
  msg->callback = callback;
  return sendMessageDelayed(msg, delay_ns);
}

}  // namespace refapp
