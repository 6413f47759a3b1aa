// refapp's command line: the option table (CLI11), the scenario flags and
// plan file parsed, every flag checked against the others.
#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace refapp {

namespace {

constexpr int kExitUsage = 2;
constexpr int kMaxThreads = 64;

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

// The event word of a plan-file line (f[1]): its kind and how many fields
// its line has at least (one more: the THREAD). False for another word.
bool planEventKind(const std::string& word, EventKind* kind, size_t* want_min) {
  static const struct {
    const char* word;
    EventKind kind;
    size_t want_min;
  } kWords[] = {{"idle", EventKind::kIdleStall, 4},
                {"barrier", EventKind::kBarrier, 3},
                {"burst", EventKind::kBurst, 3},
                {"barrier-leak", EventKind::kBarrierLeak, 2},
                {"barrier-error", EventKind::kBarrierError, 2}};
  for (const auto& w : kWords) {
    if (word == w.word) {
      *kind = w.kind;
      *want_min = w.want_min;
      return true;
    }
  }
  return false;
}

const char* planEventSyntax(EventKind kind) {
  switch (kind) {
    case EventKind::kIdleStall:
      return "AT_MS idle KIND MS [THREAD]";
    case EventKind::kBarrier:
      return "AT_MS barrier MS [THREAD]";
    case EventKind::kBurst:
      return "AT_MS burst N [THREAD]";
    case EventKind::kBarrierLeak:
      return "AT_MS barrier-leak [THREAD]";
    case EventKind::kBarrierError:
      return "AT_MS barrier-error [THREAD]";
  }
  return "";
}

// A plan event's number: a burst's N (e->count), else a length in ms.
bool parsePlanEventNumber(const std::string& text, EventSpec* e,
                          std::string* error) {
  int64_t v = 0;
  if (!parseInt(text, &v)) {
    *error = "bad number '" + text + "'";
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
  return true;
}

// A plan-file line that is not a dispatch stall: `AT_MS idle KIND MS
// [THREAD]`, `AT_MS barrier MS [THREAD]`, `AT_MS barrier-leak [THREAD]`,
// `AT_MS barrier-error [THREAD]`, `AT_MS burst N [THREAD]`. Returns false
// with *handled unset when f[1] is not one of those words.
bool parsePlanEvent(const std::vector<std::string>& f, EventSpec* e,
                    bool* handled, std::string* error) {
  size_t want_min = 0;
  *handled = planEventKind(f[1], &e->kind, &want_min);
  if (!*handled) return false;
  if (f.size() < want_min || f.size() > want_min + 1) {
    *error = std::string("expected ") + planEventSyntax(e->kind);
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
    if (!parsePlanEventNumber(f[next], e, error)) return false;
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

int usageError(const std::string& message) {
  std::fprintf(stderr, "refapp: error: %s\n", oneLine(message).c_str());
  return kExitUsage;
}

// The options whose presence counts: a flag given on the command line wins
// over a plan-file setting; any --input-* flag turns the input channel on.
struct GivenFlags {
  CLI::Option* duration = nullptr;
  CLI::Option* idle_handlers = nullptr;
  CLI::Option* barrier_report = nullptr;
  CLI::Option* barrier_rate = nullptr;
  CLI::Option* async_rate = nullptr;
  std::vector<CLI::Option*> input;
};

// The loop threads, their background work, stalls and the log.
void addLoopOptions(CLI::App& app, Options& opt, GivenFlags& given) {
  app.add_option("--rate", opt.rate,
                 "background messages per second per loop thread (0 = "
                 "none); in --messages mode, the trigger rate")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000000.0));
  given.duration =
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
}

// Idle handlers, sync barriers and delivery lag.
void addScenarioOptions(CLI::App& app, Options& opt, GivenFlags& given) {
  app.add_option("--idle-stall", opt.idle_stall_flags,
                 "KIND:MS@AT_MS[:THREAD] (repeatable): at AT_MS a one-shot "
                 "refapp::SlowIdleHandler is added that stalls MS ms the next "
                 "time the queue is idle; KIND busy|sleep|lock")
      ->type_name("KIND:MS@AT_MS[:THREAD]");
  given.idle_handlers =
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
  given.barrier_report =
      app.add_option("--barrier-report-ms", opt.barrier_report_ms,
                     "log barrier_stalled for a scenario barrier still up "
                     "this long after it was posted")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{3600000}));
  given.barrier_rate =
      app.add_option("--barrier-rate", opt.barrier_rate,
                     "frames per second on thread 0: each posts a sync "
                     "barrier and an async frame message that removes it "
                     "(rate mode only)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--frame-stall-every", opt.frame_stall_every,
                 "every Nth frame of --barrier-rate (frames 0, N, 2N, ...) "
                 "works --frame-stall-ms instead of 0.1 ms: a janky frame")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--frame-stall-ms", opt.frame_stall_ms,
                 "the work of a frame --frame-stall-every picks")
      ->capture_default_str()
      ->type_name("MS")
      ->check(CLI::Range(int64_t{1}, int64_t{10000}));
  app.add_option("--frame-stall-phase", opt.frame_stall_phase_name,
                 "the phase of doFrame those frames work in: input, "
                 "animation or traversal")
      ->type_name("PHASE")
      ->capture_default_str()
      ->check(CLI::IsMember({"input", "animation", "traversal"}));
  given.async_rate =
      app.add_option("--async-rate", opt.async_rate,
                     "asynchronous refapp::AsyncHandler messages per second "
                     "per loop thread, 0.1 ms each (rate mode only)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--burst", opt.burst_flags,
                 "N@AT_MS[:THREAD] (repeatable): at AT_MS post N sync "
                 "messages all due at once, busy 1 ms each (delivery lag)")
      ->type_name("N@AT_MS[:THREAD]");
}

// The input channel: any of these turns it on (rate mode only).
void addInputOptions(CLI::App& app, Options& opt, GivenFlags& given) {
  given.input.push_back(
      app.add_option("--input-rate", opt.input_rate,
                     "input events per second sent by the dispatcher "
                     "process over the input channel to loop thread 0 "
                     "(0 = none)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 10000.0)));
  given.input.push_back(
      app.add_option("--input-start", opt.input_start_ms,
                     "ms after the start of the first --input-rate event")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})));
  given.input.push_back(
      app.add_option("--input-duration", opt.input_duration_ms,
                     "ms of --input-rate events (default: until 300 ms "
                     "before --duration)")
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})));
  given.input.push_back(
      app.add_option("--input-tap", opt.input_taps,
                     "AT_MS (repeatable): one KEY input event at AT_MS")
          ->type_name("AT_MS")
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})));
  given.input.push_back(
      app.add_option("--input-type", opt.input_type,
                     "--input-rate events: motion, key, or mixed (every "
                     "10th KEY, the rest MOTION)")
          ->capture_default_str()
          ->check(CLI::IsMember({"motion", "key", "mixed"})));
  given.input.push_back(app.add_option("--input-pointers", opt.input_pointers,
                                       "pointers per MOTION event")
                            ->capture_default_str()
                            ->check(CLI::Range(1, 16)));
  given.input.push_back(
      app.add_option("--input-stall", opt.input_stall_flags,
                     "MS@SEQ (repeatable): handling input event SEQ "
                     "busy-stalls MS ms in refapp::InputHandler")
          ->type_name("MS@SEQ"));
  given.input.push_back(
      app.add_flag("--input-timeline", opt.input_timeline,
                   "after each event, send the dispatcher a TIMELINE "
                   "(Android 12+) with the present time of the frame that "
                   "showed it: the first vsync (--barrier-rate, else 60 "
                   "Hz) a vsync after its FINISHED"));
}

// The watchdog, the process lifecycle (the fault tests) and -- PROGRAM.
void addLifecycleOptions(CLI::App& app, Options& opt) {
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
}

// --stall, --idle-stall, --barrier, --barrier-leak, --barrier-error and
// --burst into opt->stalls and opt->events.
bool parseScenarioFlags(Options* opt, std::string* error) {
  for (const std::string& flag : opt->stall_flags) {
    StallSpec s;
    if (!parseStallFlag(flag, &s, error)) return false;
    opt->stalls.push_back(s);
  }
  for (const std::string& flag : opt->idle_stall_flags) {
    StallSpec s;
    if (!parseStallFlag(flag, &s, error, "--idle-stall")) return false;
    EventSpec e;
    e.kind = EventKind::kIdleStall;
    e.stall_kind = s.kind;
    e.ms = s.ms;
    e.at_ms = s.at_ms;
    e.thread = s.thread;
    opt->events.push_back(e);
  }
  const std::pair<const std::vector<std::string>*, EventKind> event_flags[] = {
      {&opt->barrier_flags, EventKind::kBarrier},
      {&opt->barrier_leak_flags, EventKind::kBarrierLeak},
      {&opt->barrier_error_flags, EventKind::kBarrierError},
      {&opt->burst_flags, EventKind::kBurst}};
  for (const auto& [flags, kind] : event_flags) {
    for (const std::string& flag : *flags) {
      EventSpec e;
      if (!parseEventFlag(flag, kind, &e, error)) return false;
      opt->events.push_back(e);
    }
  }
  return true;
}

// A flag given on the command line wins over a plan-file setting.
void applyPlanSettings(const PlanSettings& ps, const GivenFlags& given,
                       Options* opt) {
  if (ps.idle_handlers_set && given.idle_handlers->count() == 0) {
    opt->idle_handlers = ps.idle_handlers;
  }
  if (ps.async_rate_set && given.async_rate->count() == 0) {
    opt->async_rate = ps.async_rate;
  }
  if (ps.barrier_rate_set && given.barrier_rate->count() == 0) {
    opt->barrier_rate = ps.barrier_rate;
  }
  if (ps.barrier_report_set && given.barrier_report->count() == 0) {
    opt->barrier_report_ms = ps.barrier_report_ms;
  }
}

// Stalls: numbered in time order, each on a thread that exists and due
// before --duration.
bool checkStalls(Options* opt, std::string* error) {
  std::stable_sort(
      opt->stalls.begin(), opt->stalls.end(),
      [](const StallSpec& a, const StallSpec& b) { return a.at_ms < b.at_ms; });
  for (size_t i = 0; i < opt->stalls.size(); ++i) {
    StallSpec& s = opt->stalls[i];
    s.index = static_cast<int>(i);
    if (s.thread >= opt->threads) {
      *error = "stall at " + std::to_string(s.at_ms) + " ms targets thread " +
               std::to_string(s.thread) + " but --threads is " +
               std::to_string(opt->threads);
      return false;
    }
    if (opt->duration_applies && s.at_ms >= opt->duration_ms) {
      *error = "stall at " + std::to_string(s.at_ms) +
               " ms is not before --duration " +
               std::to_string(opt->duration_ms) + " ms";
      return false;
    }
  }
  return true;
}

// Numbers scenario event e among those of its kind (the barrier kinds
// share one numbering).
struct EventCounters {
  int idle = 0;
  int barrier = 0;
  int burst = 0;
  bool any_leak = false;

  void number(EventSpec* e) {
    switch (e->kind) {
      case EventKind::kIdleStall:
        e->index = idle++;
        break;
      case EventKind::kBurst:
        e->index = burst++;
        break;
      case EventKind::kBarrierLeak:
        any_leak = true;
        e->index = barrier++;
        break;
      case EventKind::kBarrier:
      case EventKind::kBarrierError:
        e->index = barrier++;
        break;
    }
  }
};

// Scenario events: numbered per kind in time order, checked like stalls;
// the kinds that keep --messages counts from being exact need rate mode.
bool checkEvents(Options* opt, std::string* error) {
  std::stable_sort(
      opt->events.begin(), opt->events.end(),
      [](const EventSpec& a, const EventSpec& b) { return a.at_ms < b.at_ms; });
  EventCounters counters;
  const std::string duration = std::to_string(opt->duration_ms) + " ms";
  for (EventSpec& e : opt->events) {
    counters.number(&e);
    const std::string what = std::string(eventKindName(e.kind)) + " at " +
                             std::to_string(e.at_ms) + " ms";
    if (e.thread >= opt->threads) {
      *error = what + " targets thread " + std::to_string(e.thread) +
               " but --threads is " + std::to_string(opt->threads);
      return false;
    }
    if (opt->duration_applies && e.at_ms >= opt->duration_ms) {
      *error = what + " is not before --duration " + duration;
      return false;
    }
    if (opt->duration_applies && e.kind == EventKind::kBarrier &&
        e.at_ms + e.ms >= opt->duration_ms) {
      *error = what + ": its removal (" + std::to_string(e.at_ms + e.ms) +
               " ms) is not before --duration " + duration;
      return false;
    }
  }
  if (opt->messages_mode &&
      (counters.any_leak || opt->async_rate > 0 || opt->barrier_rate > 0)) {
    *error =
        "--barrier-leak, --async-rate and --barrier-rate need rate mode (not "
        "--messages, whose dispatch count is exact)";
    return false;
  }
  if (opt->frame_stall_every > 0 && opt->barrier_rate <= 0) {
    *error = "--frame-stall-every needs --barrier-rate (the frames)";
    return false;
  }
  return true;
}

// The --input-rate stream's length: --input-duration, or until
// kInputTailMs before --duration.
bool inputStreamDuration(const Options& opt, InputConfig* in,
                         std::string* error) {
  const std::string duration = std::to_string(opt.duration_ms) + " ms";
  if (opt.input_start_ms >= opt.duration_ms) {
    *error = "--input-start " + std::to_string(opt.input_start_ms) +
             " ms is not before --duration " + duration;
    return false;
  }
  if (opt.input_duration_ms < 0) {
    in->duration_ms = opt.duration_ms - kInputTailMs - opt.input_start_ms;
    if (in->duration_ms <= 0) {
      *error = "--input-rate: no time for events between --input-start (" +
               std::to_string(opt.input_start_ms) +
               " ms) and 300 ms before --duration (" + duration +
               "); give --input-duration";
      return false;
    }
    return true;
  }
  in->duration_ms = opt.input_duration_ms;
  if (opt.input_start_ms + opt.input_duration_ms > opt.duration_ms) {
    *error = "--input-start + --input-duration (" +
             std::to_string(opt.input_start_ms + opt.input_duration_ms) +
             " ms) is after --duration " + duration;
    return false;
  }
  return true;
}

// The input channel's configuration (opt->input), when an --input-* flag
// turned it on.
bool buildInputConfig(Options* opt, std::string* error) {
  if (!opt->input_enabled) return true;
  if (opt->messages_mode) {
    *error =
        "--input-* flags need rate mode (not --messages, whose dispatch "
        "count is exact)";
    return false;
  }
  InputConfig& in = opt->input;
  in.rate = opt->input_rate;
  in.start_ms = opt->input_start_ms;
  in.pointers = opt->input_pointers;
  in.type = opt->input_type == "motion" ? InputType::kMotion
            : opt->input_type == "key"  ? InputType::kKey
                                        : InputType::kMixed;
  if (opt->input_rate > 0 && !inputStreamDuration(*opt, &in, error)) {
    return false;
  }
  in.taps = opt->input_taps;
  in.timeline = opt->input_timeline;
  std::sort(in.taps.begin(), in.taps.end());
  for (int64_t at : in.taps) {
    if (at >= opt->duration_ms) {
      *error = "--input-tap at " + std::to_string(at) +
               " ms is not before --duration " +
               std::to_string(opt->duration_ms) + " ms";
      return false;
    }
  }
  for (const std::string& flag : opt->input_stall_flags) {
    InputStallSpec s;
    if (!parseInputStall(flag, &s, error)) return false;
    for (const InputStallSpec& other : in.stalls) {
      if (other.seq == s.seq) {
        *error = "--input-stall " + flag + ": seq " + std::to_string(s.seq) +
                 " given twice";
        return false;
      }
    }
    in.stalls.push_back(s);
  }
  return true;
}

// --fork-at, --watchdog, --main-exit-at and --nested against the mode and
// --duration.
bool checkLifecycle(const Options& opt, std::string* error) {
  const std::string duration = std::to_string(opt.duration_ms) + " ms";
  // The child is one loop thread: another thread's lock held at fork would
  // stay held there forever.
  if (opt.fork_at_ms >= 0 &&
      (opt.messages_mode || opt.threads != 1 || opt.input_enabled ||
       opt.fork_at_ms >= opt.duration_ms)) {
    *error =
        "--fork-at needs rate mode, --threads 1, no --input-* and a time "
        "before --duration";
    return false;
  }
  if (opt.watchdog_ms > 0 && (opt.messages_mode || opt.fork_at_ms >= 0)) {
    // Ticks would make --messages counts inexact and keep nothing from
    // quitting; a forked child has no watchdog thread.
    *error = "--watchdog needs rate mode and no --fork-at";
    return false;
  }
  if (opt.main_exit_ms >= 0 && opt.duration_applies &&
      opt.main_exit_ms >= opt.duration_ms) {
    *error = "--main-exit-at " + std::to_string(opt.main_exit_ms) +
             " ms is not before --duration " + duration;
    return false;
  }
  if (opt.duration_applies && opt.nested > 0 &&
      opt.nested * opt.nested_interval_ms >= opt.duration_ms) {
    *error = "the last nested message (" +
             std::to_string(opt.nested * opt.nested_interval_ms) +
             " ms) is not before --duration " + duration;
    return false;
  }
  return true;
}

}  // namespace

int parseCommandLine(int argc, char** argv, Options* opt) {
  CLI::App app{
      "refapp: an Android-like Looper/MessageQueue/Handler app with "
      "injectable stalls and a ground-truth log (looptrace's reference "
      "app)."};
  app.name("refapp");
  app.footer(kFooter);
  GivenFlags given;
  addLoopOptions(app, *opt, given);
  addScenarioOptions(app, *opt, given);
  addInputOptions(app, *opt, given);
  addLifecycleOptions(app, *opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return usageError(e.what());
  }
  opt->duration_given = given.duration->count() > 0;
  opt->messages_mode = opt->messages >= 0;
  opt->duration_applies = !opt->messages_mode || opt->duration_given;
  opt->input_enabled =
      std::any_of(given.input.begin(), given.input.end(),
                  [](const CLI::Option* o) { return o->count() > 0; });

  std::string error;
  PlanSettings plan_settings;
  if (!parseScenarioFlags(opt, &error)) return usageError(error);
  if (!opt->plan.empty() && !parsePlan(opt->plan, &opt->stalls, &opt->events,
                                       &plan_settings, &error)) {
    return usageError(error);
  }
  applyPlanSettings(plan_settings, given, opt);
  if (!checkStalls(opt, &error) || !checkEvents(opt, &error) ||
      !buildInputConfig(opt, &error) || !checkLifecycle(*opt, &error)) {
    return usageError(error);
  }
  return -1;
}

}  // namespace refapp
