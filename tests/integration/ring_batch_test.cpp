// The reader's poll hands over bounded batches: a ring buffer that never
// empties must not keep the run from seeing -d or a signal (issue 23: a
// probe on looptrace's own record callback, with --record-all, made every
// record make another, and the tracer ignored -d, SIGINT and SIGTERM).
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <variant>

#include "harness.h"
#include "loader/tracer.h"
#include "profiles/resolve.h"

extern "C" __attribute__((noinline, used)) int lt_feedback_target(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace lt_test {
namespace {

using looptrace::Event;
using looptrace::ProbeDef;
using looptrace::SpanEvent;
using looptrace::Tracer;

// A dispatch probe on lt_feedback_target in this very test, every span
// recorded; the sink calls it again for each span it is handed: the ring
// buffer is never empty while the sink reads it. The old reader never came
// back from such a poll (here: not before the sink stops feeding, after
// kFeedLimit spans, many seconds later).
TEST(RingBatches, PollReturnsWhileEveryRecordMakesAnother) {
  LT_REQUIRE_BPF();
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  ProbeDef p;
  p.binary = self;
  p.symbol = "lt_feedback_target";
  std::vector<ProbeDef> probes{p};
  ASSERT_TRUE(looptrace::resolve_probes(&probes, {}).ok());
  looptrace::TraceOptions opts;
  opts.probes = probes;
  opts.limits.record_all = true;
  opts.limits.sample_hz = 0;
  opts.off_cpu = false;
  auto tracer = Tracer::Create(opts);
  ASSERT_TRUE(tracer.ok()) << tracer.status().message();

  constexpr uint64_t kFeedLimit = 20'000'000;
  uint64_t spans = 0;
  Tracer::Sink sink = [&](Event&& ev) {
    if (std::holds_alternative<SpanEvent>(ev) && ++spans < kFeedLimit)
      lt_feedback_target(static_cast<int>(spans));
  };
  lt_feedback_target(0);
  for (int poll = 0; poll < 3; ++poll) {
    SCOPED_TRACE(poll);
    const uint64_t before = spans;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE((*tracer)->poll(100, sink).ok());
    const auto took = std::chrono::steady_clock::now() - t0;
    // Back within a batch (65536 records or 50 ms), with the ring still
    // busy: each poll read records, and the feed went on.
    EXPECT_LT(took, std::chrono::seconds(2));
    EXPECT_GT(spans, before) << "the feedback ran";
    EXPECT_LT(spans, kFeedLimit) << "the poll returned before the feed ended";
  }
  // Paused, the probe records nothing more: the drain ends.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE((*tracer)->stop(sink).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

}  // namespace
}  // namespace lt_test
