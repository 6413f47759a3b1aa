// --events: live events as JSON lines, written by a thread of their own so
// that a reader that stops reading (a FIFO, a pipe) never blocks the
// tracer: lines wait in a bounded queue, and a line that finds it full is
// dropped and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/output_file.h"
#include "base/status.h"

namespace looptrace {

class EventsWriter {
 public:
  // Bytes of lines waiting for the reader before new lines are dropped.
  static constexpr size_t kDefaultQueueBytes = 4u << 20;

  explicit EventsWriter(std::unique_ptr<OutputFile> file,
                        size_t queue_bytes = kDefaultQueueBytes);
  // Without close(): the thread stops and the file is abandoned (a file it
  // created is removed; OutputFile).
  ~EventsWriter();
  EventsWriter(const EventsWriter&) = delete;
  EventsWriter& operator=(const EventsWriter&) = delete;

  // Queues `line` and a newline; never blocks. False when it was dropped
  // (the queue is full, or the file failed).
  bool write(std::string line);
  // Writes what is queued, waiting at most `grace_ms` for a slow reader:
  // what is still queued then is dropped. The first write error, or
  // "N of M lines dropped" (exit 1) when any was dropped. Call once.
  Status close(int grace_ms = 2000);

  uint64_t dropped() const;
  uint64_t lines() const;  // every line given to write()
  const std::string& path() const;

  struct State;

 private:
  // Shared with the thread: one stuck in a write past close() is left
  // behind (detached) with it, and the process's exit ends both.
  std::shared_ptr<State> state_;
  std::thread thread_;
  bool closed_ = false;
};

}  // namespace looptrace
