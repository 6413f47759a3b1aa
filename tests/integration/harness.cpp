#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace lt_test {

std::string bpf_unavailable_reason() {
  if (geteuid() != 0) return "BPF tests need root";
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return "BPF tests need kernel BTF (/sys/kernel/btf/vmlinux)";
  return "";
}

bool bpf_required() {
  const char* v = std::getenv("LOOPTRACE_REQUIRE_BPF");
  return v && std::string(v) == "1";
}

bool have_system_python() { return access("/usr/bin/python3", X_OK) == 0; }

bool have_xvfb_and_xdotool() {
  return access("/usr/bin/Xvfb", X_OK) == 0 &&
         access("/usr/bin/xdotool", X_OK) == 0;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/looptrace-test.XXXXXX";
  char* p = mkdtemp(tmpl);
  path_ = p ? p : "/tmp";
}

TempDir::~TempDir() {
  if (path_ != "/tmp" && !std::getenv("LOOPTRACE_KEEP_TEST_FILES")) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

Process::Process(std::vector<std::string> argv, const std::string& out_path,
                 const std::string& err_path) {
  pid_ = fork();
  if (pid_ == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    setpgid(0, 0);  // our own group: a test's signals reach only us
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
}

// The whole group: a program's own children die with it (meld's
// multiprocessing workers outlived a killed meld, holding its display).
Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool Process::running() {
  if (reaped_) return false;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) == pid_) {
    reaped_ = true;
    status_ = st;
    return false;
  }
  return true;
}

int Process::wait(int timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

void Process::signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

RunResult run(const std::vector<std::string>& argv, int timeout_ms) {
  TempDir dir;
  RunResult r;
  {
    Process p(argv, dir.file("out"), dir.file("err"));
    r.exit_code = p.wait(timeout_ms);
  }
  r.out = read_file(dir.file("out"));
  r.err = read_file(dir.file("err"));
  return r;
}

std::vector<std::string> without_tracefs(const std::vector<std::string>& argv) {
  // Deepest first (sort -r): /sys/kernel/debug/tracing before its parent.
  std::vector<std::string> out = {
      "unshare",
      "-m",
      "--propagation",
      "private",
      "sh",
      "-c",
      "for m in $(awk '$3 == \"tracefs\" || $3 == \"debugfs\" "
      "{ print $2 }' /proc/self/mounts | sort -r); do "
      "umount -l \"$m\" || exit 97; done; "
      "grep -qE ' (tracefs|debugfs) ' /proc/self/mounts && exit 97; "
      "exec \"$@\"",
      "sh"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << path << ": bad JSON line: " << line;
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json read_json(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(read_file(path), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  return j;
}

std::vector<nlohmann::json> events(const std::vector<nlohmann::json>& log,
                                   const std::string& event) {
  std::vector<nlohmann::json> out;
  for (const auto& j : log)
    if (j.value("event", "") == event) out.push_back(j);
  return out;
}

bool wait_for_text(const std::string& path, const std::string& needle,
                   int timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (read_file(path).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// File offset of `symbol` in `path`: nm's address mapped through the
// PT_LOAD segment that contains it (readelf -lW).
uint64_t file_offset_of(const std::string& path, const std::string& symbol) {
  RunResult nm = run({"nm", path});
  uint64_t vaddr = 0;
  std::istringstream lines(nm.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (f >> addr >> type >> name && name == symbol)
      vaddr = std::stoull(addr, nullptr, 16);
  }
  if (vaddr == 0) return 0;
  RunResult re = run({"readelf", "-lW", path});
  std::istringstream segs(re.out);
  while (std::getline(segs, line)) {
    std::istringstream f(line);
    std::string type, off, va, pa, filesz, memsz;
    if (!(f >> type >> off >> va >> pa >> filesz >> memsz) || type != "LOAD")
      continue;
    uint64_t o = std::stoull(off, nullptr, 16),
             v = std::stoull(va, nullptr, 16),
             fs = std::stoull(filesz, nullptr, 16);
    if (vaddr >= v && vaddr < v + fs) return vaddr - v + o;
  }
  return 0;
}

// The steal column of /proc/stat, all CPUs (time a hypervisor ran
// something else), in ns.
int64_t tick_ns() {
  for (const std::string& cmd :
       {std::string("zcat /proc/config.gz 2>/dev/null"),
        std::string("cat /boot/config-$(uname -r) 2>/dev/null")}) {
    RunResult r = run({"sh", "-c", cmd + " | sed -n 's/^CONFIG_HZ=//p'"});
    int hz = std::atoi(r.out.c_str());
    if (hz > 0) return 1'000'000'000 / hz;
  }
  return 4'000'000;
}

int64_t steal_ns() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {};
  in >> cpu;
  for (uint64_t& x : v) in >> x;
  return static_cast<int64_t>(v[7]) * (1'000'000'000 / sysconf(_SC_CLK_TCK));
}

std::vector<std::string> source_lines(const std::string& path) {
  std::vector<std::string> out(1);
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

int line_of(const std::string& path, const std::string& text) {
  const std::vector<std::string> lines = source_lines(path);
  for (size_t n = 1; n < lines.size(); ++n)
    if (lines[n].find(text) != std::string::npos) return static_cast<int>(n);
  return 0;
}

LineRange function_lines(const std::string& path, const std::string& def_text) {
  const std::vector<std::string> lines = source_lines(path);
  LineRange r;
  for (size_t n = 1; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    if (r.first == 0) {
      if (line.starts_with(def_text)) r.first = static_cast<int>(n);
    } else if (line.starts_with("def ") || line.starts_with("class ")) {
      break;
    } else {
      r.last = static_cast<int>(n);
    }
  }
  return r;
}

void trace_glib_loop(const TempDir& dir,
                     const std::vector<std::string>& app_args,
                     const std::vector<std::string>& lt_args, RunResult* lt) {
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   tests_dir() + "/programs/glib_loop.py",
                                   "--start-delay", "2000"};
  argv.insert(argv.end(), app_args.begin(), app_args.end());
  argv.insert(argv.end(), {"--log", dir.file("glib.jsonl")});
  Process app(argv, dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "glib_loop: ready", 10000))
      << read_file(dir.file("app.err"));
  std::vector<std::string> cmd = {looptrace_bin(), "record", "-p",
                                  std::to_string(app.pid())};
  cmd.insert(cmd.end(), lt_args.begin(), lt_args.end());
  *lt = run(cmd);
  ASSERT_EQ(lt->exit_code, 0) << lt->err;
  ASSERT_EQ(app.wait(10000), 0) << read_file(dir.file("app.err"));
}

const nlohmann::json* span_holding(const nlohmann::json& spans,
                                   const nlohmann::json& logged,
                                   int64_t tolerance_ns) {
  const uint64_t tol = static_cast<uint64_t>(tolerance_ns);
  const uint64_t st_start = logged["start_ns"], st_end = logged["end_ns"];
  const nlohmann::json* found = nullptr;
  for (const auto& s : spans) {
    const uint64_t start = s["start_ns"], dur = s["duration_ns"];
    if (start <= st_start + tol && start + dur + tol >= st_end) found = &s;
  }
  return found;
}

std::string looptrace_bin() { return LT_LOOPTRACE_BIN; }
std::string refapp_bin() { return LT_REFAPP_BIN; }
std::string refapp_nofp_bin() { return LT_REFAPP_NOFP_BIN; }
std::string tests_dir() { return LT_TESTS_DIR; }

}  // namespace lt_test

namespace lt_test {

void expect_split_adds_up(const nlohmann::json& report) {
  for (const char* list : {"slow_dispatches", "slow_idle_handlers"}) {
    if (!report.contains(list)) continue;
    for (const nlohmann::json& s : report[list]) {
      const uint64_t wall = s["duration_ns"], cpu = s["cpu_ns"],
                     runq = s["runq_ns"], steal = s["steal_ns"];
      const uint64_t slack = std::max<uint64_t>(wall / 100, 500'000);
      EXPECT_LE(cpu + runq + steal, wall + slack) << s.dump();
    }
  }
}

}  // namespace lt_test

namespace lt_test {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  EXPECT_TRUE(out.good()) << "writing " << path;
}

}  // namespace lt_test
