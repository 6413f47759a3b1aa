// The overhead benchmark's traced program: one thread calls a tiny
// dispatch-like function in a tight loop (or paced at a given rate) and
// reports what one call costs, in ns, measured with CLOCK_MONOTONIC around
// the loop. Run it untraced, under the empty uprobe pair (lt-bench-floor),
// under looptrace and under bpftrace; the differences are the tracing cost.
//
//   lt_bench_dispatch      starts with `push %rbp` (frame-pointer prologue):
//                          the kernel emulates it, no single-step. It calls
//                          lt_bench_handler, a leaf that bumps a counter.
//   lt_bench_dispatch_xol  starts with a rip-relative `lea`, which x86 uprobes
//                          cannot emulate: the kernel single-steps a copy of
//                          it out of line (XOL) on every hit.
//   ..._b ... _g, _xol_b, _xol_c
//                          identical copies, so that several tracers can be
//                          attached at once, each to its own copy.
//   lt_bench_dispatch_endbr  endbr64 first (CET builds): also single-stepped;
//                          the push %rbp at +4 is emulated.
//   lt_bench_vcall         a dispatch made as a virtual call, as AOSP's
//                          Looper makes its handler's: it calls
//                          g_object->dispatch(arg) through the vtable
//                          (`call *0x10(%rax)`); the method,
//                          lt_bench::Target::dispatch, calls the handler.
//                          What `--dispatch-call` times at the call site and
//                          `--dispatch` at the method.
//   glib_idle              not a function of ours: one iteration of a GLib
//                          main context with one idle source, whose
//                          dispatch (g_idle_dispatch, *(g_idle_funcs+16) in
//                          libglib) the glib profile probes.
//   glib_timeout, glib_frame  the same with a timeout source
//                          (g_timeout_dispatch, *(g_timeout_funcs+16))
//                          named as GTK names its frame clock's flush idle
//                          (no frame) or paint idle (a frame).
//
// Modes:
//   tight (default)  --func F: warm-up, then --rounds timed rounds of
//                    --calls calls; reports the median ns per call.
//   --rate R         --func F: exactly --calls calls paced at R per second,
//                    in batches every millisecond; reports the achieved rate.
//   --interleave F[:N],...  --slices K: K times in turn, N calls (default
//                    --calls) of each listed function, each slice timed on
//                    its own; reports the median ns per call of each
//                    function. Slow drifts of a shared, noisy machine then
//                    hit every function alike.
//
// Output: one line of key=value pairs per function on stdout (and appended
// to --out FILE), e.g.
//   lt_bench func=lt_bench_dispatch mode=tight pid=.. calls=.. ns_per_call=..
// `total_calls` counts every call made to that function, warm-up included:
// a tracer must have seen exactly that many.
#include <dlfcn.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern "C" {

// What a dispatch runs: the handler. A leaf; its own cost is a few ns.
__attribute__((noinline, noipa)) void lt_bench_handler(void* arg) {
  uint64_t* counter = static_cast<uint64_t*>(arg);
  *counter += 1;
}

}  // extern "C"

// The dispatch function: calls the handler, as a loop's dispatch does
// (GCC drops the frame pointer of a leaf that needs no stack even with
// -fno-omit-frame-pointer; a call keeps it). noipa: no clones
// (.constprop/.isra) the loop could call instead of the symbol the tracer
// attaches to. The asm keeps the call from becoming a tail jump. With
// -O2 -fno-omit-frame-pointer it compiles to
//   push %rbp; mov %rsp,%rbp; call lt_bench_handler; pop %rbp; ret
// Identical copies (_b ... _g) let several tracers run at once, each on its
// own copy, while --interleave alternates between them.
#define LT_BENCH_DISPATCH(name)                                      \
  extern "C" __attribute__((noinline, noipa)) void name(void* arg) { \
    lt_bench_handler(arg);                                           \
    asm volatile("" ::: "memory");                                   \
  }
LT_BENCH_DISPATCH(lt_bench_dispatch)
LT_BENCH_DISPATCH(lt_bench_dispatch_b)
LT_BENCH_DISPATCH(lt_bench_dispatch_c)
LT_BENCH_DISPATCH(lt_bench_dispatch_d)
LT_BENCH_DISPATCH(lt_bench_dispatch_e)
LT_BENCH_DISPATCH(lt_bench_dispatch_f)
LT_BENCH_DISPATCH(lt_bench_dispatch_g)

// A dispatch through a vtable: two implementations (so that GCC does not
// call the only one directly), the object behind a pointer set at run
// time.
namespace lt_bench {
struct Object {
  virtual ~Object() = default;
  virtual void dispatch(void* arg) = 0;
};
struct Target : Object {
  __attribute__((noinline, noipa)) void dispatch(void* arg) override {
    lt_bench_handler(arg);
    asm volatile("" ::: "memory");
  }
};
struct Other : Object {
  __attribute__((noinline, noipa)) void dispatch(void* arg) override {
    *static_cast<uint64_t*>(arg) += 2;
  }
};
}  // namespace lt_bench
lt_bench::Object* volatile g_object = nullptr;
extern "C" __attribute__((noinline, noipa)) void lt_bench_vcall(void* arg) {
  g_object->dispatch(arg);
  asm volatile("" ::: "memory");
}

// The same code behind a first instruction the kernel cannot emulate.
extern "C" void lt_bench_dispatch_xol(void* arg);
extern "C" void lt_bench_dispatch_xol_b(void* arg);
extern "C" void lt_bench_dispatch_xol_c(void* arg);
extern "C" void lt_bench_dispatch_endbr(void* arg);

asm(R"(
  .macro LT_BENCH_XOL name
  .text
  .globl \name
  .type \name, @function
  .p2align 4
\name:
  lea 0(%rip), %rax    # rip-relative: single-stepped out of line by uprobes
  push %rbp
  mov %rsp, %rbp
  call lt_bench_handler
  pop %rbp
  ret
  .size \name, .-\name
  .endm
  LT_BENCH_XOL lt_bench_dispatch_xol
  LT_BENCH_XOL lt_bench_dispatch_xol_b
  LT_BENCH_XOL lt_bench_dispatch_xol_c

  # What CET builds (-fcf-protection, the default of Ubuntu and Fedora) put
  # first in every function: endbr64 is not emulated either. The push %rbp
  # right after it (+4) is: probe there.
  .globl lt_bench_dispatch_endbr
  .type lt_bench_dispatch_endbr, @function
  .p2align 4
lt_bench_dispatch_endbr:
  endbr64
  push %rbp
  mov %rsp, %rbp
  call lt_bench_handler
  pop %rbp
  ret
  .size lt_bench_dispatch_endbr, .-lt_bench_dispatch_endbr
)");

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t g_counter = 0;

// One loop per function, so that every call in it is a direct call.
template <void (*Fn)(void*)>
void call_n(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) Fn(&g_counter);
}

// GLib's dispatch, as the glib profile probes it: one source on a context
// of its own, whose callback bumps the counter; each call is one
// g_main_context_iteration (prepare, a poll with no timeout, check, and the
// source's dispatch -> the callback). An idle source (g_idle_dispatch), or
// a timeout of interval 0 (g_timeout_dispatch, due again at once) named as
// GTK names its frame clock's sources: "[gtk+] gdk_frame_clock_flush_idle",
// not a frame, or "[gtk+] gdk_frame_clock_paint_idle", a frame to the glib
// profile (the same length: their names differ only from byte 24 on). GLib
// is opened with dlopen, so the benchmark needs no GLib headers.
using GMainContextNew = void* (*)();
using GIdleSourceNew = void* (*)();
using GTimeoutSourceNew = void* (*)(unsigned);
using GSourceSetCallback = void (*)(void*, int (*)(void*), void*, void*);
using GSourceSetName = void (*)(void*, const char*);
using GSourceAttach = unsigned (*)(void*, void*);
using GMainContextIteration = int (*)(void*, int);

int glib_callback(void* arg) {
  *static_cast<uint64_t*>(arg) += 1;
  return 1;  // G_SOURCE_CONTINUE
}

void* glib_sym(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) {
    std::fprintf(stderr, "lt_bench_target: no %s in GLib\n", name);
    std::exit(1);
  }
  return f;
}

// name: nullptr for an idle source, else a timeout's name.
template <const char* const* Name>
void run_glib(uint64_t n) {
  static void* ctx = nullptr;
  static GMainContextIteration iterate = nullptr;
  if (!ctx) {
    void* lib = dlopen("libglib-2.0.so.0", RTLD_NOW);
    if (!lib) {
      std::fprintf(stderr, "lt_bench_target: %s\n", dlerror());
      std::exit(1);
    }
    ctx = reinterpret_cast<GMainContextNew>(
        glib_sym(lib, "g_main_context_new"))();
    void* src = nullptr;
    if (*Name) {
      src = reinterpret_cast<GTimeoutSourceNew>(
          glib_sym(lib, "g_timeout_source_new"))(0);
      reinterpret_cast<GSourceSetName>(glib_sym(lib, "g_source_set_name"))(
          src, *Name);
    } else {
      src = reinterpret_cast<GIdleSourceNew>(
          glib_sym(lib, "g_idle_source_new"))();
    }
    reinterpret_cast<GSourceSetCallback>(glib_sym(
        lib, "g_source_set_callback"))(src, glib_callback, &g_counter, nullptr);
    reinterpret_cast<GSourceAttach>(glib_sym(lib, "g_source_attach"))(src, ctx);
    iterate = reinterpret_cast<GMainContextIteration>(
        glib_sym(lib, "g_main_context_iteration"));
  }
  for (uint64_t i = 0; i < n; ++i) iterate(ctx, 0);
}

constexpr const char* kIdle = nullptr;
constexpr const char* kFlushIdle = "[gtk+] gdk_frame_clock_flush_idle";
constexpr const char* kPaintIdle = "[gtk+] gdk_frame_clock_paint_idle";

struct Func {
  const char* name;
  void (*run)(uint64_t n);
};

constexpr Func kFuncs[] = {
    {"lt_bench_dispatch", call_n<lt_bench_dispatch>},
    {"lt_bench_dispatch_b", call_n<lt_bench_dispatch_b>},
    {"lt_bench_dispatch_c", call_n<lt_bench_dispatch_c>},
    {"lt_bench_dispatch_d", call_n<lt_bench_dispatch_d>},
    {"lt_bench_dispatch_e", call_n<lt_bench_dispatch_e>},
    {"lt_bench_dispatch_f", call_n<lt_bench_dispatch_f>},
    {"lt_bench_dispatch_g", call_n<lt_bench_dispatch_g>},
    {"lt_bench_dispatch_xol", call_n<lt_bench_dispatch_xol>},
    {"lt_bench_dispatch_xol_b", call_n<lt_bench_dispatch_xol_b>},
    {"lt_bench_dispatch_xol_c", call_n<lt_bench_dispatch_xol_c>},
    {"lt_bench_dispatch_endbr", call_n<lt_bench_dispatch_endbr>},
    {"lt_bench_vcall", call_n<lt_bench_vcall>},
    {"glib_idle", run_glib<&kIdle>},
    {"glib_timeout", run_glib<&kFlushIdle>},
    {"glib_frame", run_glib<&kPaintIdle>},
};

struct Args {
  const Func* func = &kFuncs[0];
  uint64_t calls = 200'000;  // per round (tight), in total (rate), per slice
  int rounds = 5;
  uint64_t warmup = 0;  // default: calls / 10 (0 with --rate)
  bool warmup_set = false;
  double rate = 0;  // calls per second; 0: tight loop
  std::vector<std::pair<const Func*, uint64_t>> interleave;
  int slices = 40;
  int cpu = -1;
  bool wait_stdin = false;
  bool hold = false;
  int start_delay_ms = 0;
  std::string out;
};

[[noreturn]] void usage(const char* msg) {
  if (msg) std::fprintf(stderr, "lt_bench_target: %s\n", msg);
  std::fprintf(
      stderr,
      "usage: lt_bench_target [--func F] [--calls N] [--rounds R] [--warmup "
      "N]\n"
      "         [--rate CALLS_PER_S] [--interleave F[:N],... [--slices K]]\n"
      "         [--cpu N] [--wait-stdin | --start-delay MS] [--hold] [--out "
      "FILE]\n"
      "  F: plain (= lt_bench_dispatch), xol (= lt_bench_dispatch_xol) or a "
      "name:\n");
  for (const Func& f : kFuncs) std::fprintf(stderr, "       %s\n", f.name);
  std::fprintf(
      stderr,
      "  --wait-stdin: start after a line (or EOF) on stdin; --hold: after\n"
      "  printing the results, exit only after another line (or EOF).\n");
  std::exit(2);
}

uint64_t parse_u64(const char* s, const char* what) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);  // accepts 1e6
  if (errno || end == s || *end || v < 0) {
    std::string m = std::string("bad ") + what + ": " + s;
    usage(m.c_str());
  }
  return static_cast<uint64_t>(v);
}

const Func* find_func(const std::string& name) {
  std::string n = name == "plain" ? "lt_bench_dispatch"
                  : name == "xol" ? "lt_bench_dispatch_xol"
                                  : name;
  for (const Func& f : kFuncs)
    if (n == f.name) return &f;
  usage(("unknown function " + name).c_str());
}

Args parse(int argc, char** argv) {
  Args a;
  std::string interleave;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage((k + " needs a value").c_str());
      return argv[++i];
    };
    if (k == "--func") {
      a.func = find_func(val());
    } else if (k == "--calls") {
      a.calls = parse_u64(val(), "--calls");
    } else if (k == "--rounds") {
      a.rounds = static_cast<int>(parse_u64(val(), "--rounds"));
    } else if (k == "--warmup") {
      a.warmup = parse_u64(val(), "--warmup");
      a.warmup_set = true;
    } else if (k == "--rate") {
      a.rate = static_cast<double>(parse_u64(val(), "--rate"));
    } else if (k == "--interleave") {
      interleave = val();
    } else if (k == "--slices") {
      a.slices = static_cast<int>(parse_u64(val(), "--slices"));
    } else if (k == "--cpu") {
      a.cpu = static_cast<int>(parse_u64(val(), "--cpu"));
    } else if (k == "--wait-stdin") {
      a.wait_stdin = true;
    } else if (k == "--hold") {
      a.hold = true;
    } else if (k == "--start-delay") {
      a.start_delay_ms = static_cast<int>(parse_u64(val(), "--start-delay"));
    } else if (k == "--out") {
      a.out = val();
    } else if (k == "-h" || k == "--help") {
      usage(nullptr);
    } else {
      usage(("unknown option " + k).c_str());
    }
  }
  if (a.calls == 0 || a.rounds <= 0 || a.slices <= 0)
    usage("--calls, --rounds and --slices must be > 0");
  if (!a.warmup_set) a.warmup = a.rate > 0 ? 0 : a.calls / 10;
  size_t pos = 0;
  while (pos < interleave.size()) {
    size_t comma = interleave.find(',', pos);
    if (comma == std::string::npos) comma = interleave.size();
    std::string item = interleave.substr(pos, comma - pos);
    size_t colon = item.find(':');
    uint64_t n = a.calls;
    if (colon != std::string::npos) {
      n = parse_u64(item.c_str() + colon + 1, "--interleave count");
      item.resize(colon);
    }
    if (n == 0) usage("--interleave: counts must be > 0");
    a.interleave.emplace_back(find_func(item), n);
    pos = comma + 1;
  }
  if (!a.interleave.empty() && a.rate > 0)
    usage("--rate and --interleave exclude each other");
  return a;
}

void emit(const Args& a, const std::string& lines) {
  std::fputs(lines.c_str(), stdout);
  std::fflush(stdout);
  if (!a.out.empty()) {
    FILE* f = std::fopen(a.out.c_str(), "a");
    if (!f) {
      std::fprintf(stderr, "lt_bench_target: cannot write %s: %s\n",
                   a.out.c_str(), std::strerror(errno));
      std::exit(1);
    }
    std::fputs(lines.c_str(), f);
    std::fclose(f);
  }
}

struct Summary {
  double median, min, max;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) {
    char one[32];
    std::snprintf(one, sizeof(one), "%s%.1f", s.empty() ? "" : ",", x);
    s += one;
  }
  return s;
}

std::string run_tight(const Args& a) {
  a.func->run(a.warmup);
  std::vector<double> per_call;
  for (int r = 0; r < a.rounds; ++r) {
    uint64_t t0 = now_ns();
    a.func->run(a.calls);
    uint64_t t1 = now_ns();
    per_call.push_back(static_cast<double>(t1 - t0) /
                       static_cast<double>(a.calls));
  }
  Summary s = summarize(per_call);
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "lt_bench func=%s mode=tight pid=%d calls=%llu rounds=%d "
                "total_calls=%llu ns_per_call=%.1f min=%.1f max=%.1f "
                "rounds_ns=%s\n",
                a.func->name, getpid(), (unsigned long long)a.calls, a.rounds,
                (unsigned long long)(a.warmup + a.calls * a.rounds), s.median,
                s.min, s.max, join(per_call).c_str());
  return buf;
}

// Each slice runs every listed function once, in a fixed order; the order
// rotates from slice to slice so that no function always follows another.
std::string run_interleave(const Args& a) {
  size_t nf = a.interleave.size();
  std::vector<std::vector<double>> per_call(nf);
  std::vector<uint64_t> made(nf, 0);
  for (size_t i = 0; i < nf; ++i) {
    uint64_t w = a.warmup_set ? a.warmup : a.interleave[i].second / 10;
    a.interleave[i].first->run(w);
    made[i] += w;
  }
  for (int k = 0; k < a.slices; ++k) {
    for (size_t j = 0; j < nf; ++j) {
      size_t i = (j + static_cast<size_t>(k)) % nf;
      uint64_t n = a.interleave[i].second;
      uint64_t t0 = now_ns();
      a.interleave[i].first->run(n);
      uint64_t t1 = now_ns();
      made[i] += n;
      per_call[i].push_back(static_cast<double>(t1 - t0) /
                            static_cast<double>(n));
    }
  }
  std::string out;
  for (size_t i = 0; i < nf; ++i) {
    Summary s = summarize(per_call[i]);
    char buf[512];
    std::snprintf(
        buf, sizeof(buf),
        "lt_bench func=%s mode=interleave pid=%d calls=%llu slices=%d "
        "total_calls=%llu ns_per_call=%.1f min=%.1f max=%.1f\n",
        a.interleave[i].first->name, getpid(),
        (unsigned long long)a.interleave[i].second, a.slices,
        (unsigned long long)made[i], s.median, s.min, s.max);
    out += buf;
  }
  return out;
}

// Exactly a.calls calls at a.rate per second: batch k (of `batch` calls)
// starts at t0 + k * period. A late batch starts at once, so a short hiccup
// is made up for; the achieved rate is reported, not assumed.
std::string run_rate(const Args& a) {
  uint64_t batch = std::max<uint64_t>(1, static_cast<uint64_t>(a.rate / 1000));
  double period_ns = 1e9 * static_cast<double>(batch) / a.rate;
  a.func->run(a.warmup);
  uint64_t made = 0;
  uint64_t t0 = now_ns();
  uint64_t late = 0;
  for (uint64_t k = 0; made < a.calls; ++k) {
    uint64_t start =
        t0 + static_cast<uint64_t>(period_ns * static_cast<double>(k));
    uint64_t now = now_ns();
    if (now < start) {
      timespec ts{static_cast<time_t>(start / 1'000'000'000ull),
                  static_cast<long>(start % 1'000'000'000ull)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
             EINTR) {
      }
    } else if (k > 0 && now - start > static_cast<uint64_t>(period_ns)) {
      ++late;
    }
    uint64_t n = std::min<uint64_t>(batch, a.calls - made);
    a.func->run(n);
    made += n;
  }
  uint64_t t1 = now_ns();
  double secs = static_cast<double>(t1 - t0) / 1e9;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "lt_bench func=%s mode=rate pid=%d calls=%llu total_calls=%llu "
                "target_rate=%.0f achieved_rate=%.0f elapsed_s=%.3f batch=%llu "
                "late_batches=%llu\n",
                a.func->name, getpid(), (unsigned long long)a.calls,
                (unsigned long long)(a.warmup + made), a.rate,
                static_cast<double>(made) / secs, secs,
                (unsigned long long)batch, (unsigned long long)late);
  return buf;
}

// A line or EOF on stdin.
void wait_line() {
  char c;
  while (read(STDIN_FILENO, &c, 1) == 1 && c != '\n') {
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  // Which implementation runs is the program's choice at run time.
  static lt_bench::Target target;
  static lt_bench::Other other;
  g_object = argc > 0 ? static_cast<lt_bench::Object*>(&target) : &other;
  if (a.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(a.cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "lt_bench_target: cannot pin to CPU %d: %s\n", a.cpu,
                   std::strerror(errno));
      return 1;
    }
  }
  // Zero calls: what a function sets up (GLib loaded and its context
  // made) is there before a tracer attaches.
  a.func->run(0);
  for (const auto& [f, n] : a.interleave) f->run(0);
  if (a.wait_stdin) {
    std::fprintf(stderr,
                 "lt_bench_target: pid %d waiting for a line on stdin\n",
                 getpid());
    wait_line();
  }
  if (a.start_delay_ms > 0) {
    timespec ts{a.start_delay_ms / 1000,
                (a.start_delay_ms % 1000) * 1'000'000L};
    nanosleep(&ts, nullptr);
  }
  std::string lines = !a.interleave.empty() ? run_interleave(a)
                      : a.rate > 0          ? run_rate(a)
                                            : run_tight(a);
  emit(a, lines);
  if (a.hold) wait_line();
  return 0;
}
