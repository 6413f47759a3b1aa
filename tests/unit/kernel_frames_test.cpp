// Kernel stacks read by their functions' names: where a blocked thread
// waited, whether its waker came from an interrupt, what woke it.
#include "symbolize/kernel_frames.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace looptrace {
namespace {

// Frame i of a stack is address i + 1; its name is names[i].
struct Stack {
  explicit Stack(std::vector<std::string> fns) : names(std::move(fns)) {
    for (size_t i = 0; i < names.size(); ++i) frames.push_back(i + 1);
  }
  KernelFunctionName name() {
    return [this](uint64_t addr) -> const std::string& {
      asked.push_back(addr);
      return names.at(addr - 1);
    };
  }
  std::vector<std::string> names;
  std::vector<uint64_t> frames;
  std::vector<uint64_t> asked;
};

TEST(KernelFrames, WaitingInSkipsTheSchedulerAndTheTracing) {
  Stack s({"bpf_get_stackid_raw_tp", "__traceiter_sched_switch", "__schedule",
           "schedule", "[unknown]", "do_nanosleep", "hrtimer_nanosleep",
           "__x64_sys_nanosleep"});
  EXPECT_EQ(waiting_in(s.frames, s.name()), "do_nanosleep");
  // Named only as far as the search went.
  EXPECT_EQ(s.asked, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));

  Stack only({"schedule", "preempt_schedule_irq", "[kernel.kallsyms]"});
  EXPECT_EQ(waiting_in(only.frames, only.name()), "");
  Stack none({});
  EXPECT_EQ(waiting_in(none.frames, none.name()), "");
}

TEST(KernelFrames, ThroughInterrupt) {
  Stack timer({"try_to_wake_up", "hrtimer_wakeup", "__hrtimer_run_queues",
               "hrtimer_interrupt", "__sysvec_apic_timer_interrupt"});
  EXPECT_TRUE(through_interrupt(timer.frames, timer.name()));
  Stack softirq({"try_to_wake_up", "__do_softirq"});
  EXPECT_TRUE(through_interrupt(softirq.frames, softirq.name()));
  Stack thread({"try_to_wake_up", "wake_up_q", "futex_wake", "do_futex",
                "__x64_sys_futex"});
  EXPECT_FALSE(through_interrupt(thread.frames, thread.name()));
}

TEST(KernelFrames, WokenByTheFrameUnderTheWakeup) {
  Stack timer({"bpf_trace_run2", "__traceiter_sched_wakeup", "try_to_wake_up",
               "ttwu_do_activate", "hrtimer_wakeup", "__hrtimer_run_queues",
               "hrtimer_interrupt"});
  EXPECT_EQ(woken_by(timer.frames, timer.name()), "hrtimer_wakeup");
  Stack pipe({"__wake_up_common", "__wake_up_sync_key", "[unknown]",
              "trace_foo", "pipe_write"});
  EXPECT_EQ(woken_by(pipe.frames, pipe.name()), "pipe_write");
  // No wakeup frame: nothing to say.
  Stack other({"hrtimer_wakeup", "hrtimer_interrupt"});
  EXPECT_EQ(woken_by(other.frames, other.name()), "");
}

}  // namespace
}  // namespace looptrace
