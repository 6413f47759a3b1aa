// refapp: the reference app looptrace traces. An Android-like Looper per loop
// thread, a scenario of background work, injected stalls, exact-count
// trigger messages and nested loops, and a ground-truth log (JSON lines,
// CLOCK_MONOTONIC ns). See `refapp --help` and refapp/README.md.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "input.h"
#include "looper.h"
#include "options.h"
#include "scenario.h"
#include "watchdog.h"

namespace {

using refapp::EventKind;
using refapp::EventSpec;
using refapp::Options;
using refapp::StallKind;
using refapp::StallSpec;

// --progress: dispatches so far (a recent count: the loops run on) and the
// CPU time the loop threads used for them.
void logProgress(
    refapp::GroundTruthLog& log,
    const std::vector<std::unique_ptr<refapp::LoopThread>>& loops) {
  uint64_t total = 0;
  int64_t cpu = 0;
  for (const auto& loop : loops) {
    total += loop->looper().dispatchCount();
    cpu += loop->cpuNs();
  }
  log.write({{"event", "progress"},
             {"pid", static_cast<int>(getpid())},
             {"at_ns", refapp::monotonicNs()},
             {"dispatches", total},
             {"cpu_ns", cpu}});
}

// `-- PROGRAM ARGS`: the run is over and its summary written; become
// PROGRAM, as a launcher hands over to the app it set up.
int execProgram(const std::vector<std::string>& argv,
                refapp::GroundTruthLog& log) {
  log.write({{"event", "exec"},
             {"pid", static_cast<int>(getpid())},
             {"tid", static_cast<int>(gettid())},
             {"at_ns", refapp::monotonicNs()},
             {"argv", argv}});
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "refapp: error: exec %s: %s\n", args[0],
               std::strerror(errno));
  return 1;
}

// Waits for SIGINT/SIGTERM/SIGUSR1 or until deadline_ns (CLOCK_MONOTONIC;
// INT64_MAX = no deadline). Returns the signal, or 0 on timeout.
int waitSignal(const sigset_t& set, int64_t deadline_ns) {
  for (;;) {
    struct timespec ts;
    const int64_t now = refapp::monotonicNs();
    if (deadline_ns != INT64_MAX && now >= deadline_ns) return 0;
    const int64_t left =
        deadline_ns == INT64_MAX ? 3600LL * 1000000000 : deadline_ns - now;
    ts.tv_sec = left / 1000000000;
    ts.tv_nsec = left % 1000000000;
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno != EAGAIN && errno != EINTR) return 0;
  }
}

// The scenario's configuration, shared by the loop threads (t0_ns and
// end_ns are set when the scenario starts).
refapp::Config makeConfig(const Options& opt) {
  refapp::Config cfg;
  cfg.messages_mode = opt.messages_mode;
  cfg.messages = opt.messages_mode ? opt.messages : 0;
  cfg.period_ns =
      opt.rate > 0 ? static_cast<int64_t>(std::llround(1e9 / opt.rate)) : 0;
  cfg.nested = opt.nested;
  cfg.nested_interval_ns = opt.nested_interval_ms * 1000000;
  cfg.seed = opt.seed;
  cfg.log_slow_ns = static_cast<int64_t>(std::llround(opt.log_slow_ms * 1e6));
  cfg.idle_handlers = opt.idle_handlers;
  cfg.async_period_ns =
      opt.async_rate > 0
          ? static_cast<int64_t>(std::llround(1e9 / opt.async_rate))
          : 0;
  cfg.frame_period_ns =
      opt.barrier_rate > 0
          ? static_cast<int64_t>(std::llround(1e9 / opt.barrier_rate))
          : 0;
  cfg.frame_stall_every = opt.frame_stall_every;
  cfg.frame_stall_ns = opt.frame_stall_ms * 1000000;
  cfg.frame_stall_phase = opt.frame_stall_phase_name == "input"       ? 0
                          : opt.frame_stall_phase_name == "animation" ? 1
                                                                      : 3;
  cfg.barrier_report_ns = opt.barrier_report_ms * 1000000;
  cfg.fork_at_ns = opt.fork_at_ms >= 0 ? opt.fork_at_ms * 1000000 : -1;
  return cfg;
}

// One run of the app: built by setUp on the main thread, then run by
// control() on the control thread (the main thread, or refapp-ctl with
// --main-exit-at), from the start to the summary.
class App {
 public:
  explicit App(const Options& opt) : opt_(opt), cfg_(makeConfig(opt)) {}

  // Everything before the scenario starts: the log, the input channel, the
  // loop threads (started, waiting for the scenario). False (the error
  // printed) on failure.
  bool setUp();
  // Waits for the start, runs the scenario, stops and logs the summary;
  // then exits 0 or execs -- PROGRAM. Returns the exit status.
  int control();
  // --main-exit-at: control() runs on refapp-ctl; the main thread leaves
  // at the time given.
  [[noreturn]] void runWithMainExit();

 private:
  bool openInput();
  void createLoops();
  bool attachInput();
  void startLoops();

  bool waitForStart();
  void startScenario();
  const char* runScenario();
  int stop(int64_t* end_ns);

  nlohmann::json startThreads() const;
  nlohmann::json startStalls() const;
  nlohmann::json startEvents() const;
  void logStart();
  void logInputChannel();
  nlohmann::json summaryThread(refapp::LoopThread& loop) const;
  nlohmann::json summaryInput(int dispatcher_status) const;
  uint64_t logSummary(const char* reason, bool started, int64_t end_ns,
                      int dispatcher_status);

  const Options& opt_;
  refapp::Config cfg_;
  refapp::GroundTruthLog log_;
  refapp::InputChannel input_channel_;
  // Signals are handled synchronously by the control thread only.
  sigset_t sigs_;
  std::vector<std::unique_ptr<refapp::LoopThread>> loops_;
  std::unique_ptr<refapp::Watchdog> watchdog_;
  // Input goes to loop thread 0, whose queue then polls the channel.
  std::unique_ptr<refapp::InputHandler> input_handler_;
  std::unique_ptr<refapp::InputReceiver> input_receiver_;
  // The thread that takes signals and runs the scenario clock.
  std::atomic<pthread_t> control_thread_{pthread_self()};
  std::atomic<int> exited_{0};
  // --main-exit-at: the main thread waits for this pipe, then exits alone.
  int main_exit_pipe_[2] = {-1, -1};
};

bool App::setUp() {
  std::string error;
  if (!opt_.log.empty() && !log_.open(opt_.log, &error)) {
    std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
    return false;
  }
  if (!openInput()) return false;
  // Signals are handled synchronously by the control thread only (the main
  // thread, or refapp-ctl with --main-exit-at).
  sigemptyset(&sigs_);
  sigaddset(&sigs_, SIGINT);
  sigaddset(&sigs_, SIGTERM);
  sigaddset(&sigs_, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs_, nullptr);
  createLoops();
  if (!attachInput()) return false;
  startLoops();
  std::fprintf(stderr, "refapp: ready pid=%d\n", static_cast<int>(getpid()));
  if (opt_.main_exit_ms >= 0 && pipe2(main_exit_pipe_, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "refapp: error: pipe: %s\n", std::strerror(errno));
    return false;
  }
  return true;
}

// The input channel and its dispatcher process, forked before any thread
// exists (and before the signal mask, which it does not inherit).
bool App::openInput() {
  std::string error;
  if (opt_.input_enabled &&
      !refapp::openInputChannel(opt_.input, log_, &input_channel_, &error)) {
    std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
    return false;
  }
  return true;
}

// The loop threads (a lock holder for those with a lock stall), their
// stalls and events, and the watchdog.
void App::createLoops() {
  for (int i = 0; i < opt_.threads; ++i) {
    const bool needs_holder =
        std::any_of(opt_.stalls.begin(), opt_.stalls.end(),
                    [i](const auto& s) {
                      return s.thread == i && s.kind == StallKind::kLock;
                    }) ||
        std::any_of(opt_.events.begin(), opt_.events.end(), [i](const auto& e) {
          return e.thread == i && e.kind == EventKind::kIdleStall &&
                 e.stall_kind == StallKind::kLock;
        });
    loops_.push_back(
        std::make_unique<refapp::LoopThread>(i, cfg_, log_, needs_holder));
  }
  for (const StallSpec& s : opt_.stalls) loops_[s.thread]->addStall(s);
  for (const EventSpec& e : opt_.events) loops_[e.thread]->addEvent(e);
  if (opt_.watchdog_ms > 0) {
    watchdog_ = std::make_unique<refapp::Watchdog>(*loops_[0],
                                                   opt_.watchdog_ms * 1000000);
  }
}

// Input goes to loop thread 0, whose queue then polls the channel.
bool App::attachInput() {
  if (!opt_.input_enabled) return true;
  std::string error;
  input_handler_ = std::make_unique<refapp::InputHandler>(
      *loops_[0], input_channel_.app_fd, opt_.input.stalls,
      opt_.input.timeline);
  input_receiver_ = std::make_unique<refapp::InputReceiver>(
      *loops_[0], *input_handler_, input_channel_.app_fd);
  if (!loops_[0]->looper().queue().addFd(input_channel_.app_fd,
                                         input_receiver_.get(), &error)) {
    std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
    refapp::closeInputChannel(&input_channel_);
    return false;
  }
  return true;
}

// Starts the loop threads; each wakes the control thread when it exits.
void App::startLoops() {
  for (auto& loop : loops_) {
    loop->start([this] {
      exited_.fetch_add(1);
      pthread_kill(control_thread_.load(), SIGUSR1);
    });
  }
}

int App::control() {
  const bool started = waitForStart();
  const char* reason = "signal";
  if (started) {
    startScenario();
    reason = runScenario();
  }
  int64_t end_ns = 0;
  const int dispatcher_status = stop(&end_ns);
  const uint64_t total = logSummary(reason, started, end_ns, dispatcher_status);
  std::fprintf(stderr, "refapp: exit reason=%s dispatches=%llu\n", reason,
               static_cast<unsigned long long>(total));
  watchdog_.reset();
  loops_.clear();
  if (!opt_.exec_argv.empty() && std::string(reason) != "signal") {
    return execProgram(opt_.exec_argv, log_);
  }
  return 0;
}

// --start-delay; false when SIGINT or SIGTERM came first.
bool App::waitForStart() {
  const int64_t deadline =
      refapp::monotonicNs() + opt_.start_delay_ms * 1000000;
  for (;;) {
    const int sig = waitSignal(sigs_, deadline);
    if (sig == SIGINT || sig == SIGTERM) return false;
    if (sig == 0) return true;
  }
}

// t0: the start line, the input channel's, and every clock started.
void App::startScenario() {
  cfg_.t0_ns = refapp::monotonicNs();
  cfg_.end_ns = opt_.duration_applies ? cfg_.t0_ns + opt_.duration_ms * 1000000
                                      : INT64_MAX;
  logStart();
  if (opt_.input_enabled) {
    logInputChannel();
    refapp::startInputDispatcher(&input_channel_, cfg_.t0_ns);
  }
  for (auto& loop : loops_) loop->schedule();
  if (watchdog_) watchdog_->start(cfg_.t0_ns);
}

// Until --duration, a signal, or every loop quit (--messages): progress
// lines and the main thread's release on the way. Returns why it ended.
const char* App::runScenario() {
  int64_t main_exit_ns = opt_.main_exit_ms >= 0
                             ? cfg_.t0_ns + opt_.main_exit_ms * 1000000
                             : INT64_MAX;
  int64_t progress_ns = opt_.progress_ms > 0
                            ? cfg_.t0_ns + opt_.progress_ms * 1000000
                            : INT64_MAX;
  const char* reason = opt_.messages_mode ? "done" : "duration";
  for (;;) {
    const int sig =
        waitSignal(sigs_, std::min({cfg_.end_ns, main_exit_ns, progress_ns}));
    if (sig == 0 && refapp::monotonicNs() >= progress_ns) {
      logProgress(log_, loops_);
      progress_ns += opt_.progress_ms * 1000000;
      continue;
    }
    if (sig == SIGINT || sig == SIGTERM) return "signal";
    if (sig == 0 && main_exit_ns != INT64_MAX &&
        refapp::monotonicNs() >= main_exit_ns) {
      main_exit_ns = INT64_MAX;
      if (write(main_exit_pipe_[1], "x", 1) != 1) {
        std::fprintf(stderr, "refapp: error: releasing the main thread\n");
      }
      continue;
    }
    if (sig == 0) return "duration";
    if (exited_.load() == static_cast<int>(loops_.size())) return reason;
  }
}

// Stops the watchdog and the loops, then the input channel. Returns the
// dispatcher's exit status (-1: none or unknown), *end_ns the end time.
int App::stop(int64_t* end_ns) {
  // The poller stops first: a loop that quits is not a blocked one.
  if (watchdog_) watchdog_->stop();
  // A dispatch in progress (e.g. a long stall) finishes first.
  for (auto& loop : loops_) loop->quit();
  for (auto& loop : loops_) loop->join();
  *end_ns = refapp::monotonicNs();
  for (auto& loop : loops_) loop->logLeaks(*end_ns);
  // The dispatcher sees EOF (or is done) and logs its summary first.
  if (!opt_.input_enabled) return -1;
  return refapp::closeInputChannel(&input_channel_);
}

void App::runWithMainExit() {
  // The main thread leaves at --main-exit-at; refapp-ctl carries on and ends
  // the process with exit(), which also runs the destructors of what the
  // main thread built (it never unwinds: it leaves by the exit system call).
  std::atomic<pid_t> control_tid{0};
  std::thread ctl([&] {
    pthread_setname_np(pthread_self(), "refapp-ctl");
    control_tid.store(gettid());
    control_thread_.store(pthread_self());
    std::exit(control());
  });
  ctl.detach();
  char c = 0;
  if (read(main_exit_pipe_[0], &c, 1) == 1) {
    log_.write({{"event", "main_exit"},
                {"pid", static_cast<int>(getpid())},
                {"tid", static_cast<int>(gettid())},
                {"at_ns", refapp::monotonicNs()},
                {"control_tid", static_cast<int>(control_tid.load())}});
  }
  syscall(SYS_exit, 0);
  __builtin_unreachable();
}

// ---- The ground-truth log: the start, input_channel and summary lines ----

nlohmann::json App::startThreads() const {
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& loop : loops_) {
    nlohmann::json t = {{"index", loop->index()},
                        {"tid", static_cast<int>(loop->tid())},
                        {"name", loop->name()}};
    if (loop->lockHolder() != nullptr) {
      t["holder_tid"] = static_cast<int>(loop->lockHolder()->tid());
    }
    threads.push_back(t);
  }
  return threads;
}

nlohmann::json App::startStalls() const {
  nlohmann::json stalls = nlohmann::json::array();
  for (const StallSpec& s : opt_.stalls) {
    stalls.push_back({{"what", s.index},
                      {"kind", refapp::stallKindName(s.kind)},
                      {"function", refapp::stallFunctionName(s.kind)},
                      {"requested_ms", s.ms},
                      {"at_ms", s.at_ms},
                      {"when_ns", cfg_.t0_ns + s.at_ms * 1000000},
                      {"thread", s.thread}});
  }
  return stalls;
}

nlohmann::json App::startEvents() const {
  nlohmann::json events = nlohmann::json::array();
  for (const EventSpec& e : opt_.events) {
    nlohmann::json j = {{"event", refapp::eventKindName(e.kind)},
                        {"index", e.index},
                        {"at_ms", e.at_ms},
                        {"when_ns", cfg_.t0_ns + e.at_ms * 1000000},
                        {"thread", e.thread}};
    if (e.kind == EventKind::kIdleStall) {
      j["kind"] = refapp::stallKindName(e.stall_kind);
      j["function"] = refapp::stallFunctionName(e.stall_kind);
      j["requested_ms"] = e.ms;
    } else if (e.kind == EventKind::kBarrier) {
      j["ms"] = e.ms;
    } else if (e.kind == EventKind::kBurst) {
      j["count"] = e.count;
    }
    events.push_back(j);
  }
  return events;
}

void App::logStart() {
  log_.write(
      {{"event", "start"},
       {"pid", static_cast<int>(getpid())},
       {"t0_ns", cfg_.t0_ns},
       {"mode", opt_.messages_mode ? "messages" : "rate"},
       {"rate", opt_.rate},
       {"period_ns", cfg_.period_ns},
       {"duration_ms", opt_.duration_applies ? nlohmann::json(opt_.duration_ms)
                                             : nlohmann::json(nullptr)},
       {"messages", opt_.messages_mode ? nlohmann::json(opt_.messages)
                                       : nlohmann::json(nullptr)},
       {"nested", opt_.nested},
       {"nested_interval_ms", opt_.nested_interval_ms},
       {"seed", opt_.seed},
       {"log_slow_ms", opt_.log_slow_ms},
       {"threads", startThreads()},
       {"stalls", startStalls()},
       {"idle_handlers", opt_.idle_handlers},
       {"async_rate", opt_.async_rate},
       {"async_period_ns", cfg_.async_period_ns},
       {"barrier_rate", opt_.barrier_rate},
       {"frame_period_ns", cfg_.frame_period_ns},
       {"barrier_report_ms", opt_.barrier_report_ms},
       {"watchdog_ms",
        watchdog_ ? nlohmann::json(opt_.watchdog_ms) : nlohmann::json(nullptr)},
       {"events", startEvents()}});
}

void App::logInputChannel() {
  const refapp::InputConfig& in = opt_.input;
  nlohmann::json input_stalls = nlohmann::json::array();
  for (const refapp::InputStallSpec& s : in.stalls) {
    input_stalls.push_back({{"seq", s.seq}, {"ms", s.ms}});
  }
  log_.write(
      {{"event", "input_channel"},
       {"pid", static_cast<int>(getpid())},
       {"dispatcher_pid", static_cast<int>(input_channel_.dispatcher_pid)},
       {"app_inode", input_channel_.app_inode},
       {"dispatcher_inode", input_channel_.dispatcher_inode},
       {"app_fd", input_channel_.app_fd},
       {"dispatcher_fd", input_channel_.dispatcher_fd},
       {"sndbuf", input_channel_.sndbuf},
       {"rcvbuf", input_channel_.rcvbuf},
       {"tid", static_cast<int>(loops_[0]->tid())},
       {"thread", 0},
       {"queue", refapp::hexAddress(&loops_[0]->looper().queue())},
       {"t0_ns", cfg_.t0_ns},
       {"rate", in.rate},
       {"start_ms", in.start_ms},
       {"duration_ms", in.duration_ms},
       {"taps", in.taps},
       {"type", refapp::inputTypeName(in.type)},
       {"pointers", in.pointers},
       {"stalls", input_stalls}});
}

// A loop thread's line in the summary: what it dispatched, by kind.
nlohmann::json App::summaryThread(refapp::LoopThread& loop) const {
  const refapp::LoopStats& s = loop.stats();
  const refapp::MessageQueue::Counters qc = loop.looper().queue().counters();
  nlohmann::json t = {{"index", loop.index()},
                      {"tid", static_cast<int>(loop.tid())},
                      {"name", loop.name()},
                      {"dispatches", loop.looper().dispatchCount()},
                      {"max_background_ns", s.max_background_ns},
                      {"background", s.background},
                      {"triggers", s.triggers},
                      {"stalls", s.stalls},
                      {"nested_outer", s.nested_outer},
                      {"nested_inner", s.nested_inner},
                      {"idle_runs", qc.idle_runs},
                      {"idle_stalls", s.idle_stalls},
                      {"barriers_posted", qc.barriers_posted},
                      {"barriers_removed", qc.barriers_removed},
                      {"barrier_errors", qc.barrier_errors},
                      {"async_dispatches", loop.looper().asyncDispatchCount()},
                      {"async_background", s.async_background},
                      {"frames", s.frames},
                      {"idle_setup", s.idle_setup},
                      {"barrier_control", s.barrier_control},
                      {"barrier_watch", s.barrier_watch},
                      {"burst_posts", s.burst_posts},
                      {"burst_items", s.burst_items}};
  if (input_handler_ != nullptr && loop.index() == 0) {
    t["input_dispatches"] = input_handler_->dispatches();
  }
  if (watchdog_ && loop.index() == 0) {
    t["watchdog_ticks"] = watchdog_->ticksRun();
  }
  return t;
}

nlohmann::json App::summaryInput(int dispatcher_status) const {
  return {{"received", input_receiver_->received()},
          {"finished", input_handler_->finished()},
          {"dispatches", input_handler_->dispatches()},
          {"invalid", input_receiver_->invalid()},
          {"finish_errors", input_handler_->finishErrors()},
          {"finish_eagain", input_handler_->finishEagain()},
          {"fd_events", loops_[0]->looper().queue().counters().fd_events},
          {"closed", input_receiver_->closed()},
          {"dispatcher_pid", static_cast<int>(input_channel_.dispatcher_pid)},
          {"dispatcher_status", dispatcher_status}};
}

// The summary line, once the loops are joined. Returns the dispatches.
uint64_t App::logSummary(const char* reason, bool started, int64_t end_ns,
                         int dispatcher_status) {
  uint64_t total = 0;
  nlohmann::json threads = nlohmann::json::array();
  for (auto& loop : loops_) {
    total += loop->looper().dispatchCount();
    threads.push_back(summaryThread(*loop));
  }
  nlohmann::json summary = {
      {"event", "summary"},  {"pid", static_cast<int>(getpid())},
      {"reason", reason},    {"started", started},
      {"t0_ns", cfg_.t0_ns}, {"end_ns", end_ns},
      {"dispatches", total}, {"threads", threads}};
  if (opt_.input_enabled) summary["input"] = summaryInput(dispatcher_status);
  if (watchdog_) {
    summary["watchdog"] = {{"interval_ms", opt_.watchdog_ms},
                           {"ticks_posted", watchdog_->ticksPosted()},
                           {"ticks_run", watchdog_->ticksRun()},
                           {"lags", watchdog_->lags()}};
  }
  log_.write(summary);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  pthread_setname_np(pthread_self(), "refapp");
  Options opt;
  const int status = refapp::parseCommandLine(argc, argv, &opt);
  if (status >= 0) return status;
  App app(opt);
  if (!app.setUp()) return 1;
  if (opt.main_exit_ms < 0) return app.control();
  app.runWithMainExit();
}
