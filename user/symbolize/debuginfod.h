// Debug files fetched by build-id from the servers DEBUGINFOD_URLS names,
// through elfutils' libdebuginfod (its cache, DEBUGINFOD_CACHE_PATH, and
// its other variables), as gdb and perf fetch them. The fetches run on a
// thread of their own, one at a time: whoever asks (the symbolizer, on the
// thread that reads the ring buffer) never waits on the network unless it
// chooses to (report time). Each build-id is asked once per run; a failure
// is said in one line and remembered (docs/looptrace.md, SYMBOLS).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "elf/elf_file.h"

namespace looptrace {

// DEBUGINFOD_TIMEOUT when unset, in seconds: libdebuginfod gives up a
// server that does not answer in this time or sends less than 100 KiB/s
// for as long (its own default, 90, is long for the end of a run, which
// waits for the fetches under way).
constexpr int kDefaultDebuginfodTimeoutS = 10;

// True when `urls` (DEBUGINFOD_URLS) names a server: set and not blank.
bool debuginfod_urls_set(const char* urls);

// Why a fetch failed, from libdebuginfod's errno: "no server has it" for
// ENOENT, "timed out" for ETIME, else strerror ("Connection refused").
std::string debuginfod_reason(int err);

// The lines said on stderr: a transfer starting, and a fetch that failed
// (name: the file's base name, escaped for the terminal).
std::string debuginfod_fetching_line(const std::string& name,
                                     const std::string& build_id);
std::string debuginfod_failure_line(const std::string& name,
                                    const std::string& build_id,
                                    const std::string& reason);

class DebuginfodFetcher {
 public:
  struct Fetched {
    int error = 0;     // an errno; 0: path is the debug file
    std::string path;  // in the client's cache
  };
  // Fetches build_id's debug file. It calls `progress` as a transfer runs
  // (and the first time when one starts); progress() true: give up.
  using FetchFn = std::function<Fetched(const std::string& build_id,
                                        const std::function<bool()>& progress)>;
  // Where the lines go (stderr by default).
  using PrintFn = std::function<void(const std::string& line)>;

  // One answer: the debug file, opened and checked (its build-id is the
  // one asked for), or nullptr.
  struct Answer {
    std::string build_id;
    std::shared_ptr<elf::ElfFile> debug;
  };

  DebuginfodFetcher(FetchFn fetch, PrintFn print = {});
  // Gives up a transfer under way (at its next progress call) and joins.
  ~DebuginfodFetcher();
  DebuginfodFetcher(const DebuginfodFetcher&) = delete;
  DebuginfodFetcher& operator=(const DebuginfodFetcher&) = delete;

  // libdebuginfod's client when DEBUGINFOD_URLS names a server (setting
  // DEBUGINFOD_TIMEOUT to kDefaultDebuginfodTimeoutS if unset); else
  // nullptr.
  static std::shared_ptr<DebuginfodFetcher> FromEnvironment();

  // Asks for build_id's debug file (lowercase hex); `name` (the file's
  // base name) is for the lines. A build-id asked before is not asked
  // again.
  void request(const std::string& build_id, const std::string& name);
  // The answers that came since the last call.
  std::vector<Answer> take_answers();
  // Blocks until build_id's request is answered (at once if it was, or
  // was never asked).
  void wait(const std::string& build_id);
  // Blocks until every request is answered.
  void wait_all();

 private:
  struct Request {
    std::string build_id;
    std::string name;
  };
  void run();
  Answer fetch_one(const Request& r);

  FetchFn fetch_;
  PrintFn print_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  // Every build-id asked: true once answered.
  std::unordered_map<std::string, bool> asked_;
  std::vector<Answer> answers_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace looptrace
