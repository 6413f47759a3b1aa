// The looptrace binary as a user runs it: bad -p values, parse errors,
// --version, output files (unsafe, unwritable, full), the traced command's
// end and exit status, SIGHUP. Each case: the exit code, the one line that
// says why, and what is (or is not) left on disk.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "harness.h"

namespace lt_test {
namespace {

// Exit `code`, one "looptrace: error: " line holding `needle` (and at most
// a hint line), nothing on stdout.
void expect_error(const RunResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err.rfind("looptrace: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_LE(count_lines(r.err), 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

void write_file(const std::string& path, const std::string& text,
                mode_t mode = 0644) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> record(std::vector<std::string> extra) {
  std::vector<std::string> argv{looptrace_bin(), "record", "--profile",
                                "refapp"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// --- the command -------------------------------------------------------

// A repeatable option right before "--" takes its one value: the
// command's own options (refapp's --duration and --log here, which
// looptrace also knows or not) stay the command's. They used to be read
// as looptrace's ("The following argument was not expected").
TEST(Cli, RepeatableOptionBeforeTheCommandTakesOneValue) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("app.jsonl");
  RunResult r =
      run({looptrace_bin(), "record", "-q", "--dispatch",
           refapp_bin() + ":refapp::Looper::dispatchMessage*", "--",
           refapp_bin(), "--rate", "100", "--duration", "300", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The app ran with its arguments: its log says so.
  auto start = events(read_jsonl(log), "start");
  ASSERT_EQ(start.size(), 1u) << r.err;
  EXPECT_EQ(start[0]["duration_ms"], 300);
}

// --- -p ----------------------------------------------------------------

TEST(Cli, BadPidIsRefused) {
  // "" is what -p "$(pidof nosuchapp)" passes; "", 0 and negatives used to
  // trace every process, 0x10 to trace pid 16.
  for (const std::string bad : {"", "0", "-5", "0x10", "abc", "12abc"}) {
    RunResult r = run(record({"-p", bad, "-d", "1s"}));
    SCOPED_TRACE("-p '" + bad + "'");
    expect_error(r, 2, "-p '" + bad + "'");
    EXPECT_EQ(r.err.find("tracing"), std::string::npos) << r.err;
  }
}

TEST(Cli, ZombiePidIsRefused) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  // Unreaped: a zombie, as `ps` shows it.
  bool zombie = false;
  for (int i = 0; i < 200 && !zombie; ++i) {
    zombie =
        read_file("/proc/" + std::to_string(child) + "/stat").find(") Z ") !=
        std::string::npos;
    if (!zombie) usleep(10'000);
  }
  ASSERT_TRUE(zombie);
  RunResult r = run(record({"-p", std::to_string(child), "-d", "1s"}));
  waitpid(child, nullptr, 0);
  expect_error(r, 2, "process " + std::to_string(child) + " has exited");
  EXPECT_NE(r.err.find("zombie"), std::string::npos) << r.err;
}

// --- parsing -----------------------------------------------------------

TEST(Cli, ParseErrorsAreOneLineAndExitTwo) {
  expect_error(run({looptrace_bin(), "record", "--bogus"}), 2, "--bogus");
  expect_error(run({looptrace_bin()}), 2, "a command is required");
  expect_error(run({looptrace_bin(), "record", "--max-threads", "many"}), 2,
               "--max-threads");
  expect_error(run({looptrace_bin(), "record", "--input-mode", "magic"}), 2,
               "magic");
  expect_error(run({looptrace_bin(), "record", "--json"}), 2, "--json");
}

// `looptrace help COMMAND` is `looptrace COMMAND --help`, as in git and
// perf; `looptrace help` is `looptrace --help`.
TEST(Cli, HelpCommandPrintsACommandsHelp) {
  for (const char* command : {"record", "monitor", "report", "list"}) {
    RunResult by_help = run({looptrace_bin(), "help", command});
    RunResult by_flag = run({looptrace_bin(), command, "--help"});
    EXPECT_EQ(by_help.exit_code, 0) << by_help.err;
    EXPECT_NE(by_help.out.find(std::string("Usage: ") + looptrace_bin() + " " +
                               command + " [OPTIONS]"),
              std::string::npos)
        << by_help.out;
    EXPECT_EQ(by_help.out, by_flag.out) << command;
  }
  RunResult top = run({looptrace_bin(), "help"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_EQ(top.out, run({looptrace_bin(), "--help"}).out);
  expect_error(run({looptrace_bin(), "help", "recrod"}), 2,
               "help: unknown command 'recrod'");
}

// An unknown command is named, with the commands there are; it was "A
// subcommand is required". --version and --debug take nothing unknown.
TEST(Cli, UnknownCommandIsNamedWithTheCommands) {
  const std::string commands =
      "; the commands: record, monitor, report, profiles, list, check, demo";
  expect_error(run({looptrace_bin(), "monitr"}), 2,
               "unknown command 'monitr'" + commands);
  expect_error(run({looptrace_bin(), "-v", "recrod", "-p", "1"}), 2,
               "unknown command 'recrod'");
  expect_error(run({looptrace_bin()}), 2, "a command is required" + commands);
  expect_error(run({looptrace_bin(), "--version", "foo"}), 2,
               "unknown command 'foo'");
  expect_error(run({looptrace_bin(), "--version", "profiles"}), 2,
               "--version takes no command");
  expect_error(run({looptrace_bin(), "--debug", "nosuch", "profiles"}), 2,
               "--debug: unknown area 'nosuch'");
  expect_error(run({looptrace_bin(), "profiles", "--debug", "elf,"}), 2,
               "unknown area ''");
  RunResult all =
      run({looptrace_bin(), "--debug", "elf,resolve,python", "profiles"});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  expect_error(run({looptrace_bin(), "profiles", "extra"}), 2, "extra");
}

// Options that act on nothing asked for are refused before tracing, from
// the command line as typed (the unit tests hold every case).
TEST(Cli, OptionsThatWouldDoNothingAreRefused) {
  expect_error(run(record({"--queue-arg", "1", "--", "true"})), 2,
               "--queue-arg applies to ad-hoc --barrier-post, "
               "--barrier-remove or --enqueue probes: none given");
  expect_error(run(record({"--key", "w=arg1:int", "--", "true"})), 2,
               "--key applies to ad-hoc spans (--dispatch, --idle, --frame, "
               "--dispatch-call): none given");
  expect_error(run(record({"--input", "--input-binary",
                           "/lib/x86_64-linux-gnu/libc.so.6", "--", "true"})),
               2, "--input-binary applies to --input-mode uprobe, not syscall");
  expect_error(run(record({"-a", "--tid", "4194304", "-d", "1s"})), 2,
               "--tid 4194304: no such thread");
  expect_error(
      run({looptrace_bin(), "record", "--dispatch", refapp_bin() + ":main",
           "--key", "w=arg1:int", "--key", "w=arg2:int", "--", "true"}),
      2, "two keys named 'w'");
}

// --hang 0, as the manual says, turns the hang watchdog off: accepted.
TEST(Cli, HangZeroIsAccepted) {
  LT_REQUIRE_BPF();
  RunResult r = run(record({"-q", "--hang", "0", "--", "true"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// The five thresholds take the same values in record and report, refused
// with the same line: record checks before anything is traced, report
// before it replays a recording.
TEST(Cli, ThresholdOptionsBehaveTheSameInRecordAndReport) {
  const std::string rec = tests_dir() + "/data/recordings/refapp.lt";
  for (const char* opt : {"--slow", "--slow-idle", "--slow-delivery",
                          "--slow-input", "--barrier-stall"}) {
    for (const char* value : {"0ms", "10", "-1ms"}) {
      RunResult r = run({looptrace_bin(), "record", "--profile", "refapp", opt,
                         value, "--", "/bin/true"});
      RunResult p = run({looptrace_bin(), "report", rec, opt, value});
      EXPECT_EQ(r.exit_code, 2) << opt << " " << value << r.err;
      EXPECT_EQ(p.exit_code, 2) << opt << " " << value << p.err;
      // The first line: "looptrace: error: --slow: must be above 0".
      EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
                p.err.substr(0, p.err.find('\n')))
          << opt << " " << value;
      EXPECT_NE(r.err.find(std::string("error: ") + opt + ": "),
                std::string::npos)
          << r.err;
    }
  }
}

// --app-code: a bad pattern list is refused alike by record (before
// tracing) and report; a good one changes which frames are key lines.
TEST(Cli, AppCodeIsCheckedAndAppliedByRecordAndReport) {
  const std::string rec = tests_dir() + "/data/recordings/refapp.lt";
  for (const char* value : {"a,,b", "a,", ","}) {
    SCOPED_TRACE(value);
    RunResult r = run({looptrace_bin(), "record", "--profile", "refapp",
                       "--app-code", value, "--", "/bin/true"});
    RunResult p = run({looptrace_bin(), "report", rec, "--app-code", value});
    expect_error(r, 2, "--app-code: an empty pattern");
    expect_error(p, 2, "--app-code: an empty pattern");
  }
  expect_error(run({looptrace_bin(), "report", rec, "--app-code", ""}), 2,
               "empty value");
  // The reference app's busy stall: its own function by default, nothing
  // when the program's code is said to be elsewhere.
  RunResult def = run({looptrace_bin(), "report", rec});
  ASSERT_EQ(def.exit_code, 0) << def.err;
  EXPECT_NE(def.out.find("    > refapp::busyStall(long)+0x"), std::string::npos)
      << def.out;
  RunResult other =
      run({looptrace_bin(), "report", rec, "--app-code", "/nowhere/*"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(other.out.find("    > "), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("(no frame of the program's own code)"),
            std::string::npos)
      << other.out;
  // Named by its library instead: libstdc++'s frame is the key line.
  RunResult lib = run({looptrace_bin(), "report", rec, "--app-code",
                       "libstdc++.so*", "--json", "-", "-q"});
  ASSERT_EQ(lib.exit_code, 0) << lib.err;
  nlohmann::json j = nlohmann::json::parse(lib.out);
  EXPECT_EQ(j["app_code"], nlohmann::json::array({"libstdc++.so*"}));
  const nlohmann::json& st = j["slow_dispatches"][0]["stacks"][0];
  ASSERT_TRUE(st["key_frame"].is_number()) << st.dump();
  EXPECT_NE(st["frames_detail"][st["key_frame"].get<size_t>()]["module"]
                .get<std::string>()
                .find("libstdc++.so"),
            std::string::npos)
      << st.dump();
  EXPECT_EQ(st["key_frame_by"], "libstdc++.so*");
}

TEST(Cli, HelpAndVersion) {
  RunResult help = run({looptrace_bin(), "record", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--pid"), std::string::npos);
  EXPECT_NE(help.out.find("man looptrace, section RECORD"), std::string::npos)
      << help.out;
  RunResult v = run({looptrace_bin(), "--version"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  // The commit the build came from, as git itself names it (the test runs
  // from the checkout the binary was built from).
  std::string commit = "unknown";
  RunResult git =
      run({"git", "-C", LT_TESTS_DIR, "rev-parse", "--short=12", "HEAD"});
  if (git.exit_code == 0 && git.out.size() > 1) {
    commit = git.out.substr(0, git.out.size() - 1);
    RunResult clean =
        run({"git", "-C", LT_TESTS_DIR, "diff-index", "--quiet", "HEAD", "--"});
    if (clean.exit_code != 0) commit += "-dirty";
  }
  EXPECT_EQ(v.out,
            std::string("looptrace ") + LT_VERSION + " (git " + commit + ")\n");
  EXPECT_TRUE(v.err.empty()) << v.err;
}

// --- profiles ------------------------------------------------------------

TEST(Cli, ProfilesListsTheBuiltinsWithTheirProbes) {
  RunResult r = run({looptrace_bin(), "profiles"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(r.out.rfind("refapp ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nglib "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libglib-2.0.so.0:*(g_idle_funcs+16)  GLib idle"),
            std::string::npos)
      << r.out;
}

// `list BINARY GLOB`: the functions, as --dispatch names them, each one nm
// also knows, with the built-in profiles' roles where they attach.
TEST(Cli, ListNamesFunctionsAndTheProfileRolesThere) {
  RunResult r =
      run({looptrace_bin(), "list", refapp_bin(), "refapp::MessageQueue::*"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunResult nm = run({"nm", "-C", "--defined-only", refapp_bin()});
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    ASSERT_EQ(line.rfind(refapp_bin() + ":refapp::MessageQueue::", 0), 0u)
        << line;
    std::string name = line.substr(refapp_bin().size() + 1);
    name = name.substr(0, name.find("  ["));
    EXPECT_NE(nm.out.find(" " + name + "\n"), std::string::npos) << name;
  }
  EXPECT_GE(n, 5) << r.out;
  EXPECT_NE(r.out.find(":refapp::MessageQueue::runIdleHandler(refapp::"
                       "IdleHandler*)  [refapp idle]\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("postSyncBarrier(long)  [refapp barrier.post]\n"),
            std::string::npos)
      << r.out;
  // Attach points no symbol names: the form that probes them.
  RunResult glib = run({looptrace_bin(), "list", "libglib-2.0.so.0"});
  ASSERT_EQ(glib.exit_code, 0) << glib.err;
  EXPECT_NE(glib.out.find(":g_main_context_dispatch\n"), std::string::npos);
  EXPECT_NE(glib.out.find(":*(g_idle_funcs+16)  [glib idle (GLib idle)]\n"),
            std::string::npos);
  // -p: every file the process maps (this test program maps libc).
  RunResult p =
      run({looptrace_bin(), "list", "-p", std::to_string(getpid()), "malloc"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("libc.so.6:malloc\n"), std::string::npos) << p.out;
  expect_error(run({looptrace_bin(), "list"}), 2, "needs a BINARY or -p PID");
  expect_error(run({looptrace_bin(), "list", "no-such-lib-lt.so"}), 2,
               "'no-such-lib-lt.so' not found");
}

// `list BINARY -p PID` lists BINARY as the process maps it (BINARY was
// taken as a glob and nothing was listed); a kernel thread has nothing to
// list and says so; a 32-bit or big-endian ELF file is refused in one line.
TEST(Cli, ListBinaryOfAProcessAndWhatCannotBeListed) {
  TempDir dir;
  Process sleeper({"sleep", "30"}, dir.file("out"), dir.file("err"));
  const std::string pid = std::to_string(sleeper.pid());
  RunResult r = run({looptrace_bin(), "list", "libc.so.6", "-p", pid});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream maps("/proc/" + pid + "/maps");
  std::string libc, line;
  while (std::getline(maps, line))
    if (line.find("/libc.so.6") != std::string::npos)
      libc = line.substr(line.find('/'));
  ASSERT_FALSE(libc.empty());
  // Every function of libc, each line in its mapped name.
  std::istringstream lines(r.out);
  int n = 0;
  while (std::getline(lines, line) && ++n)
    ASSERT_EQ(line.rfind(libc + ":", 0), 0u) << line;
  EXPECT_GT(n, 1000) << r.out.substr(0, 300);
  RunResult g =
      run({looptrace_bin(), "list", "libc.so.6", "malloc", "-p", pid});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out, libc + ":malloc\n");
  // A glob with -p is still a glob.
  RunResult glob = run({looptrace_bin(), "list", "-p", pid, "mallo?"});
  EXPECT_NE(glob.out.find(libc + ":malloc\n"), std::string::npos) << glob.out;

  std::ifstream kstat("/proc/2/stat");
  std::string comm;
  kstat >> comm >> comm;
  if (comm == "(kthreadd)")
    expect_error(run({looptrace_bin(), "list", "-p", "2"}), 2,
                 "pid 2 is a kernel thread: it runs no program to trace");

  std::ifstream in(refapp_bin(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  bytes[5] = 2;  // EI_DATA: big-endian
  write_file(dir.file("msb"), bytes, 0755);
  expect_error(run({looptrace_bin(), "list", dir.file("msb")}), 2,
               dir.file("msb") +
                   ": a 64-bit big-endian ELF file; looptrace reads 64-bit "
                   "little-endian ones only");
  bytes[5] = 1;
  bytes[4] = 1;  // EI_CLASS: 32-bit
  write_file(dir.file("elf32"), bytes, 0755);
  RunResult e32 = run({looptrace_bin(), "list", dir.file("elf32")});
  EXPECT_EQ(e32.exit_code, 2) << e32.err;
  EXPECT_NE(e32.err.find("32-bit"), std::string::npos) << e32.err;
}

// Files and processes looptrace may not read: exit 4, as the manual says
// (they exited 1 and 2).
TEST(Cli, UnreadableIsNotPermittedExitFour) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another user";
  TempDir dir;
  Process sleeper({"sleep", "30"}, dir.file("out"), dir.file("err"));
  auto as_nobody = [](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"setpriv", "--reuid=65534", "--regid=65534",
                               "--clear-groups"});
    return run(argv);
  };
  expect_error(as_nobody({looptrace_bin(), "list", "-p",
                          std::to_string(sleeper.pid()), "malloc"}),
               4, "/maps: Permission denied");
  const std::string rec = "/tmp/lt-unreadable-" + std::to_string(getpid());
  write_file(rec, "LTRECORD", 0600);
  expect_error(as_nobody({looptrace_bin(), "report", rec}), 4,
               "open " + rec + ": Permission denied");
  unlink(rec.c_str());
}

// `report` of what is not a recording file says what it is, and never
// waits on a FIFO nobody writes to.
TEST(Cli, ReportOfADirectoryOrAFifo) {
  TempDir dir;
  expect_error(run({looptrace_bin(), "report", dir.path()}), 2,
               dir.path() + " is a directory, not a looptrace recording");
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  RunResult r = run({looptrace_bin(), "report", dir.file("fifo")}, 10000);
  expect_error(r, 2, dir.file("fifo") + " is not a regular file");
}

// `check PROFILE [BINARY]`: each probe resolves or says why not; exit 0
// when all do, 1 when one does not, 2 for a bad profile.
TEST(Cli, CheckSaysWhereEachProbeResolves) {
  RunResult ok = run({looptrace_bin(), "check", "glib"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("glib: 6 of 6 probes resolve\n", 0), 0u) << ok.out;
  EXPECT_NE(ok.out.find("*(g_timeout_funcs+16) (GLib timeout) -> "),
            std::string::npos)
      << ok.out;
  RunResult bad = run({looptrace_bin(), "check", "glib", refapp_bin()});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_EQ(bad.out.rfind("glib: 0 of 6 probes resolve\n", 0), 0u) << bad.out;
  // Not a GLib at all: the version gate says so first.
  EXPECT_NE(bad.out.find("has no glib_major_version symbol: not a GLib whose "
                         "version can be read"),
            std::string::npos)
      << bad.out;
  // A profile without a gate: the table that is not there.
  RunResult table = run({looptrace_bin(), "check", "gtk3", refapp_bin()});
  EXPECT_EQ(table.exit_code, 1) << table.err;
  EXPECT_NE(table.out.find("symbol 'gtk_main_do_event' not found"),
            std::string::npos)
      << table.out;
  expect_error(run({looptrace_bin(), "check", "no-such-profile-lt"}), 2,
               "no-such-profile-lt");
}

// -v and --debug are accepted after the subcommand, as before it.
TEST(Cli, VerboseAfterTheSubcommand) {
  RunResult r = run({looptrace_bin(), "profiles", "-v", "--debug", "elf"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_error(
      run({looptrace_bin(), "record", "-v", "--profile", "no-such-profile-lt"}),
      2, "no-such-profile-lt");
}

// Thread selectors a thread can never match are refused before tracing.
TEST(Cli, BadThreadSelectorsAreUsageErrors) {
  expect_error(run(record({"--comm", "", "--", "true"})), 2,
               "--comm '': a thread name is 1 to 15 bytes");
  expect_error(run(record({"--comm", "a-name-of-16-chr", "--", "true"})), 2,
               "--comm 'a-name-of-16-chr': a thread name is 1 to 15 bytes");
  expect_error(run(record({"--tid", "0", "--", "true"})), 2,
               "--tid 0: not a thread id");
  expect_error(run(record({"--tid", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
                           "--", "true"})),
               2, "--tid: at most 16 threads");
  expect_error(run(record({"--tid", "-5", "--", "true"})), 2, "--tid");
}

// With -p and no probe option, a process whose libraries no built-in
// profile knows (this test program) is a usage error naming the built-ins.
TEST(Cli, PidWithoutAKnownRuntimeNamesTheProfiles) {
  expect_error(run({looptrace_bin(), "record", "-p", std::to_string(getpid()),
                    "-d", "1s"}),
               2,
               "maps no runtime a built-in profile knows (refapp, glib, node, "
               "qt5, qt6, gtk3, gtk4, qtquick5, qtquick6, android)");
}

// The reference app's profile probes the app's own binary: -p of a running
// refapp finds it (it said the app "maps no runtime ... (refapp, ...)").
TEST(Cli, PidOfTheReferenceAppFindsItsProfile) {
  LT_REQUIRE_BPF();
  TempDir dir;
  Process app({refapp_bin(), "--rate", "200", "--duration", "20000"},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 10000));
  RunResult r = run({looptrace_bin(), "record", "-p", std::to_string(app.pid()),
                     "-d", "500ms", "--json", dir.file("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("looptrace: profile refapp: pid " +
                       std::to_string(app.pid()) + " maps "),
            std::string::npos)
      << r.err;
  nlohmann::json report = read_json(dir.file("r.json"));
  uint64_t dispatches = 0;
  for (const auto& t : report["threads"])
    if (t["role"] == "dispatch") dispatches += t["count"].get<uint64_t>();
  EXPECT_GT(dispatches, 0u) << report["threads"].dump();
}

// One function probed twice (by its name and its mangled name) is probed
// once: every dispatch counted once, none "lost" (each call was reported
// lost twice: returns without an entry, spans left without a return). The
// same function under two different probes is refused.
TEST(Cli, OneFunctionProbedTwiceIsProbedOnce) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string log = dir.file("app.jsonl");
  RunResult r =
      run({looptrace_bin(),
           "record",
           "--dispatch",
           refapp_bin() + ":refapp::Looper::dispatchMessage",
           "--dispatch",
           refapp_bin() + ":_ZN6refapp6Looper15dispatchMessageEPNS_7MessageE",
           "--json",
           dir.file("r.json"),
           "--fail-if",
           "lost.unmatched_returns > 0",
           "--fail-if",
           "lost.abandoned > 0",
           "--",
           refapp_bin(),
           "--rate",
           "200",
           "--duration",
           "1000",
           "--log",
           log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("are the same function"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("probed once"), std::string::npos) << r.err;
  std::vector<nlohmann::json> truth = read_jsonl(log);
  std::vector<nlohmann::json> summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  nlohmann::json report = read_json(dir.file("r.json"));
  uint64_t dispatches = 0;
  for (const auto& t : report["threads"])
    if (t["role"] == "dispatch") dispatches += t["count"].get<uint64_t>();
  EXPECT_EQ(dispatches, summary[0]["dispatches"].get<uint64_t>());
  EXPECT_EQ(report["lost"]["unmatched_returns"], 0);
  EXPECT_EQ(report["lost"]["abandoned"], 0);
  expect_error(run(record({"--dispatch",
                           refapp_bin() + ":refapp::Looper::dispatchMessage",
                           "--", refapp_bin(), "--duration", "100"})),
               2, "attach at the same function");
}

// --- the command -------------------------------------------------------

TEST(Cli, CommandThatCannotRunIsAUsageError) {
  TempDir dir;
  expect_error(run(record({"--", dir.path()})), 2, "Is a directory");
  expect_error(run(record({"--", "no-such-command-lt"})), 2,
               "'no-such-command-lt' not found");
  write_file(dir.file("plain"), "echo hi\n", 0644);
  expect_error(run(record({"--", dir.file("plain")})), 2, "Permission denied");
}

TEST(Cli, CommandExitStatusIsPassedOn) {
  LT_REQUIRE_BPF();
  RunResult r = run(record({"-q", "--", "sh", "-c", "exit 3"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err, "looptrace: stopped: command exited with status 3\n");
  r = run(record({"--", "sh", "-c", "kill -9 $$"}));
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("looptrace: stopped: command killed by signal 9"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("traced"), std::string::npos) << "report printed";
  r = run(record({"-q", "--", "true"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Cli, CommandStoppedByLooptraceIsNotAFailure) {
  LT_REQUIRE_BPF();
  // --duration ends the trace; looptrace sends the command SIGTERM: that is
  // not the command failing.
  RunResult r = run(record({"-d", "500ms", "--", "sleep", "30"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stopped: duration elapsed"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("command exited"), std::string::npos) << r.err;
}

TEST(Cli, ExecFailureIsReportedFromTheChild) {
  LT_REQUIRE_BPF();
  // Executable, but the kernel cannot run it: only exec itself can tell,
  // after the probes are attached. No report, no trace, no output file.
  TempDir dir;
  write_file(dir.file("script"), "#!/nonexistent/interpreter\n", 0755);
  write_file(dir.file("garbage"), "not a program\n", 0755);
  RunResult r =
      run(record({"--json", dir.file("r.json"), "--", dir.file("script")}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("looptrace: error: cannot run " + dir.file("script") +
                            ": No such file or directory\nhint: ",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.err.find("tracing"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(exists(dir.file("r.json")));
  expect_error(run(record({"--", dir.file("garbage")})), 2,
               "cannot run " + dir.file("garbage") + ": Exec format error");
}

// A command that goes on after SIGTERM (issue 23 item 18): it used to
// outlive the trace untraced and unmentioned. Now it gets the grace period
// (3 s), then SIGKILL, and a line says so; the trace itself is complete,
// so the exit status is 0.
TEST(Cli, CommandThatOutlivesSigtermIsKilledAndSaidSo) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string got = dir.file("got-term"), pid = dir.file("pid");
  const std::string script = "echo $$ > " + pid + "; trap 'echo TERM >> " +
                             got + "' TERM; while :; do sleep 0.05; done";
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(record({"-d", "500ms", "--", "sh", "-c", script}), 60000);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The command's own word: it got SIGTERM and went on.
  EXPECT_EQ(read_file(got), "TERM\n");
  const std::string shell = read_file(pid);
  ASSERT_FALSE(shell.empty());
  const pid_t shell_pid = std::stoi(shell);
  EXPECT_NE(r.err.find("looptrace: warning: command pid " +
                       std::to_string(shell_pid) +
                       " went on 3.0s after SIGTERM, untraced: killed it "
                       "(SIGKILL)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(kill(shell_pid, 0), 0) << "gone (and reaped)";
  EXPECT_GE(took, std::chrono::seconds(3));
  EXPECT_LT(took, std::chrono::seconds(30));
  // One that ends on SIGTERM is not mentioned.
  r = run(record({"-d", "300ms", "--", "sleep", "30"}));
  EXPECT_EQ(r.err.find("SIGKILL"), std::string::npos) << r.err;
}

// Probes on looptrace itself (issue 23 item 10): they fire in the code that
// reads their records, without end.
TEST(Cli, ProbesOnLooptraceItselfAreRefused) {
  LT_REQUIRE_BPF();
  RunResult r = run({looptrace_bin(), "record", "--dispatch",
                     looptrace_bin() + ":main", "-d", "1s"});
  expect_error(r, 2, "is looptrace itself");
  // Under another name: a hard link is the same file.
  TempDir dir;
  const std::string alias = dir.file("lt-alias");
  if (link(looptrace_bin().c_str(), alias.c_str()) == 0) {
    r = run(
        {looptrace_bin(), "record", "--dispatch", alias + ":main", "-d", "1s"});
    expect_error(r, 2, "is looptrace itself");
  }
  // -p of its own pid: exec keeps the shell's.
  r = run({"sh", "-c", "exec \"$0\" record --profile refapp -p $$ -d 1s",
           looptrace_bin()});
  expect_error(r, 2, "is looptrace itself");
}

// --- output files ------------------------------------------------------

// An empty value is not "not given" (issue 23 item 14): `--json "$OUT"`
// with OUT unset must not lose the report and exit 0, nor `-d ""` trace
// until stopped.
TEST(Cli, EmptyValuesAreRefused) {
  for (const char* opt :
       {"-d", "--json", "--html", "--perfetto", "--folded", "--folded-blocked",
        "--pprof", "-o", "--events", "--slow", "--profile", "--hang"}) {
    SCOPED_TRACE(opt);
    expect_error(run(record({opt, "", "--", "true"}), 30000), 2, "empty value");
  }
  TempDir dir;
  for (const char* opt :
       {"--json", "--html", "--perfetto", "--folded", "--slow"}) {
    SCOPED_TRACE(opt);
    expect_error(
        run({looptrace_bin(), "report", dir.file("none.ltrec"), opt, ""}), 2,
        "empty value");
  }
}

// /tmp/x/link -> /tmp/victim, the link another user's (issue 23 item 12):
// the report must not land there, nor move root's file there aside.
TEST(Cli, AnotherUsersDirectoryLinkIsNotFollowed) {
  LT_REQUIRE_BPF();
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown a link";
  TempDir dir;
  const std::string victim = dir.file("victim"), x = dir.file("x");
  ASSERT_EQ(mkdir(victim.c_str(), 0755), 0);
  write_file(victim + "/conf", "root's conf\n", 0600);
  ASSERT_EQ(mkdir(x.c_str(), 0777), 0);
  ASSERT_EQ(chown(x.c_str(), 65534, 65534), 0);
  ASSERT_EQ(symlink(victim.c_str(), (x + "/link").c_str()), 0);
  ASSERT_EQ(lchown((x + "/link").c_str(), 65534, 65534), 0);
  for (const char* opt : {"--json", "--events", "-o", "--html"}) {
    SCOPED_TRACE(opt);
    RunResult r = run(record({"-d", "300ms", opt, x + "/link/conf"}));
    expect_error(r, 2,
                 x + "/link is a symbolic link owned by uid 65534; not "
                     "following it");
    EXPECT_EQ(read_file(victim + "/conf"), "root's conf\n");
    EXPECT_FALSE(exists(victim + "/conf.old"));
  }
}

TEST(Cli, UnwritableJsonFailsBeforeTracing) {
  LT_REQUIRE_BPF();
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(record({"-d", "20s", "--json", "/nonexistent/r.json"}));
  auto took = std::chrono::steady_clock::now() - t0;
  expect_error(r, 2, "/nonexistent/r.json: No such file or directory");
  // At once, not after the 20 s trace.
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST(Cli, JsonWriteFailureExitsOneAfterTheTextReport) {
  LT_REQUIRE_BPF();
  RunResult r = run(record({"-d", "300ms", "--json", "/dev/full"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("looptrace: error: --json: writing /dev/full: No space "
                       "left on device\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("traced"), std::string::npos)
      << "text report: " << r.out;
}

TEST(Cli, JsonOnAFullFilesystemExitsOne) {
  LT_REQUIRE_BPF();
  // A 16 KiB tmpfs filled to the last block, in a private mount namespace
  // (nothing outside the test sees it).
  TempDir dir;
  const std::string mnt = dir.file("full");
  ASSERT_EQ(mkdir(mnt.c_str(), 0700), 0);
  std::string script = "mount -t tmpfs -o size=16k looptrace-test " + mnt +
                       " || exit 99; " + "dd if=/dev/zero of=" + mnt +
                       "/fill bs=4k 2>/dev/null; exec \"$@\"";
  std::vector<std::string> argv{"unshare", "-m", "sh", "-c", script, "sh"};
  for (const std::string& a :
       record({"-q", "-d", "300ms", "--json", mnt + "/r.json"}))
    argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_NE(r.exit_code, 99) << "could not mount a tmpfs: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "looptrace: error: --json: writing " + mnt +
                       "/r.json: No space left on device\n");
}

TEST(Cli, EventsWriteFailureExitsOne) {
  LT_REQUIRE_BPF();
  TempDir dir;
  // A barrier held 600 ms against a 100 ms stall threshold: one live event,
  // announced on stderr and written to --events.
  RunResult r =
      run(record({"--barrier-stall", "100ms", "--events", "/dev/full", "-q",
                  "--", refapp_bin(), "--rate", "100", "--duration", "1500",
                  "--barrier", "600@300", "--log", dir.file("truth.jsonl")}));
  // The app's own log says the barrier was up that long.
  auto removes = events(read_jsonl(dir.file("truth.jsonl")), "barrier_remove");
  ASSERT_EQ(removes.size(), 1u);
  ASSERT_GE(removes[0]["lifetime_ns"].get<uint64_t>(), 100'000'000u);
  EXPECT_NE(r.err.find("STALL: sync barrier"), std::string::npos) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("looptrace: error: --events: writing /dev/full: No "
                       "space left on device\n"),
            std::string::npos)
      << r.err;
}

TEST(Cli, PlantedSymlinkIsNotFollowed) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string victim = dir.file("victim"), link = dir.file("r.json");
  write_file(victim, "secret\n", 0600);
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  for (const char* opt : {"--json", "--events"}) {
    SCOPED_TRACE(opt);
    RunResult r = run(record({"-d", "300ms", opt, link}));
    expect_error(r, 2, std::string(opt) + " " + link + ": is a symbolic link");
    EXPECT_EQ(read_file(victim), "secret\n");
    EXPECT_EQ(mode_of(victim), 0600u);
  }
}

TEST(Cli, ExistingReportIsMovedAsideAndTheNewOneIsPrivate) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string path = dir.file("r.json");
  write_file(path, "previous report\n", 0644);
  RunResult r = run(record({"-q", "-d", "300ms", "--json", path}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(path + ".old"), "previous report\n");
  EXPECT_EQ(mode_of(path), 0600u);
  nlohmann::json j = read_json(path);
  EXPECT_TRUE(j.contains("slow_dispatches")) << j.dump();
}

TEST(Cli, JsonToStdoutStillWorks) {
  LT_REQUIRE_BPF();
  RunResult r = run(record({"-d", "300ms", "--json", "-"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_TRUE(j.contains("slow_deliveries_omitted"));
  // The text report moved to stderr.
  EXPECT_NE(r.err.find("traced"), std::string::npos) << r.err;
}

// --- signals -----------------------------------------------------------

TEST(Cli, HangupStopsAndReports) {
  LT_REQUIRE_BPF();
  TempDir dir;
  Process lt(record({"--json", dir.file("r.json"), "--", "sleep", "30"}),
             dir.file("out"), dir.file("err"));
  ASSERT_TRUE(wait_for_text(dir.file("err"), "tracing", 30000))
      << read_file(dir.file("err"));
  lt.signal(SIGHUP);
  EXPECT_EQ(lt.wait(30000), 0) << read_file(dir.file("err"));
  EXPECT_NE(read_file(dir.file("err")).find("looptrace: stopped: hangup"),
            std::string::npos)
      << read_file(dir.file("err"));
  EXPECT_NE(read_file(dir.file("out")).find("traced"), std::string::npos);
  nlohmann::json j = read_json(dir.file("r.json"));
  EXPECT_GT(j.value("duration_ns", uint64_t{0}), 0u);
}

}  // namespace
}  // namespace lt_test
