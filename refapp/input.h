// An Android-like input channel: a SOCK_SEQPACKET socketpair between the app
// and a forked dispatcher process ("refapp-dispatch", like InputDispatcher in
// system_server) that sends InputMessages (input_message.h) on a schedule and
// reads the app's FINISHED replies. In the app, loop thread 0's MessageQueue
// watches the channel (MessageQueue::addFd): InputReceiver::consumeEvents()
// reads the events from MessageQueue::next() and posts one InputHandler
// message per event, whose dispatch sends FINISHED. See README.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "input_message.h"
#include "looper.h"
#include "scenario.h"

namespace refapp {

enum class InputType { kMotion, kKey, kMixed };

const char* inputTypeName(InputType type);

// --input-stall MS@SEQ: handling event SEQ busy-stalls MS ms.
struct InputStallSpec {
  int64_t ms = 0;
  uint32_t seq = 0;
};

// The input scenario, fixed before the dispatcher is forked. Times are
// relative to the scenario start t0 (as --stall's AT_MS).
struct InputConfig {
  double rate = 0;            // --input-rate events/s; 0 = no stream
  int64_t start_ms = 200;     // --input-start: first stream event
  int64_t duration_ms = 0;    // resolved --input-duration: stream length
  std::vector<int64_t> taps;  // --input-tap AT_MS, sorted: KEY events
  InputType type = InputType::kMixed;
  int pointers = 1;  // MOTION pointer count, 1..16
  std::vector<InputStallSpec> stalls;
  bool timeline = false;  // --input-timeline
};

// Both ends of the channel and the dispatcher process.
struct InputChannel {
  int app_fd = -1;         // the app's end (fds[1])
  int dispatcher_fd = -1;  // the dispatcher's end (fds[0]); closed in the app
  uint64_t app_inode = 0;  // fstat st_ino of each end (socket inodes)
  uint64_t dispatcher_inode = 0;
  int sndbuf = 0;     // getsockopt SO_SNDBUF / SO_RCVBUF of the app's end
  int rcvbuf = 0;     // (the kernel doubles what was set)
  int start_fd = -1;  // pipe to the dispatcher: t0, once the scenario starts
  pid_t dispatcher_pid = -1;
  bool reaped = false;  // closeInputChannel waited for it
};

// In the app, before any thread is started: creates the socketpair (32 KiB
// SO_SNDBUF/SO_RCVBUF on both ends, non-blocking) and forks the dispatcher,
// which waits for t0 (startInputDispatcher), sends the events, logs to log
// and _exits (it never returns from here). Returns false with *error set on
// failure.
bool openInputChannel(const InputConfig& config, GroundTruthLog& log,
                      InputChannel* channel, std::string* error);

// Tells the dispatcher the scenario start (CLOCK_MONOTONIC ns).
void startInputDispatcher(InputChannel* channel, int64_t t0_ns);

// At exit, after the loop threads were joined: closes the app's end (the
// dispatcher sees EOF unless it is done already) and waits for the
// dispatcher (SIGTERM after 3 s). Returns its exit status (-1: unknown).
int closeInputChannel(InputChannel* channel);

class InputReceiver;

// Android 12+'s InputConsumer::sendTimeline: for an event it finished, the
// app sends the dispatcher a TIMELINE {eventId, gpuCompletedTime,
// presentTime} once the frame that showed it was presented (SurfaceFlinger
// tells the app). Here the present time is the first vsync (t0 + k * the
// frame period, --barrier-rate or 60 Hz) at least one period after the
// FINISHED, the GPU done a quarter period before it, and the message sent
// 1 ms after it, from the loop (what = eventId, arg2 = present). Logs
// input_timeline {seq, event_id, gpu_completed_ns, present_ns, sent_ns}.
class TimelineSender : public Handler {
 public:
  TimelineSender(LoopThread& loop, int fd);
  ~TimelineSender() override;
  // Schedules the TIMELINE of event `seq` (its eventId), finished at
  // finished_ns.
  void schedule(uint32_t seq, int64_t finished_ns);
  REFAPP_NOINLINE void handleMessage(Message* msg) override;
  uint64_t sent() const { return sent_; }

 private:
  LoopThread& loop_;
  int fd_;
  int64_t period_ns_;
  uint64_t sent_ = 0;
};

// Handles one input event per message (what = seq, arg1 = the InputMessage
// type, 0 KEY / 1 MOTION, arg2 = received_ns): busy 50 us in busyWork (or
// busyStall for an --input-stall), then sends FINISHED as the last thing in
// handleMessage. Logs input_finish (and input_stall) from onDispatched.
class InputHandler : public Handler {
 public:
  static constexpr int64_t kWorkNs = 50000;

  // timeline: after each FINISHED, a TIMELINE for the event once its
  // frame was "presented" (TimelineSender).
  InputHandler(LoopThread& loop, int fd,
               const std::vector<InputStallSpec>& stalls, bool timeline);
  ~InputHandler() override;
  REFAPP_NOINLINE void handleMessage(Message* msg) override;
  void onDispatched(Message* msg) override;

  uint64_t dispatches() const { return dispatches_; }
  uint64_t finished() const { return finished_; }
  uint64_t finishErrors() const { return finish_errors_; }
  uint64_t finishEagain() const { return finish_eagain_; }

 private:
  LoopThread& loop_;
  int fd_;
  std::map<uint32_t, int64_t> stall_ms_;  // seq -> ms
  // Of the last handleMessage.
  int64_t finished_ns_ = 0;
  int64_t finished_runq_ns_ = 0;  // run-queue wait around it and the sendto
  int64_t stall_start_ns_ = 0;
  int64_t stall_end_ns_ = 0;
  int64_t stall_requested_ms_ = 0;
  int finish_errno_ = 0;  // 0 = FINISHED sent
  std::unique_ptr<class TimelineSender> timeline_;
  uint64_t dispatches_ = 0;
  uint64_t finished_ = 0;
  uint64_t finish_errors_ = 0;
  uint64_t finish_eagain_ = 0;  // sendto calls that returned EAGAIN
};

// Android's NativeInputEventReceiver: watches the app's end of the channel
// on loop thread 0's queue.
class InputReceiver : public FdCallback {
 public:
  InputReceiver(LoopThread& loop, InputHandler& handler, int fd);
  ~InputReceiver() override;

  // From MessageQueue::next() (outside any dispatch): consumeEvents() when
  // readable, then the input_recv lines. false (stop watching) on EOF or an
  // error.
  bool handleEvent(int fd, int revents) override;

  // Reads messages with recvfrom(fd, &msg, sizeof(InputMessage),
  // MSG_DONTWAIT, nullptr, nullptr) until EAGAIN; received_ns is read right
  // after each recvfrom returns. A message is valid only when the byte count
  // equals wireSize(); each valid KEY/MOTION is posted to the InputHandler
  // (due now). The probe point of the app's input read.
  REFAPP_NOINLINE void consumeEvents();

  uint64_t received() const { return received_; }
  uint64_t invalid() const { return invalid_; }
  bool closed() const { return closed_; }
  int error() const { return error_; }

 private:
  struct Received {
    uint32_t seq;
    uint32_t type;
    uint32_t pointers;
    uint32_t size;
    int64_t event_time_ns;
    int64_t received_ns;
    int64_t runq_ns;  // run-queue wait around the recvfrom and the clock read
  };

  LoopThread& loop_;
  InputHandler& handler_;
  int fd_;
  std::vector<Received> batch_;  // logged after consumeEvents returns
  uint64_t received_ = 0;        // valid KEY/MOTION messages
  uint64_t invalid_ = 0;         // wrong size or unexpected type
  bool closed_ = false;          // EOF or error seen
  int error_ = 0;                // errno of a failed recvfrom
};

}  // namespace refapp
