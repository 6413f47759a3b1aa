// looptrace: event-loop lag tracer. Parse, run, turn a status into an exit
// code; the work is in record.cpp and below.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "base/duration.h"
#include "base/log.h"
#include "cli/monitor.h"
#include "cli/record.h"
#include "model/thresholds.h"
#include "proc/pid.h"
#include "profiles/inspect.h"
#include "version.h"  // generated: LOOPTRACE_GIT_COMMIT

namespace {

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

constexpr const char* kExamples = R"(
Examples:
  looptrace demo
      trace the bundled reference app through a scripted scenario
  looptrace record --profile refapp -- ./refapp --stall busy:50ms@500
      run a command under the tracer until it exits
  looptrace record -p 1234
      a running GLib program: the glib profile is found from its libraries,
      one span per source dispatch
  looptrace record --dispatch libQt5Core.so.5:'QCoreApplication::notify*' -d 10s
      every process that maps QtCore, for 10 seconds
  looptrace record --profile refapp -p 1234 --slow 50ms --json report.json
      slow dispatches over 50 ms, machine-readable report in report.json
  looptrace record --profile refapp --input -- ./refapp --input-rate 120
      input latency stage by stage, and what each slow event waited behind
)";

// An empty value is refused, not taken as "not given": `--json "$OUT"`
// with OUT unset must not lose the report, nor `-d ""` trace forever.
// (The command after "--" may have empty arguments; -p and --comm say
// more themselves.)
void refuse_empty_values(CLI::App* app) {
  static const CLI::Validator kNotEmpty(
      [](std::string& v) { return v.empty() ? "empty value" : ""; }, "", "");
  for (CLI::Option* o : app->get_options())
    if (!o->get_positional() && o->get_type_size_max() > 0 &&
        !o->check_name("--pid") && !o->check_name("--comm"))
      o->check(kNotEmpty);
}

// The report outputs `record` and `report` share.
void add_output_options(CLI::App* app, looptrace::OutputPaths* out) {
  app->add_option("--json", out->json,
                  "Write the JSON report to FILE ('-': stdout)");
  app->add_option("--perfetto", out->perfetto,
                  "Write a Chrome/Perfetto trace (JSON) to FILE, for "
                  "ui.perfetto.dev");
  app->add_option("--folded", out->folded,
                  "Write folded stacks to FILE, for flamegraph.pl and "
                  "speedscope");
  app->add_option("--folded-blocked", out->folded_blocked,
                  "Write where slow spans blocked to FILE as folded stacks "
                  "weighed in microseconds (an off-CPU flame graph)");
  app->add_option("--html", out->html,
                  "Write a self-contained HTML page (timeline, flame graph, "
                  "tables) to FILE");
  app->add_option("--pprof", out->pprof,
                  "Write the slow spans' stacks as a pprof profile (gzipped "
                  "profile.proto) to FILE, for go tool pprof, Pyroscope, "
                  "Parca");
}

// The threshold options of `record` (defaults shown) and `report` (the
// recorded ones are the defaults; only raised), from the one table.
void add_threshold_options(CLI::App* app, looptrace::ThresholdArgs* args,
                           bool record) {
  using looptrace::ThresholdOption;
  for (const looptrace::ThresholdOptionInfo& o : looptrace::kThresholdOptions) {
    std::string help = o.help;
    if (record)
      help += fmt::format(" (default: {})",
                          looptrace::threshold_default_text(o.id));
    else if (o.id == ThresholdOption::kSlowIdle)
      help += " (default: --slow)";
    else if (o.id != ThresholdOption::kSlowInput &&
             o.unit == looptrace::ThresholdUnit::kDuration)
      help += ", at or above the recorded one";
    app->add_option(o.flag, (*args)[o.id], help)
        ->type_name(o.unit == looptrace::ThresholdUnit::kHz ? "HZ"
                                                            : "DURATION");
  }
}

// What counts as the program's own code in stacks (its key lines), for
// `record` and `report`.
void add_app_code_option(CLI::App* app, std::vector<std::string>* patterns) {
  app->add_option("--app-code", *patterns,
                  "The program's own code, for key lines in stacks: a glob "
                  "on a frame's file (a native module or a Python source), "
                  "e.g. 'myapp/*' (repeatable or a comma list; default: "
                  "what is not a system library or interpreter)")
      ->allow_extra_args(false)
      ->type_name("PATTERN");
}

void add_budget_option(CLI::App* app, std::vector<std::string>* fail_if) {
  // One expression per option: it must not swallow "-- COMMAND".
  app->add_option("--fail-if", *fail_if,
                  "A budget, e.g. 'dispatch.p99 > 16ms': exit 3 when it is "
                  "broken (repeatable; docs/looptrace.md BUDGETS)")
      ->allow_extra_args(false)
      ->type_name("EXPR");
}

// What to trace: a profile or ad-hoc probes and what they read.
void add_probe_options(CLI::App* rec, looptrace::RecordArgs& ra) {
  rec->add_option("--profile", ra.profile,
                  "Probe set: a built-in (refapp, glib, node, qt5, qt6, gtk3, "
                  "gtk4, qtquick5, qtquick6, android: `looptrace "
                  "profiles`) or a JSON profile file; with -p and no probe "
                  "option, found from the process's libraries");
  rec->add_option("--dispatch", ra.dispatch,
                  "Ad-hoc dispatch span BINARY:SYMBOL (repeatable); SYMBOL: "
                  "name, demangled C++ name, glob or 0x file offset");
  rec->add_option("--idle", ra.idle,
                  "Ad-hoc idle-handler span BINARY:SYMBOL (repeatable)");
  rec->add_option("--frame", ra.frame,
                  "Ad-hoc frame span BINARY:SYMBOL: each call draws a frame, "
                  "timed against --refresh-rate (repeatable)");
  rec->add_option("--frame-end", ra.frame_end,
                  "Ad-hoc frame boundary BINARY:SYMBOL (a buffer swap, a "
                  "commit): each return ends a frame that began at the "
                  "previous one on its thread (repeatable)");
  rec->add_option("--dispatch-call", ra.dispatch_call,
                  "Ad-hoc dispatch span of each virtual call inside a "
                  "function, BINARY:FUNCTION[+N] (N: the call's offset in "
                  "it), from the call to its return, named by the callee's "
                  "class (repeatable)");
  rec->add_option(
      "--key", ra.keys,
      "Key read at entry of ad-hoc probes: NAME=EXPR[:int|hex|sym|vtable], "
      "e.g. 'what=u32 *(arg1+16):int' (repeatable)");
  rec->add_option("--barrier-post", ra.barrier_post,
                  "Ad-hoc sync-barrier post BINARY:SYMBOL; the token is its "
                  "return value (repeatable)");
  rec->add_option("--barrier-remove", ra.barrier_remove,
                  "Ad-hoc sync-barrier removal BINARY:SYMBOL; the token is "
                  "argument --token-arg (repeatable)");
  rec->add_option("--enqueue", ra.enqueue,
                  "Ad-hoc enqueue BINARY:SYMBOL: message --msg-arg due at "
                  "--when-arg (CLOCK_MONOTONIC ns), for delivery lag");
  rec->add_option("--queue-arg", ra.queue_arg,
                  "Argument holding the queue in barrier/enqueue probes")
      ->capture_default_str()
      ->each([&ra](const std::string&) { ra.given.queue_arg = true; });
  rec->add_option("--token-arg", ra.token_arg,
                  "Argument holding the token in --barrier-remove")
      ->capture_default_str()
      ->each([&ra](const std::string&) { ra.given.token_arg = true; });
  rec->add_option("--msg-arg", ra.msg_arg,
                  "Argument holding the message in --enqueue")
      ->capture_default_str()
      ->each([&ra](const std::string&) { ra.given.msg_arg = true; });
  rec->add_option("--when-arg", ra.when_arg,
                  "Argument holding the due time in --enqueue")
      ->capture_default_str()
      ->each([&ra](const std::string&) { ra.given.when_arg = true; });
  // Parsed here, strictly: CLI11 would take "0x10" as 16, and an empty or
  // non-positive pid would mean every process.
}

// -p PID, parsed strictly: CLI11 would take "0x10" as 16, and an empty or
// non-positive pid would mean every process.
void add_trace_pid_option(CLI::App* sub, pid_t* out, const char* help) {
  sub->add_option_function<std::string>(
         "-p,--pid",
         [out](const std::string& text) {
           auto pid = looptrace::proc::parse_pid(text);
           if (!pid.ok()) throw CLI::ValidationError(pid.status().message());
           *out = *pid;
         },
         help)
      ->type_name("PID");
}

// Where and when: the target, the thresholds, sampling, the kernel's
// tables and thread filters.
void add_target_options(CLI::App* rec, looptrace::RecordArgs& ra) {
  add_trace_pid_option(rec, &ra.pid, "Trace this process");
  rec->add_flag("-a,--system-wide", ra.system_wide,
                "Trace every process that maps the binaries (the default "
                "without -p or a command)");
  add_threshold_options(rec, &ra.thresholds, true);
  rec->add_flag("--delivery-hysteresis", ra.delivery_hysteresis,
                fmt::format("After a slow delivery, report none on that thread "
                            "until the lag drains below {} (as Android's "
                            "Looper does)",
                            looptrace::format_duration(
                                looptrace::Thresholds::kDeliveryDrainNs)));
  rec->add_option("-d,--duration", ra.duration, "Stop after this long");
  rec->add_option("--sample-freq", ra.sample_freq,
                  "Stack samples per second and CPU (0: off)")
      ->capture_default_str();
  rec->add_option("--sample-after", ra.sample_after,
                  "Sample stacks of spans running longer than this (default: "
                  "half of --slow)");
  rec->add_option("--ringbuf-size", ra.ringbuf_size,
                  "Ring buffer size (power of two: 8M)")
      ->capture_default_str();
  rec->add_option("--max-threads", ra.hist_max,
                  "Histogram slots (threads x probes)")
      ->capture_default_str();
  rec->add_option("--tid", ra.tids,
                  "Spans only of this thread (repeatable, or a comma list)")
      ->delimiter(',');
  rec->add_option("--comm", ra.comms,
                  "Spans only of threads of this name (repeatable)");
  rec->add_option("--max-pending", ra.pending_max,
                  "Messages enqueued and not yet dispatched that are kept "
                  "for delivery lag")
      ->capture_default_str();
  rec->add_option("--max-processes", ra.process_max,
                  "Processes followed with -p or a command (the target and "
                  "what it forks)")
      ->capture_default_str();
}

// What a run writes and announces.
void add_run_options(CLI::App* rec, looptrace::RecordArgs& ra) {
  rec->add_flag("--record-all", ra.record_all,
                "Send every span through the ring buffer");
  add_output_options(rec, &ra.outputs);
  add_app_code_option(rec, &ra.app_code);
  add_budget_option(rec, &ra.fail_if);
  rec->add_option("-o,--output", ra.outputs.recording,
                  "Record every event to FILE, for `looptrace report`");
  rec->add_option("--call-graph", ra.call_graph,
                  "How user stacks are unwound: fp (frame pointers, in the "
                  "kernel), dwarf[,BYTES] (CFI in userspace from a copy of "
                  "the top BYTES of the stack, default 8192) or "
                  "auto[,BYTES] (CFI, continued by frame pointers)")
      ->capture_default_str();
  rec->add_flag("--no-off-cpu", ra.no_off_cpu,
                "Do not record where threads in spans block and who wakes "
                "them");
  rec->add_flag("--live", ra.live,
                "Print each slow span as it ends, while tracing");
  rec->add_flag("-q,--quiet", ra.quiet, "No text report, no progress lines");
  rec->add_option("--hang", ra.hang,
                  "Announce a span still running after this long, while it "
                  "runs and when it ends (0: never)")
      ->capture_default_str();
  rec->add_option("--events", ra.outputs.events,
                  "Write live events (barrier stalls, hangs) to FILE as JSON "
                  "lines");
}

// Input channels (docs/input.md).
void add_input_options(CLI::App* rec, looptrace::RecordArgs& ra) {
  rec->add_flag("--input", ra.input,
                "Trace input channels: Android InputChannel messages on "
                "AF_UNIX SOCK_SEQPACKET sockets, stage by stage");
  rec->add_option("--input-mode", ra.input_mode,
                  "How socket calls are probed: syscall (tracepoints) or "
                  "uprobe (libc functions)")
      ->check(CLI::IsMember({"syscall", "uprobe"}))
      ->capture_default_str();
  rec->add_option(
         "--input-calls", ra.input_calls,
         "Socket calls to probe, comma-separated: recvfrom, sendto, "
         "recvmsg, sendmsg, read, write, readv, writev (default: the first "
         "four)")
      ->delimiter(',');
  rec->add_option("--input-binary", ra.input_binary,
                  "--input-mode uprobe: the ELF file with the socket "
                  "functions (default: the target's libc; a static binary)");
  rec->add_option("--input-fd", ra.input_fd,
                  "A raw input channel (no FINISHED replies; X11, Wayland): "
                  "this fd of -p PID (repeatable)");
  rec->add_option("--input-peer", ra.input_peer,
                  "A raw input channel: the target's sockets connected to the "
                  "unix socket at PATH, e.g. /tmp/.X11-unix/X0; 'auto': its "
                  "X11 and Wayland connections (repeatable)");
}

CLI::App* add_record_command(CLI::App& app, looptrace::RecordArgs& ra) {
  CLI::App* rec =
      app.add_subcommand("record", "Trace dispatches and report slow ones");
  add_probe_options(rec, ra);
  add_target_options(rec, ra);
  add_run_options(rec, ra);
  add_input_options(rec, ra);
  // A repeatable option takes one value each time: `--dispatch LIB:FN --
  // COMMAND --duration 5` must not read "--" as the end of --dispatch's
  // values and the command's own options as looptrace's.
  for (CLI::Option* o : rec->get_options())
    if (!o->get_positional() && o->get_items_expected_max() > 1)
      o->allow_extra_args(false);
  refuse_empty_values(rec);
  rec->add_option("command", ra.command,
                  "-- COMMAND [ARGS...] to run and trace");
  rec->footer(kExamples);
  return rec;
}

// `monitor`: record's target, profile and kernel options that make sense
// for a run that lasts, and the monitor's own.
CLI::App* add_monitor_command(CLI::App& app, looptrace::MonitorArgs& ma) {
  CLI::App* mon = app.add_subcommand(
      "monitor",
      "Always on: follow every process of a known runtime, keep a window of "
      "its events, dump it when a trigger fires, serve metrics");
  looptrace::RecordArgs& ra = ma.rec;
  add_trace_pid_option(mon, &ra.pid, "Only this process");
  mon->add_option("--comm", ra.comms, "Only threads of this name (repeatable)");
  mon->add_option("--profile", ra.profile,
                  "Only this profile's runtime (`looptrace profiles`) or a "
                  "JSON profile file");
  add_threshold_options(mon, &ra.thresholds, true);
  mon->add_option("--window", ma.window,
                  "What the flight recorder keeps of each process")
      ->capture_default_str();
  mon->add_option("--window-max", ma.window_max,
                  "Memory for every window together (the oldest events go "
                  "first, counted)")
      ->capture_default_str();
  mon->add_option("--dump-if", ma.dump_if,
                  "When to dump a window: 'dispatch > 100ms', 'frame > 50ms', "
                  "'frame.missed_vsyncs >= 6', 'hang' (repeatable; default "
                  "with --dump-dir: hang and dispatch > 100ms)")
      ->allow_extra_args(false)
      ->type_name("EXPR");
  mon->add_option("--dump-dir", ma.dump_dir,
                  "Write each dump there, as a recording (`looptrace report`)");
  mon->add_option("--dump-every", ma.dump_every,
                  "At most one dump per process this often")
      ->capture_default_str();
  mon->add_flag("--dump-pprof", ma.dump_pprof,
                "Write each dump's stacks beside it as a pprof profile "
                "(.pb.gz)");
  mon->add_option("--dump-max-bytes", ma.dump_max_bytes,
                  "The dumps in --dump-dir together; the oldest are removed")
      ->capture_default_str();
  mon->add_option("--hang", ra.hang,
                  "A span running this long is a hang (0: never)")
      ->capture_default_str();
  mon->add_option("--call-graph", ra.call_graph,
                  "How user stacks are unwound: fp, dwarf[,BYTES], "
                  "auto[,BYTES]")
      ->capture_default_str();
  mon->add_option("--sample-freq", ra.sample_freq,
                  "Stack samples per second and CPU (0: off)")
      ->capture_default_str();
  mon->add_option("--ringbuf-size", ra.ringbuf_size,
                  "Ring buffer size (power of two: 8M)")
      ->capture_default_str();
  mon->add_flag("--no-off-cpu", ra.no_off_cpu,
                "Do not record where threads in spans block");
  mon->add_option("--metrics", ma.metrics,
                  "Serve Prometheus metrics at http://ADDR:PORT/metrics "
                  "(PORT alone: on 127.0.0.1)")
      ->type_name("ADDR:PORT");
  mon->add_flag("--metrics-per-pid", ma.metrics_per_pid,
                "A pid label on the span metrics");
  refuse_empty_values(mon);
  return mon;
}

CLI::App* add_report_command(CLI::App& app, looptrace::ReportArgs& args) {
  CLI::App* rep = app.add_subcommand(
      "report", "Replay a recording (record -o FILE) into reports");
  rep->add_option("recording", args.recording, "The recording")->required();
  add_threshold_options(rep, &args.thresholds, false);
  add_output_options(rep, &args.outputs);
  add_app_code_option(rep, &args.app_code);
  add_budget_option(rep, &args.fail_if);
  rep->add_flag("-q,--quiet", args.quiet, "No text report");
  refuse_empty_values(rep);
  return rep;
}

void add_pid_option(CLI::App* sub, looptrace::InspectArgs* args) {
  sub->add_option_function<std::string>(
         "-p,--pid",
         [args](const std::string& text) {
           auto pid = looptrace::proc::parse_pid(text);
           if (!pid.ok()) throw CLI::ValidationError(pid.status().message());
           args->pid = *pid;
         },
         "The process whose mappings to look in")
      ->type_name("PID");
}

CLI::App* add_list_command(CLI::App& app, looptrace::InspectArgs& args) {
  CLI::App* list = app.add_subcommand(
      "list",
      "List the functions of a binary (or of a process) a probe can "
      "attach to, and the built-in profiles' roles there");
  list->add_option("binary_or_glob", args.binary,
                   "BINARY [GLOB], or with -p GLOB or a BINARY it maps");
  list->add_option("glob", args.glob, "Functions to list (* ? [...])");
  add_pid_option(list, &args);
  return list;
}

CLI::App* add_check_command(CLI::App& app, looptrace::InspectArgs& args) {
  CLI::App* check = app.add_subcommand(
      "check", "Say where each probe of a profile resolves, or why not");
  check->add_option("profile", args.profile, "A built-in name or a file")
      ->required();
  check->add_option("binary", args.binary,
                    "Check against this binary instead of each probe's own");
  add_pid_option(check, &args);
  return check;
}

// --debug AREAS: each one a known area, or "all".
std::string check_debug_areas(const std::string& text) {
  static const std::set<std::string> kAreas{"elf",    "resolve",   "loader",
                                            "libbpf", "symbolize", "unwind",
                                            "python", "v8",        "all"};
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string area = text.substr(pos, comma - pos);
    if (!kAreas.count(area))
      return fmt::format(
          "unknown area '{}' (elf, resolve, loader, libbpf, symbolize, "
          "unwind, python, v8 or all)",
          looptrace::log::printable(area, 40));
    pos = comma + 1;
  }
  return "";
}

// What the command line named when no command ran: the commands, an
// unknown one, or --version alone.
int no_command(const CLI::App& app, bool version) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({}))
    if (!sub->get_group().empty())
      names += (names.empty() ? "" : ", ") + sub->get_name();
  const std::vector<std::string> extra = app.remaining();
  std::string what;
  if (!extra.empty() && !extra[0].empty() && extra[0][0] == '-')
    what = fmt::format("unknown option '{}'",
                       looptrace::log::printable(extra[0], 60));
  else if (!extra.empty())
    what = fmt::format("unknown command '{}'",
                       looptrace::log::printable(extra[0], 60));
  else if (version) {
    std::printf("looptrace %s (git %s)\n", LOOPTRACE_VERSION,
                LOOPTRACE_GIT_COMMIT);
    return 0;
  } else {
    what = "a command is required";
  }
  std::fprintf(stderr, "looptrace: error: %s; the commands: %s\n", what.c_str(),
               names.c_str());
  return 2;
}

// `looptrace help [COMMAND]`, as git and perf have it; not listed: the
// commands' list stays what they do.
CLI::App* add_help_command(CLI::App& app, std::string& topic) {
  CLI::App* help =
      app.add_subcommand("help", "Print the help of a command (or this one)");
  help->add_option("COMMAND", topic, "The command");
  help->group("");
  return help;
}

// `looptrace help [COMMAND]`: that command's --help, or looptrace's.
int print_help(const CLI::App& app, const std::string& topic) {
  // The formatter, not help(): that one prints the selected command's
  // (help's own).
  const auto& format = *app.get_formatter();
  if (topic.empty()) {
    std::fputs(
        format.make_help(&app, app.get_name(), CLI::AppFormatMode::Normal)
            .c_str(),
        stdout);
    return 0;
  }
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() != topic || sub->get_group().empty()) continue;
    std::fputs(format
                   .make_help(sub, app.get_name() + " " + sub->get_name(),
                              CLI::AppFormatMode::Normal)
                   .c_str(),
               stdout);
    return 0;
  }
  std::fprintf(stderr, "looptrace: error: help: unknown command '%s'\n",
               looptrace::log::printable(topic, 60).c_str());
  return 2;
}

// `list -p PID [GLOB]`: the one positional is the glob, unless it names
// a file the process maps (`list BINARY -p PID`): then that binary, as the
// process maps it. `list BINARY GLOB -p PID` is both.
int run_list_command(looptrace::InspectArgs& args) {
  if (args.pid > 0 && args.glob.empty() && !args.binary.empty() &&
      !looptrace::names_mapped_file(args.pid, args.binary)) {
    args.glob = args.binary;
    args.binary.clear();
  } else if (args.pid <= 0 && args.binary.empty()) {
    std::fprintf(stderr, "looptrace: error: list needs a BINARY or -p PID\n");
    return 2;
  }
  return looptrace::run_list(args);
}

}  // namespace

// -v and --debug also after the subcommand; each --help ends with where
// the manual says the rest (its sections are named after the commands).
static void point_to_manual(std::initializer_list<CLI::App*> subs) {
  for (CLI::App* sub : subs) {
    sub->fallthrough();
    std::string section = sub->get_name();
    for (char& c : section) c = static_cast<char>(std::toupper(c));
    sub->footer(sub->get_footer() + "\nIn detail: man looptrace, section " +
                section + "\n");
  }
}

int main(int argc, char** argv) {
  CLI::App app{"looptrace: find where an event loop loses time"};
  // At most one command; none, an unknown one and --version are handled
  // after parsing (no_command).
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version,
               "Print the version and the commit it was built from");
  bool verbose = false;
  std::string debug_areas;
  app.add_flag("-v,--verbose", verbose, "Print progress and libbpf messages");
  app.add_option(
         "--debug", debug_areas,
         "Debug areas: elf,resolve,loader,libbpf,symbolize,unwind,python or "
         "all")
      ->check(check_debug_areas)
      ->type_name("AREAS");

  looptrace::RecordArgs ra;
  ra.self_dir = self_dir();
  CLI::App* rec = add_record_command(app, ra);
  looptrace::MonitorArgs mon_args;
  mon_args.rec.self_dir = ra.self_dir;
  CLI::App* mon = add_monitor_command(app, mon_args);
  looptrace::ReportArgs rep_args;
  CLI::App* rep = add_report_command(app, rep_args);
  CLI::App* profiles = app.add_subcommand(
      "profiles", "List the built-in profiles (--profile NAME)");
  looptrace::InspectArgs list_args, check_args;
  list_args.self_dir = check_args.self_dir = ra.self_dir;
  CLI::App* list = add_list_command(app, list_args);
  CLI::App* check = add_check_command(app, check_args);
  std::string demo_json;
  CLI::App* demo = app.add_subcommand("demo",
                                      "Run the bundled reference app under "
                                      "looptrace and compare with its own log");
  demo->add_option("--json", demo_json, "Also write the JSON report to FILE");

  std::string help_topic;
  CLI::App* help = add_help_command(app, help_topic);

  app.footer(std::string(kExamples) + "\nThe manual: man looptrace\n");
  point_to_manual({rec, mon, rep, profiles, list, check, demo});
  // An unknown command is kept, to be named (set after the subcommands:
  // they would inherit it).
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end parsing with a "success" exit.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "looptrace: error: %s\n", e.what());
    return 2;
  }
  if (app.get_subcommands().empty()) return no_command(app, version);
  if (!app.remaining().empty()) {
    std::fprintf(stderr, "looptrace: error: %s: unexpected argument '%s'\n",
                 app.get_subcommands()[0]->get_name().c_str(),
                 looptrace::log::printable(app.remaining()[0], 60).c_str());
    return 2;
  }
  if (version) {
    std::fprintf(stderr, "looptrace: error: --version takes no command\n");
    return 2;
  }
  if (verbose) looptrace::log::set_level(looptrace::log::Level::kInfo);
  if (!debug_areas.empty()) looptrace::log::enable_debug_areas(debug_areas);
  if (verbose) looptrace::log::enable_debug_areas("libbpf");

  if (*help) return print_help(app, help_topic);
  if (*profiles) return looptrace::run_profiles();
  if (*list) return run_list_command(list_args);
  if (*check) return looptrace::run_check(check_args);
  if (*rec) return looptrace::run_record(ra);
  if (*mon) return looptrace::run_monitor(mon_args);
  if (*rep) return looptrace::run_report(rep_args);
  if (*demo) return looptrace::run_demo(ra.self_dir, demo_json);
  return 2;
}
