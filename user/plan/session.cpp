#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "plan/plan.h"

namespace looptrace {

SessionEvent session_header(const RecordArgs& a, const Plan& plan,
                            const std::string& input_hook, pid_t target) {
  SessionEvent s;
  s.looptrace_version = LOOPTRACE_VERSION;
  s.thresholds = plan.opts.limits;
  s.probes = plan.probes;
  s.command_line = a.command.empty() ? "" : join_command(a.command);
  s.target_pid = target;
  s.has_input = plan.opts.input.mode != InputMode::kOff;
  s.input_hook = input_hook;
  s.ringbuf_bytes = plan.opts.ringbuf_bytes;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) s.hostname = host;
  utsname u{};
  if (uname(&u) == 0) s.kernel = u.release;
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  s.start_realtime_ns = static_cast<uint64_t>(rt.tv_sec) * 1'000'000'000ull +
                        static_cast<uint64_t>(rt.tv_nsec);
  return s;
}

}  // namespace looptrace
