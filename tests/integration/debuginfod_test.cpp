// Debug files from a debuginfod server: a library this test strips
// (objcopy --only-keep-debug, strip --strip-all) stalls its caller's
// dispatches in a static function that only the debug file names; Debian's
// debuginfod serves that file on a loopback port. With DEBUGINFOD_URLS set,
// `looptrace record -p PID` names the function in each stall's stack, and
// the recording names it with the server gone; with the server down, one
// line says why and the frames are addresses as before. Ground truth: the
// name the library's source defines and nm -S on the debug file (its
// range); each stall's time from the program's own log
// (tests/programs/debuginfod_loop.c, CLOCK_MONOTONIC).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

const std::string kPrograms = LT_TEST_PROGRAMS_DIR;
constexpr char kDebuginfod[] = "/usr/bin/debuginfod";
constexpr char kStalled[] = "ltdbg_busy_in_library";
constexpr int kRuns = 3;

std::string sh(const std::string& cmd) {
  return run({"/bin/sh", "-c", cmd}).out;
}

// A port of 127.0.0.1 nothing listens on (free when asked).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// The status of GET path on 127.0.0.1:port; -1 when nothing answers.
int http_status(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = -1;
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  char buf[64] = {};
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size()) &&
      read(fd, buf, sizeof buf - 1) > 12 &&
      std::strncmp(buf, "HTTP/1.", 7) == 0)
    status = std::atoi(buf + 9);
  close(fd);
  return status;
}

class DebuginfodServer : public testing::Test {
 protected:
  void SetUp() override {
    LT_REQUIRE_BPF();
    LT_REQUIRE_INSTALLED(access(kDebuginfod, X_OK) == 0, kDebuginfod);
    const std::string full = kPrograms + "/debuginfod/libltdbg.so";
    std::filesystem::create_directories(dir_.file("lib"));
    std::filesystem::create_directories(dir_.file("serve"));
    lib_ = dir_.file("lib/libltdbg.so");
    debug_ = dir_.file("serve/libltdbg.so.debug");
    sh("objcopy --only-keep-debug " + full + " " + debug_);
    sh("strip --strip-all -o " + lib_ + " " + full);
    build_id_ = sh("readelf -n " + lib_ +
                   " | sed -n 's/.*Build ID: *//p' | tr -d '\\n'");
    ASSERT_EQ(build_id_.size(), 40u) << build_id_;
    // Stripped for real: the name is only in the debug file (a local
    // function, "t"), whose nm -S gives its size.
    ASSERT_EQ(sh("nm " + lib_ + " 2>/dev/null | grep -c " + kStalled), "0\n");
    std::istringstream nm(
        sh("nm -S " + debug_ + " | grep ' t " + std::string(kStalled) + "$'"));
    std::string addr, size;
    ASSERT_TRUE(nm >> addr >> size) << "nm -S found no " << kStalled;
    stalled_size_ = std::stoull(size, nullptr, 16);
  }

  // Debian's debuginfod serving serve/ on a loopback port, once it
  // answers for the library's build-id.
  void start_server() {
    port_ = free_port();
    ASSERT_GT(port_, 0);
    server_ = std::make_unique<Process>(
        std::vector<std::string>{kDebuginfod, "-p", std::to_string(port_), "-F",
                                 dir_.file("serve"), "-d",
                                 dir_.file("index.sqlite")},
        dir_.file("server.out"), dir_.file("server.err"));
    const std::string url = "/buildid/" + build_id_ + "/debuginfo";
    for (int i = 0; i < 300 && http_status(port_, url) != 200; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(http_status(port_, url), 200)
        << read_file(dir_.file("server.err"));
  }

  // debuginfod_loop on the stripped library, traced by `looptrace record
  // -p PID` with DEBUGINFOD_URLS=urls and an empty cache of its own;
  // looptrace's stderr, the JSON report and the program's stalls.
  void record(const std::string& urls, const std::string& name) {
    const std::string log = dir_.file(name + ".jsonl");
    Process app({"/usr/bin/env", "LD_LIBRARY_PATH=" + dir_.file("lib"),
                 kPrograms + "/debuginfod_loop", log, std::to_string(kRuns),
                 "150", "2000"},
                dir_.file(name + ".out"), dir_.file(name + ".err"));
    ASSERT_TRUE(wait_for_text(dir_.file(name + ".err"),
                              "debuginfod_loop: ready", 10000));
    rec_ = dir_.file(name + ".rec");
    RunResult r =
        run({"/usr/bin/env", "DEBUGINFOD_URLS=" + urls,
             "DEBUGINFOD_CACHE_PATH=" + dir_.file(name + ".cache"),
             looptrace_bin(), "record", "-q", "-p", std::to_string(app.pid()),
             "--dispatch", kPrograms + "/debuginfod_loop:lt_dbg_dispatch",
             "--json", dir_.file(name + ".json"), "-o", rec_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(app.wait(10000), 0);
    err_ = r.err;
    report_ = read_json(dir_.file(name + ".json"));
    stalls_ = events(read_jsonl(log), "stall");
    ASSERT_EQ(stalls_.size(), static_cast<size_t>(kRuns));
  }

  // The slow dispatch inside each logged stall, its stacks' frames.
  std::vector<std::vector<std::string>> stall_stacks(const json& report) {
    std::vector<std::vector<std::string>> out;
    for (const json& st : stalls_) {
      uint64_t start = std::stoull(st["start_ns"].get<std::string>());
      uint64_t end = std::stoull(st["end_ns"].get<std::string>());
      const json* match = nullptr;
      for (const json& s : report["slow_dispatches"]) {
        uint64_t s0 = s["start_ns"], dur = s["duration_ns"];
        if (s0 >= start && s0 + dur <= end) match = &s;
      }
      EXPECT_NE(match, nullptr) << st.dump() << "\n"
                                << report["slow_dispatches"].dump();
      if (!match) continue;
      EXPECT_FALSE((*match)["stacks"].empty()) << match->dump();
      for (const json& stack : (*match)["stacks"])
        out.push_back(stack["frames"].get<std::vector<std::string>>());
    }
    return out;
  }

  // Every stall's most sampled stack names the stalled function, at an
  // offset inside it (nm -S), and no frame of any stall is a bare address
  // in the library.
  void expect_named(const json& report) {
    std::vector<std::vector<std::string>> stacks = stall_stacks(report);
    ASSERT_FALSE(stacks.empty());
    size_t named = 0;
    for (const std::vector<std::string>& frames : stacks) {
      for (const std::string& f : frames) {
        EXPECT_EQ(f.find("libltdbg.so"), std::string::npos) << f;
        if (f.rfind(kStalled, 0) != 0) continue;
        named++;
        size_t plus = f.find("+0x");
        uint64_t off = plus == std::string::npos
                           ? 0
                           : std::stoull(f.substr(plus + 3), nullptr, 16);
        EXPECT_LT(off, stalled_size_) << f;
      }
    }
    EXPECT_GE(named, static_cast<size_t>(kRuns));
  }

  TempDir dir_;
  std::string lib_, debug_, build_id_, rec_, err_;
  uint64_t stalled_size_ = 0;
  int port_ = -1;
  std::unique_ptr<Process> server_;
  json report_;
  std::vector<json> stalls_;
};

TEST_F(DebuginfodServer, NamesTheStalledFunctionAndTheRecordingKeepsIt) {
  ASSERT_NO_FATAL_FAILURE(start_server());
  const std::string url = "http://127.0.0.1:" + std::to_string(port_);
  ASSERT_NO_FATAL_FAILURE(record(url, "up"));
  // One progress line for the one file fetched.
  const std::string fetching =
      "looptrace: debuginfod: fetching libltdbg.so "
      "(build-id " +
      build_id_ + ")\n";
  EXPECT_NE(err_.find(fetching), std::string::npos) << err_;
  EXPECT_EQ(err_.find(fetching), err_.rfind(fetching)) << err_;
  EXPECT_EQ(err_.find("no debug file"), std::string::npos) << err_;
  expect_named(report_);

  // The server gone, and a cache that never saw the file: the recording
  // alone names the function.
  server_.reset();
  RunResult rep =
      run({"/usr/bin/env", "DEBUGINFOD_URLS=" + url,
           "DEBUGINFOD_CACHE_PATH=" + dir_.file("empty.cache"), looptrace_bin(),
           "report", rec_, "-q", "--json", dir_.file("replay.json")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(rep.err.find("debuginfod"), std::string::npos) << rep.err;
  expect_named(read_json(dir_.file("replay.json")));
}

TEST_F(DebuginfodServer, AServerDownIsOneLineAndFramesStayAddresses) {
  const int closed = free_port();
  ASSERT_GT(closed, 0);
  ASSERT_NO_FATAL_FAILURE(
      record("http://127.0.0.1:" + std::to_string(closed), "down"));
  const std::string why =
      "looptrace: debuginfod: no debug file for "
      "libltdbg.so (build-id " +
      build_id_ + "): Connection refused\n";
  EXPECT_NE(err_.find(why), std::string::npos) << err_;
  EXPECT_EQ(err_.find(why), err_.rfind(why)) << err_;
  std::vector<std::vector<std::string>> stacks = stall_stacks(report_);
  ASSERT_FALSE(stacks.empty());
  size_t bare = 0;
  for (const std::vector<std::string>& frames : stacks) {
    for (const std::string& f : frames) {
      EXPECT_EQ(f.find(kStalled), std::string::npos) << f;
      // "0x7f... (/tmp/.../lib/libltdbg.so)"
      if (f.rfind("0x", 0) == 0 &&
          f.find("(" + lib_ + ")") != std::string::npos)
        bare++;
    }
  }
  EXPECT_GE(bare, static_cast<size_t>(kRuns));
}

}  // namespace
}  // namespace lt_test
