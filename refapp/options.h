// refapp's command line: its flags, parsed and checked into Options (the
// stalls and scenario events sorted and numbered, the input channel's
// configuration built).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "input.h"
#include "scenario.h"

namespace refapp {

// The command line, parsed and checked (parseCommandLine).
struct Options {
  double rate = 500;
  int64_t duration_ms = 5000;
  bool duration_given = false;
  uint64_t seed = 1;
  std::vector<std::string> stall_flags;
  std::string plan;
  int64_t messages = -1;
  int nested = 0;
  int64_t nested_interval_ms = 50;
  int threads = 1;
  int64_t start_delay_ms = 0;
  std::string log;
  double log_slow_ms = 10;
  std::vector<StallSpec> stalls;
  // Idle handlers, sync barriers, delivery lag.
  std::vector<std::string> idle_stall_flags;
  std::vector<std::string> barrier_flags;
  std::vector<std::string> barrier_leak_flags;
  std::vector<std::string> barrier_error_flags;
  std::vector<std::string> burst_flags;
  int idle_handlers = 0;
  double async_rate = 0;
  double barrier_rate = 0;
  // Every Nth frame of --barrier-rate (0: none) does MS ms of work, not
  // 0.1 ms: a janky frame.
  int64_t frame_stall_every = 0;
  int64_t frame_stall_ms = 30;
  // The doFrame phase those frames stall in: Choreographer's callback type
  // (0 input, 1 animation, 3 traversal).
  std::string frame_stall_phase_name = "traversal";
  int64_t barrier_report_ms = 3000;
  std::vector<EventSpec> events;
  // The input channel (any --input-* flag turns it on).
  double input_rate = 0;
  int64_t input_start_ms = 200;
  int64_t input_duration_ms = -1;  // -1: until 300 ms before --duration
  std::vector<int64_t> input_taps;
  std::string input_type = "mixed";
  int input_pointers = 1;
  std::vector<std::string> input_stall_flags;
  bool input_timeline = false;  // --input-timeline
  // Process lifecycle (the fault tests).
  int64_t main_exit_ms = -1;           // --main-exit-at
  int64_t progress_ms = 0;             // --progress
  int64_t fork_at_ms = -1;             // --fork-at
  std::vector<std::string> exec_argv;  // -- PROGRAM ARGS
  int64_t watchdog_ms = 0;             // --watchdog; 0 = off
  // Derived from the flags above.
  bool messages_mode = false;  // --messages given
  // The duration stops the loops in rate mode, and caps --messages mode
  // only when given.
  bool duration_applies = true;
  bool input_enabled = false;  // any --input-* flag
  InputConfig input;           // the input channel's, when enabled
};

// Parses and checks argv into *opt. Returns -1 when the run goes on, else
// the exit status: 0 after --help (printed), 2 for a usage error (its
// message printed on stderr).
int parseCommandLine(int argc, char** argv, Options* opt);

}  // namespace refapp
