// Off-CPU: where a thread inside a dispatch blocked (its user and kernel
// stacks at the switch-out) and who woke it (the waker's thread and stacks,
// or an interrupt). Ground truth: the traced programs' own logs (refapp's
// stall lines and holder thread, glib_loop.py's and glib_lock.py's clocks),
// what strace shows python's time.sleep to be (clock_nanosleep), and the
// programs' documented call chains (refapp/README.md).
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness.h"
#include "looptrace/abi.h"

namespace lt_test {
namespace {

using nlohmann::json;

// blocked_ns and the ground truth are both CLOCK_MONOTONIC (the kernel's
// bpf_ktime_get_ns, the programs' vDSO clock_gettime): an interval looptrace
// saw inside the program's two clock reads is shorter than theirs. This
// much is allowed for the two ways of reading the one clock.
constexpr int64_t kClockSlackNs = 50'000;

// The function of a frame "function+0x12"; "0x7f... (module)" as it is.
std::string function_of(const std::string& frame) {
  std::string f = frame;
  size_t plus = f.rfind("+0x");
  if (plus != std::string::npos) f.resize(plus);
  return f;
}

bool has_frame(const json& frames, const std::string& what) {
  for (const json& f : frames)
    if (function_of(f.get<std::string>()).find(what) != std::string::npos)
      return true;
  return false;
}

std::string dump_frames(const json& frames) {
  std::string all;
  for (const json& f : frames) all += f.get<std::string>() + " < ";
  return all;
}

// A timer's wakeup of a blocked span may be missing only when the kernel
// did not run looptrace's hooks for it: a hook skipped while it ran for
// another thread (lost.hook_misses), or a guest kernel that runs no hook
// in its agent's threads (docs/looptrace.md, LIMITS), which leaves the
// thread's switch back in unseen too, so the span's split came from the
// kernel's counters.
::testing::AssertionResult waker_loss_explained(const json& report,
                                                const json& span) {
  if (report["lost"]["hook_misses"].get<int64_t>() > 0)
    return ::testing::AssertionSuccess();
  if (span.value("split_from", "") == "kernel_counters")
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "no waker, and neither a hook miss nor an unseen switch: "
         << span.dump() << "\nlost: " << report["lost"].dump();
}

// refapp's dispatch span starts within microseconds of the log's start_ns
// (its first clock read inside dispatchMessage); 5 ms tells it from the
// neighbouring background dispatches, 10 ms apart at --rate 100.
// Same thread: with two loop threads stalls may start together.
const json* span_of(const json& report, const json& stall) {
  for (const json& s : report["slow_dispatches"])
    if (s["tid"] == stall["tid"] &&
        std::llabs(diff(s["start_ns"], stall["start_ns"])) < 5'000'000)
      return &s;
  return nullptr;
}

// A GLib dispatch span covers the python callback plus GLib's and
// PyGObject's work around it: match by containment.
const json* span_containing(const json& report, const json& stall) {
  for (const json& s : report["slow_dispatches"]) {
    uint64_t start = s["start_ns"], dur = s["duration_ns"];
    if (s["tid"] == stall["tid"] &&
        start <= stall["start_ns"].get<uint64_t>() &&
        start + dur >= stall["end_ns"].get<uint64_t>())
      return &s;
  }
  return nullptr;
}

struct Traced {
  json report;
  std::vector<json> log;
};

// looptrace record (the refapp profile, or `profile_args`) of `argv` under
// --call-graph `mode` (empty: the default); the report and the program's
// log.
Traced record(const std::vector<std::string>& profile_args,
              const std::string& mode, const std::vector<std::string>& extra,
              const std::vector<std::string>& argv) {
  TempDir dir;
  const std::string out = dir.file("r.json"), log = dir.file("app.jsonl");
  std::vector<std::string> cmd = {looptrace_bin(), "record"};
  cmd.insert(cmd.end(), profile_args.begin(), profile_args.end());
  cmd.push_back("-q");
  if (!mode.empty()) cmd.insert(cmd.end(), {"--call-graph", mode});
  cmd.insert(cmd.end(), {"--json", out});
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  cmd.push_back("--");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  cmd.insert(cmd.end(), {"--log", log});
  RunResult r = run(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Traced t;
  t.log = read_jsonl(log);
  t.report = read_json(out);
  return t;
}

Traced record_refapp(const std::string& mode,
                     const std::vector<std::string>& stalls,
                     const std::vector<std::string>& extra = {},
                     int threads = 1) {
  std::vector<std::string> argv = {
      refapp_bin(),           "--rate", "100",
      "--duration",           "1500",   "--threads",
      std::to_string(threads)};
  for (const std::string& s : stalls) argv.insert(argv.end(), {"--stall", s});
  return record({"--profile", "refapp"}, mode, extra, argv);
}

// What every slow span with recorded blocking points must satisfy:
// the recorded points account for (almost) all of its blocked time and
// never for more.
void expect_recorded_close_to_blocked(const json& span) {
  const int64_t blocked = span["blocked_ns"],
                recorded = span["blocked_recorded_ns"];
  // blocked_ns is the scheduler's books (wall - cpu - runq - steal); the
  // recorded points run from the switch-out to the wakeup, and the thread
  // is runnable, not blocked, from its wakeup to its switch-in. Slack: a
  // missed context switch makes looptrace fall back on the kernel's CPU
  // split, good to a tick, plus 1 ms for where the books start and stop.
  const int64_t slack = tick_ns() + 1'000'000;
  EXPECT_LE(recorded, blocked + slack) << span.dump();
  // The sleeps and lock waits here are one blocking point each, hundreds
  // of ms long: the few short waits around them (page faults, the lock
  // handshake) may go unrecorded, not 10 %.
  EXPECT_GE(recorded, blocked * 9 / 10) << span.dump();
}

class OffCpuSleep : public ::testing::TestWithParam<const char*> {};

TEST_P(OffCpuSleep, BlockedInSleepStallWokenByTimer) {
  LT_REQUIRE_BPF();
  const std::string mode = GetParam();
  Traced t = record_refapp(mode, {"sleep:150@400", "sleep:250@800"});
  std::vector<json> stalls = events(t.log, "stall");
  ASSERT_EQ(stalls.size(), 2u);
  for (const json& st : stalls) {
    const json* s = span_of(t.report, st);
    ASSERT_NE(s, nullptr) << "stall not reported: " << st.dump() << "\n"
                          << t.report["slow_dispatches"].dump();
    ASSERT_FALSE((*s)["blocked"].empty()) << s->dump();
    const json& b = (*s)["blocked"][0];
    // refapp::sleepStall issues clock_nanosleep from its own frame
    // (refapp/README.md): frame pointers see it as well as CFI does.
    EXPECT_TRUE(has_frame(b["frames"], "refapp::sleepStall"))
        << dump_frames(b["frames"]);
    EXPECT_TRUE(has_frame(b["frames"], "refapp::Looper::dispatchMessage"))
        << dump_frames(b["frames"]);
    EXPECT_EQ(b["unwind"], mode == "fp" ? "frame_pointer" : "dwarf");
    // The whole stack, down to the thread's start, by default too.
    if (mode != "fp") {
      EXPECT_EQ(b["truncated"], false) << b.dump();
    }
    EXPECT_NE(b["kernel_wait"].get<std::string>().find("nanosleep"),
              std::string::npos)
        << b.dump();
    EXPECT_EQ(b["count"], 1) << b.dump();

    const int64_t requested = st["requested_ms"].get<int64_t>() * 1'000'000;
    const int64_t run_delay = std::max<int64_t>(0, st["run_delay_ns"]);
    const int64_t blocked = b["blocked_ns"];
    // The sleep is to an absolute deadline, the clock read at sleepStall's
    // entry + MS, and a timer never fires early: blocked for MS less what
    // ran between that read and the switch-out (microseconds, 1 ms allowed)
    // and any wait for a CPU there (the stall's run_delay, logged).
    EXPECT_GE(blocked, requested - 1'000'000 - run_delay) << b.dump() << "\n"
                                                          << st.dump();
    // The switch-out and the wakeup both fall between the dispatch's first
    // and last clock reads.
    EXPECT_LE(blocked, st["duration_ns"].get<int64_t>() + kClockSlackNs)
        << b.dump() << "\n"
        << st.dump();

    expect_recorded_close_to_blocked(*s);

    // Nobody woke it: the timer's interrupt did (hrtimer_wakeup).
    if (b["wakers"].empty()) {
      EXPECT_TRUE(waker_loss_explained(t.report, *s));
      continue;
    }
    const json& w = b["wakers"][0];
    EXPECT_EQ(w["interrupt"], true) << w.dump();
    EXPECT_TRUE(w["frames"].empty()) << w.dump();
    EXPECT_TRUE(has_frame(w["kernel_frames"], "hrtimer_wakeup")) << w.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(OffCpu, OffCpuSleep,
                         ::testing::Values("fp", "dwarf", ""));

// The refapp lock stall: refapp::lockStall has thread refapp-holderN take
// the mutex, then blocks in std::mutex::lock until the holder unlocks it
// at dispatch start + MS (refapp/README.md).
struct LockRun {
  Traced t;
  json stall;
  const json* span = nullptr;
  int holder_tid = 0;
  int pid = 0;
};

void record_lock_stall(const std::string& mode, LockRun* out,
                       const std::vector<std::string>& extra = {}) {
  out->t = record_refapp(mode, {"lock:250@500"}, extra);
  std::vector<json> stalls = events(out->t.log, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  out->stall = stalls[0];
  out->holder_tid = out->stall["holder_tid"];
  out->pid = out->stall["pid"];
  ASSERT_GT(out->holder_tid, 0) << out->stall.dump();
  out->span = span_of(out->t.report, out->stall);
  ASSERT_NE(out->span, nullptr) << out->stall.dump() << "\n"
                                << out->t.report["slow_dispatches"].dump();
  ASSERT_FALSE((*out->span)["blocked"].empty()) << out->span->dump();
}

TEST(OffCpuLock, DwarfBlockedInLockStallWokenByHolder) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string rec = dir.file("t.lt");
  LockRun l;
  ASSERT_NO_FATAL_FAILURE(record_lock_stall("dwarf", &l, {"-o", rec}));
  const json& b = (*l.span)["blocked"][0];  // most blocked time
  EXPECT_EQ(b["unwind"], "dwarf");
  // CFI unwinds through glibc: the mutex's lock and the app's caller.
  EXPECT_TRUE(has_frame(b["frames"], "pthread_mutex_lock"))
      << dump_frames(b["frames"]);
  EXPECT_TRUE(has_frame(b["frames"], "refapp::lockStall"))
      << dump_frames(b["frames"]);
  EXPECT_TRUE(has_frame(b["frames"], "refapp::Looper::dispatchMessage"))
      << dump_frames(b["frames"]);
  EXPECT_NE(b["kernel_wait"].get<std::string>().find("futex"),
            std::string::npos)
      << b.dump();

  ASSERT_FALSE(b["wakers"].empty())
      << b.dump() << "\nlost: " << l.t.report["lost"].dump();
  const json& w = b["wakers"][0];
  EXPECT_EQ(w["tid"], l.holder_tid) << w.dump();
  EXPECT_EQ(w["pid"], l.pid) << w.dump();
  EXPECT_EQ(w["comm"], "refapp-holder0") << w.dump();
  EXPECT_EQ(w["interrupt"], false) << w.dump();
  EXPECT_TRUE(has_frame(w["frames"], "refapp::LockHolder::run"))
      << dump_frames(w["frames"]);
  EXPECT_TRUE(has_frame(w["kernel_frames"], "futex_wake")) << w.dump();

  const int64_t requested = l.stall["requested_ms"].get<int64_t>() * 1'000'000;
  const int64_t run_delay = std::max<int64_t>(0, l.stall["run_delay_ns"]);
  const int64_t blocked = b["blocked_ns"];
  // The holder unlocks at the log's start_ns + MS (an absolute sleep that
  // never ends early). Before the lock wait the loop thread hands the
  // request to the holder and waits until it holds the mutex: two wakeups
  // across threads, microseconds on an idle machine; 10 ms allows for the
  // holder's waits for a CPU (not logged) on a loaded 2-core machine, plus
  // the loop thread's own (run_delay, logged).
  EXPECT_GE(blocked, requested - 10'000'000 - run_delay) << b.dump() << "\n"
                                                         << l.stall.dump();
  EXPECT_LE(blocked, l.stall["duration_ns"].get<int64_t>() + kClockSlackNs)
      << b.dump() << "\n"
      << l.stall.dump();
  expect_recorded_close_to_blocked(*l.span);
  // A recording keeps the blocking points, the wakeups and the stack
  // copies they are unwound from: its replay says the same.
  RunResult rep =
      run({looptrace_bin(), "report", rec, "--json", dir.file("replay.json")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json replay = read_json(dir.file("replay.json"));
  const json* again = span_of(replay, l.stall);
  ASSERT_NE(again, nullptr) << replay["slow_dispatches"].dump();
  EXPECT_EQ((*again)["blocked"], (*l.span)["blocked"]);
  EXPECT_EQ((*again)["blocked_recorded_ns"], (*l.span)["blocked_recorded_ns"]);
}

TEST(OffCpuLock, TwoLoopThreadsEachWokenByItsOwnHolder) {
  LT_REQUIRE_BPF();
  // Overlapping lock stalls on two loop threads, each with its own holder
  // thread (refapp-holder0, refapp-holder1): wakeups must not be crossed.
  Traced t =
      record_refapp("dwarf", {"lock:200@400:0", "lock:200@450:1"}, {}, 2);
  std::vector<json> stalls = events(t.log, "stall");
  ASSERT_EQ(stalls.size(), 2u);
  ASSERT_NE(stalls[0]["holder_tid"], stalls[1]["holder_tid"]);
  for (const json& st : stalls) {
    const json* s = span_of(t.report, st);
    ASSERT_NE(s, nullptr) << st.dump() << "\n"
                          << t.report["slow_dispatches"].dump();
    ASSERT_FALSE((*s)["blocked"].empty()) << s->dump();
    const json& b = (*s)["blocked"][0];
    EXPECT_TRUE(has_frame(b["frames"], "refapp::lockStall"))
        << dump_frames(b["frames"]);
    ASSERT_FALSE(b["wakers"].empty())
        << b.dump() << "\nlost: " << t.report["lost"].dump();
    const json& w = b["wakers"][0];
    EXPECT_EQ(w["tid"], st["holder_tid"]) << w.dump() << "\n" << st.dump();
    EXPECT_EQ(w["comm"],
              "refapp-holder" + std::to_string(st["thread"].get<int>()))
        << w.dump();
    // Bounds as in DwarfBlockedInLockStallWokenByHolder.
    const int64_t requested = st["requested_ms"].get<int64_t>() * 1'000'000;
    const int64_t run_delay = std::max<int64_t>(0, st["run_delay_ns"]);
    EXPECT_GE(b["blocked_ns"].get<int64_t>(),
              requested - 10'000'000 - run_delay)
        << b.dump() << "\n"
        << st.dump();
    EXPECT_LE(b["blocked_ns"].get<int64_t>(),
              st["duration_ns"].get<int64_t>() + kClockSlackNs)
        << b.dump() << "\n"
        << st.dump();
  }
}

TEST(OffCpuLock, FramePointersStillNameTheWaker) {
  LT_REQUIRE_BPF();
  LockRun l;
  ASSERT_NO_FATAL_FAILURE(record_lock_stall("fp", &l));
  const json& b = (*l.span)["blocked"][0];
  EXPECT_EQ(b["unwind"], "frame_pointer");
  // glibc has no frame pointers: the chain skips lockStall's own frame
  // but reaches the handler that called it (refapp/README.md).
  EXPECT_TRUE(has_frame(b["frames"], "refapp::StallHandler::handleMessage"))
      << dump_frames(b["frames"]);
  EXPECT_NE(b["kernel_wait"].get<std::string>().find("futex"),
            std::string::npos)
      << b.dump();
  ASSERT_FALSE(b["wakers"].empty())
      << b.dump() << "\nlost: " << l.t.report["lost"].dump();
  EXPECT_EQ(b["wakers"][0]["tid"], l.holder_tid) << b["wakers"][0].dump();
  EXPECT_EQ(b["wakers"][0]["interrupt"], false) << b["wakers"][0].dump();
  expect_recorded_close_to_blocked(*l.span);
}

TEST(OffCpuOff, NoOffCpuLeavesBlockedEmpty) {
  LT_REQUIRE_BPF();
  Traced t = record_refapp("fp", {"sleep:200@500"}, {"--no-off-cpu"});
  std::vector<json> stalls = events(t.log, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const json& st = stalls[0];
  const json* s = span_of(t.report, st);
  ASSERT_NE(s, nullptr) << st.dump() << "\n"
                        << t.report["slow_dispatches"].dump();
  EXPECT_TRUE((*s)["blocked"].is_array()) << s->dump();
  EXPECT_TRUE((*s)["blocked"].empty()) << s->dump();
  EXPECT_EQ((*s)["blocked_recorded_ns"], 0) << s->dump();
  // The rest still works: the span's length, and its blocked time from the
  // scheduler's books, match the app's log. The span's probes fire within
  // microseconds of the app's clock reads; run-queue waits there (the
  // stall's run_delay) may widen the gap.
  const int64_t run_delay = std::max<int64_t>(0, st["run_delay_ns"]);
  EXPECT_LE(std::llabs(diff((*s)["duration_ns"], st["duration_ns"])),
            1'000'000 + run_delay)
      << s->dump() << "\n"
      << st.dump();
  EXPECT_GE(
      (*s)["blocked_ns"].get<int64_t>(),
      st["requested_ms"].get<int64_t>() * 1'000'000 - 1'000'000 - run_delay)
      << s->dump();
  EXPECT_EQ((*s)["keys"]["target"], "refapp::StallHandler") << s->dump();
}

// Debian's python3 (python3-gi) running a GLib main loop: a real program,
// built without frame pointers, that nobody here wrote.
std::vector<std::string> glib_profile() {
  return {"--dispatch", "libglib-2.0.so.0:g_main_context_dispatch", "--slow",
          "50ms"};
}

TEST(OffCpuPython, GlibCallbackSleepingInTimeSleep) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  Traced t =
      record(glib_profile(), "dwarf", {},
             {"/usr/bin/python3", tests_dir() + "/programs/glib_loop.py",
              "--kind", "sleep", "--stall", "200@500", "--duration", "1000"});
  std::vector<json> stalls = events(t.log, "stall");
  std::vector<json> summary = events(t.log, "summary");
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_EQ(summary.size(), 1u);
  const json& st = stalls[0];
  const json* s = span_containing(t.report, st);
  ASSERT_NE(s, nullptr) << st.dump() << "\n"
                        << t.report["slow_dispatches"].dump();
  ASSERT_FALSE((*s)["blocked"].empty()) << s->dump();
  const json& b = (*s)["blocked"][0];
  EXPECT_EQ(b["unwind"], "dwarf");
  // strace of this very run: python 3.11's time.sleep is
  // clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ...), the kernel's
  // do_nanosleep.
  EXPECT_NE(b["kernel_wait"].get<std::string>().find("nanosleep"),
            std::string::npos)
      << b.dump();
  // CFI through libc and the interpreter up to GLib's dispatch: libc's
  // clock_nanosleep, python's eval loop (exported from /usr/bin/python3.11).
  EXPECT_TRUE(has_frame(b["frames"], "clock_nanosleep"))
      << dump_frames(b["frames"]);
  EXPECT_TRUE(has_frame(b["frames"], "_PyEval_EvalFrameDefault"))
      << dump_frames(b["frames"]);
  EXPECT_TRUE(has_frame(b["frames"], "g_main_context_dispatch"))
      << dump_frames(b["frames"]);
  if (b["wakers"].empty()) {
    EXPECT_TRUE(waker_loss_explained(t.report, *s));
  } else {
    EXPECT_EQ(b["wakers"][0]["interrupt"], true) << b["wakers"][0].dump();
    EXPECT_TRUE(has_frame(b["wakers"][0]["kernel_frames"], "hrtimer_wakeup"))
        << b["wakers"][0].dump();
  }

  const int64_t requested = st["requested_ms"].get<int64_t>() * 1'000'000;
  // The loop thread's whole wait for a CPU in the run (schedstat): an
  // upper bound of any wait between time.sleep computing its deadline and
  // the switch-out.
  const int64_t run_delay = std::max<int64_t>(0, summary[0]["run_delay_ns"]);
  const int64_t blocked = b["blocked_ns"];
  // time.sleep sleeps to an absolute deadline (strace: TIMER_ABSTIME)
  // taken at its entry, after the callback's first clock read: blocked
  // for MS less what ran in between (python code, microseconds; 1 ms
  // allowed) and any wait for a CPU there.
  EXPECT_GE(blocked, requested - 1'000'000 - run_delay) << b.dump() << "\n"
                                                        << st.dump();
  EXPECT_LE(blocked, st["duration_ns"].get<int64_t>() + kClockSlackNs)
      << b.dump() << "\n"
      << st.dump();
  expect_recorded_close_to_blocked(*s);
}

TEST(OffCpuPython, GlibCallbackWaitingOnLockNamesThePythonThread) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  Traced t = record(glib_profile(), "dwarf", {},
                    {"/usr/bin/python3", tests_dir() + "/programs/glib_lock.py",
                     "--stall", "200@400", "--duration", "900"});
  std::vector<json> stalls = events(t.log, "stall");
  std::vector<json> summary = events(t.log, "summary");
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_EQ(summary.size(), 1u);
  const json& st = stalls[0];
  const int holder_tid = st["holder_tid"];
  ASSERT_NE(holder_tid, st["tid"].get<int>());
  const json* s = span_containing(t.report, st);
  ASSERT_NE(s, nullptr) << st.dump() << "\n"
                        << t.report["slow_dispatches"].dump();
  ASSERT_FALSE((*s)["blocked"].empty()) << s->dump();
  const json& b = (*s)["blocked"][0];
  EXPECT_EQ(b["unwind"], "dwarf");
  // threading.Lock is a POSIX semaphore in CPython 3.11: a futex wait.
  EXPECT_NE(b["kernel_wait"].get<std::string>().find("futex"),
            std::string::npos)
      << b.dump();
  EXPECT_TRUE(has_frame(b["frames"], "PyThread_acquire_lock"))
      << dump_frames(b["frames"]);
  EXPECT_TRUE(has_frame(b["frames"], "g_main_context_dispatch"))
      << dump_frames(b["frames"]);
  ASSERT_FALSE(b["wakers"].empty())
      << b.dump() << "\nlost: " << t.report["lost"].dump();
  const json& w = b["wakers"][0];
  // The python thread that released the lock (its native id, logged).
  EXPECT_EQ(w["tid"], holder_tid) << w.dump();
  EXPECT_EQ(w["pid"], st["pid"]) << w.dump();
  EXPECT_EQ(w["interrupt"], false) << w.dump();
  // Its release(): sem_post from the interpreter running python code.
  EXPECT_TRUE(has_frame(w["frames"], "sem_post")) << dump_frames(w["frames"]);
  EXPECT_TRUE(has_frame(w["frames"], "_PyEval_EvalFrameDefault"))
      << dump_frames(w["frames"]);
  // And its Python frames: the holder thread's own function, as the
  // program's source names it.
  EXPECT_TRUE(has_frame(w["frames"], "Holder.run (glib_lock.py:"))
      << dump_frames(w["frames"]);

  const int64_t run_delay = std::max<int64_t>(0, summary[0]["run_delay_ns"]);
  const int64_t blocked = b["blocked_ns"];
  // From just before acquire() (wait_ns) to just before the holder's
  // release() (release_ns) the main thread waits for the lock; between
  // wait_ns and its switch-out it only drops the GIL (microseconds, 1 ms
  // allowed) unless it waits for a CPU (run_delay, the whole run's).
  const int64_t expected = diff(st["release_ns"], st["wait_ns"]);
  EXPECT_GE(blocked, expected - 1'000'000 - run_delay) << b.dump() << "\n"
                                                       << st.dump();
  // The same place (a lock's acquire, python's threading.Condition is made
  // of them) also holds the callback's short wait for the holder to take
  // the lock, before wait_ns: all of it between the callback's clock
  // reads.
  EXPECT_LE(blocked, st["duration_ns"].get<int64_t>() + kClockSlackNs)
      << b.dump() << "\n"
      << st.dump();
  expect_recorded_close_to_blocked(*s);
}

// One callback sleeping 40 times, 5 ms each (glib_loop.py --sleep-pieces;
// strace shows 40 clock_nanosleep calls): more blocking points than
// looptrace records per span (LT_MAX_BLOCKS).
constexpr int kPieces = 40;
constexpr int64_t kPieceNs = 5'000'000;

Traced record_pieces() {
  static_assert(kPieces > LT_MAX_BLOCKS, "the test must pass the cap");
  return record(
      glib_profile(), "dwarf", {},
      {"/usr/bin/python3", tests_dir() + "/programs/glib_loop.py", "--kind",
       "sleep", "--stall",
       std::to_string(kPieces * kPieceNs / 1'000'000) + "@400",
       "--sleep-pieces", std::to_string(kPieces), "--duration", "900"});
}

TEST(OffCpuPython, BlockingPointsPastTheCapAreNotRecorded) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  Traced t = record_pieces();
  std::vector<json> stalls = events(t.log, "stall");
  std::vector<json> summary = events(t.log, "summary");
  ASSERT_EQ(stalls.size(), 1u);
  ASSERT_EQ(summary.size(), 1u);
  const json& st = stalls[0];
  ASSERT_EQ(st["pieces"], kPieces);
  const json* s = span_containing(t.report, st);
  ASSERT_NE(s, nullptr) << st.dump() << "\n"
                        << t.report["slow_dispatches"].dump();
  // The first LT_MAX_BLOCKS pieces, all in time.sleep. (Two groups, not
  // one: CPython 3.11 specializes the call after a few runs, so later
  // pieces come from another return address in the eval loop.)
  ASSERT_FALSE((*s)["blocked"].empty()) << s->dump();
  int64_t count = 0, sum_ns = 0;
  for (const json& b : (*s)["blocked"]) {
    count += b["count"].get<int64_t>();
    sum_ns += b["blocked_ns"].get<int64_t>();
    EXPECT_NE(b["kernel_wait"].get<std::string>().find("nanosleep"),
              std::string::npos)
        << b.dump();
    EXPECT_TRUE(has_frame(b["frames"], "clock_nanosleep"))
        << dump_frames(b["frames"]);
  }
  EXPECT_EQ(count, LT_MAX_BLOCKS) << s->dump();
  // Each piece sleeps to a deadline 5 ms after its own clock read: at
  // least 5 ms less what ran in between (python code, microseconds; 1 ms
  // allowed), less the loop thread's waits for a CPU (the whole run's).
  const int64_t run_delay = std::max<int64_t>(0, summary[0]["run_delay_ns"]);
  const int64_t recorded = (*s)["blocked_recorded_ns"];
  EXPECT_GE(recorded, LT_MAX_BLOCKS * (kPieceNs - 1'000'000) - run_delay)
      << s->dump();
  // The pieces past the cap are not in it: at least their sleeps' worth
  // of the callback is left out.
  EXPECT_LE(recorded, st["duration_ns"].get<int64_t>() -
                          (kPieces - LT_MAX_BLOCKS) * (kPieceNs - 1'000'000))
      << s->dump() << "\n"
      << st.dump();
  EXPECT_EQ(recorded, sum_ns) << "the groups hold all recorded time";
}

// The blocking points past the cap are counted where a user looks for
// what went unrecorded (lost.blocks_capped).
TEST(OffCpuPython, BlockingPointsPastTheCapAreCountedAsLost) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  Traced t = record_pieces();
  ASSERT_EQ(events(t.log, "stall").size(), 1u);
  // Whatever its name: a lost count of exactly the pieces past the cap.
  bool counted = false;
  for (const auto& item : t.report["lost"].items())
    counted |= item.value() == kPieces - LT_MAX_BLOCKS;
  EXPECT_TRUE(counted) << t.report["lost"].dump();
}

// An interrupt's wakeups are one waker whatever thread the interrupt
// happened to hit: one timer waking one place 16 times is one entry.
TEST(OffCpuPython, InterruptWakersOfOnePlaceAreMerged) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_SYSTEM_PYTHON();
  Traced t = record_pieces();
  std::vector<json> stalls = events(t.log, "stall");
  ASSERT_EQ(stalls.size(), 1u);
  const json* s = span_containing(t.report, stalls[0]);
  ASSERT_NE(s, nullptr);
  int duplicates = 0;
  for (const json& b : (*s)["blocked"]) {
    std::vector<json> seen;
    for (const json& w : b["wakers"]) {
      if (w["interrupt"] != true) continue;
      duplicates +=
          std::count(seen.begin(), seen.end(), w["kernel_frames"]) > 0;
      seen.push_back(w["kernel_frames"]);
    }
  }
  EXPECT_EQ(duplicates, 0) << "interrupt wakers with the same kernel stack: "
                           << (*s)["blocked"].dump();
}

// tests/programs/ping_pong: spans whose futex waits a peer thread ends,
// often while the waiter is still on its way to sleep (the wakeup races
// its switch-out), each span ending in a 10 ms clock_nanosleep.
struct PingPong {
  Traced t;
  json start;
  std::vector<json> dispatches;
};

constexpr int kPingPongDispatches = 150;

void record_ping_pong(PingPong* out) {
  const std::string bin = std::string(LT_TEST_PROGRAMS_DIR) + "/ping_pong";
  // 6 pings: at most 2 blocking points each (the condition variable, its
  // mutex) and the sleep stay under LT_MAX_BLOCKS.
  out->t =
      record({"--dispatch", bin + ":pp_dispatch", "--slow", "5ms"}, "fp", {},
             {bin, "--dispatches", std::to_string(kPingPongDispatches),
              "--pings", "6", "--sleep-ms", "10"});
  std::vector<json> start = events(out->t.log, "start");
  ASSERT_EQ(start.size(), 1u);
  out->start = start[0];
  out->dispatches = events(out->t.log, "dispatch");
  ASSERT_EQ(out->dispatches.size(), static_cast<size_t>(kPingPongDispatches));
  for (json& d : out->dispatches) d["tid"] = out->start["tid"];
}

// A blocking point left without its wakeup would run to the next one,
// over the thread's wait for a CPU in between, and on a loaded machine the
// recorded time would pass the books' blocked time (seen before the fix:
// 15.5 ms recorded of 10.3 ms blocked, 5.4 ms of it runq).
TEST(OffCpuRace, AccountingHoldsWhenWakeupsRaceTheSwitchOut) {
  LT_REQUIRE_BPF();
  PingPong p;
  ASSERT_NO_FATAL_FAILURE(record_ping_pong(&p));
  for (const json& d : p.dispatches) {
    const json* s = span_containing(p.t.report, d);
    ASSERT_NE(s, nullptr) << d.dump();
    int64_t count = 0, sleeps = 0;
    for (const json& b : (*s)["blocked"]) {
      count += b["count"].get<int64_t>();
      if (b["kernel_wait"].get<std::string>().find("nanosleep") ==
          std::string::npos)
        continue;
      sleeps += b["count"].get<int64_t>();
      // The sleep lies between the program's clock reads around it.
      EXPECT_LE(b["blocked_ns"].get<int64_t>(),
                diff(d["sleep_end_ns"], d["sleep_start_ns"]) + kClockSlackNs)
          << b.dump() << "\n"
          << d.dump();
    }
    EXPECT_LE(count, LT_MAX_BLOCKS) << s->dump();
    EXPECT_EQ(sleeps, 1) << s->dump();
    // Never more recorded than the scheduler's books say it was blocked
    // (slack as in expect_recorded_close_to_blocked).
    EXPECT_LE((*s)["blocked_recorded_ns"].get<int64_t>(),
              (*s)["blocked_ns"].get<int64_t>() + tick_ns() + 1'000'000)
        << s->dump();
  }
}

// Every blocking point gets its waker, also when the waker gets there
// while the sleeper is still on its way out (futex waits the peer ends;
// before the fix 1-4 % of them, and now and then a timer sleep, had none).
// About 1 run in 3 leaves one timer sleep of ~1300 points without its
// wakeup record: on the Firecracker guests this runs on, a timer that fires
// while the guest agent's thread has the CPU wakes the sleeper with no
// hook of looptrace's run (docs/looptrace.md, LIMITS); allowed up to 1 in
// 500.
TEST(OffCpuRace, EveryBlockingPointHasItsWaker) {
  LT_REQUIRE_BPF();
  PingPong p;
  ASSERT_NO_FATAL_FAILURE(record_ping_pong(&p));
  const int peer = p.start["peer_tid"];
  int64_t points = 0, unwoken = 0, wrong = 0;
  for (const json& d : p.dispatches) {
    const json* s = span_containing(p.t.report, d);
    ASSERT_NE(s, nullptr) << d.dump();
    for (const json& b : (*s)["blocked"]) {
      const bool sleep = b["kernel_wait"].get<std::string>().find(
                             "nanosleep") != std::string::npos;
      int64_t woken = 0;
      for (const json& w : b["wakers"]) {
        woken += w["count"].get<int64_t>();
        wrong += sleep ? w["interrupt"] != true : w["tid"] != peer;
      }
      points += b["count"].get<int64_t>();
      unwoken += b["count"].get<int64_t>() - woken;
    }
  }
  EXPECT_LE(unwoken * 500, points)
      << unwoken << " of " << points << " blocking points have no waker";
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace lt_test
