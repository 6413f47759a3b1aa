// lt-bench-floor: the benchmark floor. Attaches the empty uprobe + uretprobe
// pair from tests/bench/empty.bpf.c to one function, the way looptrace attaches
// its span probes (same libbpf call, same file offset from our ELF resolver),
// so that the difference to looptrace is only what our programs do.
//
//   lt-bench-floor BINARY SYMBOL -p PID        attach to a running process;
//                                              print "ready"; detach on
//                                              SIGINT/SIGTERM, PID exit, or a
//                                              line/EOF on stdin if that is
//                                              a pipe or a terminal
//   lt-bench-floor BINARY SYMBOL -- CMD ARGS   start CMD after attaching,
//                                              exit with its status
//   --obj FILE.bpf.o[:NAME] (first option)     attach NAME_entry and
//                                              NAME_return of FILE instead
//                                              (no NAME: its first uprobe
//                                              and uretprobe): cost
//                                              breakdowns against the floor
//                                              (tests/bench/ablation.bpf.c)
//
// SYMBOL takes what looptrace's --dispatch takes (a name, a demangled name,
// a glob or a 0x file offset).
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "elf/resolve.h"
#include "empty.skel.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int quiet_libbpf(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_WARN || getenv("LT_BENCH_DEBUG"))
    return std::vfprintf(stderr, fmt, ap);
  return 0;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: lt-bench-floor [--obj FILE.bpf.o[:NAME]] BINARY SYMBOL "
               "(-p PID | -- COMMAND [ARGS...])\n");
  std::exit(2);
}

int die(const char* what, int err) {
  std::fprintf(stderr, "lt-bench-floor: %s: %s\n", what, std::strerror(err));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string obj_path, prog_name;
  if (argc > 2 && std::strcmp(argv[1], "--obj") == 0) {
    obj_path = argv[2];
    size_t colon = obj_path.rfind(':');
    if (colon != std::string::npos &&
        obj_path.find('/', colon) == std::string::npos) {
      prog_name = obj_path.substr(colon + 1);
      obj_path.resize(colon);
    }
    argv += 2;
    argc -= 2;
  }
  if (argc < 5) usage();
  std::string binary = argv[1];
  std::string symbol = argv[2];
  pid_t pid = -1;
  std::vector<char*> command;
  if (std::strcmp(argv[3], "-p") == 0 && argc == 5) {
    pid = static_cast<pid_t>(std::atoi(argv[4]));
    if (pid <= 0) usage();
  } else if (std::strcmp(argv[3], "--") == 0) {
    for (int i = 4; i < argc; ++i) command.push_back(argv[i]);
    command.push_back(nullptr);
  } else {
    usage();
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "lt-bench-floor: needs root to load BPF programs\n");
    return 3;
  }

  auto sym = looptrace::elf::resolve_symbol(binary, symbol);
  if (!sym.ok()) {
    std::fprintf(stderr, "lt-bench-floor: %s\n",
                 sym.status().message().c_str());
    return 2;
  }
  libbpf_set_print(quiet_libbpf);

  // A command waits on a pipe until the probes are in (like looptrace's).
  int gate[2] = {-1, -1};
  if (!command.empty()) {
    if (pipe2(gate, O_CLOEXEC) != 0) return die("pipe", errno);
    pid = fork();
    if (pid < 0) return die("fork", errno);
    if (pid == 0) {
      close(gate[1]);
      char c;
      if (read(gate[0], &c, 1) != 1) _exit(127);
      execvp(command[0], command.data());
      std::fprintf(stderr, "lt-bench-floor: cannot run %s: %s\n", command[0],
                   std::strerror(errno));
      _exit(127);
    }
    close(gate[0]);
  }

  empty_bpf* skel = nullptr;
  bpf_object* obj = nullptr;
  bpf_program* progs[2] = {nullptr, nullptr};  // entry, return
  if (obj_path.empty()) {
    skel = empty_bpf::open_and_load();
    if (!skel) return die("loading the empty BPF programs", errno);
    progs[0] = skel->progs.lt_empty_entry;
    progs[1] = skel->progs.lt_empty_return;
  } else {
    obj = bpf_object__open_file(obj_path.c_str(), nullptr);
    if (!obj) return die(obj_path.c_str(), errno);
    bpf_program* p;
    bpf_object__for_each_program(p, obj) {
      std::string sec = bpf_program__section_name(p);
      std::string name = bpf_program__name(p);
      if (!prog_name.empty()) {
        if (name == prog_name + "_entry") progs[0] = p;
        if (name == prog_name + "_return") progs[1] = p;
        continue;
      }
      if (sec == "uprobe" && !progs[0]) progs[0] = p;
      if (sec == "uretprobe" && !progs[1]) progs[1] = p;
    }
    if (!progs[0] || !progs[1]) {
      std::fprintf(
          stderr, "lt-bench-floor: %s has no %s pair\n", obj_path.c_str(),
          prog_name.empty()
              ? "SEC(\"uprobe\") + SEC(\"uretprobe\")"
              : (prog_name + "_entry + " + prog_name + "_return").c_str());
      return 2;
    }
    // Load only the pair.
    bpf_object__for_each_program(p, obj) {
      if (p != progs[0] && p != progs[1]) bpf_program__set_autoload(p, false);
    }
    if (int err = bpf_object__load(obj))
      return die(("loading " + obj_path).c_str(), -err);
  }
  bpf_link* links[2] = {nullptr, nullptr};
  for (int ret = 0; ret < 2; ++ret) {
    LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret != 0);
    bpf_program* prog = progs[ret];
    links[ret] = bpf_program__attach_uprobe_opts(prog, pid, binary.c_str(),
                                                 sym->file_offset, &uo);
    if (!links[ret]) {
      int err = errno;
      if (!command.empty()) kill(pid, SIGKILL);
      return die(ret ? "attaching the uretprobe" : "attaching the uprobe", err);
    }
  }
  std::fprintf(
      stderr,
      "lt-bench-floor: %s uprobe+uretprobe on %s:%s (offset %#llx), pid %d\n",
      obj_path.empty() ? "empty" : (obj_path + ":" + prog_name).c_str(),
      binary.c_str(), sym->name.c_str(),
      static_cast<unsigned long long>(sym->file_offset), pid);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  int rc = 0;
  if (!command.empty()) {
    if (write(gate[1], "g", 1) != 1) return die("releasing the command", errno);
    close(gate[1]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return die("waitpid", errno);
      if (g_stop) kill(pid, SIGTERM);
    }
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    // stdin counts only if it is a pipe or a terminal: a tool started with
    // </dev/null stays until it is signalled or the pid is gone.
    struct stat sb {};
    bool watch_stdin = fstat(STDIN_FILENO, &sb) == 0 &&
                       (S_ISFIFO(sb.st_mode) || isatty(STDIN_FILENO));
    std::printf("ready\n");
    std::fflush(stdout);
    while (!g_stop && kill(pid, 0) == 0) {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      int n = poll(&p, watch_stdin ? 1 : 0, 100);
      if (n > 0) break;  // a line or EOF
    }
  }
  bpf_link__destroy(links[1]);
  bpf_link__destroy(links[0]);
  if (skel) empty_bpf::destroy(skel);
  if (obj) bpf_object__close(obj);
  return rc;
}
