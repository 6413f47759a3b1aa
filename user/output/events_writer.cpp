#include "output/events_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace looptrace {

struct EventsWriter::State {
  std::unique_ptr<OutputFile> file;
  size_t max_bytes = 0;
  std::mutex mu;
  std::condition_variable wake;  // the thread: a line, or the end
  std::condition_variable idle;  // close(): a line written, or the thread done
  std::deque<std::string> queue;
  size_t queued = 0;     // bytes in `queue`
  bool writing = false;  // a line off the queue, not yet all written
  bool closing = false;  // write what is queued, then end
  bool done = false;     // the thread has ended
  std::atomic<bool> give_up{false};  // end now, written or not
  uint64_t lines = 0, dropped = 0;
  int error = 0;  // the first write error
};

namespace {

using State = EventsWriter::State;

// Writes one line without ever blocking for long: waits for room (POLLOUT)
// in steps, so that giving up is seen, and writes at most PIPE_BUF bytes
// at a time, which a pipe with room takes whole. 0, an errno, or -1 when
// it gave up.
int write_line(State& s, int fd, const std::string& line) {
  size_t at = 0;
  while (at < line.size()) {
    if (s.give_up) return -1;
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, 100);
    if (r < 0 && errno != EINTR) return errno;
    if (r <= 0) continue;
    ssize_t w = ::write(fd, line.data() + at,
                        std::min<size_t>(line.size() - at, PIPE_BUF));
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (w < 0) return errno;
    at += static_cast<size_t>(w);
  }
  return 0;
}

void run(std::shared_ptr<State> state) {
  State& s = *state;
  const int fd = s.file->fd();
  std::unique_lock lk(s.mu);
  while (true) {
    s.wake.wait(lk, [&] { return !s.queue.empty() || s.closing || s.give_up; });
    if (s.give_up || s.queue.empty()) break;
    std::string line = std::move(s.queue.front());
    s.queue.pop_front();
    s.queued -= line.size();
    s.writing = true;
    lk.unlock();
    int err = write_line(s, fd, line);
    lk.lock();
    s.writing = false;
    if (err != 0) ++s.dropped;
    if (err > 0) {
      // Nothing more goes out after a write error: it is what is reported.
      s.error = err;
      s.dropped += s.queue.size();
      s.queue.clear();
      s.queued = 0;
      break;
    }
    s.idle.notify_all();
  }
  s.done = true;
  s.idle.notify_all();
}

// Lets the thread go: joined once it has ended (within `wait_ms`), else
// left behind with the state it shares (stuck in a write that does not
// return; the process's exit ends it).
void let_go(State& s, std::thread& t, int wait_ms) {
  {
    std::unique_lock lk(s.mu);
    s.give_up = true;
    s.wake.notify_all();
    s.idle.wait_for(lk, std::chrono::milliseconds(wait_ms),
                    [&] { return s.done; });
    if (!s.done && s.writing) ++s.dropped;
    s.dropped += s.queue.size();
    s.queue.clear();
  }
  if (!t.joinable()) return;
  if (s.done)
    t.join();
  else
    t.detach();
}

}  // namespace

EventsWriter::EventsWriter(std::unique_ptr<OutputFile> file, size_t queue_bytes)
    : state_(std::make_shared<State>()) {
  state_->file = std::move(file);
  state_->max_bytes = queue_bytes;
  // A FIFO or a device of its own (not a shared stdout): writes that find
  // no room return at once.
  const int fd = state_->file->fd();
  if (state_->file->kind() == OutputKind::kExisting)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  thread_ = std::thread(run, state_);
}

EventsWriter::~EventsWriter() {
  if (!closed_) let_go(*state_, thread_, 1000);
}

bool EventsWriter::write(std::string line) {
  State& s = *state_;
  std::lock_guard lk(s.mu);
  ++s.lines;
  line.push_back('\n');
  if (s.done || s.closing || s.queued + line.size() > s.max_bytes) {
    ++s.dropped;
    return false;
  }
  s.queued += line.size();
  s.queue.push_back(std::move(line));
  s.wake.notify_one();
  return true;
}

Status EventsWriter::close(int grace_ms) {
  if (closed_) return Status::Ok();
  closed_ = true;
  State& s = *state_;
  {
    std::unique_lock lk(s.mu);
    s.closing = true;
    s.wake.notify_all();
    s.idle.wait_for(lk, std::chrono::milliseconds(grace_ms),
                    [&] { return s.done; });
  }
  let_go(s, thread_, 1000);
  const char* what = "--events";
  std::lock_guard lk(s.mu);
  Status st = s.done ? s.file->close() : Status::Ok();
  if (s.error != 0) {
    const std::string where =
        s.file->kind() == OutputKind::kStdout ? "stdout" : s.file->path();
    return Status::Errno(fmt::format("{}: writing {}", what, where), s.error);
  }
  if (!st.ok()) return st;
  if (s.dropped != 0)
    return Status::Error(
        fmt::format("{} {}: {} of {} lines dropped: the reader did not keep "
                    "up (the JSON report's events_dropped)",
                    what, s.file->path(), s.dropped, s.lines));
  return Status::Ok();
}

uint64_t EventsWriter::dropped() const {
  std::lock_guard lk(state_->mu);
  return state_->dropped;
}

uint64_t EventsWriter::lines() const {
  std::lock_guard lk(state_->mu);
  return state_->lines;
}

const std::string& EventsWriter::path() const { return state_->file->path(); }

}  // namespace looptrace
