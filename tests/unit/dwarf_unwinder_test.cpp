// DwarfUnwinder against samples recorded from a program built here without
// frame pointers: its registers and the top of its stack, taken with ptrace
// while it is stopped deep in a call chain, then unwound after it has been
// killed (as from a recording). The results are checked against
// independent tools: addr2line (binutils) names the frames, eu-stack
// (elfutils, unwinding the live process through ptrace) gives the pcs.
// Then: separate debug files found by build-id and by .gnu_debuglink, the
// vDSO, truncated and garbage input, and a throughput figure.
#include "unwind/dwarf_unwinder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "proc/maps.h"

namespace looptrace {
namespace {

// main -> level1 -> level2 -> level3, each a real frame (a stack buffer,
// work after the call). level3 raises SIGSTOP, or with "spin" calls
// clock_gettime (the vDSO) forever.
constexpr char kProgramSource[] = R"(
#include <signal.h>
#include <string.h>
#include <time.h>
#define NOINLINE __attribute__((noinline, noclone))
volatile long sink;
NOINLINE static long level3(long x, int spin) {
  volatile char buf[64];
  for (int i = 0; i < 64; i++) buf[i] = (char)(x + i);
  if (spin) {
    struct timespec ts;
    for (;;) {
      clock_gettime(CLOCK_MONOTONIC, &ts);
      sink += ts.tv_nsec;
    }
  }
  raise(SIGSTOP);
  return buf[x & 63] + 1;
}
NOINLINE static long level2(long x, int spin) {
  volatile char buf[32];
  buf[0] = (char)x;
  long r = level3(x + 1, spin);
  return r * 3 + buf[0];
}
NOINLINE static long level1(long x, int spin) {
  volatile char buf[16];
  buf[0] = (char)x;
  long r = level2(x * 2, spin);
  return r + buf[0];
}
int main(int argc, char** argv) {
  int spin = argc > 1 && strcmp(argv[1], "spin") == 0;
  sink = level1(argc, spin);
  return (int)(sink & 1);
}
)";

const std::vector<std::string> kChain = {"level3", "level2", "level1", "main",
                                         "_start"};

int sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string sh_output(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

bool have(const std::string& tool) {
  return sh("command -v " + tool + " >/dev/null 2>&1") == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/lt-unwind-XXXXXX";
    if (mkdtemp(tmpl)) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

// Writes the program to dir/name.c and builds dir/name; "" on success.
std::string build(const std::string& dir, const std::string& name,
                  const std::string& extra_flags = "") {
  std::string src = dir + "/" + name + ".c";
  std::ofstream(src) << kProgramSource;
  std::string cmd = "gcc -O2 -fomit-frame-pointer -g -fPIE -pie " +
                    extra_flags + " -o " + dir + "/" + name + " " + src +
                    " 2>&1";
  std::string out = sh_output(cmd + "; echo rc=$?");
  return out.ends_with("rc=0\n") ? "" : cmd + ": " + out;
}

// A recorded sample of a stopped process, and eu-stack's view of it.
struct Sample {
  uint32_t pid = 0;
  UserRegs regs;
  StackCopy stack;
  std::string maps;
  std::vector<uint64_t> eu_stack;  // empty without eu-stack
  std::string error;               // why there is no sample
};

UserRegs to_dwarf(const user_regs_struct& r) {
  UserRegs u;
  u.dwarf = {r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8,
             r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip};
  return u;
}

const MapEntry* mapping_of(const std::vector<MapEntry>& maps, uint64_t addr) {
  for (const MapEntry& m : maps)
    if (m.contains(addr)) return &m;
  return nullptr;
}

std::vector<uint64_t> parse_eu_stack(const std::string& text) {
  // "#3  0x000056482098b1b0 level2"
  std::vector<uint64_t> pcs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    unsigned n = 0;
    unsigned long long pc = 0;
    if (std::sscanf(line.c_str(), "#%u 0x%llx", &n, &pc) == 2 &&
        n == pcs.size())
      pcs.push_back(pc);
  }
  return pcs;
}

// Runs program (traced from its exec), stops it in level3 (at its
// raise(SIGSTOP); with in_vdso, by SIGSTOPs until it is stopped inside the
// vDSO), records registers, maps and up to 8 KiB of stack, lets eu-stack
// unwind it, and kills it.
Sample capture(const std::string& program, bool in_vdso = false,
               const std::string& eu_stack_args = "") {
  Sample s;
  std::string arg = in_vdso ? "spin" : "raise";
  pid_t pid = fork();
  if (pid < 0) {
    s.error = "fork failed";
    return s;
  }
  if (pid == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    execl(program.c_str(), program.c_str(), arg.c_str(), nullptr);
    _exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGKILL);
      int st;
      while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR) {
      }
    }
  } reaper{pid};
  s.pid = static_cast<uint32_t>(pid);

  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
      WSTOPSIG(status) != SIGTRAP) {
    s.error = "no stop at exec";
    return s;
  }
  std::string maps_path = "/proc/" + std::to_string(pid) + "/maps";
  Result<std::vector<MapEntry>> exec_maps =
      proc::parse_maps(read_file(maps_path));
  uint64_t vdso_start = 0, vdso_end = 0;
  if (exec_maps.ok())
    for (const MapEntry& m : *exec_maps)
      if (m.path == "[vdso]") vdso_start = m.start, vdso_end = m.end;
  if (in_vdso && vdso_start == 0) {
    s.error = "no [vdso]";
    return s;
  }

  user_regs_struct ur{};
  bool stopped = false;
  for (int attempt = 0; attempt < 1000 && !stopped; ++attempt) {
    ptrace(PTRACE_CONT, pid, nullptr, nullptr);
    if (in_vdso) {
      usleep(attempt == 0 ? 20000 : 1000);
      kill(pid, SIGSTOP);
    }
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
        WSTOPSIG(status) != SIGSTOP) {
      s.error = "no SIGSTOP stop";
      return s;
    }
    if (ptrace(PTRACE_GETREGS, pid, nullptr, &ur) != 0) {
      s.error = "PTRACE_GETREGS failed";
      return s;
    }
    stopped = !in_vdso || (ur.rip >= vdso_start && ur.rip < vdso_end);
  }
  if (!stopped) {
    s.error = "never stopped inside the vDSO";
    return s;
  }
  s.regs = to_dwarf(ur);
  s.maps = read_file(maps_path);
  Result<std::vector<MapEntry>> maps = proc::parse_maps(s.maps);
  const MapEntry* stack = maps.ok() ? mapping_of(*maps, ur.rsp) : nullptr;
  if (!stack) {
    s.error = "rsp is not in a mapping";
    return s;
  }
  size_t n = std::min<uint64_t>(8192, stack->end - ur.rsp);
  s.stack.addr = ur.rsp;
  s.stack.bytes.resize(n);
  iovec local{s.stack.bytes.data(), n};
  iovec remote{reinterpret_cast<void*>(ur.rsp), n};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) !=
      static_cast<ssize_t>(n)) {
    s.error = "process_vm_readv failed";
    return s;
  }

  // Leave it stopped, untraced, for eu-stack.
  ptrace(PTRACE_DETACH, pid, nullptr, reinterpret_cast<void*>(SIGSTOP));
  waitpid(pid, &status, WUNTRACED);
  if (have("eu-stack"))
    s.eu_stack =
        parse_eu_stack(sh_output("eu-stack " + eu_stack_args + " -p " +
                                 std::to_string(pid) + " 2>/dev/null"));
  return s;
}

// The function addr2line names for each frame inside `mapped` (the path in
// the maps), from symbols_file's DWARF and symbols; "" for the frames in
// other files. A caller's return address is looked up minus 1.
std::vector<std::string> names_in(const Sample& s, const UnwindResult& r,
                                  const std::string& mapped,
                                  const std::string& symbols_file) {
  std::vector<std::string> names(r.frames.size());
  Result<std::vector<MapEntry>> maps = proc::parse_maps(s.maps);
  if (!maps.ok()) return names;
  uint64_t base = 0;
  bool found = false;
  for (const MapEntry& m : *maps)
    if (m.path == mapped && !found) base = m.start - m.pgoff, found = true;
  std::string cmd = "addr2line -f -e " + symbols_file;
  std::vector<size_t> asked;
  for (size_t i = 0; i < r.frames.size(); ++i) {
    const MapEntry* m = mapping_of(*maps, r.frames[i]);
    if (!m || m->path != mapped) continue;
    uint64_t vaddr = r.frames[i] - base - (i > 0 ? 1 : 0);
    cmd += " 0x" + fmt::format("{:x}", vaddr);
    asked.push_back(i);
  }
  if (asked.empty()) return names;
  std::istringstream out(sh_output(cmd + " 2>/dev/null"));
  std::string function, location;
  for (size_t i : asked) {
    if (!std::getline(out, function) || !std::getline(out, location)) break;
    names[i] = function;
  }
  return names;
}

std::vector<std::string> nonempty(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (!n.empty()) out.push_back(n);
  return out;
}

std::string path_of(const Sample& s, uint64_t addr) {
  Result<std::vector<MapEntry>> maps = proc::parse_maps(s.maps);
  if (!maps.ok()) return "";
  const MapEntry* m = mapping_of(*maps, addr);
  return m ? m->path : "";
}

std::string describe(const UnwindResult& r) {
  std::string out =
      fmt::format("truncated={} error='{}' frames:", r.truncated, r.error);
  for (uint64_t pc : r.frames) out += fmt::format(" {:x}", pc);
  return out;
}

// Whatever the input: bounded, and truncated exactly when there is a
// one-line reason.
void expect_sane(const UnwindResult& r, size_t max_frames) {
  EXPECT_LE(r.frames.size(), max_frames);
  EXPECT_EQ(r.truncated, !r.error.empty()) << describe(r);
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
}

class DwarfUnwinderTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    if (!have("gcc")) {
      skip_ = "gcc is not installed";
      return;
    }
    if (!have("addr2line")) {
      skip_ = "addr2line is not installed";
      return;
    }
    if (std::string error = build(dir_->path, "prog"); !error.empty()) {
      skip_ = error;
      return;
    }
    sample_ = new Sample(capture(dir_->path + "/prog"));
    if (!sample_->error.empty()) skip_ = "no sample: " + sample_->error;
  }
  static void TearDownTestSuite() {
    delete sample_;
    sample_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  static std::string program() { return dir_->path + "/prog"; }
  static const Sample& sample() { return *sample_; }

  // Asserts that r is the whole chain of the program's frames with libc
  // before, between and after them, down to _start.
  static void expect_whole_chain(const Sample& s, const UnwindResult& r,
                                 const std::string& prog,
                                 const std::string& symbols) {
    ASSERT_FALSE(r.truncated) << describe(r);
    ASSERT_EQ(r.error, "");
    ASSERT_FALSE(r.frames.empty());
    EXPECT_EQ(r.frames[0], s.regs.dwarf[UserRegs::kRip]);
    std::vector<std::string> names = names_in(s, r, prog, symbols);
    EXPECT_EQ(nonempty(names), kChain) << describe(r);
    EXPECT_EQ(names.back(), "_start");
    // libc: raise() called from level3, __libc_start_call_main and
    // __libc_start_main between main and _start.
    auto main_at = std::find(names.begin(), names.end(), "main");
    ASSERT_NE(main_at, names.end());
    size_t after_main = static_cast<size_t>(main_at - names.begin()) + 1;
    ASSERT_LT(after_main + 2, r.frames.size()) << describe(r);
    for (size_t i = after_main; i < r.frames.size() - 1; ++i)
      EXPECT_NE(path_of(s, r.frames[i]).find("libc.so"), std::string::npos)
          << "frame " << i;
    if (!s.eu_stack.empty()) {
      EXPECT_EQ(r.frames, s.eu_stack);
    }
  }

  static TempDir* dir_;
  static Sample* sample_;
  static std::string skip_;
};

TempDir* DwarfUnwinderTest::dir_ = nullptr;
Sample* DwarfUnwinderTest::sample_ = nullptr;
std::string DwarfUnwinderTest::skip_;

TEST_F(DwarfUnwinderTest, UnwindsCodeWithoutFramePointersToStart) {
  // The process is gone: everything comes from the sample and the files.
  ASSERT_NE(kill(static_cast<pid_t>(sample().pid), 0), 0);
  DwarfUnwinder unwinder;
  unwinder.set_maps(sample().pid, sample().maps);
  UnwindResult r = unwinder.unwind(sample().pid, sample().regs, sample().stack);
  expect_whole_chain(sample(), r, program(), program());
  // frames[0] is in libc (raise), not yet the program.
  EXPECT_NE(path_of(sample(), r.frames[0]).find("libc.so"), std::string::npos);

  // The same sample again, with the kept state: the same frames.
  UnwindResult again =
      unwinder.unwind(sample().pid, sample().regs, sample().stack);
  EXPECT_EQ(again.frames, r.frames);
  EXPECT_FALSE(again.truncated);
}

TEST_F(DwarfUnwinderTest, NamesSymbolsOfTheModules) {
  DwarfUnwinder unwinder;
  unwinder.set_maps(sample().pid, sample().maps);
  UnwindResult r = unwinder.unwind(sample().pid, sample().regs, sample().stack);
  std::vector<std::string> names = names_in(sample(), r, program(), program());
  for (size_t i = 1; i < r.frames.size(); ++i)
    if (!names[i].empty()) {
      EXPECT_EQ(unwinder.symbol_name(sample().pid, r.frames[i] - 1), names[i]);
    }
  EXPECT_EQ(unwinder.symbol_name(sample().pid, 0), "");
  EXPECT_EQ(unwinder.symbol_name(sample().pid + 1, r.frames[0]), "");
}

TEST_F(DwarfUnwinderTest, ShortStackCopyIsTruncated) {
  DwarfUnwinder unwinder;
  unwinder.set_maps(sample().pid, sample().maps);
  StackCopy cut = sample().stack;
  cut.bytes.resize(64);
  UnwindResult r = unwinder.unwind(sample().pid, sample().regs, cut);
  expect_sane(r, 127);
  EXPECT_TRUE(r.truncated);
  ASSERT_GE(r.frames.size(), 1u);
  EXPECT_EQ(r.frames[0], sample().regs.dwarf[UserRegs::kRip]);
  EXPECT_NE(r.error.find("outside the stack copy"), std::string::npos)
      << r.error;
  // What was found is the start of the whole stack.
  UnwindResult whole =
      unwinder.unwind(sample().pid, sample().regs, sample().stack);
  ASSERT_LE(r.frames.size(), whole.frames.size());
  EXPECT_TRUE(
      std::equal(r.frames.begin(), r.frames.end(), whole.frames.begin()));

  // No stack at all: the instruction pointer, and the reason.
  UnwindResult none = unwinder.unwind(sample().pid, sample().regs, {});
  expect_sane(none, 127);
  EXPECT_TRUE(none.truncated);
  EXPECT_EQ(none.frames,
            std::vector<uint64_t>{sample().regs.dwarf[UserRegs::kRip]});
}

TEST_F(DwarfUnwinderTest, StopsAtMaxFrames) {
  DwarfUnwinder unwinder;
  unwinder.set_maps(sample().pid, sample().maps);
  UnwindResult whole =
      unwinder.unwind(sample().pid, sample().regs, sample().stack);
  ASSERT_FALSE(whole.truncated);
  UnwindResult r =
      unwinder.unwind(sample().pid, sample().regs, sample().stack, 3);
  expect_sane(r, 3);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.error, "stopped after 3 frames");
  EXPECT_EQ(r.frames, std::vector<uint64_t>(whole.frames.begin(),
                                            whole.frames.begin() + 3));
  // Exactly as many as there are: whole.
  r = unwinder.unwind(sample().pid, sample().regs, sample().stack,
                      whole.frames.size());
  EXPECT_FALSE(r.truncated) << describe(r);
  EXPECT_EQ(r.frames, whole.frames);
  r = unwinder.unwind(sample().pid, sample().regs, sample().stack, 0);
  expect_sane(r, 0);
  EXPECT_TRUE(r.truncated);
}

TEST_F(DwarfUnwinderTest, NewMapsReplaceTheModules) {
  DwarfUnwinder unwinder;
  uint32_t pid = sample().pid;
  unwinder.set_maps(pid, sample().maps);
  UnwindResult whole = unwinder.unwind(pid, sample().regs, sample().stack);
  ASSERT_FALSE(whole.truncated);

  // Without the program's lines, no module holds level3's return address.
  std::string without;
  std::istringstream in(sample().maps);
  for (std::string line; std::getline(in, line);)
    if (!line.ends_with(program())) without += line + "\n";
  unwinder.set_maps(pid, without);
  UnwindResult r = unwinder.unwind(pid, sample().regs, sample().stack);
  expect_sane(r, 127);
  EXPECT_TRUE(r.truncated);
  EXPECT_LT(r.frames.size(), whole.frames.size());

  unwinder.set_maps(pid, sample().maps);
  r = unwinder.unwind(pid, sample().regs, sample().stack);
  EXPECT_EQ(r.frames, whole.frames);
  EXPECT_FALSE(r.truncated);

  EXPECT_EQ(unwinder.process_count(), 1u);
  unwinder.forget(pid);
  EXPECT_EQ(unwinder.process_count(), 0u);
  r = unwinder.unwind(pid, sample().regs, sample().stack);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.error, fmt::format("no maps for pid {}", pid));
}

TEST_F(DwarfUnwinderTest, GarbageInputIsAnErrorNotACrash) {
  DwarfUnwinder unwinder;
  uint32_t pid = sample().pid;
  const UserRegs& regs = sample().regs;
  const StackCopy& stack = sample().stack;

  // Maps: none, malformed (the instruction pointer only), empty or nonsense
  // (libdw falls back to following rbp where it has no CFI: a few frames
  // may come of it).
  UnwindResult r = unwinder.unwind(pid, regs, stack);
  expect_sane(r, 127);
  EXPECT_EQ(r.error, fmt::format("no maps for pid {}", pid));
  EXPECT_EQ(r.frames, std::vector<uint64_t>{regs.dwarf[UserRegs::kRip]});
  unwinder.set_maps(pid, "garbage\n");
  r = unwinder.unwind(pid, regs, stack);
  expect_sane(r, 127);
  EXPECT_NE(r.error.find("malformed"), std::string::npos) << r.error;
  EXPECT_EQ(r.frames, std::vector<uint64_t>{regs.dwarf[UserRegs::kRip]});
  for (const char* maps :
       {"", "\n\n\n", "ffff-0 r-xp 0 0:0 0 /bin/true\n",
        "0-ffffffffffffffff r-xp 00000000 00:00 1 /nonexistent\n",
        "1000-2000 r-xp 00000000 00:00 0 /dev/zero\n"
        "1000-3000 r-xp ffffffffffff0000 00:00 0 /bin/sh\n"}) {
    unwinder.set_maps(pid, maps);
    r = unwinder.unwind(pid, regs, stack);
    expect_sane(r, 127);
    EXPECT_TRUE(r.truncated) << maps;
    ASSERT_GE(r.frames.size(), 1u);
    EXPECT_EQ(r.frames[0], regs.dwarf[UserRegs::kRip]);
  }

  // Registers: instruction pointer 0, random ones, random ones with the
  // real stack pointer and pcs in the mapped code; random stack bytes.
  unwinder.set_maps(pid, sample().maps);
  UserRegs zero;
  r = unwinder.unwind(pid, zero, stack);
  expect_sane(r, 127);
  EXPECT_TRUE(r.frames.empty());
  EXPECT_TRUE(r.truncated);

  Result<std::vector<MapEntry>> maps = proc::parse_maps(sample().maps);
  ASSERT_TRUE(maps.ok());
  std::vector<MapEntry> code;
  for (const MapEntry& m : *maps)
    if (m.executable()) code.push_back(m);
  ASSERT_FALSE(code.empty());

  std::mt19937_64 rng(1);
  for (int i = 0; i < 3000; ++i) {
    UserRegs garbage;
    for (uint64_t& reg : garbage.dwarf) reg = rng();
    StackCopy bytes = stack;
    switch (i % 3) {
      case 0:  // all random
        break;
      case 1: {  // a pc in the mapped code, the real stack
        const MapEntry& m = code[rng() % code.size()];
        garbage.dwarf[UserRegs::kRip] = m.start + rng() % (m.end - m.start);
        garbage.dwarf[UserRegs::kRsp] = stack.addr + (rng() % 64) * 8;
        break;
      }
      case 2: {  // the real registers, random bytes on the stack
        garbage = regs;
        for (size_t k = 0; k < 16; ++k)
          bytes.bytes[rng() % bytes.bytes.size()] = static_cast<uint8_t>(rng());
        if (rng() % 2) bytes.addr += rng() % 64;
        break;
      }
    }
    size_t max_frames = 1 + rng() % 64;
    r = unwinder.unwind(pid, garbage, bytes, max_frames);
    expect_sane(r, max_frames);
    if (i % 3 == 0) {
      EXPECT_TRUE(r.truncated) << describe(r);
    }
    if (testing::Test::HasFailure()) break;
  }
}

TEST_F(DwarfUnwinderTest, UnwindsOutOfTheVdso) {
  Sample s = capture(program(), true);
  if (s.error == "no [vdso]") GTEST_SKIP() << "no vDSO here";
  ASSERT_EQ(s.error, "");
  DwarfUnwinder unwinder;
  unwinder.set_maps(s.pid, s.maps);
  UnwindResult r = unwinder.unwind(s.pid, s.regs, s.stack);
  ASSERT_FALSE(r.truncated) << describe(r);
  EXPECT_EQ(path_of(s, r.frames[0]), "[vdso]");
  std::vector<std::string> names = names_in(s, r, program(), program());
  EXPECT_EQ(nonempty(names), kChain) << describe(r);
  if (!s.eu_stack.empty()) {
    EXPECT_EQ(r.frames, s.eu_stack);
  }
  EXPECT_NE(unwinder.symbol_name(s.pid, r.frames[0]), "");
}

// The program's own CFI only in .debug_frame (no unwind tables), moved to a
// separate debug file with its symbols; the program is stripped.
class SeparateDebugFileTest : public DwarfUnwinderTest {
 protected:
  void SetUp() override {
    DwarfUnwinderTest::SetUp();
    if (IsSkipped()) return;
    for (const char* tool : {"objcopy", "strip", "readelf"})
      if (!have(tool)) GTEST_SKIP() << tool << " is not installed";
    std::string error =
        build(tmp_.path, "prog",
              "-fno-asynchronous-unwind-tables -fno-unwind-tables");
    ASSERT_EQ(error, "");
    prog_ = tmp_.path + "/prog";
    debug_ = tmp_.path + "/prog.debug";
    ASSERT_EQ(sh("objcopy --only-keep-debug " + prog_ + " " + debug_), 0);
    ASSERT_EQ(sh("strip --strip-all " + prog_), 0);
    // The CFI of level1..3 is in the debug file only.
    std::string sections = sh_output("readelf -S " + prog_ + " 2>/dev/null");
    ASSERT_EQ(sections.find(".debug_frame"), std::string::npos);
    ASSERT_EQ(sections.find(".symtab"), std::string::npos);
    ASSERT_NE(
        sh_output("readelf -S " + debug_ + " 2>/dev/null").find(".debug_frame"),
        std::string::npos);
    build_id_ =
        sh_output("readelf -n " + prog_ +
                  " 2>/dev/null | sed -n 's/.*Build ID: *//p' | tr -d '\\n'");
    ASSERT_GE(build_id_.size(), 4u);
  }

  TempDir tmp_;
  std::string prog_, debug_, build_id_;
};

TEST_F(SeparateDebugFileTest, FoundByBuildId) {
  std::string root = tmp_.path + "/debug";
  std::string link_dir = root + "/.build-id/" + build_id_.substr(0, 2);
  std::filesystem::create_directories(link_dir);
  std::filesystem::rename(debug_,
                          link_dir + "/" + build_id_.substr(2) + ".debug");
  Sample s = capture(prog_, false, "--debuginfo-path=" + root);
  ASSERT_EQ(s.error, "");
  std::string debug_file = link_dir + "/" + build_id_.substr(2) + ".debug";

  DwarfUnwinder unwinder(root.c_str());
  unwinder.set_maps(s.pid, s.maps);
  UnwindResult r = unwinder.unwind(s.pid, s.regs, s.stack);
  expect_whole_chain(s, r, prog_, debug_file);
  // Static functions: named from the debug file's .symtab.
  std::vector<std::string> names = names_in(s, r, prog_, debug_file);
  auto at = std::find(names.begin(), names.end(), "level2");
  ASSERT_NE(at, names.end());
  uint64_t pc = r.frames[static_cast<size_t>(at - names.begin())];
  EXPECT_EQ(unwinder.symbol_name(s.pid, pc - 1), "level2");

  // Elsewhere: no CFI for level3, so no level2 (and no name).
  DwarfUnwinder elsewhere((tmp_.path + "/nowhere").c_str());
  elsewhere.set_maps(s.pid, s.maps);
  UnwindResult cut = elsewhere.unwind(s.pid, s.regs, s.stack);
  expect_sane(cut, 127);
  EXPECT_NE(nonempty(names_in(s, cut, prog_, debug_file)), kChain)
      << describe(cut);
  EXPECT_EQ(elsewhere.symbol_name(s.pid, pc - 1), "");
}

TEST_F(SeparateDebugFileTest, FoundByDebuglink) {
  ASSERT_EQ(
      sh("cd " + tmp_.path + " && objcopy --add-gnu-debuglink=prog.debug prog"),
      0);
  // Next to the program in .debug/: one of libdw's default places.
  std::filesystem::create_directories(tmp_.path + "/.debug");
  std::string debug_file = tmp_.path + "/.debug/prog.debug";
  std::filesystem::rename(debug_, debug_file);
  Sample s = capture(prog_);
  ASSERT_EQ(s.error, "");

  DwarfUnwinder unwinder;
  unwinder.set_maps(s.pid, s.maps);
  UnwindResult r = unwinder.unwind(s.pid, s.regs, s.stack);
  expect_whole_chain(s, r, prog_, debug_file);
  std::vector<std::string> names = names_in(s, r, prog_, debug_file);
  auto at = std::find(names.begin(), names.end(), "level1");
  ASSERT_NE(at, names.end());
  EXPECT_EQ(unwinder.symbol_name(
                s.pid, r.frames[static_cast<size_t>(at - names.begin())] - 1),
            "level1");
}

// Not a timed assertion: a figure for docs/unwinding.md.
TEST_F(DwarfUnwinderTest, Throughput) {
  DwarfUnwinder unwinder;
  unwinder.set_maps(sample().pid, sample().maps);
  // The first sample of a process opens its files and reads their CFI
  // indexes.
  auto cold_start = std::chrono::steady_clock::now();
  UnwindResult first =
      unwinder.unwind(sample().pid, sample().regs, sample().stack);
  double cold = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              cold_start)
                    .count();
  ASSERT_FALSE(first.truncated);
  constexpr int kRounds = 20000;
  size_t frames = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i)
    frames += unwinder.unwind(sample().pid, sample().regs, sample().stack)
                  .frames.size();
  double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_EQ(frames, first.frames.size() * kRounds);
  std::printf(
      "[ bench    ] %d unwinds of %zu frames in %.3f s: %.0f stacks/s, "
      "%.2f us each\n",
      kRounds, first.frames.size(), s, kRounds / s, s / kRounds * 1e6);
  std::printf("[ bench    ] the first unwind (cold): %.0f us\n", cold * 1e6);
  RecordProperty("stacks_per_second", static_cast<int>(kRounds / s));
}

}  // namespace
}  // namespace looptrace
