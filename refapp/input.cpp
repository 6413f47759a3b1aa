#include "input.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>

#include "stalls.h"

namespace refapp {

namespace {

constexpr int kChannelBufferBytes = 32 * 1024;  // AOSP's SOCKET_BUFFER_SIZE
constexpr int64_t kDrainNs = 2000000000;        // wait for FINISHED at the end
constexpr int32_t kKeycodeDpadDown = 20;
constexpr int32_t kKeycodeEnter = 66;
const char* const kInputTarget = "refapp::InputHandler";

const char* typeName(uint32_t type) {
  return type == InputMessage::kKey ? "key" : "motion";
}

bool setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// ---- The dispatcher process ------------------------------------------------

volatile sig_atomic_t g_dispatcher_stop = 0;

void onDispatcherSignal(int /*sig*/) { g_dispatcher_stop = 1; }

// One event of the schedule.
struct ScheduledEvent {
  int64_t when_ns = 0;  // eventTime: when it is due
  bool key = false;
  bool tap = false;
  int32_t action = kActionMove;  // MOTION: DOWN first, UP last, else MOVE
  int64_t index = 0;             // stream index k (taps: tap index)
};

// The stream (--input-rate: event k due at start + k/rate, absolute times,
// so no drift) merged with the taps (KEY), in time order (a tap first on a
// tie).
class Schedule {
 public:
  Schedule(const InputConfig& cfg, int64_t t0_ns) : cfg_(cfg), t0_ns_(t0_ns) {
    if (cfg.rate > 0) {
      start_ns_ = t0_ns + cfg.start_ms * 1000000;
      end_ns_ = start_ns_ + cfg.duration_ms * 1000000;
      // The stream's last MOTION event (the UP) and its size.
      while (streamTime(count_) < end_ns_) ++count_;
      last_motion_ = -1;
      for (int64_t k = count_ - 1; k >= 0; --k) {
        if (!streamIsKey(k)) {
          last_motion_ = k;
          break;
        }
      }
    }
  }

  int64_t total() const {
    return count_ + static_cast<int64_t>(cfg_.taps.size());
  }

  bool next(ScheduledEvent* ev) {
    const bool have_stream = k_ < count_;
    const bool have_tap = tap_ < cfg_.taps.size();
    if (!have_stream && !have_tap) return false;
    const int64_t tap_time = have_tap ? t0_ns_ + cfg_.taps[tap_] * 1000000 : 0;
    if (have_tap && (!have_stream || tap_time <= streamTime(k_))) {
      *ev = ScheduledEvent{};
      ev->when_ns = tap_time;
      ev->key = true;
      ev->tap = true;
      ev->action = kActionDown;
      ev->index = static_cast<int64_t>(tap_++);
      return true;
    }
    *ev = ScheduledEvent{};
    ev->when_ns = streamTime(k_);
    ev->key = streamIsKey(k_);
    ev->index = k_;
    if (ev->key) {
      ev->action = kActionDown;
    } else if (!seen_motion_) {
      ev->action = kActionDown;
      seen_motion_ = true;
      down_ns_ = ev->when_ns;
    } else if (k_ == last_motion_) {
      ev->action = kActionUp;
    } else {
      ev->action = kActionMove;
    }
    ++k_;
    return true;
  }

  int64_t gestureDownNs() const { return down_ns_; }

 private:
  int64_t streamTime(int64_t k) const {
    return start_ns_ + static_cast<int64_t>(std::llround(
                           static_cast<double>(k) * 1e9 / cfg_.rate));
  }
  bool streamIsKey(int64_t k) const {
    switch (cfg_.type) {
      case InputType::kKey:
        return true;
      case InputType::kMotion:
        return false;
      case InputType::kMixed:
        return k % 10 == 9;  // every 10th: the 10th, 20th, ...
    }
    return false;
  }

  const InputConfig& cfg_;
  int64_t t0_ns_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  int64_t count_ = 0;
  int64_t last_motion_ = -1;
  int64_t k_ = 0;
  size_t tap_ = 0;
  bool seen_motion_ = false;
  int64_t down_ns_ = 0;
};

// Fills msg (zeroed first: padding included) for event ev with sequence
// number seq.
void buildMessage(InputMessage* msg, const ScheduledEvent& ev, uint32_t seq,
                  int pointers, int64_t down_ns) {
  std::memset(msg, 0, sizeof *msg);
  msg->header.seq = seq;
  if (ev.key) {
    msg->header.type = InputMessage::kKey;
    InputMessage::Body::Key& k = msg->body.key;
    k.eventId = static_cast<int32_t>(seq);
    k.eventTime = ev.when_ns;
    k.deviceId = 1;
    k.source = kSourceKeyboard;
    k.displayId = 0;
    k.action = ev.action;
    k.keyCode = ev.tap ? kKeycodeEnter : kKeycodeDpadDown;
    k.scanCode = ev.tap ? 28 : 108;  // KEY_ENTER, KEY_DOWN
    k.downTime = ev.when_ns;
    return;
  }
  msg->header.type = InputMessage::kMotion;
  InputMessage::Body::Motion& m = msg->body.motion;
  m.eventId = static_cast<int32_t>(seq);
  m.pointerCount = static_cast<uint32_t>(pointers);
  m.eventTime = ev.when_ns;
  m.deviceId = 2;
  m.source = kSourceTouchscreen;
  m.displayId = 0;
  m.action = ev.action;
  m.downTime = down_ns;
  m.dsdx = 1;
  m.dsdy = 1;
  m.xPrecision = 1;
  m.yPrecision = 1;
  m.xCursorPosition = std::numeric_limits<float>::quiet_NaN();
  m.yCursorPosition = std::numeric_limits<float>::quiet_NaN();
  m.dsdxRaw = 1;
  m.dsdyRaw = 1;
  // A vertical swipe: pointer i at x = 100 + 100 i, y moving 1 px per event.
  const float y = 200.0f + static_cast<float>(ev.index % 2000);
  for (int i = 0; i < pointers; ++i) {
    InputMessage::Pointer& p = m.pointers[i];
    p.properties.id = i;
    p.properties.toolType = 1;  // finger
    p.coords.bits = 0x7;        // AXIS_X, AXIS_Y, AXIS_PRESSURE
    p.coords.values[0] = 100.0f + 100.0f * static_cast<float>(i);
    p.coords.values[1] = y;
    p.coords.values[2] = 1.0f;
  }
}

struct FinishRecord {
  uint32_t seq;
  bool handled;
  int64_t consume_time_ns;
  int64_t received_ns;
  int64_t runq_ns;  // run-queue wait around the recvfrom and the clock read
};

// The dispatcher process's run: sends the schedule's events to the app,
// reads its FINISHED replies, and logs both (input_send, input_finish_recv)
// and, at the end, its summary.
class Dispatcher {
 public:
  Dispatcher(const InputConfig& cfg, GroundTruthLog& log, int fd, pid_t app_pid,
             InputMessage* msg, InputMessage* in)
      : cfg_(cfg),
        log_(log),
        fd_(fd),
        app_pid_(app_pid),
        msg_(*msg),
        in_(*in) {}

  // The scenario start, once the app knows it; false (the reason set) when
  // it never comes (EOF: the app never started, or a signal).
  bool waitForStart(int start_fd);
  // Sends every event and waits for their replies (or EOF, a signal, the
  // drain timeout).
  void run();
  void logSummary();

 private:
  enum class SendResult {
    kSent,    // on to the next event
    kRetry,   // EINTR: send again
    kFull,    // EAGAIN: wait for POLLOUT, then send again
    kClosed,  // EPIPE / ECONNRESET: the app closed its end
  };
  SendResult sendPending();
  bool nextTimeout(int64_t* timeout_ns);
  void waitAndRead(int64_t timeout_ns);
  void readFinishes();

  const InputConfig& cfg_;
  GroundTruthLog& log_;
  const int fd_;
  const pid_t app_pid_;
  const int pid_ = static_cast<int>(getpid());
  uint64_t sent_ = 0;
  uint64_t finished_ = 0;
  uint64_t eagain_ = 0;         // sendto calls that returned EAGAIN
  uint64_t eagain_events_ = 0;  // events that met at least one EAGAIN
  uint64_t invalid_ = 0;
  uint64_t timelines_ = 0;   // TIMELINE replies (--input-timeline)
  int64_t max_late_ns_ = 0;  // max sent_ns - event_time_ns
  int64_t scheduled_ = 0;
  const char* reason_ = "done";
  std::unordered_set<uint32_t> outstanding_;
  // The run's state.
  std::optional<Schedule> schedule_;
  ScheduledEvent ev_;
  bool have_next_ = false;
  uint32_t seq_ = 1;
  bool pending_ = false;  // built, not sent yet (EAGAIN)
  bool pending_eagain_ = false;
  size_t size_ = 0;
  InputMessage& msg_;
  InputMessage& in_;
  std::vector<FinishRecord> finishes_;
  int64_t drain_deadline_ = -1;
  bool eof_ = false;
};

void Dispatcher::logSummary() {
  log_.write({{"event", "input_dispatcher_summary"},
              {"pid", pid_},
              {"app_pid", static_cast<int>(app_pid_)},
              {"sent", sent_},
              {"finished", finished_},
              {"eagain", eagain_},
              {"eagain_events", eagain_events_},
              {"invalid", invalid_},
              {"timelines", timelines_},
              {"outstanding", outstanding_.size()},
              {"scheduled", scheduled_},
              {"max_late_ns", max_late_ns_},
              {"reason", reason_}});
}

bool Dispatcher::waitForStart(int start_fd) {
  int64_t t0_ns = 0;
  char* p = reinterpret_cast<char*>(&t0_ns);
  size_t got = 0;
  while (got < sizeof t0_ns) {
    const ssize_t n = read(start_fd, p + got, sizeof t0_ns - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR && !g_dispatcher_stop) continue;
    break;
  }
  close(start_fd);
  if (got != sizeof t0_ns) {
    reason_ = g_dispatcher_stop ? "signal" : "not_started";
    return false;
  }
  schedule_.emplace(cfg_, t0_ns);
  scheduled_ = schedule_->total();
  have_next_ = schedule_->next(&ev_);
  return true;
}

void Dispatcher::run() {
  while (!eof_) {
    if (g_dispatcher_stop) {
      reason_ = "signal";
      break;
    }
    if (have_next_ && (pending_ || monotonicNs() >= ev_.when_ns)) {
      const SendResult r = sendPending();
      if (r == SendResult::kSent || r == SendResult::kRetry) continue;
      if (r == SendResult::kClosed) {
        reason_ = "eof";
        eof_ = true;
        break;
      }
    }
    int64_t timeout_ns = -1;
    if (!nextTimeout(&timeout_ns)) break;
    waitAndRead(timeout_ns);
  }
}

// Sends the next event (built once, kept while the app's buffer is full).
Dispatcher::SendResult Dispatcher::sendPending() {
  if (!pending_) {
    buildMessage(&msg_, ev_, seq_, cfg_.pointers, schedule_->gestureDownNs());
    size_ = wireSize(msg_);
    pending_ = true;
  }
  const int64_t runq0 = runDelayNs();
  const int64_t sent_ns = monotonicNs();
  const ssize_t n =
      sendto(fd_, &msg_, size_, MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
  const int64_t sent_runq_ns = runDelayNs() - runq0;
  if (n == static_cast<ssize_t>(size_)) {
    log_.write({{"event", "input_send"},
                {"pid", pid_},
                {"seq", seq_},
                {"type", typeName(msg_.header.type)},
                {"pointers", ev_.key ? 0 : cfg_.pointers},
                {"size", size_},
                {"event_time_ns", ev_.when_ns},
                {"sent_ns", sent_ns},
                {"sent_runq_ns", sent_runq_ns},
                {"action", ev_.action},
                {"tap", ev_.tap}});
    max_late_ns_ = std::max(max_late_ns_, sent_ns - ev_.when_ns);
    outstanding_.insert(seq_);
    ++sent_;
    ++seq_;
    pending_ = false;
    pending_eagain_ = false;
    have_next_ = schedule_->next(&ev_);
    return SendResult::kSent;
  }
  if (n < 0 && errno == EINTR) return SendResult::kRetry;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    // The app's receive side is full: wait for POLLOUT, then retry.
    ++eagain_;
    if (!pending_eagain_) ++eagain_events_;
    pending_eagain_ = true;
    return SendResult::kFull;
  }
  return SendResult::kClosed;
}

// How long to wait: until the next event is due, for POLLOUT (-1: the
// app's buffer was full), or at the end for the outstanding FINISHED
// replies. False when the run is over: every reply came, or the drain
// timed out.
bool Dispatcher::nextTimeout(int64_t* timeout_ns) {
  const int64_t now = monotonicNs();
  if (!have_next_) {
    if (outstanding_.empty()) return false;
    if (drain_deadline_ < 0) drain_deadline_ = now + kDrainNs;
    if (now >= drain_deadline_) {
      reason_ = "timeout";
      return false;
    }
    *timeout_ns = drain_deadline_ - now;
  } else if (!pending_) {
    *timeout_ns = std::max<int64_t>(ev_.when_ns - now, 0);
  }
  return true;
}

// Waits up to timeout_ns (-1: no limit), reading replies whenever they
// arrive. POLLOUT: the pending event is retried at the top of the loop.
void Dispatcher::waitAndRead(int64_t timeout_ns) {
  struct pollfd pfd = {
      fd_, static_cast<short>(POLLIN | (pending_ ? POLLOUT : 0)), 0};
  struct timespec ts;
  if (timeout_ns >= 0) {
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
  }
  const int r = ppoll(&pfd, 1, timeout_ns >= 0 ? &ts : nullptr, nullptr);
  if (r <= 0) return;  // due, EINTR (stop flag)
  if ((pfd.revents & POLLIN) != 0) {
    readFinishes();
    if (eof_) reason_ = "eof";
  } else if ((pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
    reason_ = "eof";
    eof_ = true;
  }
}

// Reads every FINISHED reply waiting (EOF sets eof_), then logs them.
void Dispatcher::readFinishes() {
  for (;;) {
    const int64_t runq0 = runDelayNs();
    const ssize_t n = recvfrom(fd_, &in_, sizeof(InputMessage), MSG_DONTWAIT,
                               nullptr, nullptr);
    const int64_t received_ns = monotonicNs();
    const int64_t runq_ns = runDelayNs() - runq0;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) eof_ = true;
      break;
    }
    if (n == 0) {
      eof_ = true;
      break;
    }
    if (n >= 8 && in_.header.type == InputMessage::kTimeline &&
        static_cast<size_t>(n) == kTimelineWireSize) {
      ++timelines_;  // --input-timeline: the app logs them
      continue;
    }
    if (n < 8 || in_.header.type != InputMessage::kFinished ||
        static_cast<size_t>(n) != wireSize(in_)) {
      ++invalid_;
      continue;
    }
    finishes_.push_back({in_.header.seq, in_.body.finished.handled != 0,
                         in_.body.finished.consumeTime, received_ns, runq_ns});
  }
  for (const FinishRecord& f : finishes_) {
    log_.write({{"event", "input_finish_recv"},
                {"pid", pid_},
                {"seq", f.seq},
                {"handled", f.handled},
                {"consume_time_ns", f.consume_time_ns},
                {"finish_received_ns", f.received_ns},
                {"finish_received_runq_ns", f.runq_ns}});
    outstanding_.erase(f.seq);
    ++finished_;
  }
  finishes_.clear();
}

[[noreturn]] REFAPP_NOINLINE void runDispatcher(const InputConfig& cfg,
                                                GroundTruthLog& log, int fd,
                                                int start_fd, pid_t app_pid) {
  static InputMessage msg;
  static InputMessage in;
  Dispatcher dispatcher(cfg, log, fd, app_pid, &msg, &in);
  if (dispatcher.waitForStart(start_fd)) dispatcher.run();
  dispatcher.logSummary();
  _exit(0);
}

}  // namespace

const char* inputTypeName(InputType type) {
  switch (type) {
    case InputType::kMotion:
      return "motion";
    case InputType::kKey:
      return "key";
    case InputType::kMixed:
      return "mixed";
  }
  return "?";
}

// ---- The channel (app side) ------------------------------------------------

bool openInputChannel(const InputConfig& config, GroundTruthLog& log,
                      InputChannel* ch, std::string* error) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    *error = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  const int size = kChannelBufferBytes;
  for (int fd : fds) {
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size) != 0 ||
        !setNonBlocking(fd)) {
      *error = std::string("input channel setup: ") + std::strerror(errno);
      close(fds[0]);
      close(fds[1]);
      return false;
    }
  }
  ch->dispatcher_fd = fds[0];
  ch->app_fd = fds[1];
  struct stat st;
  if (fstat(ch->app_fd, &st) == 0) ch->app_inode = st.st_ino;
  if (fstat(ch->dispatcher_fd, &st) == 0) ch->dispatcher_inode = st.st_ino;
  socklen_t len = sizeof ch->sndbuf;
  getsockopt(ch->app_fd, SOL_SOCKET, SO_SNDBUF, &ch->sndbuf, &len);
  len = sizeof ch->rcvbuf;
  getsockopt(ch->app_fd, SOL_SOCKET, SO_RCVBUF, &ch->rcvbuf, &len);

  int start_pipe[2];
  if (pipe2(start_pipe, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t app_pid = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    // The dispatcher: never returns into the app's main.
    close(ch->app_fd);
    close(start_pipe[1]);
    struct sigaction sa = {};
    sa.sa_handler = onDispatcherSignal;  // no SA_RESTART: waits return EINTR
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGINT, SIG_IGN);  // Ctrl-C: the app quits and closes its end
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != app_pid) _exit(0);  // the app is gone already
    prctl(PR_SET_NAME, "refapp-dispatch", 0, 0, 0);
    // Send close to the due time (the default 50 us timer slack would add
    // to every event's latency).
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    runDispatcher(config, log, ch->dispatcher_fd, start_pipe[0], app_pid);
  }
  close(ch->dispatcher_fd);
  close(start_pipe[0]);
  ch->start_fd = start_pipe[1];
  ch->dispatcher_pid = pid;
  return true;
}

void startInputDispatcher(InputChannel* ch, int64_t t0_ns) {
  if (ch->start_fd < 0) return;
  const char* p = reinterpret_cast<const char*>(&t0_ns);
  size_t done = 0;
  while (done < sizeof t0_ns) {
    const ssize_t n = write(ch->start_fd, p + done, sizeof t0_ns - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    done += static_cast<size_t>(n);
  }
  close(ch->start_fd);
  ch->start_fd = -1;
}

int closeInputChannel(InputChannel* ch) {
  if (ch->app_fd >= 0) close(ch->app_fd);
  ch->app_fd = -1;
  if (ch->start_fd >= 0) close(ch->start_fd);  // never started
  ch->start_fd = -1;
  if (ch->dispatcher_pid <= 0 || ch->reaped) return -1;
  const pid_t pid = ch->dispatcher_pid;
  ch->reaped = true;
  int status = 0;
  const int64_t start = monotonicNs();
  bool termed = false;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    const int64_t waited = monotonicNs() - start;
    if (!termed && waited > 3000000000LL) {
      kill(pid, SIGTERM);
      termed = true;
    } else if (waited > 5000000000LL) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(1000);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// ---- InputHandler ----------------------------------------------------------

InputHandler::InputHandler(LoopThread& loop, int fd,
                           const std::vector<InputStallSpec>& stalls,
                           bool timeline)
    : Handler("InputHandler", &loop.looper()), loop_(loop), fd_(fd) {
  for (const InputStallSpec& s : stalls) stall_ms_[s.seq] = s.ms;
  if (timeline) timeline_ = std::make_unique<TimelineSender>(loop, fd);
}

InputHandler::~InputHandler() = default;

void InputHandler::handleMessage(Message* msg) {
  const uint32_t seq = static_cast<uint32_t>(msg->what);
  stall_requested_ms_ = 0;
  const auto it = stall_ms_.find(seq);
  if (it != stall_ms_.end()) {
    stall_requested_ms_ = it->second;
    stall_start_ns_ = monotonicNs();
    busyStall(it->second * 1000000);
    stall_end_ns_ = monotonicNs();
  } else {
    busyWork(kWorkNs);
  }
  // FINISHED {seq, handled, consumeTime = when the event was read}: the
  // last thing of the dispatch (a full buffer: wait for room, retry).
  InputMessage fin;
  std::memset(&fin, 0, sizeof fin);
  fin.header.type = InputMessage::kFinished;
  fin.header.seq = seq;
  fin.body.finished.handled = 1;
  fin.body.finished.consumeTime = msg->arg2;
  for (int tries = 0;; ++tries) {
    const int64_t runq0 = runDelayNs();
    finished_ns_ = monotonicNs();
    const ssize_t n = sendto(fd_, &fin, kFinishedWireSize,
                             MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
    finished_runq_ns_ = runDelayNs() - runq0;
    finish_errno_ = n < 0 ? errno : 0;
    if (n >= 0 || finish_errno_ == EINTR) {
      if (n < 0) continue;
      if (timeline_) timeline_->schedule(seq, finished_ns_);
      break;
    }
    if (finish_errno_ != EAGAIN || tries >= 100) break;
    ++finish_eagain_;
    struct pollfd pfd = {fd_, POLLOUT, 0};
    poll(&pfd, 1, 100);
  }
}

void InputHandler::onDispatched(Message* msg) {
  const int pid = static_cast<int>(getpid());
  const int tid = static_cast<int>(loop_.tid());
  ++dispatches_;
  if (stall_requested_ms_ > 0) {
    loop_.log().write({{"event", "input_stall"},
                       {"seq", msg->what},
                       {"requested_ms", stall_requested_ms_},
                       {"function", "refapp::busyStall"},
                       {"start_ns", stall_start_ns_},
                       {"end_ns", stall_end_ns_},
                       {"duration_ns", stall_end_ns_ - stall_start_ns_},
                       {"dispatch_start_ns", msg->dispatch_start_ns},
                       {"dispatch_end_ns", msg->dispatch_end_ns},
                       {"target", kInputTarget},
                       {"pid", pid},
                       {"tid", tid},
                       {"thread", loop_.index()}});
  }
  nlohmann::json line = {
      {"event", "input_finish"},
      {"pid", pid},
      {"tid", tid},
      {"seq", msg->what},
      {"type", typeName(static_cast<uint32_t>(msg->arg1))},
      {"handled", true},
      {"consume_time_ns", msg->arg2},
      {"finished_ns", finished_ns_},
      {"finished_runq_ns", finished_runq_ns_},
      {"dispatch_start_ns", msg->dispatch_start_ns},
      {"dispatch_start_runq_ns", msg->dispatch_start_runq_ns},
      {"dispatch_end_ns", msg->dispatch_end_ns},
      {"when_ns", msg->when_ns}};
  if (finish_errno_ != 0) {
    line["error"] = std::strerror(finish_errno_);
    ++finish_errors_;
  } else {
    ++finished_;
  }
  loop_.log().write(line);
}

// ---- TimelineSender --------------------------------------------------------

TimelineSender::TimelineSender(LoopThread& loop, int fd)
    : Handler("TimelineSender", &loop.looper()),
      loop_(loop),
      fd_(fd),
      period_ns_(loop.config().frame_period_ns > 0
                     ? loop.config().frame_period_ns
                     : 16666667) {}

TimelineSender::~TimelineSender() = default;

void TimelineSender::schedule(uint32_t seq, int64_t finished_ns) {
  const int64_t t0 = loop_.config().t0_ns;
  const int64_t after = finished_ns + period_ns_ - t0;
  const int64_t k = after <= 0 ? 0 : (after + period_ns_ - 1) / period_ns_;
  const int64_t present = t0 + k * period_ns_;
  Message* msg = obtainMessage(static_cast<int32_t>(seq), 0);
  msg->arg2 = present;
  sendMessageAtTime(msg, present + 1000000);
}

void TimelineSender::handleMessage(Message* msg) {
  InputMessage tl;
  std::memset(&tl, 0, sizeof tl);
  tl.header.type = InputMessage::kTimeline;
  tl.header.seq = 0;  // as AOSP's InputConsumer::sendTimeline
  tl.body.timeline.eventId = msg->what;
  tl.body.timeline.presentTime = msg->arg2;
  tl.body.timeline.gpuCompletedTime = msg->arg2 - period_ns_ / 4;
  const int64_t sent_ns = monotonicNs();
  const ssize_t n = sendto(fd_, &tl, kTimelineWireSize,
                           MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
  if (n != static_cast<ssize_t>(kTimelineWireSize)) return;  // not logged
  ++sent_;
  loop_.log().write({{"event", "input_timeline"},
                     {"pid", static_cast<int>(getpid())},
                     {"tid", static_cast<int>(loop_.tid())},
                     {"seq", msg->what},
                     {"event_id", tl.body.timeline.eventId},
                     {"gpu_completed_ns", tl.body.timeline.gpuCompletedTime},
                     {"present_ns", tl.body.timeline.presentTime},
                     {"sent_ns", sent_ns}});
}

// ---- InputReceiver ---------------------------------------------------------

InputReceiver::InputReceiver(LoopThread& loop, InputHandler& handler, int fd)
    : loop_(loop), handler_(handler), fd_(fd) {
  batch_.reserve(64);
}

InputReceiver::~InputReceiver() = default;

void InputReceiver::consumeEvents() {
  static_assert(sizeof(InputMessage) == 2472);
  InputMessage msg;
  for (;;) {
    const int64_t runq0 = runDelayNs();
    const ssize_t n = recvfrom(fd_, &msg, sizeof(InputMessage), MSG_DONTWAIT,
                               nullptr, nullptr);
    const int64_t received_ns = monotonicNs();
    const int64_t runq_ns = runDelayNs() - runq0;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        error_ = errno;
        closed_ = true;
      }
      return;
    }
    if (n == 0) {  // EOF: the dispatcher closed its end
      closed_ = true;
      return;
    }
    if (n < 16 || static_cast<size_t>(n) != wireSize(msg) ||
        (msg.header.type != InputMessage::kKey &&
         msg.header.type != InputMessage::kMotion)) {
      ++invalid_;
      continue;
    }
    const bool key = msg.header.type == InputMessage::kKey;
    const int64_t event_time =
        key ? msg.body.key.eventTime : msg.body.motion.eventTime;
    batch_.push_back({msg.header.seq, msg.header.type,
                      key ? 0u : msg.body.motion.pointerCount,
                      static_cast<uint32_t>(n), event_time, received_ns,
                      runq_ns});
    ++received_;
    // Android hands the event to the app from here; this app posts it to
    // its InputHandler, due now (a synchronous message: it waits behind
    // other due messages).
    Message* m = handler_.obtainMessage(static_cast<int32_t>(msg.header.seq),
                                        static_cast<int32_t>(msg.header.type));
    m->arg2 = received_ns;
    m->flags |= Message::kFlagMeasureRunq;
    handler_.sendMessage(m);
  }
}

bool InputReceiver::handleEvent(int /*fd*/, int revents) {
  if ((revents & POLLIN) != 0) consumeEvents();
  const int pid = static_cast<int>(getpid());
  const int tid = static_cast<int>(loop_.tid());
  for (const Received& r : batch_) {
    loop_.log().write({{"event", "input_recv"},
                       {"pid", pid},
                       {"tid", tid},
                       {"seq", r.seq},
                       {"type", typeName(r.type)},
                       {"pointers", r.pointers},
                       {"size", r.size},
                       {"event_time_ns", r.event_time_ns},
                       {"received_ns", r.received_ns},
                       {"received_runq_ns", r.runq_ns}});
  }
  batch_.clear();
  if ((revents & POLLIN) == 0 &&
      (revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
    closed_ = true;
  }
  return !closed_;
}

}  // namespace refapp
