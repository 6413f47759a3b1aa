// The plan's kernel options and thresholds, from the values as typed.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "base/duration.h"
#include "base/log.h"
#include "base/size.h"
#include "plan/steps.h"
#include "report/key_frames.h"

namespace looptrace::plan {
namespace {

Status build_thresholds(const RecordArgs& a, Plan* p) {
  auto given = parse_thresholds(a.thresholds);
  if (!given.ok()) return given.status();
  Thresholds& t = p->opts.limits;
  t = thresholds_for_record(*given);
  // Android's Looper: after a slow delivery, quiet until the lag drains.
  if (a.delivery_hysteresis) t.delivery_drain_ns = Thresholds::kDeliveryDrainNs;
  t.record_all = a.record_all;
  if (a.sample_freq > 100000)
    return Status::Error("--sample-freq: at most 100000 Hz", ErrorKind::kUsage);
  t.sample_hz = a.sample_freq;
  if (!a.sample_after.empty()) {
    auto sa = parse_duration(a.sample_after);
    if (!sa.ok()) return sa.status();
    t.sample_after_ns = *sa;
  }
  if (!a.duration.empty()) {
    auto d = parse_duration(a.duration);
    if (!d.ok()) return d.status();
    if (*d == 0)
      return Status::Error("--duration must be above 0", ErrorKind::kUsage);
    p->duration_ns = *d;
  }
  auto hang = parse_hang(a.hang);
  if (!hang.ok()) return hang.status();
  p->hang_ns = *hang;
  return Status::Ok();
}

// --call-graph fp | dwarf[,BYTES] | auto[,BYTES]: how stacks are unwound
// and the bytes of stack each sample copies.
Status parse_call_graph(const std::string& text, TraceOptions* o) {
  o->call_graph = CallGraph::kFramePointer;
  o->stack_copy = 0;
  if (text == "fp") return Status::Ok();
  const bool dwarf = text.rfind("dwarf", 0) == 0;
  if (!dwarf && text.rfind("auto", 0) != 0)
    return Status::Error(
        fmt::format("--call-graph {}: fp, dwarf[,BYTES] or auto[,BYTES]", text),
        ErrorKind::kUsage);
  o->call_graph = dwarf ? CallGraph::kDwarf : CallGraph::kAuto;
  const std::string mode = dwarf ? "dwarf" : "auto";
  const std::string rest = text.substr(mode.size());
  o->stack_copy = LT_STACK_COPY;
  if (rest.empty()) return Status::Ok();
  // The kernel copies 8, 4, 2 or 1 KiB: the most that is mapped. (No
  // string concatenation here: GCC 12's -O3 reports a bogus -Wrestrict in
  // it.)
  const std::string bytes =
      rest.size() > 1 && rest[0] == ',' ? rest.substr(1) : "";
  for (uint32_t v : {1024u, 2048u, 4096u, 8192u})
    if (bytes == fmt::format("{}", v) ||
        bytes == fmt::format("{}K", v / 1024)) {
      o->stack_copy = v;
      return Status::Ok();
    }
  return Status::Error(
      fmt::format("--call-graph {}: {},BYTES with BYTES 1024, 2048, 4096 "
                  "or 8192 (1K..8K)",
                  text, mode),
      ErrorKind::kUsage);
}

Status check_thread_filters(const RecordArgs& a) {
  if (a.tids.size() > LT_MAX_FILTER_TIDS)
    return Status::Error(
        fmt::format("--tid: at most {} threads", LT_MAX_FILTER_TIDS),
        ErrorKind::kUsage);
  for (uint32_t t : a.tids)
    if (t == 0 || t > (1u << 22))
      return Status::Error(fmt::format("--tid {}: not a thread id", t),
                           ErrorKind::kUsage);
  if (a.comms.size() > LT_MAX_FILTER_COMMS)
    return Status::Error(
        fmt::format("--comm: at most {} names", LT_MAX_FILTER_COMMS),
        ErrorKind::kUsage);
  for (const std::string& c : a.comms)
    if (c.empty() || c.size() >= LT_COMM_LEN ||
        c.find('\0') != std::string::npos)
      return Status::Error(
          fmt::format("--comm '{}': a thread name is 1 to {} bytes (the "
                      "kernel's comm)",
                      log::printable(c, 40), LT_COMM_LEN - 1),
          ErrorKind::kUsage);
  return Status::Ok();
}

// A --tid names a thread that exists: of -p's process, or with
// --system-wide (or no target) of any; a command's threads do not exist
// yet. A tid that never calls a probe would filter out everything.
Status check_tids_exist(const RecordArgs& a) {
  if (a.tids.empty()) return Status::Ok();
  if (!a.command.empty())
    return Status::Error(
        "--tid with -- COMMAND: the command's threads do not exist yet; "
        "select them by name (--comm NAME)",
        ErrorKind::kUsage);
  for (uint32_t t : a.tids) {
    std::string dir = a.pid > 0
                          ? fmt::format("/proc/{}/task/{}", a.pid, t)
                          : fmt::format("/proc/{}", t);  // any thread's id
    if (access(dir.c_str(), F_OK) == 0) continue;
    return Status::Error(
        a.pid > 0 ? fmt::format("--tid {}: not a thread of pid {} (its "
                                "threads: /proc/{}/task)",
                                t, a.pid, a.pid)
                  : fmt::format("--tid {}: no such thread", t),
        ErrorKind::kUsage);
  }
  return Status::Ok();
}

// Options that only act on a probe or a mode not asked for: refused, not
// silently ignored.
Status check_options_apply(const RecordArgs& a) {
  const ArgsGiven& given = a.given;
  auto unused = [](const std::string& what, const std::string& needs) {
    return Status::Error(
        fmt::format("{} applies to {}: none given", what, needs),
        ErrorKind::kUsage);
  };
  if (!a.keys.empty() && a.dispatch.empty() && a.idle.empty() &&
      a.frame.empty() && a.frame_end.empty() && a.dispatch_call.empty())
    return unused(
        "--key", "ad-hoc spans (--dispatch, --idle, --frame, --dispatch-call)");
  if (given.queue_arg && a.barrier_post.empty() && a.barrier_remove.empty() &&
      a.enqueue.empty())
    return unused(
        "--queue-arg",
        "ad-hoc --barrier-post, --barrier-remove or --enqueue probes");
  if (given.token_arg && a.barrier_remove.empty())
    return unused("--token-arg", "ad-hoc --barrier-remove probes");
  if (given.msg_arg && a.enqueue.empty())
    return unused("--msg-arg", "ad-hoc --enqueue probes");
  if (given.when_arg && a.enqueue.empty())
    return unused("--when-arg", "ad-hoc --enqueue probes");
  if (!a.input_binary.empty() && a.input_mode != "uprobe")
    return Status::Error(
        fmt::format("--input-binary applies to --input-mode uprobe, not {}",
                    log::printable(a.input_mode, 20)),
        ErrorKind::kUsage);
  return Status::Ok();
}

// The kernel's tables: the ring buffer and the maps sized at load.
Status build_sizes(const RecordArgs& a, TraceOptions* o) {
  auto rb = parse_ringbuf_size(a.ringbuf_size);
  if (!rb.ok()) return rb.status();
  o->ringbuf_bytes = *rb;
  if (a.hist_max == 0 || a.hist_max > (1u << 20))
    return Status::Error("--max-threads: 1 to 1048576", ErrorKind::kUsage);
  o->hist_max = a.hist_max;
  if (a.pending_max == 0 || a.pending_max > (1u << 24))
    return Status::Error("--max-pending: 1 to 16777216", ErrorKind::kUsage);
  o->pending_max = a.pending_max;
  if (a.process_max == 0 || a.process_max > (1u << 22))
    return Status::Error("--max-processes: 1 to 4194304", ErrorKind::kUsage);
  o->process_max = a.process_max;
  return Status::Ok();
}

}  // namespace

Status build_options(const RecordArgs& a, Plan* p) {
  LT_RETURN_IF_ERROR(build_thresholds(a, p));
  LT_RETURN_IF_ERROR(parse_call_graph(a.call_graph, &p->opts));
  p->opts.off_cpu = !a.no_off_cpu;
  LT_RETURN_IF_ERROR(build_sizes(a, &p->opts));
  LT_RETURN_IF_ERROR(check_thread_filters(a));
  LT_RETURN_IF_ERROR(check_tids_exist(a));
  LT_RETURN_IF_ERROR(check_options_apply(a));
  LT_RETURN_IF_ERROR(report::check_app_code(a.app_code));
  p->opts.tids = a.tids;
  p->opts.comms = a.comms;
  return Status::Ok();
}

}  // namespace looptrace::plan
