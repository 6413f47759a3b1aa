// `looptrace record`: trace, analyse, report.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace {

struct RecordArgs {
  std::string profile;
  std::vector<std::string> dispatch;  // BINARY:SYMBOL
  std::vector<std::string> idle;      // BINARY:SYMBOL
  // Point probes, BINARY:SYMBOL, with the argument positions of what they
  // carry (C++ members: arg0 is `this`, the queue).
  std::vector<std::string> barrier_post;    // token = return value
  std::vector<std::string> barrier_remove;  // token = arg `token_arg`
  std::vector<std::string> enqueue;  // message = `msg_arg`, due = `when_arg`
  int queue_arg = 0;
  int token_arg = 1;
  int msg_arg = 1;
  int when_arg = 2;
  std::vector<std::string> keys;  // NAME=EXPR[:FORMAT], for ad-hoc probes
  pid_t pid = -1;
  bool system_wide = false;
  std::vector<std::string> command;
  std::string slow = "16ms";
  std::string slow_idle;  // default: same as --slow
  std::string slow_delivery = "16ms";
  bool delivery_hysteresis = false;
  std::string duration;      // empty: until Ctrl-C / exit
  std::string sample_after;  // default: half the slow threshold
  uint32_t sample_freq = 1000;
  std::string ringbuf_size = "8M";
  uint32_t hist_max = 4096;
  bool record_all = false;
  std::string json_path;
  std::string events_path;  // live events (barrier stalls), JSON lines
  std::string barrier_stall = "3s";
  bool quiet = false;
  // Input channels (docs/input.md).
  bool input = false;
  std::string input_mode = "syscall";     // or "uprobe"
  std::vector<std::string> input_calls;   // default recvfrom,sendto,...
  std::vector<std::string> input_binary;  // uprobe mode; default libc
  std::vector<int> input_fd;              // raw channels by fd (-p)
  std::vector<std::string> input_peer;    // raw channels by server socket
  std::string slow_input = "100ms";
  std::string self_dir;  // directory of the looptrace binary
};

// Runs a whole tracing session; returns the process exit code.
int run_record(const RecordArgs& args);

// Runs the reference app under looptrace with a built-in scenario.
int run_demo(const std::string& self_dir, const std::string& json_path);

}  // namespace looptrace
