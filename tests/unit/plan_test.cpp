// The plan of `looptrace record` from its arguments, checked before
// anything touches the system (no root): values, ad-hoc probes and their
// key roles, a profile's probes, and the errors a user meets.
#include "plan/plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

Result<Plan> plan_of(const RecordArgs& a) {
  Plan p;
  Status st = parse_plan(a, &p);
  if (!st.ok()) return st;
  return p;
}

RecordArgs adhoc() {
  RecordArgs a;
  a.dispatch = {"/bin/true:main"};
  return a;
}

TEST(Plan, ThresholdsAndKernelOptions) {
  RecordArgs a = adhoc();
  a.thresholds[ThresholdOption::kSlow] = "40ms";
  a.thresholds[ThresholdOption::kRefreshRate] = "120";
  a.delivery_hysteresis = true;
  a.call_graph = "dwarf,4K";
  a.ringbuf_size = "16M";
  auto p = plan_of(a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->opts.limits.slow_ns[LT_ROLE_DISPATCH], 40 * kMs);
  EXPECT_EQ(p->opts.limits.slow_ns[LT_ROLE_IDLE], 40 * kMs);
  EXPECT_EQ(p->opts.limits.sample_after_ns, 20 * kMs);
  EXPECT_EQ(p->opts.limits.refresh_ns, 8'333'333u);  // recorded with them
  EXPECT_EQ(p->opts.limits.delivery_drain_ns, Thresholds::kDeliveryDrainNs);
  EXPECT_EQ(p->opts.stack_copy, 4096u);
  EXPECT_EQ(p->opts.call_graph, CallGraph::kDwarf);
  EXPECT_EQ(p->opts.ringbuf_bytes, 16u << 20);
  EXPECT_EQ(p->hang_ns, Thresholds::kHangNs);
}

TEST(Plan, CallGraphIsAutoByDefaultAndCanBeForced) {
  struct Case {
    const char* arg;
    CallGraph mode;
    uint32_t copy;
  } cases[] = {{nullptr, CallGraph::kAuto, LT_STACK_COPY},
               {"auto", CallGraph::kAuto, LT_STACK_COPY},
               {"auto,2K", CallGraph::kAuto, 2048},
               {"dwarf", CallGraph::kDwarf, LT_STACK_COPY},
               {"dwarf,1024", CallGraph::kDwarf, 1024},
               {"fp", CallGraph::kFramePointer, 0}};
  for (const Case& c : cases) {
    RecordArgs a = adhoc();
    if (c.arg) a.call_graph = c.arg;
    auto p = plan_of(a);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->opts.call_graph, c.mode) << (c.arg ? c.arg : "default");
    EXPECT_EQ(p->opts.stack_copy, c.copy) << (c.arg ? c.arg : "default");
  }
}

TEST(Plan, BadValuesAreUsageErrorsNamingTheOption) {
  struct Case {
    void (*set)(RecordArgs&);
    std::string message;
  } cases[] = {
      {[](RecordArgs& a) {
         a.thresholds[ThresholdOption::kBarrierStall] = "0s";
       },
       "--barrier-stall: must be above 0"},
      {[](RecordArgs& a) {
         a.thresholds[ThresholdOption::kRefreshRate] = "16ms";
       },
       "--refresh-rate: bad rate '16ms': expected frames per second from 1 "
       "to 1000 (60, 59.94, 144)"},
      {[](RecordArgs& a) { a.call_graph = "dwarf,3K"; },
       "--call-graph dwarf,3K: dwarf,BYTES with BYTES 1024, 2048, 4096 or "
       "8192 (1K..8K)"},
      {[](RecordArgs& a) { a.call_graph = "auto,16K"; },
       "--call-graph auto,16K: auto,BYTES with BYTES 1024, 2048, 4096 or "
       "8192 (1K..8K)"},
      {[](RecordArgs& a) { a.call_graph = "lbr"; },
       "--call-graph lbr: fp, dwarf[,BYTES] or auto[,BYTES]"},
      {[](RecordArgs& a) { a.ringbuf_size = "3M"; },
       "bad ring buffer size '3M': a power of two from 4K to 1G"},
      {[](RecordArgs& a) {
         a.token_arg = 7;
         a.barrier_remove = {"x:y"};
       },
       "--token-arg must be 0..5 (got 7)"},
      {[](RecordArgs& a) { a.comms = {"a-name-longer-than-15"}; },
       "--comm 'a-name-longer-than-15': a thread name is 1 to 15 bytes (the "
       "kernel's comm)"},
  };
  for (const Case& c : cases) {
    RecordArgs a = adhoc();
    c.set(a);
    auto p = plan_of(a);
    ASSERT_FALSE(p.ok()) << c.message;
    EXPECT_EQ(p.status().kind(), ErrorKind::kUsage) << c.message;
    EXPECT_EQ(p.status().message(), c.message);
  }
}

// Point probes read their arguments by position, with the roles the kernel
// and the barrier analyser act on, never by name.
TEST(Plan, AdHocPointProbesCarryTypedKeyRoles) {
  RecordArgs a;
  a.barrier_remove = {"libq.so:removeBarrier"};
  a.enqueue = {"libq.so:enqueue"};
  a.queue_arg = 0;
  a.token_arg = 2;
  a.msg_arg = 1;
  a.when_arg = 3;
  auto p = plan_of(a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->probes.size(), 2u);
  const ProbeDef& remove = p->probes[0];
  EXPECT_EQ(remove.role, LT_ROLE_BARRIER_REMOVE);
  ASSERT_EQ(remove.keys.size(), 2u);
  EXPECT_EQ(remove.keys[0].role, KeyRole::kQueue);
  EXPECT_EQ(remove.keys[1].role, KeyRole::kToken);
  EXPECT_EQ(remove.keys[1].expr, "arg2");
  EXPECT_EQ(remove.keys[1].format, KeyFormat::kInt);
  const ProbeDef& enqueue = p->probes[1];
  ASSERT_EQ(enqueue.keys.size(), 3u);
  EXPECT_EQ(enqueue.keys[1].role, KeyRole::kMessage);
  EXPECT_EQ(enqueue.keys[1].format, KeyFormat::kPointer);
  EXPECT_EQ(enqueue.keys[2].role, KeyRole::kWhen);
  EXPECT_EQ(enqueue.keys[2].expr, "arg3");
}

// --key and a profile's keys get their role from their name where they
// are read.
TEST(Plan, ProfileAndKeyOptionKeysGetTheirRoles) {
  RecordArgs a;
  a.profile = "refapp";
  auto p = plan_of(a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  int messages = 0, queues = 0, tokens = 0;
  for (const ProbeDef& d : p->probes)
    for (const KeyDef& k : d.keys) {
      messages += k.role == KeyRole::kMessage;
      queues += k.role == KeyRole::kQueue;
      tokens += k.role == KeyRole::kToken;
      if (k.name == "what") {
        EXPECT_EQ(k.role, KeyRole::kShown);
      }
    }
  EXPECT_EQ(messages, 2);  // the dispatch's and the enqueue's
  EXPECT_EQ(queues, 3);    // enqueue, barrier post and removal
  EXPECT_EQ(tokens, 1);
  RecordArgs k = adhoc();
  k.keys = {"due_us=*(arg0+8):int", "what=u32 *(arg1+16):int"};
  auto q = plan_of(k);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->probes[0].keys[0].role, KeyRole::kDueUs);
  EXPECT_EQ(q->probes[0].keys[1].role, KeyRole::kShown);
}

TEST(Plan, NothingToTraceSaysWhatToGive) {
  auto p = plan_of(RecordArgs{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().kind(), ErrorKind::kUsage);
  EXPECT_EQ(
      p.status().message().rfind("nothing to trace: give --profile NAME", 0),
      0u)
      << p.status().message();
}

// --hang 0 is the manual's way to turn the watchdog off.
TEST(Plan, HangZeroTurnsTheWatchdogOff) {
  RecordArgs a = adhoc();
  a.hang = "0";
  auto p = plan_of(a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->hang_ns, 0u);
}

// Options that act on a probe or a mode not asked for are refused, not
// silently ignored; so are two --key options of one name.
TEST(Plan, OptionsThatWouldDoNothingAreRefused) {
  struct Case {
    void (*set)(RecordArgs&);
    std::string message;
  } cases[] = {
      {[](RecordArgs& a) {
         a.dispatch.clear();
         a.profile = "refapp";
         a.keys = {"w=arg1:int"};
       },
       "--key applies to ad-hoc spans (--dispatch, --idle, --frame, "
       "--dispatch-call): none given"},
      {[](RecordArgs& a) { a.given.queue_arg = true; },
       "--queue-arg applies to ad-hoc --barrier-post, --barrier-remove or "
       "--enqueue probes: none given"},
      {[](RecordArgs& a) {
         a.barrier_post = {"x:y"};
         a.given.msg_arg = true;
       },
       "--msg-arg applies to ad-hoc --enqueue probes: none given"},
      {[](RecordArgs& a) { a.given.token_arg = true; },
       "--token-arg applies to ad-hoc --barrier-remove probes: none given"},
      {[](RecordArgs& a) { a.given.when_arg = true; },
       "--when-arg applies to ad-hoc --enqueue probes: none given"},
      {[](RecordArgs& a) {
         a.input = true;
         a.input_binary = {"/lib/x86_64-linux-gnu/libc.so.6"};
       },
       "--input-binary applies to --input-mode uprobe, not syscall"},
      {[](RecordArgs& a) {
         a.keys = {"w=arg1:int", "w=arg2:hex"};
       },
       "--key w=arg2:hex: two keys named 'w'"},
      {[](RecordArgs& a) {
         a.command = {"/bin/true"};
         a.tids = {1};
       },
       "--tid with -- COMMAND: the command's threads do not exist yet; "
       "select them by name (--comm NAME)"},
  };
  for (const Case& c : cases) {
    RecordArgs a = adhoc();
    c.set(a);
    auto p = plan_of(a);
    ASSERT_FALSE(p.ok()) << c.message;
    EXPECT_EQ(p.status().kind(), ErrorKind::kUsage) << c.message;
    EXPECT_EQ(p.status().message(), c.message);
  }
  // Given where they act, the same options are taken.
  RecordArgs a = adhoc();
  a.keys = {"w=arg1:int"};
  a.enqueue = {"x:y"};
  a.given = {true, false, true, true};
  EXPECT_TRUE(plan_of(a).ok()) << plan_of(a).status().message();
}

// --tid names a live thread: of -p's process, or of any process with
// --system-wide.
TEST(Plan, TidMustNameAThreadThatExists) {
  RecordArgs a = adhoc();
  a.pid = getpid();
  a.tids = {static_cast<uint32_t>(getpid())};
  EXPECT_TRUE(plan_of(a).ok()) << plan_of(a).status().message();
  // pid 1 exists, and is not a thread of this process.
  a.tids = {1};
  auto p = plan_of(a);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "--tid 1: not a thread of pid " + std::to_string(getpid()) +
                " (its threads: /proc/" + std::to_string(getpid()) + "/task)");
  RecordArgs w = adhoc();
  w.system_wide = true;
  w.tids = {1u << 22};  // above any pid_max
  p = plan_of(w);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "--tid 4194304: no such thread");
  EXPECT_EQ(p.status().kind(), ErrorKind::kUsage);
}

}  // namespace
}  // namespace looptrace
