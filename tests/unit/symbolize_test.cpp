// ProcSymbolizer against a live test program (PIE and non-PIE), before and
// after it exits; demangling and frame formatting.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "base/demangle.h"
#include "proc/maps.h"
#include "proc/process.h"
#include "symbolize/proc_symbolizer.h"

extern char** environ;

namespace looptrace {
namespace {

const std::string kProgramsDir = LT_TEST_PROGRAMS_DIR;

// Runs "<program> --print-addr" and reads the addresses it prints; the
// program waits until its stdin closes. The destructor ends it.
class PrintAddrChild {
 public:
  explicit PrintAddrChild(const std::string& program) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::string arg = "--print-addr";
    char* argv[] = {const_cast<char*>(program.c_str()), arg.data(), nullptr};
    pid_t pid = 0;
    int rc = posix_spawn(&pid, program.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    out_ = fdopen(out[0], "r");
    if (rc != 0) return;
    pid_ = pid;
    char line[256];
    while (out_ && std::fgets(line, sizeof line, out_)) {
      char name[64];
      unsigned long long addr = 0;
      if (std::sscanf(line, "%63s %llx", name, &addr) == 2) addrs_[name] = addr;
      if (std::string(line) == "ready\n") break;
    }
  }
  ~PrintAddrChild() {
    if (pid_ > 0 && !exited_) kill(pid_, SIGKILL);
    wait_exit();
    if (stdin_ >= 0) close(stdin_);
    if (out_) fclose(out_);
  }
  PrintAddrChild(const PrintAddrChild&) = delete;
  PrintAddrChild& operator=(const PrintAddrChild&) = delete;

  uint32_t pid() const { return static_cast<uint32_t>(pid_); }
  uint64_t addr(const std::string& name) const {
    auto it = addrs_.find(name);
    return it == addrs_.end() ? 0 : it->second;
  }
  // Closes stdin, lets the program exit and reaps it.
  void finish() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
    wait_exit();
  }

 private:
  void wait_exit() {
    if (pid_ <= 0 || exited_) return;
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = true;
  }

  pid_t pid_ = -1;
  bool exited_ = false;
  int stdin_ = -1;
  FILE* out_ = nullptr;
  std::map<std::string, uint64_t> addrs_;
};

class SymbolizeChildTest : public testing::TestWithParam<std::string> {
 protected:
  std::string program() const { return kProgramsDir + "/" + GetParam(); }
};

void expect_program_frames(ProcSymbolizer& sym, const PrintAddrChild& child,
                           const std::string& program) {
  Frame draw = sym.symbolize(child.pid(), child.addr("draw"));
  EXPECT_EQ(draw.function, "lt_test::Widget::draw(int)");
  EXPECT_EQ(draw.offset, 0u);
  EXPECT_EQ(draw.module, program);
  EXPECT_EQ(draw.to_string(), "lt_test::Widget::draw(int)");

  // A return address: inside draw, past its start.
  Frame ret = sym.symbolize(child.pid(), child.addr("draw_ret"));
  EXPECT_EQ(ret.function, "lt_test::Widget::draw(int)");
  EXPECT_GT(ret.offset, 0u);
  EXPECT_EQ(ret.offset, child.addr("draw_ret") - child.addr("draw"));

  Frame plain = sym.symbolize(child.pid(), child.addr("plain"));
  EXPECT_EQ(plain.function, "lt_plain_function");

  // The object's vptr points 16 bytes into the vtable (offset-to-top and
  // typeinfo come first).
  Frame vtable = sym.symbolize(child.pid(), child.addr("vtable"));
  EXPECT_EQ(vtable.function, "vtable for lt_test::Widget");
  EXPECT_EQ(vtable.offset, 16u);
  EXPECT_EQ(vtable.to_string(), "vtable for lt_test::Widget+0x10");
}

TEST_P(SymbolizeChildTest, LiveProcess) {
  PrintAddrChild child(program());
  ASSERT_GT(child.pid(), 0u);
  ASSERT_NE(child.addr("draw"), 0u);
  ASSERT_NE(child.addr("vtable"), 0u);

  // No snapshot: the first miss reads the maps.
  ProcSymbolizer sym;
  expect_program_frames(sym, child, program());

  Frame unknown = sym.symbolize(child.pid(), 0x10);
  EXPECT_FALSE(unknown.known());
  EXPECT_EQ(unknown.module, "");
  EXPECT_EQ(unknown.to_string(), "0x10 [unknown]");

  // Somewhere in libc's code: the module is known even if the symbol is
  // not (Debian strips libc's .symtab).
  Result<std::vector<MapEntry>> maps = proc::read_maps(child.pid());
  ASSERT_TRUE(maps.ok());
  for (const MapEntry& m : *maps) {
    if (m.executable() && m.path.ends_with("/libc.so.6")) {
      Frame libc = sym.symbolize(child.pid(), m.start + 0x100);
      EXPECT_EQ(libc.module, m.path);
    }
    if (m.path == "[stack]") {
      Frame stack = sym.symbolize(child.pid(), m.start);
      EXPECT_EQ(stack.module, "[stack]");
      EXPECT_FALSE(stack.known());
    }
  }
}

TEST_P(SymbolizeChildTest, AfterExitWithSnapshot) {
  PrintAddrChild child(program());
  ASSERT_GT(child.pid(), 0u);
  ASSERT_NE(child.addr("draw"), 0u);
  ProcSymbolizer sym;
  sym.snapshot(child.pid());
  uint32_t pid = child.pid();
  child.finish();
  ASSERT_FALSE(proc::pid_exists(pid));
  expect_program_frames(sym, child, program());
}

TEST_P(SymbolizeChildTest, AfterExitWithoutSnapshot) {
  PrintAddrChild child(program());
  ASSERT_GT(child.pid(), 0u);
  ProcSymbolizer sym;
  uint64_t draw = child.addr("draw");
  child.finish();
  Frame f = sym.symbolize(child.pid(), draw);
  EXPECT_FALSE(f.known());
  EXPECT_EQ(f.to_string(), fmt::format("{:#x} [unknown]", draw));
}

INSTANTIATE_TEST_SUITE_P(Symbolize, SymbolizeChildTest,
                         testing::Values("elf_target_pie", "elf_target_nopie"));

TEST(SymbolizeTest, Demangle) {
  EXPECT_EQ(demangle("_ZN7lt_test6Widget4drawEi"),
            "lt_test::Widget::draw(int)");
  EXPECT_EQ(demangle("_ZTVN7lt_test6WidgetE"), "vtable for lt_test::Widget");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("i"), "i");  // a type name to __cxa_demangle
  EXPECT_EQ(demangle("_Znot_valid"), "_Znot_valid");
  EXPECT_EQ(demangle(""), "");
}

TEST(SymbolizeTest, FrameToString) {
  Frame f;
  f.addr = 0x7f0012345678;
  EXPECT_EQ(f.to_string(), "0x7f0012345678 [unknown]");
  f.module = "/usr/lib/libfoo.so";
  EXPECT_EQ(f.to_string(), "0x7f0012345678 (/usr/lib/libfoo.so)");
  f.function = "ns::Foo::bar(int)";
  EXPECT_EQ(f.to_string(), "ns::Foo::bar(int)");
  f.offset = 0x1a;
  EXPECT_EQ(f.to_string(), "ns::Foo::bar(int)+0x1a");
}

}  // namespace
}  // namespace looptrace
