#include "symbolize/debuginfod.h"

#include <elfutils/debuginfod.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "base/text.h"

namespace looptrace {
namespace {

// One line on stderr in one write, so that it never interleaves with
// another thread's. On a terminal the live view's status line (rewritten
// in place, not ended by a newline) is cleared first; it is drawn again
// at its next update.
void print_stderr(const std::string& line) {
  std::string out = isatty(STDERR_FILENO) ? "\r\033[K" + line : line;
  out += '\n';
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = write(STDERR_FILENO, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int on_progress(debuginfod_client* client, long, long) {
  const auto* progress = static_cast<const std::function<bool()>*>(
      debuginfod_get_user_data(client));
  return progress != nullptr && (*progress)() ? 1 : 0;
}

// libdebuginfod's client, made on the first fetch (on the fetching
// thread, the only one that uses it).
DebuginfodFetcher::FetchFn libdebuginfod_fetch() {
  std::shared_ptr<debuginfod_client> client;
  return [client](const std::string& build_id,
                  const std::function<bool()>& progress) mutable {
    DebuginfodFetcher::Fetched out;
    if (!client) {
      client.reset(debuginfod_begin(), &debuginfod_end);
      if (!client) {
        out.error = errno ? errno : ENOMEM;
        return out;
      }
      debuginfod_set_progressfn(client.get(), on_progress);
    }
    debuginfod_set_user_data(client.get(),
                             const_cast<std::function<bool()>*>(&progress));
    char* path = nullptr;
    // Length 0: the build-id is given as a hex string.
    int fd = debuginfod_find_debuginfo(
        client.get(), reinterpret_cast<const unsigned char*>(build_id.c_str()),
        0, &path);
    debuginfod_set_user_data(client.get(), nullptr);
    if (fd < 0) {
      out.error = -fd;
    } else {
      close(fd);
      if (path != nullptr) out.path = path;
      if (out.path.empty()) out.error = ENOENT;
    }
    std::free(path);
    return out;
  };
}

}  // namespace

bool debuginfod_urls_set(const char* urls) {
  if (urls == nullptr) return false;
  for (const char* p = urls; *p; p++)
    if (!std::isspace(static_cast<unsigned char>(*p))) return true;
  return false;
}

std::string debuginfod_reason(int err) {
  switch (err) {
    case ENOENT:
      return "no server has it";
    case ETIME:
    case ETIMEDOUT:
      return "timed out (DEBUGINFOD_TIMEOUT)";
    case ECANCELED:
      return "given up, looptrace is ending";
    default:
      return std::strerror(err);
  }
}

std::string debuginfod_fetching_line(const std::string& name,
                                     const std::string& build_id) {
  return fmt::format("looptrace: debuginfod: fetching {} (build-id {})",
                     printable(name, 256), build_id);
}

std::string debuginfod_failure_line(const std::string& name,
                                    const std::string& build_id,
                                    const std::string& reason) {
  return fmt::format(
      "looptrace: debuginfod: no debug file for {} (build-id "
      "{}): {}",
      printable(name, 256), build_id, printable(reason, 512));
}

DebuginfodFetcher::DebuginfodFetcher(FetchFn fetch, PrintFn print)
    : fetch_(std::move(fetch)),
      print_(print ? std::move(print) : PrintFn(print_stderr)) {}

DebuginfodFetcher::~DebuginfodFetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<DebuginfodFetcher> DebuginfodFetcher::FromEnvironment() {
  if (!debuginfod_urls_set(std::getenv(DEBUGINFOD_URLS_ENV_VAR)))
    return nullptr;
  // Before any thread of ours reads the environment.
  setenv(DEBUGINFOD_TIMEOUT_ENV_VAR,
         std::to_string(kDefaultDebuginfodTimeoutS).c_str(), 0);
  return std::make_shared<DebuginfodFetcher>(libdebuginfod_fetch());
}

void DebuginfodFetcher::request(const std::string& build_id,
                                const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || !asked_.emplace(build_id, false).second) return;
  queue_.push_back({build_id, name});
  // The thread starts with the first request: a run that needs nothing
  // fetched has none.
  if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
  cv_.notify_all();
}

std::vector<DebuginfodFetcher::Answer> DebuginfodFetcher::take_answers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Answer> out;
  out.swap(answers_);
  return out;
}

void DebuginfodFetcher::wait(const std::string& build_id) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    auto it = asked_.find(build_id);
    return stop_ || it == asked_.end() || it->second;
  });
}

void DebuginfodFetcher::wait_all() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    for (const auto& [id, answered] : asked_)
      if (!answered) return stop_;
    return true;
  });
}

void DebuginfodFetcher::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Request r = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Answer a = fetch_one(r);
    lock.lock();
    answers_.push_back(std::move(a));
    asked_[r.build_id] = true;
    cv_.notify_all();
  }
}

DebuginfodFetcher::Answer DebuginfodFetcher::fetch_one(const Request& r) {
  Answer a;
  a.build_id = r.build_id;
  bool said = false;
  std::function<bool()> progress = [&] {
    // A transfer is under way (a file in the cache needs none).
    if (!said) print_(debuginfod_fetching_line(r.name, r.build_id));
    said = true;
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  };
  Fetched f = fetch_(r.build_id, progress);
  std::string why;
  if (f.error != 0) {
    why = debuginfod_reason(f.error);
  } else {
    Result<elf::ElfFile> debug = elf::ElfFile::Open(f.path);
    if (!debug.ok()) {
      why = debug.status().message();
    } else if (debug->build_id() != r.build_id) {
      why = fmt::format("{} has build-id {}", f.path, debug->build_id());
    } else {
      log::debug("symbolize", "debuginfod: {} for {}", f.path, r.name);
      a.debug = std::make_shared<elf::ElfFile>(std::move(debug).value());
      return a;
    }
  }
  // Given up because looptrace is ending: nobody waits for it.
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_) print_(debuginfod_failure_line(r.name, r.build_id, why));
  return a;
}

}  // namespace looptrace
