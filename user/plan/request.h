// What `looptrace record` was asked for, as typed: the command line parsed
// into fields and not yet checked. The plan (plan/plan.h) checks it and
// turns it into probes, kernel options and input channels.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/duration.h"
#include "base/size.h"
#include "model/thresholds.h"
#include "output/outputs.h"

namespace looptrace {

// The options whose default is a value (argument positions): whether they
// were typed, so that one that acts on nothing can be refused.
struct ArgsGiven {
  bool queue_arg = false;
  bool token_arg = false;
  bool msg_arg = false;
  bool when_arg = false;
};

struct RecordArgs {
  std::string profile;
  std::vector<std::string> dispatch;  // BINARY:SYMBOL
  std::vector<std::string> idle;      // BINARY:SYMBOL
  // Ad-hoc frame spans, BINARY:SYMBOL: dispatch spans that are each a
  // frame (a profile's "frame": {}).
  std::vector<std::string> frame;
  // Ad-hoc frame boundaries, BINARY:SYMBOL: each return of the function
  // ends a frame that began at the previous one on its thread.
  std::vector<std::string> frame_end;
  // Ad-hoc call-site spans, BINARY:FUNCTION[+N]: the virtual calls inside
  // FUNCTION (or the one at offset N in it), each a dispatch span from the
  // call to its return, named by the callee's class.
  std::vector<std::string> dispatch_call;
  // Point probes, BINARY:SYMBOL, with the argument positions of what they
  // carry (C++ members: arg0 is `this`, the queue).
  std::vector<std::string> barrier_post;    // token = return value
  std::vector<std::string> barrier_remove;  // token = arg `token_arg`
  std::vector<std::string> enqueue;  // message = `msg_arg`, due = `when_arg`
  int queue_arg = 0;
  int token_arg = 1;
  int msg_arg = 1;
  int when_arg = 2;
  ArgsGiven given;                // which of the four were typed
  std::vector<std::string> keys;  // NAME=EXPR[:FORMAT], for ad-hoc probes
  pid_t pid = -1;
  bool system_wide = false;
  // No probe option and no target: every runtime installed here (monitor).
  bool every_runtime = false;
  std::vector<std::string> command;
  ThresholdArgs thresholds;  // --slow, --slow-idle, ... (empty: default)
  bool delivery_hysteresis = false;
  std::string duration;      // empty: until Ctrl-C / exit
  std::string sample_after;  // default: half the slow threshold
  uint32_t sample_freq = Thresholds::kSampleHz;
  std::string call_graph = "auto";  // or "fp", "dwarf[,BYTES]", "auto,BYTES"
  bool no_off_cpu = false;
  std::string ringbuf_size = format_size(Thresholds::kRingbufBytes);
  uint32_t hist_max = Thresholds::kHistMax;
  uint32_t pending_max = Thresholds::kPendingMax;
  uint32_t process_max = Thresholds::kProcessMax;
  std::vector<uint32_t> tids;      // --tid
  std::vector<std::string> comms;  // --comm
  bool record_all = false;
  OutputPaths outputs;  // --json, --events, -o, --perfetto, --folded, --html
  bool live = false;    // print slow spans as they end
  std::string hang = format_duration(Thresholds::kHangNs);  // 0: off
  std::vector<std::string> fail_if;                         // budgets
  std::vector<std::string> app_code;  // --app-code, for key lines
  bool quiet = false;
  // Input channels (docs/input.md).
  bool input = false;
  std::string input_mode = "syscall";     // or "uprobe"
  std::vector<std::string> input_calls;   // default recvfrom,sendto,...
  std::vector<std::string> input_binary;  // uprobe mode; default libc
  std::vector<int> input_fd;              // raw channels by fd (-p)
  std::vector<std::string> input_peer;    // raw channels by server socket
  std::string self_dir;                   // directory of the looptrace binary
  // Printed on stderr once everything is checked, before tracing starts
  // (the demo's scenario line); empty: nothing.
  std::string preamble;
};

}  // namespace looptrace
