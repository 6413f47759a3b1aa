#include "scenario.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <future>
#include <utility>

namespace refapp {

namespace {

const char* const kStallTarget = "refapp::StallHandler";
const char* const kNestedTarget = "refapp::NestedHandler";
const char* const kNestedCallback = "refapp::nestedInnerWork";
const char* const kWorkTarget = "refapp::WorkHandler";
const char* const kTriggerTarget = "refapp::TriggerHandler";
const char* const kAsyncTarget = "refapp::AsyncHandler";
const char* const kBurstTarget = "refapp::BurstHandler";
const char* const kBurstCallback = "refapp::burstWork";
const char* const kSlowIdle = "refapp::SlowIdleHandler";

// CLOCK_THREAD_CPUTIME_ID: a syscall, so only stall dispatches read it.
int64_t threadCpuNs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The thread's run-queue wait so far as the kernel counts it (schedstat's
// run_delay, ns), -1 where it does not say: ground truth for how long a
// stall waited for a CPU.
int64_t threadRunDelayNs() {
  FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  unsigned long long runtime = 0, delay = 0;
  int n = std::fscanf(f, "%llu %llu", &runtime, &delay);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(delay) : -1;
}

}  // namespace

const char* stallKindName(StallKind kind) {
  switch (kind) {
    case StallKind::kBusy:
      return "busy";
    case StallKind::kSleep:
      return "sleep";
    case StallKind::kLock:
      return "lock";
  }
  return "?";
}

const char* stallFunctionName(StallKind kind) {
  switch (kind) {
    case StallKind::kBusy:
      return "refapp::busyStall";
    case StallKind::kSleep:
      return "refapp::sleepStall";
    case StallKind::kLock:
      return "refapp::lockStall";
  }
  return "?";
}

const char* eventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kIdleStall:
      return "idle-stall";
    case EventKind::kBarrier:
      return "barrier";
    case EventKind::kBarrierLeak:
      return "barrier-leak";
    case EventKind::kBurst:
      return "burst";
    case EventKind::kBarrierError:
      return "barrier-error";
  }
  return "?";
}

std::string hexAddress(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return buf;
}

// ---- GroundTruthLog --------------------------------------------------------

GroundTruthLog::~GroundTruthLog() {
  if (fd_ >= 0) ::close(fd_);
}

bool GroundTruthLog::open(const std::string& path, std::string* error) {
  // O_APPEND: the input dispatcher (a forked child) appends to the same open
  // file; every line is one write(2), so lines never interleave.
  fd_ = ::open(path.c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    *error = "cannot open log file " + path;
    return false;
  }
  return true;
}

void GroundTruthLog::write(const nlohmann::json& line) {
  if (fd_ < 0) return;
  std::string text = line.dump();
  text += '\n';
  std::lock_guard<std::mutex> lk(mu_);
  // A regular file takes the whole line at once; only a pipe or a full disk
  // writes less (then the rest follows, possibly after another process's
  // line).
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// ---- WorkHandler -----------------------------------------------------------

WorkHandler::WorkHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

WorkHandler::~WorkHandler() = default;

void WorkHandler::postWork(int64_t k) {
  const Config& cfg = loop_.config();
  if (cfg.period_ns <= 0 || k < next_post_) return;
  const int64_t when = cfg.t0_ns + k * cfg.period_ns;
  if (when >= cfg.end_ns) return;
  next_post_ = k + 1;
  std::uniform_int_distribution<int32_t> us(100, 2000);
  Message* msg =
      obtainMessage(static_cast<int32_t>(k & 0x7fffffff), us(loop_.rng()));
  msg->arg2 = k;
  sendMessageAtTime(msg, when);
}

void WorkHandler::catchUp(int64_t now_ns) {
  const Config& cfg = loop_.config();
  if (cfg.period_ns <= 0) return;
  for (;;) {
    const int64_t when = cfg.t0_ns + next_post_ * cfg.period_ns;
    if (when > now_ns || when >= cfg.end_ns) return;
    postWork(next_post_);
  }
}

void WorkHandler::handleMessage(Message* msg) {
  busyWork(static_cast<int64_t>(msg->arg1) * 1000);
  postWork(msg->arg2 + 1);
}

void WorkHandler::onDispatched(Message* msg) {
  LoopStats& s = loop_.stats();
  ++s.background;
  s.max_background_ns = std::max(s.max_background_ns,
                                 msg->dispatch_end_ns - msg->dispatch_start_ns);
  loop_.logIfSlow(msg, kWorkTarget, nullptr);
}

// ---- TriggerHandler --------------------------------------------------------

TriggerHandler::TriggerHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

TriggerHandler::~TriggerHandler() = default;

void TriggerHandler::postTrigger(int64_t k) {
  const Config& cfg = loop_.config();
  if (k >= cfg.messages) return;
  Message* msg = obtainMessage(static_cast<int32_t>(k & 0x7fffffff));
  msg->arg2 = k;
  sendMessageAtTime(msg, cfg.t0_ns + k * cfg.period_ns);
}

void TriggerHandler::handleMessage(Message* msg) {
  trigger();
  postTrigger(msg->arg2 + 1);
}

void TriggerHandler::onDispatched(Message* msg) {
  ++loop_.stats().triggers;
  loop_.logIfSlow(msg, kTriggerTarget, nullptr);
  loop_.finishOne();
}

// ---- StallHandler ----------------------------------------------------------

StallHandler::StallHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

StallHandler::~StallHandler() = default;

void StallHandler::postStall(const StallSpec* spec) {
  Message* msg = obtainMessage(
      spec->index,
      static_cast<int32_t>(std::min<int64_t>(spec->ms, INT32_MAX)));
  msg->obj = const_cast<StallSpec*>(spec);
  sendMessageAtTime(msg, loop_.config().t0_ns + spec->at_ms * 1000000);
}

void StallHandler::handleMessage(Message* msg) {
  const auto* spec = static_cast<const StallSpec*>(msg->obj);
  const int64_t ns = spec->ms * 1000000;
  const int64_t cpu_start = threadCpuNs();
  const int64_t delay_start = threadRunDelayNs();
  switch (spec->kind) {
    case StallKind::kBusy:
      busyStall(ns);
      break;
    case StallKind::kSleep:
      sleepStall(ns);
      break;
    case StallKind::kLock:
      // The holder releases the lock ns after this dispatch started.
      lockStall(*loop_.lockHolder(), msg->dispatch_start_ns + ns);
      break;
  }
  cpu_ns_ = threadCpuNs() - cpu_start;
  const int64_t delay_end = threadRunDelayNs();
  run_delay_ns_ =
      delay_start >= 0 && delay_end >= 0 ? delay_end - delay_start : -1;
}

void StallHandler::onDispatched(Message* msg) {
  const auto* spec = static_cast<const StallSpec*>(msg->obj);
  nlohmann::json line = {
      {"event", "stall"},
      {"kind", stallKindName(spec->kind)},
      {"function", stallFunctionName(spec->kind)},
      {"requested_ms", spec->ms},
      {"start_ns", msg->dispatch_start_ns},
      {"end_ns", msg->dispatch_end_ns},
      {"duration_ns", msg->dispatch_end_ns - msg->dispatch_start_ns},
      {"cpu_ns", cpu_ns_},
      {"run_delay_ns", run_delay_ns_},
      {"when_ns", msg->when_ns},
      {"at_ms", spec->at_ms},
      {"pid", static_cast<int>(getpid())},
      {"tid", static_cast<int>(loop_.tid())},
      {"thread", loop_.index()},
      {"target", kStallTarget},
      {"what", msg->what},
  };
  if (spec->kind == StallKind::kLock && loop_.lockHolder() != nullptr) {
    line["holder_tid"] = static_cast<int>(loop_.lockHolder()->tid());
  }
  loop_.log().write(line);
  ++loop_.stats().stalls;
  loop_.finishOne();
}

// ---- NestedHandler ---------------------------------------------------------

void nestedInnerWork(Message* /*msg*/) {
  busyWork(NestedHandler::kInnerWorkNs);
}

NestedHandler::NestedHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

NestedHandler::~NestedHandler() = default;

void NestedHandler::postNested(int index) {
  const Config& cfg = loop_.config();
  Message* msg = obtainMessage(index);
  sendMessageAtTime(msg, cfg.t0_ns + (index + 1) * cfg.nested_interval_ns);
}

void NestedHandler::handleMessage(Message* msg) {
  inner_done_ = 0;
  // Front of the queue, last first, so they run in order 0, 1, 2 before
  // anything else that is queued.
  for (int j = kInner - 1; j >= 0; --j) {
    Message* inner = obtainMessage(j, msg->what);
    inner->callback = &nestedInnerWork;
    sendMessageAtFrontOfQueue(inner);
  }
  looper()->loopUntil([this] { return inner_done_ >= kInner; });
}

void NestedHandler::onDispatched(Message* msg) {
  LoopStats& s = loop_.stats();
  if (msg->callback != nullptr) {  // inner (inside the outer dispatch)
    if (inner_done_ < kInner) {
      inner_start_ns_[inner_done_] = msg->dispatch_start_ns;
      inner_duration_ns_[inner_done_] =
          msg->dispatch_end_ns - msg->dispatch_start_ns;
    }
    ++inner_done_;
    ++s.nested_inner;
    loop_.logIfSlow(msg, kNestedTarget, kNestedCallback);
    return;
  }
  const int n = std::min(inner_done_, kInner);
  nlohmann::json line = {
      {"event", "nested"},
      {"start_ns", msg->dispatch_start_ns},
      {"end_ns", msg->dispatch_end_ns},
      {"duration_ns", msg->dispatch_end_ns - msg->dispatch_start_ns},
      {"outer_duration_ns", msg->dispatch_end_ns - msg->dispatch_start_ns},
      {"inner",
       std::vector<int64_t>(inner_duration_ns_, inner_duration_ns_ + n)},
      {"inner_start_ns",
       std::vector<int64_t>(inner_start_ns_, inner_start_ns_ + n)},
      {"when_ns", msg->when_ns},
      {"pid", static_cast<int>(getpid())},
      {"tid", static_cast<int>(loop_.tid())},
      {"thread", loop_.index()},
      {"target", kNestedTarget},
      {"inner_callback", kNestedCallback},
      {"what", msg->what},
  };
  loop_.log().write(line);
  ++s.nested_outer;
  loop_.finishOne();
}

// ---- Idle handlers ---------------------------------------------------------

SlowIdleHandler::SlowIdleHandler(LoopThread& loop, const EventSpec* spec)
    : IdleHandler("slow-idle" + std::to_string(spec->index)),
      loop_(loop),
      spec_(spec) {}

SlowIdleHandler::~SlowIdleHandler() = default;

bool SlowIdleHandler::queueIdle() {
  const int64_t ns = spec_->ms * 1000000;
  const int64_t cpu_start = threadCpuNs();
  switch (spec_->stall_kind) {
    case StallKind::kBusy:
      busyStall(ns);
      break;
    case StallKind::kSleep:
      sleepStall(ns);
      break;
    case StallKind::kLock:
      // The holder releases the lock ns after this run started.
      lockStall(*loop_.lockHolder(), run_start_ns + ns);
      break;
  }
  cpu_ns_ = threadCpuNs() - cpu_start;
  return false;  // one-shot
}

void SlowIdleHandler::onIdleRun(MessageQueue* queue, bool kept) {
  nlohmann::json line = {
      {"event", "idle"},
      {"handler", kSlowIdle},
      {"kind", stallKindName(spec_->stall_kind)},
      {"function", stallFunctionName(spec_->stall_kind)},
      {"requested_ms", spec_->ms},
      {"at_ms", spec_->at_ms},
      {"index", spec_->index},
      {"start_ns", run_start_ns},
      {"end_ns", run_end_ns},
      {"duration_ns", run_end_ns - run_start_ns},
      {"cpu_ns", cpu_ns_},
      {"queue", hexAddress(queue)},
      {"pid", static_cast<int>(getpid())},
      {"tid", static_cast<int>(loop_.tid())},
      {"thread", loop_.index()},
      {"kept", kept},
  };
  if (spec_->stall_kind == StallKind::kLock && loop_.lockHolder() != nullptr) {
    line["holder_tid"] = static_cast<int>(loop_.lockHolder()->tid());
  }
  loop_.log().write(line);
  ++loop_.stats().idle_stalls;
  loop_.finishOne();
}

CheapIdleHandler::CheapIdleHandler(std::string name)
    : IdleHandler(std::move(name)) {}

CheapIdleHandler::~CheapIdleHandler() = default;

bool CheapIdleHandler::queueIdle() {
  busyWork(kWorkNs);
  return true;
}

IdleSetupHandler::IdleSetupHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

IdleSetupHandler::~IdleSetupHandler() = default;

void IdleSetupHandler::postSetup(SlowIdleHandler* idle) {
  const EventSpec* spec = idle->spec();
  Message* msg = obtainMessage(
      spec->index,
      static_cast<int32_t>(std::min<int64_t>(spec->ms, INT32_MAX)));
  msg->obj = idle;
  sendMessageAtTime(msg, loop_.config().t0_ns + spec->at_ms * 1000000);
}

void IdleSetupHandler::handleMessage(Message* msg) {
  looper()->queue().addIdleHandler(static_cast<SlowIdleHandler*>(msg->obj));
}

void IdleSetupHandler::onDispatched(Message* msg) {
  ++loop_.stats().idle_setup;
  loop_.logIfSlow(msg, "refapp::IdleSetupHandler", nullptr);
  loop_.finishOne();
}

// ---- Barriers --------------------------------------------------------------

BarrierHandler::BarrierHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

BarrierHandler::~BarrierHandler() = default;

void BarrierHandler::postEvent(const EventSpec* spec) {
  Message* msg = obtainMessage(spec->index, 0);
  msg->obj = const_cast<EventSpec*>(spec);
  msg->arg2 = spec->kind == EventKind::kBarrierError ? kError : kPost;
  sendMessageAtTime(msg, loop_.config().t0_ns + spec->at_ms * 1000000);
}

void BarrierHandler::handleMessage(Message* msg) {
  MessageQueue& q = looper()->queue();
  const auto* spec = static_cast<const EventSpec*>(msg->obj);
  switch (msg->arg2) {
    case kPost: {
      q.postSyncBarrier(monotonicNs());
      op_ = MessageQueue::lastBarrierOp();
      if (spec->kind == EventKind::kBarrier) {
        // Removed by an asynchronous message, as Choreographer's frame
        // (doTraversal) removes ViewRootImpl's barrier: it is delivered
        // past the barrier it removes.
        Message* rm = obtainMessage(spec->index, op_.token);
        rm->obj = msg->obj;
        rm->arg2 = kRemove;
        rm->setAsynchronous(true);
        sendMessageAtTime(rm, op_.posted_ns + spec->ms * 1000000);
      }
      break;
    }
    case kRemove:
      q.removeSyncBarrier(msg->arg1);
      op_ = MessageQueue::lastBarrierOp();
      break;
    case kError:
      // A double removal (the token this thread removed last; 0, never
      // issued, if none).
      q.removeSyncBarrier(loop_.lastRemovedToken());
      op_ = MessageQueue::lastBarrierOp();
      break;
  }
}

void BarrierHandler::onDispatched(Message* msg) {
  const auto* spec = static_cast<const EventSpec*>(msg->obj);
  const char* source = spec->kind == EventKind::kBarrierLeak    ? "leak"
                       : spec->kind == EventKind::kBarrierError ? "error"
                                                                : "barrier";
  loop_.logBarrierOp(op_, source, spec->index);
  if (msg->arg2 == kPost) {
    loop_.noteBarrier(spec->index, op_.token,
                      spec->kind == EventKind::kBarrierLeak);
    const int64_t report = loop_.config().barrier_report_ns;
    if (spec->kind == EventKind::kBarrierLeak || spec->ms * 1000000 > report) {
      loop_.barrierWatch().postWatch(spec->index, op_.token,
                                     op_.posted_ns + report, source);
    }
  }
  ++loop_.stats().barrier_control;
  loop_.logIfSlow(msg, "refapp::BarrierHandler", nullptr);
  loop_.finishOne();
}

BarrierWatchHandler::BarrierWatchHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {
  setAsynchronous(true);
}

BarrierWatchHandler::~BarrierWatchHandler() = default;

void BarrierWatchHandler::postWatch(int index, int token, int64_t when_ns,
                                    const char* source) {
  Message* msg = obtainMessage(index, token);
  msg->obj = const_cast<char*>(source);
  sendMessageAtTime(msg, when_ns);
}

void BarrierWatchHandler::handleMessage(Message* msg) {
  at_ns_ = monotonicNs();
  backlog_ = looper()->queue().backlog(msg->arg1, at_ns_);
}

void BarrierWatchHandler::onDispatched(Message* msg) {
  if (backlog_.present) {
    loop_.log().write({
        {"event", "barrier_stalled"},
        {"token", msg->arg1},
        {"index", msg->what},
        {"source", static_cast<const char*>(msg->obj)},
        {"queue", hexAddress(&looper()->queue())},
        {"at_ns", at_ns_},
        {"posted_ns", backlog_.posted_ns},
        {"when_ns", backlog_.when_ns},
        {"held_ns", at_ns_ - backlog_.posted_ns},
        {"at_head", backlog_.at_head},
        {"sync_waiting", backlog_.sync_due},
        {"oldest_sync_due_ns", backlog_.sync_due > 0
                                   ? nlohmann::json(backlog_.oldest_sync_due_ns)
                                   : nlohmann::json(nullptr)},
        {"sync_queued", backlog_.sync_queued},
        {"async_queued", backlog_.async_queued},
        {"pid", static_cast<int>(getpid())},
        {"tid", static_cast<int>(loop_.tid())},
        {"thread", loop_.index()},
    });
  }
  ++loop_.stats().barrier_watch;
  loop_.logIfSlow(msg, "refapp::BarrierWatchHandler", nullptr);
  loop_.finishOne();
}

// ---- Frames ----------------------------------------------------------------

FrameHandler::FrameHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

FrameHandler::~FrameHandler() = default;

void FrameHandler::postSchedule(int64_t k) {
  const Config& cfg = loop_.config();
  if (cfg.frame_period_ns <= 0) return;
  const int64_t when = cfg.t0_ns + k * cfg.frame_period_ns;
  if (when >= cfg.end_ns) return;
  Message* msg = obtainMessage(static_cast<int32_t>(k & 0x7fffffff), 0);
  msg->arg2 = k;
  sendMessageAtTime(msg, when);
}

void FrameHandler::handleMessage(Message* msg) {
  MessageQueue& q = looper()->queue();
  if (!msg->isAsynchronous()) {
    // ViewRootImpl.scheduleTraversals: barrier, then the async frame.
    const int token = q.postSyncBarrier(monotonicNs());
    op_ = MessageQueue::lastBarrierOp();
    Message* frame = obtainMessage(msg->what, token);
    frame->arg2 = msg->arg2;
    frame->setAsynchronous(true);
    sendMessageAtTime(frame, monotonicNs());
    postSchedule(msg->arg2 + 1);
  } else {
    // doTraversal: remove the barrier first, then traverse.
    q.removeSyncBarrier(msg->arg1);
    op_ = MessageQueue::lastBarrierOp();
    const Config& cfg = loop_.config();
    doFrame(msg->arg2, cfg.t0_ns + msg->arg2 * cfg.frame_period_ns,
            cfg.frame_period_ns);
  }
}

__attribute__((noinline)) void FrameHandler::doFrame(
    int64_t k, int64_t frame_time_ns, int64_t /*frame_interval_ns*/) {
  frame_.k = k;
  frame_.vsync_ns = frame_time_ns;
  frame_.start_ns = monotonicNs();
  doCallbacks(kCallbackInput, frame_time_ns);
  doCallbacks(kCallbackAnimation, frame_time_ns);
  doCallbacks(kCallbackTraversal, frame_time_ns);
  frame_.end_ns = monotonicNs();
}

// A frame's 0.1 ms of work: input 10 us, animation 20 us, traversal 70 us;
// a stalling frame's --frame-stall-ms in its --frame-stall-phase.
__attribute__((noinline)) void FrameHandler::doCallbacks(
    int type, int64_t /*frame_time_ns*/) {
  const Config& cfg = loop_.config();
  int64_t* at = frame_.phase_ns[type & 3];
  at[0] = monotonicNs();
  const bool stall = cfg.frame_stall_every > 0 &&
                     frame_.k % cfg.frame_stall_every == 0 &&
                     type == cfg.frame_stall_phase;
  const int64_t work = type == kCallbackInput       ? 10000
                       : type == kCallbackAnimation ? 20000
                                                    : kFrameWorkNs - 30000;
  busyWork(stall ? cfg.frame_stall_ns : work);
  at[1] = monotonicNs();
}

void FrameHandler::onDispatched(Message* msg) {
  if (frame_.k >= 0 && msg->isAsynchronous())
    loop_.logFrame(frame_.k, frame_.vsync_ns, frame_.start_ns, frame_.end_ns,
                   frame_.phase_ns);
  frame_.k = -1;
  loop_.logBarrierOp(op_, "frame", msg->what);
  ++loop_.stats().frames;
  loop_.logIfSlow(msg, "refapp::FrameHandler", nullptr);
}

// ---- Bursts ----------------------------------------------------------------

void burstWork(Message* /*msg*/) { busyWork(BurstHandler::kItemWorkNs); }

BurstHandler::BurstHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

BurstHandler::~BurstHandler() = default;

void BurstHandler::postBurst(const EventSpec* spec) {
  Message* msg = obtainMessage(
      spec->index,
      static_cast<int32_t>(std::min<int64_t>(spec->count, INT32_MAX)));
  msg->obj = const_cast<EventSpec*>(spec);
  sendMessageAtTime(msg, loop_.config().t0_ns + spec->at_ms * 1000000);
}

void BurstHandler::handleMessage(Message* msg) {
  const auto* spec = static_cast<const EventSpec*>(msg->obj);
  const int64_t due = monotonicNs();  // all due at once
  for (int64_t i = 0; i < spec->count; ++i) {
    Message* item = obtainMessage(static_cast<int32_t>(i), spec->index);
    item->callback = &burstWork;
    item->obj = msg->obj;
    sendMessageAtTime(item, due);
  }
}

void BurstHandler::onDispatched(Message* msg) {
  if (msg->callback == nullptr) {  // the posting message
    ++loop_.stats().burst_posts;
    loop_.logIfSlow(msg, kBurstTarget, nullptr);
    loop_.finishOne();
    return;
  }
  loop_.log().write({
      {"event", "delivery"},
      {"target", kBurstTarget},
      {"callback", kBurstCallback},
      {"what", msg->what},
      {"burst", msg->arg1},
      {"due_ns", msg->when_ns},
      {"start_ns", msg->dispatch_start_ns},
      {"end_ns", msg->dispatch_end_ns},
      {"lag_ns", msg->dispatch_start_ns - msg->when_ns},
      {"duration_ns", msg->dispatch_end_ns - msg->dispatch_start_ns},
      {"pid", static_cast<int>(getpid())},
      {"tid", static_cast<int>(loop_.tid())},
      {"thread", loop_.index()},
  });
  ++loop_.stats().burst_items;
  loop_.finishOne();
}

// ---- AsyncHandler ----------------------------------------------------------

AsyncHandler::AsyncHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {
  setAsynchronous(true);
}

AsyncHandler::~AsyncHandler() = default;

void AsyncHandler::postAsync(int64_t k) {
  const Config& cfg = loop_.config();
  if (cfg.async_period_ns <= 0) return;
  const int64_t when = cfg.t0_ns + k * cfg.async_period_ns;
  if (when >= cfg.end_ns) return;
  Message* msg = obtainMessage(static_cast<int32_t>(k & 0x7fffffff), kWorkUs);
  msg->arg2 = k;
  sendMessageAtTime(msg, when);
}

void AsyncHandler::handleMessage(Message* msg) {
  busyWork(static_cast<int64_t>(msg->arg1) * 1000);
  loop_.work().catchUp(monotonicNs());
  postAsync(msg->arg2 + 1);
}

void AsyncHandler::onDispatched(Message* msg) {
  ++loop_.stats().async_background;
  loop_.logIfSlow(msg, kAsyncTarget, nullptr);
}

// ---- ForkHandler -----------------------------------------------------------

ForkHandler::ForkHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

ForkHandler::~ForkHandler() = default;

void ForkHandler::postFork() {
  const Config& cfg = loop_.config();
  sendMessageAtTime(obtainMessage(0), cfg.t0_ns + cfg.fork_at_ns);
}

void ForkHandler::handleMessage(Message* msg) {
  if (msg->what == 1) {  // in the child, at --duration
    loop_.looper().quit();
    return;
  }
  dispatches_at_fork_ = loop_.looper().dispatchCount();
  child_ = fork();
  fork_errno_ = child_ < 0 ? errno : 0;
  fork_ns_ = monotonicNs();
  if (child_ != 0) return;
  loop_.noteForked();
  // The child: this thread alone. The main thread, which would quit the
  // loop and take signals, is not here.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  const Config& cfg = loop_.config();
  sendMessageAtTime(obtainMessage(1), cfg.end_ns);
}

uint64_t ForkHandler::childDispatches() const {
  return loop_.looper().dispatchCount() - dispatches_at_fork_;
}

void ForkHandler::onDispatched(Message* msg) {
  if (msg->what != 0) return;
  const int pid = static_cast<int>(getpid());
  nlohmann::json line = {{"event", child_ == 0 ? "forked" : "fork"},
                         {"pid", pid},
                         {"tid", static_cast<int>(gettid())},
                         {"thread", loop_.index()},
                         {"start_ns", msg->dispatch_start_ns},
                         {"fork_ns", fork_ns_},
                         {"end_ns", msg->dispatch_end_ns},
                         {"dispatches_before", dispatches_at_fork_}};
  if (child_ == 0) {
    line["parent_pid"] = static_cast<int>(getppid());
  } else {
    line["child_pid"] = static_cast<int>(child_);
    if (child_ < 0) line["error"] = std::strerror(fork_errno_);
  }
  loop_.log().write(line);
}

// ---- LoopThread ------------------------------------------------------------

LoopThread::LoopThread(int index, const Config& config, GroundTruthLog& log,
                       bool needs_lock_holder)
    : index_(index),
      name_("refapp-loop" + std::to_string(index)),
      config_(config),
      log_(log),
      looper_(name_),
      work_("work" + std::to_string(index), *this),
      trigger_("trigger" + std::to_string(index), *this),
      stall_("stall" + std::to_string(index), *this),
      nested_("nested" + std::to_string(index), *this),
      idle_setup_("idle-setup" + std::to_string(index), *this),
      barrier_("barrier" + std::to_string(index), *this),
      barrier_watch_("barrier-watch" + std::to_string(index), *this),
      frame_("frame" + std::to_string(index), *this),
      burst_("burst" + std::to_string(index), *this),
      async_("async" + std::to_string(index), *this),
      fork_("fork" + std::to_string(index), *this) {
  std::seed_seq seq{static_cast<uint32_t>(config.seed),
                    static_cast<uint32_t>(config.seed >> 32),
                    static_cast<uint32_t>(index)};
  rng_.seed(seq);
  if (needs_lock_holder) {
    holder_ =
        std::make_unique<LockHolder>("refapp-holder" + std::to_string(index));
  }
}

LoopThread::~LoopThread() {
  if (thread_.joinable()) {
    quit();
    thread_.join();
  }
}

namespace {

// Dispatches of a scenario event's messages, and the finishOne() calls they
// make (an idle stall also finishes when its idle handler ran).
int64_t eventDispatches(const EventSpec& e, const Config& cfg) {
  switch (e.kind) {
    case EventKind::kIdleStall:
      return 1;
    case EventKind::kBarrier:
      return 2 + (e.ms * 1000000 > cfg.barrier_report_ns ? 1 : 0);
    case EventKind::kBarrierLeak:
      return 2;  // post + watch
    case EventKind::kBurst:
      return 1 + e.count;
    case EventKind::kBarrierError:
      return 1;
  }
  return 0;
}

int64_t eventFinishes(const EventSpec& e, const Config& cfg) {
  return eventDispatches(e, cfg) + (e.kind == EventKind::kIdleStall ? 1 : 0);
}

}  // namespace

int64_t LoopThread::plannedFinite() const {
  int64_t n = static_cast<int64_t>(stalls_.size());
  if (config_.messages_mode) n += config_.messages;
  if (index_ == 0) n += static_cast<int64_t>(config_.nested) * 4;
  for (const EventSpec& e : events_) n += eventDispatches(e, config_);
  return n;
}

void LoopThread::start(std::function<void()> on_exit) {
  std::promise<void> started;
  std::future<void> running = started.get_future();
  thread_ = std::thread([this, on_exit = std::move(on_exit),
                         started = std::move(started)]() mutable {
    pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
    tid_ = gettid();
    Looper::prepare(&looper_);
    started.set_value();
    run(std::move(on_exit));
  });
  running.get();
}

void LoopThread::run(std::function<void()> on_exit) {
  looper_.loop();
  if (fork_.inChild()) exitForkedChild();
  if (on_exit) on_exit();
}

void LoopThread::exitForkedChild() {
  const uint64_t n = fork_.childDispatches();
  const int pid = static_cast<int>(getpid());
  log_.write({{"event", "summary"},
              {"pid", pid},
              {"reason", "forked-child"},
              {"started", true},
              {"t0_ns", config_.t0_ns},
              {"end_ns", monotonicNs()},
              {"dispatches", n},
              {"threads",
               {{{"index", index_},
                 {"tid", pid},
                 {"name", name_},
                 {"dispatches", n}}}}});
  // The parent's objects are copies whose threads do not exist here.
  _exit(0);
}

void LoopThread::schedule() {
  // Outer nested messages are finished by their own onDispatched(); their
  // inner messages are not counted separately.
  remaining_ = static_cast<int64_t>(stalls_.size());
  if (config_.messages_mode) remaining_ += config_.messages;
  if (index_ == 0) remaining_ += config_.nested;
  for (const EventSpec& e : events_) remaining_ += eventFinishes(e, config_);
  for (int i = 0; i < config_.idle_handlers; ++i) {
    cheap_idle_.push_back(std::make_unique<CheapIdleHandler>(
        "cheap-idle" + std::to_string(index_) + "." + std::to_string(i)));
    looper_.queue().addIdleHandler(cheap_idle_.back().get());
  }
  if (config_.messages_mode && remaining_ == 0) {
    quit();
    return;
  }
  if (config_.messages_mode) {
    trigger_.postTrigger(0);
  } else {
    work_.postWork(0);
  }
  for (const StallSpec& s : stalls_) stall_.postStall(&s);
  if (index_ == 0) {
    for (int i = 0; i < config_.nested; ++i) nested_.postNested(i);
  }
  for (const EventSpec& e : events_) {
    switch (e.kind) {
      case EventKind::kIdleStall:
        slow_idle_.push_back(std::make_unique<SlowIdleHandler>(*this, &e));
        idle_setup_.postSetup(slow_idle_.back().get());
        break;
      case EventKind::kBarrier:
      case EventKind::kBarrierLeak:
      case EventKind::kBarrierError:
        barrier_.postEvent(&e);
        break;
      case EventKind::kBurst:
        burst_.postBurst(&e);
        break;
    }
  }
  if (!config_.messages_mode) {
    async_.postAsync(0);
    if (index_ == 0) frame_.postSchedule(0);
  }
  if (index_ == 0 && config_.fork_at_ns >= 0) fork_.postFork();
}

void LoopThread::logBarrierOp(const MessageQueue::BarrierOp& op,
                              const char* source, int index) {
  const int pid = static_cast<int>(getpid());
  if (!op.remove) {
    log_.write({{"event", "barrier_post"},
                {"token", op.token},
                {"queue", hexAddress(op.queue)},
                {"posted_ns", op.posted_ns},
                {"when_ns", op.when_ns},
                {"source", source},
                {"index", index},
                {"tid", static_cast<int>(tid_)},
                {"pid", pid},
                {"thread", index_}});
  } else if (op.ok) {
    last_removed_token_ = op.token;
    log_.write({{"event", "barrier_remove"},
                {"token", op.token},
                {"queue", hexAddress(op.queue)},
                {"removed_ns", op.start_ns},
                {"posted_ns", op.posted_ns},
                {"lifetime_ns", op.start_ns - op.posted_ns},
                {"source", source},
                {"index", index},
                {"tid", static_cast<int>(tid_)},
                {"pid", pid},
                {"thread", index_}});
  } else {
    log_.write({{"event", "barrier_error"},
                {"error", "unknown token"},
                {"token", op.token},
                {"queue", hexAddress(op.queue)},
                {"at_ns", op.start_ns},
                {"source", source},
                {"index", index},
                {"tid", static_cast<int>(tid_)},
                {"pid", pid},
                {"thread", index_}});
  }
}

void LoopThread::noteBarrier(int index, int token, bool leak) {
  barriers_.push_back({index, token, leak});
}

void LoopThread::logLeaks(int64_t now_ns) {
  for (const ScenarioBarrier& b : barriers_) {
    if (!b.leak) continue;
    const MessageQueue::Backlog bl = looper_.queue().backlog(b.token, now_ns);
    if (!bl.present) continue;
    log_.write({{"event", "barrier_leak"},
                {"token", b.token},
                {"index", b.index},
                {"queue", hexAddress(&looper_.queue())},
                {"posted_ns", bl.posted_ns},
                {"when_ns", bl.when_ns},
                {"at_ns", now_ns},
                {"held_ns", now_ns - bl.posted_ns},
                {"at_head", bl.at_head},
                {"sync_waiting", bl.sync_due},
                {"oldest_sync_due_ns",
                 bl.sync_due > 0 ? nlohmann::json(bl.oldest_sync_due_ns)
                                 : nlohmann::json(nullptr)},
                {"sync_queued", bl.sync_queued},
                {"async_queued", bl.async_queued},
                {"tid", static_cast<int>(tid_)},
                {"pid", static_cast<int>(getpid())},
                {"thread", index_}});
  }
}

void LoopThread::finishOne() {
  if (--remaining_ == 0 && config_.messages_mode) quit();
}

void LoopThread::logFrame(int64_t k, int64_t vsync_ns, int64_t start_ns,
                          int64_t end_ns, const int64_t (&phase_ns)[4][2]) {
  nlohmann::json phases = nlohmann::json::array();
  for (auto [type, name] : {std::pair{FrameHandler::kCallbackInput, "input"},
                            {FrameHandler::kCallbackAnimation, "animation"},
                            {FrameHandler::kCallbackTraversal, "traversal"}})
    phases.push_back({{"type", name},
                      {"start_ns", phase_ns[type][0]},
                      {"end_ns", phase_ns[type][1]}});
  log_.write({{"event", "frame"},
              {"index", k},
              {"vsync_ns", vsync_ns},
              {"phases", std::move(phases)},
              {"start_ns", start_ns},
              {"end_ns", end_ns},
              {"duration_ns", end_ns - start_ns},
              {"tid", static_cast<int>(tid_)},
              {"pid", static_cast<int>(getpid())},
              {"thread", index_}});
}

void LoopThread::logIfSlow(const Message* msg, const char* target,
                           const char* callback) {
  const int64_t duration = msg->dispatch_end_ns - msg->dispatch_start_ns;
  if (config_.log_slow_ns <= 0 || duration < config_.log_slow_ns) return;
  log_.write({{"event", "slow"},
              {"target", target},
              {"callback", callback != nullptr ? nlohmann::json(callback)
                                               : nlohmann::json(nullptr)},
              {"what", msg->what},
              {"arg1", msg->arg1},
              {"start_ns", msg->dispatch_start_ns},
              {"end_ns", msg->dispatch_end_ns},
              {"duration_ns", duration},
              {"when_ns", msg->when_ns},
              {"depth", looper_.depth()},
              {"pid", static_cast<int>(getpid())},
              {"tid", static_cast<int>(tid_)},
              {"thread", index_}});
}

int64_t LoopThread::cpuNs() {
  clockid_t clock;
  struct timespec ts;
  if (!thread_.joinable() ||
      pthread_getcpuclockid(thread_.native_handle(), &clock) != 0 ||
      clock_gettime(clock, &ts) != 0) {
    return 0;
  }
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void LoopThread::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace refapp
