// refapp: the reference app looptrace traces. An Android-like Looper per loop
// thread, a scenario of background work, injected stalls, exact-count
// trigger messages and nested loops, and a ground-truth log (JSON lines,
// CLOCK_MONOTONIC ns). See `refapp --help` and refapp/README.md.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "looper.h"
#include "scenario.h"

namespace {

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

// KIND:MS@AT_MS[:THREAD]
bool parseStallFlag(const std::string& text, StallSpec* spec,
                    std::string* error) {
  const auto bad = [&](const std::string& why) {
    *error = "--stall " + text + ": " + why +
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

// One stall per line: AT_MS KIND MS [THREAD]; '#' starts a comment.
bool parsePlan(const std::string& path, std::vector<StallSpec>* out,
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
    std::string why;
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

Log (--log, JSON lines, CLOCK_MONOTONIC ns, one per line, flushed):
  start (at t0), stall (per stall dispatch), nested (per outer nested
  dispatch), slow (any other dispatch >= --log-slow, e.g. background work
  preempted on a busy machine), summary (at exit: per-thread dispatch
  counts and max_background_ns). start_ns/end_ns are read at the very
  start and end of refapp::Looper::dispatchMessage.

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
  if (!opt.plan.empty() && !parsePlan(opt.plan, &opt.stalls, &error)) {
    return usageError(error);
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

  refapp::GroundTruthLog log;
  if (!opt.log.empty() && !log.open(opt.log, &error)) {
    std::fprintf(stderr, "refapp: error: %s\n", error.c_str());
    return 1;
  }

  // Signals are handled synchronously by the main thread only.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  const pthread_t main_thread = pthread_self();

  std::vector<std::unique_ptr<refapp::LoopThread>> loops;
  for (int i = 0; i < opt.threads; ++i) {
    const bool needs_holder =
        std::any_of(opt.stalls.begin(), opt.stalls.end(), [i](const auto& s) {
          return s.thread == i && s.kind == StallKind::kLock;
        });
    loops.push_back(
        std::make_unique<refapp::LoopThread>(i, cfg, log, needs_holder));
  }
  for (const StallSpec& s : opt.stalls) loops[s.thread]->addStall(s);

  std::atomic<int> exited{0};
  for (auto& loop : loops) {
    loop->start([&exited, main_thread] {
      exited.fetch_add(1);
      pthread_kill(main_thread, SIGUSR1);
    });
  }
  std::fprintf(stderr, "refapp: ready pid=%d\n", static_cast<int>(getpid()));

  const char* reason = "duration";
  bool started = false;
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
         {"stalls", stalls}});
    for (auto& loop : loops) loop->schedule();

    reason = messages_mode ? "done" : "duration";
    for (;;) {
      const int sig = waitSignal(sigs, cfg.end_ns);
      if (sig == SIGINT || sig == SIGTERM) {
        reason = "signal";
        break;
      }
      if (sig == 0) {
        reason = "duration";
        break;
      }
      if (exited.load() == static_cast<int>(loops.size())) break;
    }
  }

  // A dispatch in progress (e.g. a long stall) finishes first.
  for (auto& loop : loops) loop->quit();
  for (auto& loop : loops) loop->join();
  const int64_t end_ns = refapp::monotonicNs();

  uint64_t total = 0;
  nlohmann::json threads = nlohmann::json::array();
  for (auto& loop : loops) {
    const refapp::LoopStats& s = loop->stats();
    const uint64_t n = loop->looper().dispatchCount();
    total += n;
    threads.push_back({{"index", loop->index()},
                       {"tid", static_cast<int>(loop->tid())},
                       {"name", loop->name()},
                       {"dispatches", n},
                       {"max_background_ns", s.max_background_ns},
                       {"background", s.background},
                       {"triggers", s.triggers},
                       {"stalls", s.stalls},
                       {"nested_outer", s.nested_outer},
                       {"nested_inner", s.nested_inner}});
  }
  log.write({{"event", "summary"},
             {"pid", static_cast<int>(getpid())},
             {"reason", reason},
             {"started", started},
             {"t0_ns", cfg.t0_ns},
             {"end_ns", end_ns},
             {"dispatches", total},
             {"threads", threads}});
  std::fprintf(stderr, "refapp: exit reason=%s dispatches=%llu\n", reason,
               static_cast<unsigned long long>(total));
  loops.clear();
  return 0;
}
