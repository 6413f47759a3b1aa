// Kernel stacks read by their functions' names: which frames are the
// scheduler's and the tracing's own, which enter from an interrupt, which
// wake a thread. What a blocked thread waited in, and what woke it, is
// read from them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace looptrace {

// The function of a kernel frame at `addr` ("[unknown]" or "[module]" when
// it has no symbol). Asked for only as far up a stack as a search goes.
using KernelFunctionName = std::function<const std::string&(uint64_t addr)>;

// The kernel function a blocked thread waits in (do_nanosleep, futex_wait,
// ep_poll...): the first of `kframes` (innermost first) that is not the
// scheduler or the tracing that recorded it; empty when none is known.
std::string waiting_in(const std::vector<uint64_t>& kframes,
                       const KernelFunctionName& name);
// Whether a waker's stack passes through an interrupt entry (a timer, a
// device, a softirq).
bool through_interrupt(const std::vector<uint64_t>& kframes,
                       const KernelFunctionName& name);
// What woke a thread from an interrupt (hrtimer_wakeup...): the frame under
// try_to_wake_up and its kin; empty when none is known.
std::string woken_by(const std::vector<uint64_t>& kframes,
                     const KernelFunctionName& name);

}  // namespace looptrace
