#include "scenario.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <utility>

namespace refapp {

namespace {

const char* const kStallTarget = "refapp::StallHandler";
const char* const kNestedTarget = "refapp::NestedHandler";
const char* const kNestedCallback = "refapp::nestedInnerWork";
const char* const kWorkTarget = "refapp::WorkHandler";
const char* const kTriggerTarget = "refapp::TriggerHandler";

// CLOCK_THREAD_CPUTIME_ID: a syscall, so only stall dispatches read it.
int64_t threadCpuNs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
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

// ---- GroundTruthLog --------------------------------------------------------

GroundTruthLog::~GroundTruthLog() {
  if (file_ != nullptr) std::fclose(file_);
}

bool GroundTruthLog::open(const std::string& path, std::string* error) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    *error = "cannot open log file " + path;
    return false;
  }
  return true;
}

void GroundTruthLog::write(const nlohmann::json& line) {
  if (file_ == nullptr) return;
  std::string text = line.dump();
  text += '\n';
  std::lock_guard<std::mutex> lk(mu_);
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
}

// ---- WorkHandler -----------------------------------------------------------

WorkHandler::WorkHandler(std::string name, LoopThread& loop)
    : Handler(std::move(name), &loop.looper()), loop_(loop) {}

WorkHandler::~WorkHandler() = default;

void WorkHandler::postWork(int64_t k) {
  const Config& cfg = loop_.config();
  if (cfg.period_ns <= 0) return;
  const int64_t when = cfg.t0_ns + k * cfg.period_ns;
  if (when >= cfg.end_ns) return;
  std::uniform_int_distribution<int32_t> us(100, 2000);
  Message* msg =
      obtainMessage(static_cast<int32_t>(k & 0x7fffffff), us(loop_.rng()));
  msg->arg2 = k;
  sendMessageAtTime(msg, when);
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
      nested_("nested" + std::to_string(index), *this) {
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

int64_t LoopThread::plannedFinite() const {
  int64_t n = static_cast<int64_t>(stalls_.size());
  if (config_.messages_mode) n += config_.messages;
  if (index_ == 0) n += static_cast<int64_t>(config_.nested) * 4;
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
  if (on_exit) on_exit();
}

void LoopThread::schedule() {
  // Outer nested messages are finished by their own onDispatched(); their
  // inner messages are not counted separately.
  remaining_ = static_cast<int64_t>(stalls_.size());
  if (config_.messages_mode) remaining_ += config_.messages;
  if (index_ == 0) remaining_ += config_.nested;
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
}

void LoopThread::finishOne() {
  if (--remaining_ == 0 && config_.messages_mode) quit();
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

void LoopThread::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace refapp
