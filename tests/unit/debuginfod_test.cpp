// Debug files from debuginfod (symbolize/debuginfod.h): the fetcher's
// bookkeeping (once per build-id, one line per failure, a file of another
// build refused, a transfer given up at the end) with a fetch function of
// the test's own, and the symbolizer and the recording's capture with
// names that arrive late. The program is built here with cc and binutils;
// the expected name is the one its source defines, its address from nm and
// readelf, never from the code under test. The real libdebuginfod and
// server: tests/integration/debuginfod_test.cpp.
#include "symbolize/debuginfod.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/symbols.h"
#include "stripped_program.h"
#include "symbolize/proc_symbolizer.h"

namespace looptrace {
namespace {

using test::have_tool;
using test::shell_ok;
using test::shell_output;

constexpr char kSource[] = R"(
#define NOINLINE __attribute__((noinline, noclone))
volatile int sink;
NOINLINE static int lt_dbgd_static_fn(int x) {
  for (int i = 0; i < x; i++) sink += i * x;
  return sink;
}
int main(int argc, char** argv) { (void)argv; return lt_dbgd_static_fn(argc); }
)";

constexpr uint32_t kFakePid = (1u << 22) + 4747;
constexpr uint64_t kBase = 0x555500000000;

// A fetch that answers when the test lets it, and counts its calls.
struct FakeServer {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  bool transfer = true;  // false: a cache hit (progress never called)
  int calls = 0;
  std::string last_build_id;
  DebuginfodFetcher::Fetched answer;

  DebuginfodFetcher::FetchFn fn() {
    return [this](const std::string& id, const std::function<bool()>& prog) {
      std::unique_lock<std::mutex> lock(mu);
      calls++;
      last_build_id = id;
      bool t = transfer;
      DebuginfodFetcher::Fetched a = answer;
      lock.unlock();
      if (t && prog()) return DebuginfodFetcher::Fetched{ECANCELED, ""};
      lock.lock();
      // A transfer under way, asking on as libdebuginfod does.
      while (!open) {
        lock.unlock();
        if (prog()) return DebuginfodFetcher::Fetched{ECANCELED, ""};
        lock.lock();
        cv.wait_for(lock, std::chrono::milliseconds(5));
      }
      return a;
    };
  }
  void set_open(bool o) {
    std::lock_guard<std::mutex> lock(mu);
    open = o;
    cv.notify_all();
  }
};

struct Lines {
  std::mutex mu;
  std::vector<std::string> lines;
  DebuginfodFetcher::PrintFn fn() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(l);
    };
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mu);
    return lines;
  }
};

class DebuginfodTest : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"cc", "objcopy", "strip", "nm", "readelf"})
      if (!have_tool(tool)) GTEST_SKIP() << tool << " is not installed";
    ASSERT_NO_FATAL_FAILURE(
        p_.build("lt-debuginfod-", kSource, "lt_dbgd_static_fn", "prog"));
    dir_ = p_.dir;
    prog_ = p_.prog;
    debug_ = p_.debug;
    build_id_ = p_.build_id;
    server_.answer = {0, debug_};
  }
  void TearDown() override { fetcher_.reset(); }

  void make_fetcher() {
    fetcher_ = std::make_shared<DebuginfodFetcher>(server_.fn(), lines_.fn());
  }
  // A symbolizer that sees prog_ mapped whole at kBase and looks for debug
  // files nowhere else.
  std::unique_ptr<ProcSymbolizer> symbolizer() {
    ProcSymbolizerOptions opts;
    opts.debug_root = dir_ + "/no-debug-root";
    opts.perf_map_dir = dir_ + "/no-perf-maps";
    opts.debuginfod = fetcher_;
    auto sym = std::make_unique<ProcSymbolizer>(opts);
    sym->add_mappings(kFakePid, {p_.mapping(kBase)});
    return sym;
  }
  uint64_t addr() const { return kBase + p_.offset + 1; }

  test::StrippedProgram p_;
  std::string dir_, prog_, debug_, build_id_;
  FakeServer server_;
  Lines lines_;
  std::shared_ptr<DebuginfodFetcher> fetcher_;
};

TEST(DebuginfodText, UrlsMustNameAServer) {
  EXPECT_FALSE(debuginfod_urls_set(nullptr));
  EXPECT_FALSE(debuginfod_urls_set(""));
  EXPECT_FALSE(debuginfod_urls_set(" \t\n"));
  EXPECT_TRUE(debuginfod_urls_set("http://127.0.0.1:8002"));
}

TEST(DebuginfodText, ReasonsAndLines) {
  EXPECT_EQ(debuginfod_reason(ECONNREFUSED), "Connection refused");
  EXPECT_EQ(debuginfod_reason(ENOENT), "no server has it");
  EXPECT_EQ(debuginfod_failure_line("libfoo.so", "abcd", "Connection refused"),
            "looptrace: debuginfod: no debug file for libfoo.so (build-id "
            "abcd): Connection refused");
  EXPECT_EQ(debuginfod_fetching_line("libfoo.so", "abcd"),
            "looptrace: debuginfod: fetching libfoo.so (build-id abcd)");
  // A mapped file's name is the traced process's: escaped, one line.
  std::string hostile = debuginfod_fetching_line("a\nb\x1b[2J", "ab");
  EXPECT_EQ(hostile.find('\n'), std::string::npos) << hostile;
  EXPECT_EQ(hostile.find('\x1b'), std::string::npos) << hostile;
}

TEST_F(DebuginfodTest, OnceABuildIdWithALineWhenATransferStarts) {
  make_fetcher();
  fetcher_->request(build_id_, "prog");
  fetcher_->request(build_id_, "prog");
  fetcher_->wait(build_id_);
  fetcher_->request(build_id_, "prog");
  fetcher_->wait_all();
  EXPECT_EQ(server_.calls, 1);
  EXPECT_EQ(server_.last_build_id, build_id_);
  std::vector<DebuginfodFetcher::Answer> got = fetcher_->take_answers();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_NE(got[0].debug, nullptr);
  EXPECT_EQ(got[0].debug->build_id(), build_id_);
  EXPECT_EQ(lines_.get(), std::vector<std::string>{
                              debuginfod_fetching_line("prog", build_id_)});
  EXPECT_TRUE(fetcher_->take_answers().empty());
}

TEST_F(DebuginfodTest, ACacheHitSaysNothing) {
  server_.transfer = false;
  make_fetcher();
  fetcher_->request(build_id_, "prog");
  fetcher_->wait_all();
  ASSERT_EQ(fetcher_->take_answers().size(), 1u);
  EXPECT_TRUE(lines_.get().empty());
}

TEST_F(DebuginfodTest, AFailureIsOneLineWithTheReason) {
  server_.answer = {ECONNREFUSED, ""};
  make_fetcher();
  fetcher_->request(build_id_, "prog");
  fetcher_->wait_all();
  fetcher_->request(build_id_, "prog");
  fetcher_->wait_all();
  std::vector<DebuginfodFetcher::Answer> got = fetcher_->take_answers();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].debug, nullptr);
  std::vector<std::string> l = lines_.get();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1],
            debuginfod_failure_line("prog", build_id_, "Connection refused"));
}

TEST_F(DebuginfodTest, AFileOfAnotherBuildIsRefused) {
  ASSERT_TRUE(shell_ok("cc -O1 -DX=1 -Wl,--build-id -o " + dir_ + "/other " +
                       dir_ + "/prog.c"));
  server_.answer = {0, dir_ + "/other"};
  make_fetcher();
  fetcher_->request(build_id_, "prog");
  fetcher_->wait_all();
  std::vector<DebuginfodFetcher::Answer> got = fetcher_->take_answers();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].debug, nullptr);
  std::vector<std::string> l = lines_.get();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NE(l[1].find("has build-id"), std::string::npos) << l[1];
}

TEST_F(DebuginfodTest, ATransferUnderWayIsGivenUpAtTheEnd) {
  server_.set_open(false);
  make_fetcher();
  fetcher_->request(build_id_, "prog");
  fetcher_->request("00ff", "other");  // queued behind it
  for (int i = 0; i < 2000; i++) {
    std::lock_guard<std::mutex> lock(server_.mu);
    if (server_.calls == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The destructor returns (the test would hang otherwise), saying nothing
  // about the fetch it gave up.
  fetcher_.reset();
  for (const std::string& l : lines_.get())
    EXPECT_EQ(l.find("no debug file"), std::string::npos) << l;
  EXPECT_EQ(server_.calls, 1);
}

TEST_F(DebuginfodTest, NamesArriveWhileTracingAndAreNotCachedBefore) {
  server_.set_open(false);
  make_fetcher();
  std::unique_ptr<ProcSymbolizer> sym = symbolizer();
  // The fetch is under way: no name yet, and no waiting for it.
  Frame before = sym->symbolize(kFakePid, addr());
  EXPECT_FALSE(before.known());
  EXPECT_EQ(before.module, prog_);
  server_.set_open(true);
  fetcher_->wait_all();
  Frame after = sym->symbolize(kFakePid, addr());
  EXPECT_EQ(after.function, "lt_dbgd_static_fn");
  EXPECT_EQ(after.offset, 1u);
  EXPECT_EQ(sym->take_improved_modules(), std::vector<std::string>{prog_});
  EXPECT_TRUE(sym->take_improved_modules().empty());
  EXPECT_EQ(server_.calls, 1);
}

TEST_F(DebuginfodTest, AtReportTimeALookupWaitsForItsFetch) {
  make_fetcher();
  std::unique_ptr<ProcSymbolizer> sym = symbolizer();
  sym->settle_debuginfod();
  EXPECT_EQ(server_.calls, 0);  // nothing was needed yet
  EXPECT_EQ(sym->symbolize(kFakePid, addr()).function, "lt_dbgd_static_fn");
  EXPECT_EQ(server_.calls, 1);
}

TEST_F(DebuginfodTest, WithoutAServerNothingIsAsked) {
  // fetcher_ stays nullptr: DEBUGINFOD_URLS unset.
  std::unique_ptr<ProcSymbolizer> sym = symbolizer();
  sym->settle_debuginfod();
  EXPECT_FALSE(sym->symbolize(kFakePid, addr()).known());
  EXPECT_EQ(server_.calls, 0);
}

// A build-id note longer than any server takes (72 bytes; ld writes what
// it is given) is the file's own garbage: not asked for.
TEST_F(DebuginfodTest, AnOverlongBuildIdIsNotAskedFor) {
  std::string id(144, 'a');
  ASSERT_TRUE(shell_ok("cc -O1 -fPIE -pie -Wl,--build-id=0x" + id + " -o " +
                       dir_ + "/long " + dir_ +
                       "/prog.c && strip --strip-all -o " + prog_ + " " + dir_ +
                       "/long"));
  ASSERT_NE(shell_output("readelf -n " + prog_).find(id), std::string::npos);
  make_fetcher();
  std::unique_ptr<ProcSymbolizer> sym = symbolizer();
  sym->settle_debuginfod();
  EXPECT_FALSE(sym->symbolize(kFakePid, kBase + 0x1000).known());
  EXPECT_EQ(server_.calls, 0);
}

// The recording gets the better name as a later SymbolEvent, and a
// recording's reader keeps the last.
TEST_F(DebuginfodTest, TheRecordingGetsTheNameThatCameLate) {
  server_.set_open(false);
  make_fetcher();
  std::unique_ptr<ProcSymbolizer> sym = symbolizer();
  CapturingSymbolizer capture(sym.get(), sym.get());
  EXPECT_FALSE(capture.symbolize(kFakePid, addr()).known());
  std::vector<SymbolEvent> first = capture.take();
  ASSERT_EQ(first.size(), 1u);
  server_.set_open(true);
  sym->settle_debuginfod();
  capture.refresh_from_proc();
  std::vector<SymbolEvent> later = capture.take();
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].frame.function, "lt_dbgd_static_fn");
  RecordedSymbols recorded;
  for (const SymbolEvent& s : first) recorded.add(s);
  for (const SymbolEvent& s : later) recorded.add(s);
  EXPECT_EQ(recorded.symbolize(kFakePid, addr()).function, "lt_dbgd_static_fn");
  // Asked again, the capture has it already: nothing more to record.
  EXPECT_EQ(capture.symbolize(kFakePid, addr()).function, "lt_dbgd_static_fn");
  EXPECT_TRUE(capture.take().empty());
}

}  // namespace
}  // namespace looptrace
