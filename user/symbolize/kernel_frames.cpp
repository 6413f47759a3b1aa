#include "symbolize/kernel_frames.h"

#include <string_view>

namespace looptrace {
namespace {

bool starts_with(const std::string& s, std::string_view p) {
  return s.compare(0, p.size(), p) == 0;
}

// The scheduler's own frames and the tracing that recorded the stack.
bool machinery(const std::string& fn) {
  for (std::string_view p :
       {"bpf_", "__bpf", "__traceiter_", "__probestub_", "perf_", "__schedule",
        "schedule", "preempt_schedule", "__sched_text", "trace_"})
    if (starts_with(fn, p)) return true;
  return fn.front() == '[';  // unknown
}

bool interrupt_entry(const std::string& fn) {
  for (std::string_view p :
       {"asm_sysvec_", "sysvec_", "__sysvec_", "asm_common_interrupt",
        "common_interrupt", "__do_softirq", "handle_softirqs", "irq_exit",
        "__irq_exit_rcu", "run_ksoftirqd", "hrtimer_interrupt"})
    if (starts_with(fn, p)) return true;
  return false;
}

bool wakeup(const std::string& fn) {
  return starts_with(fn, "try_to_wake_up") || starts_with(fn, "wake_up") ||
         starts_with(fn, "__wake_up") || starts_with(fn, "ttwu");
}

}  // namespace

std::string waiting_in(const std::vector<uint64_t>& kframes,
                       const KernelFunctionName& name) {
  for (uint64_t a : kframes) {
    const std::string& fn = name(a);
    if (!machinery(fn)) return fn;
  }
  return {};
}

bool through_interrupt(const std::vector<uint64_t>& kframes,
                       const KernelFunctionName& name) {
  for (uint64_t a : kframes)
    if (interrupt_entry(name(a))) return true;
  return false;
}

std::string woken_by(const std::vector<uint64_t>& kframes,
                     const KernelFunctionName& name) {
  bool past_wakeup = false;
  for (uint64_t a : kframes) {
    const std::string& fn = name(a);
    if (wakeup(fn)) {
      past_wakeup = true;
      continue;
    }
    if (past_wakeup && !machinery(fn)) return fn;
  }
  return {};
}

}  // namespace looptrace
