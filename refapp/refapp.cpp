// refapp: the reference app looptrace traces. An Android-like Looper per loop
// thread, a scenario of background work, injected stalls, exact-count
// trigger messages and nested loops, and a ground-truth log (JSON lines,
// CLOCK_MONOTONIC ns). See `refapp --help` and refapp/README.md.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "input.h"
#include "looper.h"
#include "scenario.h"
#include "watchdog.h"

namespace {

using refapp::EventKind;
using refapp::EventSpec;
using refapp::StallKind;
using refapp::StallSpec;

constexpr int kExitUsage = 2;
constexpr int kMaxThreads = 64;

struct Options {
  double rate = 500;
  int64_t duration_ms = 5000;
  bool duration_given = false;
  uint64_t seed = 1;
  std::vector<std::string> stall_flags;
  std::string plan;
  int64_t messages = -1;
  int nested = 0;
  int64_t nested_interval_ms = 50;
  int threads = 1;
  int64_t start_delay_ms = 0;
  std::string log;
  double log_slow_ms = 10;
  std::vector<StallSpec> stalls;
  // Idle handlers, sync barriers, delivery lag.
  std::vector<std::string> idle_stall_flags;
  std::vector<std::string> barrier_flags;
  std::vector<std::string> barrier_leak_flags;
  std::vector<std::string> barrier_error_flags;
  std::vector<std::string> burst_flags;
  int idle_handlers = 0;
  double async_rate = 0;
  double barrier_rate = 0;
  int64_t barrier_report_ms = 3000;
  std::vector<EventSpec> events;
  // The input channel (any --input-* flag turns it on).
  double input_rate = 0;
  int64_t input_start_ms = 200;
  int64_t input_duration_ms = -1;  // -1: until 300 ms before --duration
  std::vector<int64_t> input_taps;
  std::string input_type = "mixed";
  int input_pointers = 1;
  std::vector<std::string> input_stall_flags;
  // Process lifecycle (the fault tests).
  int64_t main_exit_ms = -1;           // --main-exit-at
  int64_t progress_ms = 0;             // --progress
  int64_t fork_at_ms = -1;             // --fork-at
  std::vector<std::string> exec_argv;  // -- PROGRAM ARGS
  int64_t watchdog_ms = 0;             // --watchdog; 0 = off
};

// Stream events stop this long before --duration unless --input-duration
// says otherwise.
constexpr int64_t kInputTailMs = 300;

// Settings a plan file may give; a flag given on the command line wins.
struct PlanSettings {
  bool idle_handlers_set = false;
  int idle_handlers = 0;
  bool async_rate_set = false;
  double async_rate = 0;
  bool barrier_rate_set = false;
  double barrier_rate = 0;
  bool barrier_report_set = false;
  int64_t barrier_report_ms = 0;
};

bool parseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

bool parseKind(const std::string& text, StallKind* kind) {
  if (text == "busy") {
    *kind = StallKind::kBusy;
  } else if (text == "sleep") {
    *kind = StallKind::kSleep;
  } else if (text == "lock") {
    *kind = StallKind::kLock;
  } else {
    return false;
  }
  return true;
}

bool checkStall(const StallSpec& s, std::string* error) {
  if (s.ms <= 0 || s.ms > 3600000) {
    *error = "stall length must be 1..3600000 ms";
    return false;
  }
  if (s.at_ms < 0 || s.at_ms > 86400000) {
    *error = "stall time must be 0..86400000 ms";
    return false;
  }
  if (s.thread < 0 || s.thread >= kMaxThreads) {
    *error = "stall thread index out of range";
    return false;
  }
  return true;
}

// KIND:MS@AT_MS[:THREAD] (--stall, and --idle-stall with flag set).
bool parseStallFlag(const std::string& text, StallSpec* spec,
                    std::string* error, const char* flag = "--stall") {
  const auto bad = [&](const std::string& why) {
    *error = std::string(flag) + " " + text + ": " + why +
             " (expected KIND:MS@AT_MS[:THREAD], KIND busy|sleep|lock)";
    return false;
  };
  const size_t colon = text.find(':');
  const size_t at = text.find('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon) {
    return bad("malformed");
  }
  if (!parseKind(text.substr(0, colon), &spec->kind)) {
    return bad("unknown kind");
  }
  if (!parseInt(text.substr(colon + 1, at - colon - 1), &spec->ms)) {
    return bad("bad MS");
  }
  std::string rest = text.substr(at + 1);
  int64_t thread = 0;
  const size_t colon2 = rest.find(':');
  if (colon2 != std::string::npos) {
    if (!parseInt(rest.substr(colon2 + 1), &thread)) return bad("bad THREAD");
    rest = rest.substr(0, colon2);
  }
  if (!parseInt(rest, &spec->at_ms)) return bad("bad AT_MS");
  if (thread < 0 || thread >= kMaxThreads) return bad("bad THREAD");
  spec->thread = static_cast<int>(thread);
  std::string why;
  if (!checkStall(*spec, &why)) return bad(why);
  return true;
}

bool checkAt(int64_t at_ms, int64_t thread, std::string* error) {
  if (at_ms < 0 || at_ms > 86400000) {
    *error = "time must be 0..86400000 ms";
    return false;
  }
  if (thread < 0 || thread >= kMaxThreads) {
    *error = "thread index out of range";
    return false;
  }
  return true;
}

// Splits "AT_MS[:THREAD]".
bool parseAtThread(const std::string& text, int64_t* at_ms, int* thread) {
  std::string at = text;
  int64_t t = 0;
  const size_t colon = text.find(':');
  if (colon != std::string::npos) {
    if (!parseInt(text.substr(colon + 1), &t)) return false;
    at = text.substr(0, colon);
  }
  if (!parseInt(at, at_ms) || t < 0 || t >= kMaxThreads) return false;
  *thread = static_cast<int>(t);
  return true;
}

// --barrier MS@AT_MS[:THREAD], --burst N@AT_MS[:THREAD] (N in spec->count),
// --barrier-leak / --barrier-error AT_MS[:THREAD].
bool parseEventFlag(const std::string& text, EventKind kind, EventSpec* spec,
                    std::string* error) {
  spec->kind = kind;
  const char* flag = "";
  const char* syntax = "";
  switch (kind) {
    case EventKind::kBarrier:
      flag = "--barrier";
      syntax = "MS@AT_MS[:THREAD]";
      break;
    case EventKind::kBurst:
      flag = "--burst";
      syntax = "N@AT_MS[:THREAD]";
      break;
    case EventKind::kBarrierLeak:
      flag = "--barrier-leak";
      syntax = "AT_MS[:THREAD]";
      break;
    case EventKind::kBarrierError:
      flag = "--barrier-error";
      syntax = "AT_MS[:THREAD]";
      break;
    case EventKind::kIdleStall:
      return false;  // parseStallFlag
  }
  const auto bad = [&](const std::string& why) {
    *error = std::string(flag) + " " + text + ": " + why + " (expected " +
             syntax + ")";
    return false;
  };
  std::string rest = text;
  if (kind == EventKind::kBarrier || kind == EventKind::kBurst) {
    const size_t at = text.find('@');
    if (at == std::string::npos) return bad("malformed");
    int64_t v = 0;
    if (!parseInt(text.substr(0, at), &v)) {
      return bad(kind == EventKind::kBurst ? "bad N" : "bad MS");
    }
    if (kind == EventKind::kBarrier) {
      if (v <= 0 || v > 3600000) return bad("MS must be 1..3600000");
      spec->ms = v;
    } else {
      if (v <= 0 || v > 100000) return bad("N must be 1..100000");
      spec->count = v;
    }
    rest = text.substr(at + 1);
  }
  if (!parseAtThread(rest, &spec->at_ms, &spec->thread)) {
    return bad("bad AT_MS or THREAD");
  }
  std::string why;
  if (!checkAt(spec->at_ms, spec->thread, &why)) return bad(why);
  return true;
}

// --input-stall MS@SEQ.
bool parseInputStall(const std::string& text, refapp::InputStallSpec* spec,
                     std::string* error) {
  const auto bad = [&](const std::string& why) {
    *error = "--input-stall " + text + ": " + why + " (expected MS@SEQ)";
    return false;
  };
  const size_t at = text.find('@');
  if (at == std::string::npos) return bad("malformed");
  int64_t ms = 0;
  int64_t seq = 0;
  if (!parseInt(text.substr(0, at), &ms) || ms <= 0 || ms > 3600000) {
    return bad("MS must be 1..3600000");
  }
  if (!parseInt(text.substr(at + 1), &seq) || seq < 1 || seq > UINT32_MAX) {
    return bad("SEQ must be 1..4294967295");
  }
  spec->ms = ms;
  spec->seq = static_cast<uint32_t>(seq);
  return true;
}

bool parseRate(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !(v >= 0)) {
    return false;
  }
  *out = v;
  return true;
}

// A plan-file line that is not a dispatch stall: `AT_MS idle KIND MS
// [THREAD]`, `AT_MS barrier MS [THREAD]`, `AT_MS barrier-leak [THREAD]`,
// `AT_MS barrier-error [THREAD]`, `AT_MS burst N [THREAD]`. Returns false
// with *handled unset when f[1] is not one of those words.
bool parsePlanEvent(const std::vector<std::string>& f, EventSpec* e,
                    bool* handled, std::string* error) {
  *handled = true;
  const std::string& word = f[1];
  size_t want_min = 0;
  if (word == "idle") {
    e->kind = EventKind::kIdleStall;
    want_min = 4;
  } else if (word == "barrier") {
    e->kind = EventKind::kBarrier;
    want_min = 3;
  } else if (word == "burst") {
    e->kind = EventKind::kBurst;
    want_min = 3;
  } else if (word == "barrier-leak") {
    e->kind = EventKind::kBarrierLeak;
    want_min = 2;
  } else if (word == "barrier-error") {
    e->kind = EventKind::kBarrierError;
    want_min = 2;
  } else {
    *handled = false;
    return false;
  }
  if (f.size() < want_min || f.size() > want_min + 1) {
    const char* syntax = "";
    switch (e->kind) {
      case EventKind::kIdleStall:
        syntax = "AT_MS idle KIND MS [THREAD]";
        break;
      case EventKind::kBarrier:
        syntax = "AT_MS barrier MS [THREAD]";
        break;
      case EventKind::kBurst:
        syntax = "AT_MS burst N [THREAD]";
        break;
      case EventKind::kBarrierLeak:
        syntax = "AT_MS barrier-leak [THREAD]";
        break;
      case EventKind::kBarrierError:
        syntax = "AT_MS barrier-error [THREAD]";
        break;
    }
    *error = std::string("expected ") + syntax;
    return false;
  }
  if (!parseInt(f[0], &e->at_ms)) {
    *error = "bad AT_MS '" + f[0] + "'";
    return false;
  }
  size_t next = 2;
  if (e->kind == EventKind::kIdleStall) {
    if (!parseKind(f[2], &e->stall_kind)) {
      *error = "bad KIND '" + f[2] + "' (busy|sleep|lock)";
      return false;
    }
    next = 3;
  }
  if (want_min > next) {
    int64_t v = 0;
    if (!parseInt(f[next], &v)) {
      *error = "bad number '" + f[next] + "'";
      return false;
    }
    if (e->kind == EventKind::kBurst) {
      if (v <= 0 || v > 100000) {
        *error = "burst N must be 1..100000";
        return false;
      }
      e->count = v;
    } else {
      if (v <= 0 || v > 3600000) {
        *error = "MS must be 1..3600000";
        return false;
      }
      e->ms = v;
    }
    ++next;
  }
  int64_t thread = 0;
  if (f.size() > next && !parseInt(f[next], &thread)) {
    *error = "bad THREAD '" + f[next] + "'";
    return false;
  }
  if (!checkAt(e->at_ms, thread, error)) return false;
  e->thread = static_cast<int>(thread);
  return true;
}

// A plan-file setting line: `idle-handlers N`, `async-rate N`,
// `barrier-rate N`, `barrier-report-ms MS`.
bool parsePlanSetting(const std::vector<std::string>& f, PlanSettings* ps,
                      bool* handled, std::string* error) {
  *handled = true;
  const std::string& word = f[0];
  if (word != "idle-handlers" && word != "async-rate" &&
      word != "barrier-rate" && word != "barrier-report-ms") {
    *handled = false;
    return false;
  }
  if (f.size() != 2) {
    *error = "expected '" + word + " VALUE'";
    return false;
  }
  if (word == "idle-handlers") {
    int64_t v = 0;
    if (!parseInt(f[1], &v) || v < 0 || v > 1000) {
      *error = "idle-handlers must be 0..1000";
      return false;
    }
    ps->idle_handlers_set = true;
    ps->idle_handlers = static_cast<int>(v);
  } else if (word == "barrier-report-ms") {
    int64_t v = 0;
    if (!parseInt(f[1], &v) || v < 1 || v > 3600000) {
      *error = "barrier-report-ms must be 1..3600000";
      return false;
    }
    ps->barrier_report_set = true;
    ps->barrier_report_ms = v;
  } else {
    double v = 0;
    const double max = word == "async-rate" ? 100000.0 : 1000.0;
    if (!parseRate(f[1], &v) || v > max) {
      *error = word + " must be 0.." + std::to_string(static_cast<int>(max));
      return false;
    }
    if (word == "async-rate") {
      ps->async_rate_set = true;
      ps->async_rate = v;
    } else {
      ps->barrier_rate_set = true;
      ps->barrier_rate = v;
    }
  }
  return true;
}

// One stall per line: AT_MS KIND MS [THREAD]; '#' starts a comment. Also
// the event and setting lines of parsePlanEvent / parsePlanSetting.
bool parsePlan(const std::string& path, std::vector<StallSpec>* out,
               std::vector<EventSpec>* events, PlanSettings* settings,
               std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "--plan: cannot read " + path;
    return false;
  }
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    bool handled = false;
    std::string why;
    if (parsePlanSetting(f, settings, &handled, &why)) continue;
    if (handled) {
      *error = where + why;
      return false;
    }
    if (f.size() >= 2) {
      EventSpec e;
      if (parsePlanEvent(f, &e, &handled, &why)) {
        events->push_back(e);
        continue;
      }
      if (handled) {
        *error = where + why;
        return false;
      }
    }
    StallSpec s;
    int64_t thread = 0;
    if (f.size() < 3 || f.size() > 4) {
      *error = where + "expected AT_MS KIND MS [THREAD]";
      return false;
    }
    if (!parseInt(f[0], &s.at_ms)) {
      *error = where + "bad AT_MS '" + f[0] + "'";
      return false;
    }
    if (!parseKind(f[1], &s.kind)) {
      *error = where + "bad KIND '" + f[1] + "' (busy|sleep|lock)";
      return false;
    }
    if (!parseInt(f[2], &s.ms)) {
      *error = where + "bad MS '" + f[2] + "'";
      return false;
    }
    if (f.size() == 4 &&
        (!parseInt(f[3], &thread) || thread < 0 || thread >= kMaxThreads)) {
      *error = where + "bad THREAD '" + f[3] + "'";
      return false;
    }
    s.thread = static_cast<int>(thread);
    if (!checkStall(s, &why)) {
      *error = where + why;
      return false;
    }
    out->push_back(s);
  }
  return true;
}

const char* const kFooter = R"(
Modes (per loop thread; dispatch counts are exact unless noted):
  rate mode (default): WorkHandler messages due every 1/rate s from the
    start, each busy 0.1-2 ms (seeded), until --duration; about
    rate*duration of them (the loop quits at --duration, whatever is due).
  --messages N: exactly N TriggerHandler messages (each calls
    refapp::trigger() once), due every 1/rate s (--rate 0: back to back),
    no background; the thread quits after its last trigger, stall and
    nested message. --duration is then only a cap, if given.
  Either mode adds: every --stall/--plan stall for that thread (1 dispatch
    each), and on thread 0 --nested N outer messages due at
    (i+1)*--nested-interval, each 1 outer + 3 inner dispatches.
  Stalls are due at AT_MS after the start, run on thread THREAD (default
    0) and last MS from the dispatch start: busy = refapp::busyStall spins,
    sleep = refapp::sleepStall clock_nanosleep, lock = refapp::lockStall
    blocks on a mutex that thread refapp-holderN holds.
  --idle-stall KIND:MS@AT_MS[:THREAD]: a refapp::IdleSetupHandler message
    at AT_MS adds a one-shot refapp::SlowIdleHandler; it stalls MS (as
    --stall) in refapp::MessageQueue::runIdleHandler the next time the
    queue is idle. 1 dispatch; the idle run is not a dispatch.
  --idle-handlers N: N refapp::CheapIdleHandlers (busy ~20 us, kept) per
    loop thread, run once at every idle moment. No dispatches.
  --barrier MS@AT_MS[:THREAD]: a sync refapp::BarrierHandler message at
    AT_MS posts a sync barrier; an asynchronous one removes it MS later
    (2 dispatches; 3 if MS > --barrier-report-ms: a
    refapp::BarrierWatchHandler check logs barrier_stalled).
  --barrier-leak AT_MS[:THREAD]: as --barrier, never removed; sync work
    piles up behind it, async work (--async-rate) flows. Rate mode only.
  --barrier-error AT_MS[:THREAD]: removes a stale token (1 dispatch).
  --burst N@AT_MS[:THREAD]: a refapp::BurstHandler message at AT_MS posts
    N sync messages (callback refapp::burstWork, busy 1 ms) all due at
    once; 1 + N dispatches, a delivery line each.
  --async-rate N (rate mode): refapp::AsyncHandler asynchronous messages,
    0.1 ms each. --barrier-rate N (rate mode, thread 0): N frames/s, each
    a sync refapp::FrameHandler message posting a barrier and an async one
    removing it at once.
  Plan lines: AT_MS KIND MS [THREAD] (stall), AT_MS idle KIND MS [THREAD],
    AT_MS barrier MS [THREAD], AT_MS barrier-leak [THREAD],
    AT_MS barrier-error [THREAD], AT_MS burst N [THREAD], and the settings
    idle-handlers N, async-rate N, barrier-rate N, barrier-report-ms MS
    (a flag on the command line wins).
  Input channel (any --input-* flag; rate mode only): a SOCK_SEQPACKET
    socketpair to a forked dispatcher process (refapp-dispatch) that sends
    AOSP InputMessages (sendto) to loop thread 0; its queue then waits in
    ppoll() on the channel and refapp::InputReceiver::consumeEvents reads
    them (recvfrom) from MessageQueue::next(), outside any dispatch, posting
    one sync refapp::InputHandler message per event (busy 50 us, then sends
    FINISHED). --input-rate HZ events from --input-start for
    --input-duration (absolute times: event k at start + k/HZ);
    --input-type motion|key|mixed (every 10th KEY); --input-tap AT_MS: a KEY
    event; --input-pointers N; --input-stall MS@SEQ busy-stalls event SEQ.
  --watchdog MS (rate mode): the seed article's WatchDog poller. Thread
    refapp-watchdog posts a refapp::WatchdogHandler tick to loop thread 0
    at t0 + k*MS and, at the next check, logs watchdog_lag if it has not
    run (once per tick; no new tick until it ran). 1 dispatch per tick.

Log (--log, JSON lines, CLOCK_MONOTONIC ns, one per line, flushed):
  start (at t0), stall (per stall dispatch), nested (per outer nested
  dispatch), slow (any other dispatch >= --log-slow, e.g. background work
  preempted on a busy machine), idle (per SlowIdleHandler run),
  barrier_post, barrier_remove, barrier_error, barrier_stalled,
  barrier_leak (at exit), delivery (per burst message), input_channel,
  input_send, input_recv, input_finish, input_finish_recv, input_stall,
  input_dispatcher_summary (input channel), progress (--progress),
  watchdog_tick, watchdog_lag (--watchdog),
  main_exit, fork, forked, exec (process lifecycle flags), summary (at
  exit: per-thread dispatch counts and max_background_ns; a --fork-at
  child writes its own). start_ns/end_ns are
  read at the very start and end of refapp::Looper::dispatchMessage (idle:
  of refapp::MessageQueue::runIdleHandler).

Exit status: 0 (also after SIGTERM/SIGINT), 1 runtime error, 2 bad usage.
)";

std::string oneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

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

int usageError(const std::string& message) {
  std::fprintf(stderr, "refapp: error: %s\n", oneLine(message).c_str());
  return kExitUsage;
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

}  // namespace

int main(int argc, char** argv) {
  pthread_setname_np(pthread_self(), "refapp");

  Options opt;
  CLI::App app{
      "refapp: an Android-like Looper/MessageQueue/Handler app with "
      "injectable stalls and a ground-truth log (looptrace's reference "
      "app)."};
  app.name("refapp");
  app.footer(kFooter);
  app.add_option("--rate", opt.rate,
                 "background messages per second per loop thread (0 = "
                 "none); in --messages mode, the trigger rate")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000000.0));
  auto* duration_opt =
      app.add_option("--duration", opt.duration_ms,
                     "run time in ms after the start; then the loops quit "
                     "and refapp exits 0")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  app.add_option("--seed", opt.seed, "random seed of the background work")
      ->capture_default_str();
  app.add_option("--stall", opt.stall_flags,
                 "KIND:MS@AT_MS[:THREAD] (repeatable): at AT_MS a "
                 "StallHandler message stalls MS ms; KIND busy|sleep|lock")
      ->type_name("KIND:MS@AT_MS[:THREAD]");
  app.add_option("--plan", opt.plan,
                 "stall plan file: one 'AT_MS KIND MS [THREAD]' per line, "
                 "# comments")
      ->type_name("FILE");
  app.add_option("--messages", opt.messages,
                 "dispatch exactly N TriggerHandler messages per loop thread "
                 "(no background), then quit")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  app.add_option("--nested", opt.nested,
                 "N NestedHandler messages on thread 0, each running a nested "
                 "loop of 3 inner dispatches")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--nested-interval", opt.nested_interval_ms,
                 "ms between nested messages (the first is due at one "
                 "interval)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  app.add_option("--threads", opt.threads,
                 "loop threads, each with its own Looper (refapp-loopN)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxThreads));
  app.add_option("--start-delay", opt.start_delay_ms,
                 "ms to wait after startup before the scenario starts")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
  app.add_option("--log", opt.log, "ground-truth log (JSON lines)")
      ->type_name("FILE");
  app.add_option("--log-slow", opt.log_slow_ms,
                 "also log background, trigger and nested-inner dispatches "
                 "of at least MS ms (fractions allowed) as \"slow\" lines "
                 "(0 = never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600000.0));

  app.add_option("--idle-stall", opt.idle_stall_flags,
                 "KIND:MS@AT_MS[:THREAD] (repeatable): at AT_MS a one-shot "
                 "refapp::SlowIdleHandler is added that stalls MS ms the next "
                 "time the queue is idle; KIND busy|sleep|lock")
      ->type_name("KIND:MS@AT_MS[:THREAD]");
  auto* idle_handlers_opt =
      app.add_option("--idle-handlers", opt.idle_handlers,
                     "N keep-alive refapp::CheapIdleHandlers per loop thread "
                     "(~20 us each, at every idle moment)")
          ->capture_default_str()
          ->check(CLI::Range(0, 1000));
  app.add_option("--barrier", opt.barrier_flags,
                 "MS@AT_MS[:THREAD] (repeatable): at AT_MS post a sync "
                 "barrier; an asynchronous message removes it MS ms later")
      ->type_name("MS@AT_MS[:THREAD]");
  app.add_option("--barrier-leak", opt.barrier_leak_flags,
                 "AT_MS[:THREAD] (repeatable): post a sync barrier at AT_MS "
                 "and never remove it (rate mode only)")
      ->type_name("AT_MS[:THREAD]");
  app.add_option("--barrier-error", opt.barrier_error_flags,
                 "AT_MS[:THREAD] (repeatable): at AT_MS remove a stale "
                 "barrier token (an error, logged, then carry on)")
      ->type_name("AT_MS[:THREAD]");
  auto* barrier_report_opt =
      app.add_option("--barrier-report-ms", opt.barrier_report_ms,
                     "log barrier_stalled for a scenario barrier still up "
                     "this long after it was posted")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  auto* barrier_rate_opt =
      app.add_option("--barrier-rate", opt.barrier_rate,
                     "frames per second on thread 0: each posts a sync "
                     "barrier and an async frame message that removes it "
                     "(rate mode only)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1000.0));
  auto* async_rate_opt =
      app.add_option("--async-rate", opt.async_rate,
                     "asynchronous refapp::AsyncHandler messages per second "
                     "per loop thread, 0.1 ms each (rate mode only)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--burst", opt.burst_flags,
                 "N@AT_MS[:THREAD] (repeatable): at AT_MS post N sync "
                 "messages all due at once, busy 1 ms each (delivery lag)")
      ->type_name("N@AT_MS[:THREAD]");

  // The input channel: any of these turns it on (rate mode only).
  std::vector<CLI::Option*> input_opts;
  input_opts.push_back(
      app.add_option("--input-rate", opt.input_rate,
                     "input events per second sent by the dispatcher "
                     "process over the input channel to loop thread 0 "
                     "(0 = none)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 10000.0)));
  input_opts.push_back(
      app.add_option("--input-start", opt.input_start_ms,
                     "ms after the start of the first --input-rate event")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})));
  input_opts.push_back(
      app.add_option("--input-duration", opt.input_duration_ms,
                     "ms of --input-rate events (default: until 300 ms "
                     "before --duration)")
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})));
  input_opts.push_back(
      app.add_option("--input-tap", opt.input_taps,
                     "AT_MS (repeatable): one KEY input event at AT_MS")
          ->type_name("AT_MS")
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})));
  input_opts.push_back(
      app.add_option("--input-type", opt.input_type,
                     "--input-rate events: motion, key, or mixed (every "
                     "10th KEY, the rest MOTION)")
          ->capture_default_str()
          ->check(CLI::IsMember({"motion", "key", "mixed"})));
  input_opts.push_back(app.add_option("--input-pointers", opt.input_pointers,
                                      "pointers per MOTION event")
                           ->capture_default_str()
                           ->check(CLI::Range(1, 16)));
  input_opts.push_back(
      app.add_option("--input-stall", opt.input_stall_flags,
                     "MS@SEQ (repeatable): handling input event SEQ "
                     "busy-stalls MS ms in refapp::InputHandler")
          ->type_name("MS@SEQ"));

  app.add_option("--watchdog", opt.watchdog_ms,
                 "the seed article's WatchDog poller on loop thread 0: a "
                 "tick posted every MS ms, a watchdog_lag line when one has "
                 "not run by the next check (rate mode; 0 = off)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
  app.add_option("--main-exit-at", opt.main_exit_ms,
                 "at AT_MS the main thread exits on its own (the process "
                 "lives on with a zombie leader); thread refapp-ctl takes "
                 "over signals, --duration and the summary")
      ->type_name("AT_MS")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  app.add_option("--fork-at", opt.fork_at_ms,
                 "at AT_MS a refapp::ForkHandler dispatch on loop thread 0 "
                 "forks; the child keeps looping until --duration, logs its "
                 "own summary, exits 0 (rate mode, --threads 1)")
      ->type_name("AT_MS")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  app.add_option("--progress", opt.progress_ms,
                 "every MS ms after the start, a progress line with the "
                 "dispatches so far (0 = none)")
      ->type_name("MS")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
  app.add_option("exec", opt.exec_argv,
                 "after the run (its summary written), exec PROGRAM ARGS "
                 "instead of exiting")
      ->type_name("-- PROGRAM ARGS");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return usageError(e.what());
  }
  opt.duration_given = duration_opt->count() > 0;
  const bool messages_mode = opt.messages >= 0;
  // The duration stops the loops in rate mode, and caps --messages mode
  // only when given.
  const bool duration_applies = !messages_mode || opt.duration_given;

  std::string error;
  for (const std::string& flag : opt.stall_flags) {
    StallSpec s;
    if (!parseStallFlag(flag, &s, &error)) return usageError(error);
    opt.stalls.push_back(s);
  }
  for (const std::string& flag : opt.idle_stall_flags) {
    StallSpec s;
    if (!parseStallFlag(flag, &s, &error, "--idle-stall")) {
      return usageError(error);
    }
    EventSpec e;
    e.kind = EventKind::kIdleStall;
    e.stall_kind = s.kind;
    e.ms = s.ms;
    e.at_ms = s.at_ms;
    e.thread = s.thread;
    opt.events.push_back(e);
  }
  const std::pair<const std::vector<std::string>*, EventKind> event_flags[] = {
      {&opt.barrier_flags, EventKind::kBarrier},
      {&opt.barrier_leak_flags, EventKind::kBarrierLeak},
      {&opt.barrier_error_flags, EventKind::kBarrierError},
      {&opt.burst_flags, EventKind::kBurst}};
  for (const auto& [flags, kind] : event_flags) {
    for (const std::string& flag : *flags) {
      EventSpec e;
      if (!parseEventFlag(flag, kind, &e, &error)) return usageError(error);
      opt.events.push_back(e);
    }
  }
  PlanSettings plan_settings;
  if (!opt.plan.empty() &&
      !parsePlan(opt.plan, &opt.stalls, &opt.events, &plan_settings, &error)) {
    return usageError(error);
  }
  // A flag given on the command line wins over a plan-file setting.
  if (plan_settings.idle_handlers_set && idle_handlers_opt->count() == 0) {
    opt.idle_handlers = plan_settings.idle_handlers;
  }
  if (plan_settings.async_rate_set && async_rate_opt->count() == 0) {
    opt.async_rate = plan_settings.async_rate;
  }
  if (plan_settings.barrier_rate_set && barrier_rate_opt->count() == 0) {
    opt.barrier_rate = plan_settings.barrier_rate;
  }
  if (plan_settings.barrier_report_set && barrier_report_opt->count() == 0) {
    opt.barrier_report_ms = plan_settings.barrier_report_ms;
  }
  std::stable_sort(
      opt.stalls.begin(), opt.stalls.end(),
      [](const StallSpec& a, const StallSpec& b) { return a.at_ms < b.at_ms; });
  for (size_t i = 0; i < opt.stalls.size(); ++i) {
    StallSpec& s = opt.stalls[i];
    s.index = static_cast<int>(i);
    if (s.thread >= opt.threads) {
      return usageError("stall at " + std::to_string(s.at_ms) +
                        " ms targets thread " + std::to_string(s.thread) +
                        " but --threads is " + std::to_string(opt.threads));
    }
    if (duration_applies && s.at_ms >= opt.duration_ms) {
      return usageError("stall at " + std::to_string(s.at_ms) +
                        " ms is not before --duration " +
                        std::to_string(opt.duration_ms) + " ms");
    }
  }
  // Scenario events: numbered per kind in time order (the barrier kinds
  // share one numbering), checked like stalls.
  std::stable_sort(
      opt.events.begin(), opt.events.end(),
      [](const EventSpec& a, const EventSpec& b) { return a.at_ms < b.at_ms; });
  int idle_index = 0;
  int barrier_index = 0;
  int burst_index = 0;
  bool any_leak = false;
  for (EventSpec& e : opt.events) {
    switch (e.kind) {
      case EventKind::kIdleStall:
        e.index = idle_index++;
        break;
      case EventKind::kBurst:
        e.index = burst_index++;
        break;
      case EventKind::kBarrierLeak:
        any_leak = true;
        e.index = barrier_index++;
        break;
      case EventKind::kBarrier:
      case EventKind::kBarrierError:
        e.index = barrier_index++;
        break;
    }
    const std::string what = std::string(refapp::eventKindName(e.kind)) +
                             " at " + std::to_string(e.at_ms) + " ms";
    if (e.thread >= opt.threads) {
      return usageError(what + " targets thread " + std::to_string(e.thread) +
                        " but --threads is " + std::to_string(opt.threads));
    }
    if (duration_applies && e.at_ms >= opt.duration_ms) {
      return usageError(what + " is not before --duration " +
                        std::to_string(opt.duration_ms) + " ms");
    }
    if (duration_applies && e.kind == EventKind::kBarrier &&
        e.at_ms + e.ms >= opt.duration_ms) {
      return usageError(what + ": its removal (" +
                        std::to_string(e.at_ms + e.ms) +
                        " ms) is not before --duration " +
                        std::to_string(opt.duration_ms) + " ms");
    }
  }
  if (messages_mode &&
      (any_leak || opt.async_rate > 0 || opt.barrier_rate > 0)) {
    return usageError(
        "--barrier-leak, --async-rate and --barrier-rate need rate mode (not "
        "--messages, whose dispatch count is exact)");
  }
  const bool input_enabled =
      std::any_of(input_opts.begin(), input_opts.end(),
                  [](const CLI::Option* o) { return o->count() > 0; });
  refapp::InputConfig input_cfg;
  if (input_enabled) {
    if (messages_mode) {
      return usageError(
          "--input-* flags need rate mode (not --messages, whose dispatch "
          "count is exact)");
    }
    input_cfg.rate = opt.input_rate;
    input_cfg.start_ms = opt.input_start_ms;
    input_cfg.pointers = opt.input_pointers;
    input_cfg.type = opt.input_type == "motion" ? refapp::InputType::kMotion
                     : opt.input_type == "key"  ? refapp::InputType::kKey
                                                : refapp::InputType::kMixed;
    if (opt.input_rate > 0) {
      if (opt.input_start_ms >= opt.duration_ms) {
        return usageError("--input-start " +
                          std::to_string(opt.input_start_ms) +
                          " ms is not before --duration " +
                          std::to_string(opt.duration_ms) + " ms");
      }
      if (opt.input_duration_ms < 0) {
        input_cfg.duration_ms =
            opt.duration_ms - kInputTailMs - opt.input_start_ms;
        if (input_cfg.duration_ms <= 0) {
          return usageError(
              "--input-rate: no time for events between --input-start (" +
              std::to_string(opt.input_start_ms) +
              " ms) and 300 ms before --duration (" +
              std::to_string(opt.duration_ms) + " ms); give --input-duration");
        }
      } else {
        input_cfg.duration_ms = opt.input_duration_ms;
        if (opt.input_start_ms + opt.input_duration_ms > opt.duration_ms) {
          return usageError(
              "--input-start + --input-duration (" +
              std::to_string(opt.input_start_ms + opt.input_duration_ms) +
              " ms) is after --duration " + std::to_string(opt.duration_ms) +
              " ms");
        }
      }
    }
    input_cfg.taps = opt.input_taps;
    std::sort(input_cfg.taps.begin(), input_cfg.taps.end());
    for (int64_t at : input_cfg.taps) {
      if (at >= opt.duration_ms) {
        return usageError("--input-tap at " + std::to_string(at) +
                          " ms is not before --duration " +
                          std::to_string(opt.duration_ms) + " ms");
      }
    }
    for (const std::string& flag : opt.input_stall_flags) {
      refapp::InputStallSpec s;
      if (!parseInputStall(flag, &s, &error)) return usageError(error);
      for (const refapp::InputStallSpec& other : input_cfg.stalls) {
        if (other.seq == s.seq) {
          return usageError("--input-stall " + flag + ": seq " +
                            std::to_string(s.seq) + " given twice");
        }
      }
      input_cfg.stalls.push_back(s);
    }
  }
  if (opt.fork_at_ms >= 0) {
    // The child is one loop thread: another thread's lock held at fork
    // would stay held there forever.
    if (messages_mode || opt.threads != 1 || input_enabled ||
        opt.fork_at_ms >= opt.duration_ms) {
      return usageError(
          "--fork-at needs rate mode, --threads 1, no --input-* and a time "
          "before --duration");
    }
  }
  if (opt.watchdog_ms > 0 && (messages_mode || opt.fork_at_ms >= 0)) {
    // Ticks would make --messages counts inexact and keep nothing from
    // quitting; a forked child has no watchdog thread.
    return usageError("--watchdog needs rate mode and no --fork-at");
  }
  if (opt.main_exit_ms >= 0 && duration_applies &&
      opt.main_exit_ms >= opt.duration_ms) {
    return usageError("--main-exit-at " + std::to_string(opt.main_exit_ms) +
                      " ms is not before --duration " +
                      std::to_string(opt.duration_ms) + " ms");
  }
  if (duration_applies && opt.nested > 0 &&
      opt.nested * opt.nested_interval_ms >= opt.duration_ms) {
    return usageError("the last nested message (" +
                      std::to_string(opt.nested * opt.nested_interval_ms) +
                      " ms) is not before --duration " +
                      std::to_string(opt.duration_ms) + " ms");
  }

  refapp::Config cfg;
  cfg.messages_mode = messages_mode;
  cfg.messages = messages_mode ? opt.messages : 0;
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
  cfg.barrier_report_ns = opt.barrier_report_ms * 1000000;
  cfg.fork_at_ns = opt.fork_at_ms >= 0 ? opt.fork_at_ms * 1000000 : -1;

  refapp::GroundTruthLog log;
  if (!opt.log.empty() && !log.open(opt.log, &error)) {
    std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
    return 1;
  }

  // The input channel and its dispatcher process, forked before any thread
  // exists (and before the signal mask below, which it does not inherit).
  refapp::InputChannel input_channel;
  if (input_enabled &&
      !refapp::openInputChannel(input_cfg, log, &input_channel, &error)) {
    std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
    return 1;
  }

  // Signals are handled synchronously by the control thread only (the main
  // thread, or refapp-ctl with --main-exit-at).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  std::vector<std::unique_ptr<refapp::LoopThread>> loops;
  for (int i = 0; i < opt.threads; ++i) {
    const bool needs_holder =
        std::any_of(opt.stalls.begin(), opt.stalls.end(),
                    [i](const auto& s) {
                      return s.thread == i && s.kind == StallKind::kLock;
                    }) ||
        std::any_of(opt.events.begin(), opt.events.end(), [i](const auto& e) {
          return e.thread == i && e.kind == EventKind::kIdleStall &&
                 e.stall_kind == StallKind::kLock;
        });
    loops.push_back(
        std::make_unique<refapp::LoopThread>(i, cfg, log, needs_holder));
  }
  for (const StallSpec& s : opt.stalls) loops[s.thread]->addStall(s);
  for (const EventSpec& e : opt.events) loops[e.thread]->addEvent(e);

  std::unique_ptr<refapp::Watchdog> watchdog;
  if (opt.watchdog_ms > 0) {
    watchdog = std::make_unique<refapp::Watchdog>(*loops[0],
                                                  opt.watchdog_ms * 1000000);
  }

  // Input goes to loop thread 0, whose queue then polls the channel.
  std::unique_ptr<refapp::InputHandler> input_handler;
  std::unique_ptr<refapp::InputReceiver> input_receiver;
  if (input_enabled) {
    input_handler = std::make_unique<refapp::InputHandler>(
        *loops[0], input_channel.app_fd, input_cfg.stalls);
    input_receiver = std::make_unique<refapp::InputReceiver>(
        *loops[0], *input_handler, input_channel.app_fd);
    if (!loops[0]->looper().queue().addFd(input_channel.app_fd,
                                          input_receiver.get(), &error)) {
      std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
      refapp::closeInputChannel(&input_channel);
      return 1;
    }
  }

  // The thread that takes signals and runs the scenario clock: the main
  // thread, or refapp-ctl with --main-exit-at.
  std::atomic<pthread_t> control_thread{pthread_self()};
  std::atomic<int> exited{0};
  for (auto& loop : loops) {
    loop->start([&exited, &control_thread] {
      exited.fetch_add(1);
      pthread_kill(control_thread.load(), SIGUSR1);
    });
  }
  std::fprintf(stderr, "refapp: ready pid=%d\n", static_cast<int>(getpid()));

  // --main-exit-at: the main thread waits for this pipe, then exits alone.
  int main_exit_pipe[2] = {-1, -1};
  if (opt.main_exit_ms >= 0 && pipe2(main_exit_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "refapp: error: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  // Everything from here to the summary (and --exec) runs on the control
  // thread.
  const auto control = [&]() -> int {
    const char* reason = "duration";
    bool started = false;
    int64_t main_exit_ns = INT64_MAX;
    int64_t deadline = refapp::monotonicNs() + opt.start_delay_ms * 1000000;
    for (;;) {
      const int sig = waitSignal(sigs, deadline);
      if (sig == SIGINT || sig == SIGTERM) {
        reason = "signal";
        break;
      }
      if (sig == 0) break;
    }

    if (std::string(reason) != "signal") {
      started = true;
      cfg.t0_ns = refapp::monotonicNs();
      cfg.end_ns =
          duration_applies ? cfg.t0_ns + opt.duration_ms * 1000000 : INT64_MAX;
      nlohmann::json threads = nlohmann::json::array();
      for (auto& loop : loops) {
        nlohmann::json t = {{"index", loop->index()},
                            {"tid", static_cast<int>(loop->tid())},
                            {"name", loop->name()}};
        if (loop->lockHolder() != nullptr) {
          t["holder_tid"] = static_cast<int>(loop->lockHolder()->tid());
        }
        threads.push_back(t);
      }
      nlohmann::json stalls = nlohmann::json::array();
      for (const StallSpec& s : opt.stalls) {
        stalls.push_back({{"what", s.index},
                          {"kind", refapp::stallKindName(s.kind)},
                          {"function", refapp::stallFunctionName(s.kind)},
                          {"requested_ms", s.ms},
                          {"at_ms", s.at_ms},
                          {"when_ns", cfg.t0_ns + s.at_ms * 1000000},
                          {"thread", s.thread}});
      }
      nlohmann::json events = nlohmann::json::array();
      for (const EventSpec& e : opt.events) {
        nlohmann::json j = {{"event", refapp::eventKindName(e.kind)},
                            {"index", e.index},
                            {"at_ms", e.at_ms},
                            {"when_ns", cfg.t0_ns + e.at_ms * 1000000},
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
      log.write(
          {{"event", "start"},
           {"pid", static_cast<int>(getpid())},
           {"t0_ns", cfg.t0_ns},
           {"mode", messages_mode ? "messages" : "rate"},
           {"rate", opt.rate},
           {"period_ns", cfg.period_ns},
           {"duration_ms", duration_applies ? nlohmann::json(opt.duration_ms)
                                            : nlohmann::json(nullptr)},
           {"messages", messages_mode ? nlohmann::json(opt.messages)
                                      : nlohmann::json(nullptr)},
           {"nested", opt.nested},
           {"nested_interval_ms", opt.nested_interval_ms},
           {"seed", opt.seed},
           {"log_slow_ms", opt.log_slow_ms},
           {"threads", threads},
           {"stalls", stalls},
           {"idle_handlers", opt.idle_handlers},
           {"async_rate", opt.async_rate},
           {"async_period_ns", cfg.async_period_ns},
           {"barrier_rate", opt.barrier_rate},
           {"frame_period_ns", cfg.frame_period_ns},
           {"barrier_report_ms", opt.barrier_report_ms},
           {"watchdog_ms", watchdog ? nlohmann::json(opt.watchdog_ms)
                                    : nlohmann::json(nullptr)},
           {"events", events}});
      if (input_enabled) {
        nlohmann::json input_stalls = nlohmann::json::array();
        for (const refapp::InputStallSpec& s : input_cfg.stalls) {
          input_stalls.push_back({{"seq", s.seq}, {"ms", s.ms}});
        }
        log.write(
            {{"event", "input_channel"},
             {"pid", static_cast<int>(getpid())},
             {"dispatcher_pid", static_cast<int>(input_channel.dispatcher_pid)},
             {"app_inode", input_channel.app_inode},
             {"dispatcher_inode", input_channel.dispatcher_inode},
             {"app_fd", input_channel.app_fd},
             {"dispatcher_fd", input_channel.dispatcher_fd},
             {"sndbuf", input_channel.sndbuf},
             {"rcvbuf", input_channel.rcvbuf},
             {"tid", static_cast<int>(loops[0]->tid())},
             {"thread", 0},
             {"queue", refapp::hexAddress(&loops[0]->looper().queue())},
             {"t0_ns", cfg.t0_ns},
             {"rate", input_cfg.rate},
             {"start_ms", input_cfg.start_ms},
             {"duration_ms", input_cfg.duration_ms},
             {"taps", input_cfg.taps},
             {"type", refapp::inputTypeName(input_cfg.type)},
             {"pointers", input_cfg.pointers},
             {"stalls", input_stalls}});
        refapp::startInputDispatcher(&input_channel, cfg.t0_ns);
      }
      for (auto& loop : loops) loop->schedule();
      if (watchdog) watchdog->start(cfg.t0_ns);
      if (opt.main_exit_ms >= 0)
        main_exit_ns = cfg.t0_ns + opt.main_exit_ms * 1000000;

      int64_t progress_ns = opt.progress_ms > 0
                                ? cfg.t0_ns + opt.progress_ms * 1000000
                                : INT64_MAX;
      reason = messages_mode ? "done" : "duration";
      for (;;) {
        const int sig =
            waitSignal(sigs, std::min({cfg.end_ns, main_exit_ns, progress_ns}));
        if (sig == 0 && refapp::monotonicNs() >= progress_ns) {
          logProgress(log, loops);
          progress_ns += opt.progress_ms * 1000000;
          continue;
        }
        if (sig == SIGINT || sig == SIGTERM) {
          reason = "signal";
          break;
        }
        if (sig == 0 && main_exit_ns != INT64_MAX &&
            refapp::monotonicNs() >= main_exit_ns) {
          main_exit_ns = INT64_MAX;
          if (write(main_exit_pipe[1], "x", 1) != 1) {
            std::fprintf(stderr, "refapp: error: releasing the main thread\n");
          }
          continue;
        }
        if (sig == 0) {
          reason = "duration";
          break;
        }
        if (exited.load() == static_cast<int>(loops.size())) break;
      }
    }

    // The poller stops first: a loop that quits is not a blocked one.
    if (watchdog) watchdog->stop();
    // A dispatch in progress (e.g. a long stall) finishes first.
    for (auto& loop : loops) loop->quit();
    for (auto& loop : loops) loop->join();
    const int64_t end_ns = refapp::monotonicNs();
    for (auto& loop : loops) loop->logLeaks(end_ns);
    // The dispatcher sees EOF (or is done) and logs its summary first.
    int dispatcher_status = -1;
    if (input_enabled)
      dispatcher_status = refapp::closeInputChannel(&input_channel);

    uint64_t total = 0;
    nlohmann::json threads = nlohmann::json::array();
    for (auto& loop : loops) {
      const refapp::LoopStats& s = loop->stats();
      const uint64_t n = loop->looper().dispatchCount();
      const refapp::MessageQueue::Counters qc =
          loop->looper().queue().counters();
      total += n;
      nlohmann::json t = {
          {"index", loop->index()},
          {"tid", static_cast<int>(loop->tid())},
          {"name", loop->name()},
          {"dispatches", n},
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
          {"async_dispatches", loop->looper().asyncDispatchCount()},
          {"async_background", s.async_background},
          {"frames", s.frames},
          {"idle_setup", s.idle_setup},
          {"barrier_control", s.barrier_control},
          {"barrier_watch", s.barrier_watch},
          {"burst_posts", s.burst_posts},
          {"burst_items", s.burst_items}};
      if (input_handler != nullptr && loop->index() == 0) {
        t["input_dispatches"] = input_handler->dispatches();
      }
      if (watchdog && loop->index() == 0) {
        t["watchdog_ticks"] = watchdog->ticksRun();
      }
      threads.push_back(t);
    }
    nlohmann::json summary = {
        {"event", "summary"},  {"pid", static_cast<int>(getpid())},
        {"reason", reason},    {"started", started},
        {"t0_ns", cfg.t0_ns},  {"end_ns", end_ns},
        {"dispatches", total}, {"threads", threads}};
    if (input_enabled) {
      summary["input"] = {
          {"received", input_receiver->received()},
          {"finished", input_handler->finished()},
          {"dispatches", input_handler->dispatches()},
          {"invalid", input_receiver->invalid()},
          {"finish_errors", input_handler->finishErrors()},
          {"finish_eagain", input_handler->finishEagain()},
          {"fd_events", loops[0]->looper().queue().counters().fd_events},
          {"closed", input_receiver->closed()},
          {"dispatcher_pid", static_cast<int>(input_channel.dispatcher_pid)},
          {"dispatcher_status", dispatcher_status}};
    }
    if (watchdog) {
      summary["watchdog"] = {{"interval_ms", opt.watchdog_ms},
                             {"ticks_posted", watchdog->ticksPosted()},
                             {"ticks_run", watchdog->ticksRun()},
                             {"lags", watchdog->lags()}};
    }
    log.write(summary);
    std::fprintf(stderr, "refapp: exit reason=%s dispatches=%llu\n", reason,
                 static_cast<unsigned long long>(total));
    watchdog.reset();
    loops.clear();
    if (!opt.exec_argv.empty() && std::string(reason) != "signal") {
      return execProgram(opt.exec_argv, log);
    }
    return 0;
  };  // control

  if (opt.main_exit_ms < 0) return control();
  // The main thread leaves at --main-exit-at; refapp-ctl carries on and ends
  // the process with exit(), which also runs the destructors of what the
  // main thread built (it never unwinds: it leaves by the exit system call).
  std::atomic<pid_t> control_tid{0};
  std::thread ctl([&] {
    pthread_setname_np(pthread_self(), "refapp-ctl");
    control_tid.store(gettid());
    control_thread.store(pthread_self());
    std::exit(control());
  });
  ctl.detach();
  char c = 0;
  if (read(main_exit_pipe[0], &c, 1) == 1) {
    log.write({{"event", "main_exit"},
               {"pid", static_cast<int>(getpid())},
               {"tid", static_cast<int>(gettid())},
               {"at_ns", refapp::monotonicNs()},
               {"control_tid", static_cast<int>(control_tid.load())}});
  }
  syscall(SYS_exit, 0);
  return 0;
}
