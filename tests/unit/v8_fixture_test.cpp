// JavaScript frames decoded from a recorded fixture of the installed Node:
// a node (no flag) stalls in Date.now() calls under two levels of
// JavaScript; the test stops it with ptrace, records its registers, the
// top of its stack and every byte of its heap the naming reads, lets it
// go, and names the frames again from the recording alone. Both namings
// must match the err.stack the program printed for that stall (V8's own
// names and lines, the independent reader). No BPF: the stack copy path
// (JsFrames::recover) finds the frames, as it does for a sample taken in
// V8's C++.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "proc/maps.h"
#include "python/frames.h"
#include "v8/frames.h"

namespace looptrace::v8 {
namespace {

constexpr char kNode[] = "/usr/bin/node";

// Line 3: stall's Error on the line that calls busy; line 4: onTimer's
// call of stall.
constexpr char kProgram[] =
    "'use strict';\n"
    "function busy(ms) { const end = Date.now() + ms; let x = 0; while "
    "(Date.now() < end) x++; return x; }\n"
    "function stall(ms) { const e = new Error('stall'); "
    "console.log(JSON.stringify(e.stack)); return busy(ms); }\n"
    "setTimeout(function onTimer() { stall(60000); }, 100);\n";

// The recorded heap: every read the naming made, by address.
struct Recording {
  std::map<uint64_t, std::string> reads;
  bool read(uint64_t addr, void* out, size_t len) const {
    auto it = reads.upper_bound(addr);
    if (it == reads.begin()) return false;
    --it;
    if (addr - it->first + len > it->second.size()) return false;
    std::memcpy(out, it->second.data() + (addr - it->first), len);
    return true;
  }
};

struct Named {
  std::string function;
  int line = 0;
};

// The JavaScript frames merged into a stack with no native frame: their
// names, innermost first.
std::vector<Named> names_of(JsFrames& js, uint32_t pid, const Stack& in) {
  Stack st = in;
  js.recover(pid, &st);
  js.merge(pid, &st);
  std::vector<Named> out;
  static const std::regex re(R"(^(\S+) \((.+):(\d+)\)$)");
  for (uint64_t a : st.frames) {
    if (!is_js_frame(a)) continue;
    std::smatch m;
    const std::string f = js.frame(a).function;
    if (std::regex_match(f, m, re) && m[2] == "fixture.js")
      out.push_back({m[1], std::stoi(m[3])});
  }
  return out;
}

TEST(V8Fixture, FramesFromARecordedStackAndHeapMatchErrStack) {
  if (access(kNode, X_OK) != 0) GTEST_SKIP() << kNode << " is not installed";
  char dir[] = "/tmp/lt-v8-fixture.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string script = std::string(dir) + "/fixture.js";
  FILE* f = std::fopen(script.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(kProgram, f);
  std::fclose(f);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(kNode, kNode, script.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  // err.stack, printed as the stall starts.
  std::string printed;
  char buf[4096];
  while (printed.find('\n') == std::string::npos) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    printed.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  auto finish = [&] {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::remove(script.c_str());
    rmdir(dir);
  };
  // "    at stall (/tmp/.../fixture.js:3:29)" -> stall 3.
  std::vector<Named> truth;
  {
    static const std::regex at(
        R"(at (?:[\w$]+\.)?([\w$]+)(?: \[as [\w$]+\])? \(([^():]+):(\d+):\d+\))");
    std::string s = printed;
    for (std::smatch m; std::regex_search(s, m, at); s = m.suffix())
      if (m[2] == script) truth.push_back({m[1], std::stoi(m[3])});
  }
  if (truth.size() != 2u) {
    finish();
    FAIL() << printed;
  }

  JsFrames live;
  auto maps = proc::read_maps(static_cast<uint32_t>(pid));
  ASSERT_TRUE(maps.ok());
  ASSERT_TRUE(live.attach(static_cast<uint32_t>(pid), *maps).has_value());

  // Stopped where an exit frame is on the stack (in V8's C++ under
  // Date.now, most of the time): a few tries.
  Recording rec;
  Stack stack;
  std::vector<Named> live_names;
  for (int attempt = 0; attempt < 50 && live_names.size() < 3; ++attempt) {
    usleep(20000);
    ASSERT_EQ(ptrace(PTRACE_ATTACH, pid, nullptr, nullptr), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    user_regs_struct ur{};
    ASSERT_EQ(ptrace(PTRACE_GETREGS, pid, nullptr, &ur), 0);
    auto u = std::make_shared<UserStack>();
    // DWARF order (abi.h): rbp 6, rsp 7, rip 16.
    u->regs[6] = ur.rbp;
    u->regs[7] = ur.rsp;
    u->regs[16] = ur.rip;
    u->bytes.resize(8192);
    iovec local{u->bytes.data(), u->bytes.size()};
    iovec remote{reinterpret_cast<void*>(ur.rsp), u->bytes.size()};
    // Up to the stack's end, which may be nearer than 8 KiB (the main
    // thread's, under main()): what could be read.
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    u->bytes.resize(got > 0 ? static_cast<size_t>(got) & ~size_t{7} : 0);
    stack = Stack();
    stack.ustack = u;
    stack.frames = {ur.rip};
    // Named live, every read recorded.
    Recording attempt_rec;
    JsFrames recording([&](uint32_t p, uint64_t addr, void* out, size_t len) {
      if (!python::read_process_memory(p, addr, out, len)) return false;
      attempt_rec.reads[addr].assign(static_cast<const char*>(out), len);
      return true;
    });
    ASSERT_TRUE(recording.attach(static_cast<uint32_t>(pid), *maps));
    live_names = names_of(recording, static_cast<uint32_t>(pid), stack);
    rec = attempt_rec;
    ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  }
  finish();
  ASSERT_GE(live_names.size(), 3u) << "never stopped under an exit frame";
  ASSERT_FALSE(rec.reads.empty());

  // From the recording alone (the process is gone).
  JsFrames replay([&](uint32_t, uint64_t addr, void* out, size_t len) {
    return rec.read(addr, out, len);
  });
  ASSERT_TRUE(replay.attach(static_cast<uint32_t>(pid), *maps).has_value());
  const std::vector<Named> replayed =
      names_of(replay, static_cast<uint32_t>(pid), stack);

  for (const std::vector<Named>* got :
       std::vector<const std::vector<Named>*>{&live_names, &replayed}) {
    ASSERT_EQ(got->size(), 3u);
    // busy, at a line of its own (line 2: one line), then stall and
    // onTimer at err.stack's lines.
    EXPECT_EQ((*got)[0].function, "busy");
    EXPECT_EQ((*got)[0].line, 2);
    for (size_t i = 0; i < truth.size(); ++i) {
      EXPECT_EQ((*got)[i + 1].function, truth[i].function);
      EXPECT_EQ((*got)[i + 1].line, truth[i].line);
    }
  }
}

}  // namespace
}  // namespace looptrace::v8
