#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "analysis/input.h"
#include "input_message_fixtures.h"
#include "looptrace/abi.h"
#include "monitor/trigger.h"

namespace looptrace {
namespace {

using fixture::Bytes;

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kDispatcherPid = 1000, kDispatcherTid = 1001;
constexpr uint32_t kAppPid = 2000, kAppTid = 2000;

// The two ends of an input channel's socket pair.
struct Channel {
  uint64_t dispatcher;  // InputDispatcher's end (sends events)
  uint64_t app;         // the app's end (sends FINISHED): names the channel
  uint32_t app_pid = kAppPid;
  uint32_t app_tid = kAppTid;
};
constexpr Channel kChanA{100, 200};
constexpr Channel kChanB{300, 400, 2100, 2100};

IoEvent io(const Bytes& m, uint64_t ts, bool send, uint64_t inode,
           uint64_t peer, uint32_t pid, uint32_t tid, const char* comm) {
  IoEvent e;
  e.pid = pid;
  e.tid = tid;
  e.comm = comm;
  e.ts_ns = ts;
  // A send moves at its entry, a receive at its return.
  e.enter_ns = send ? ts : ts - 1000;
  e.exit_ns = send ? ts + 1000 : ts;
  e.inode = inode;
  e.peer_inode = peer;
  e.bytes = static_cast<int64_t>(m.size());
  e.fd = send ? 41 : 42;
  e.op = send ? LT_IO_SEND : 0;
  e.chan = LT_CHAN_INPUT;
  e.head = fixture::head_of(m);
  return e;
}

// The dispatcher sends an event.
IoEvent sent(const Channel& c, const Bytes& m, uint64_t ts) {
  return io(m, ts, true, c.dispatcher, c.app, kDispatcherPid, kDispatcherTid,
            "InputDispatcher");
}
// The app receives it.
IoEvent received(const Channel& c, const Bytes& m, uint64_t ts) {
  return io(m, ts, false, c.app, c.dispatcher, c.app_pid, c.app_tid, "app");
}
// The app sends FINISHED, from inside dispatch `span_id` if span_start != 0.
IoEvent finish_sent(const Channel& c, uint32_t seq, uint64_t ts,
                    uint64_t span_start = 0, uint64_t span_id = 0,
                    int64_t consume_time = 0, bool handled = true) {
  IoEvent e = io(fixture::finished(seq, handled, consume_time), ts, true, c.app,
                 c.dispatcher, c.app_pid, c.app_tid, "app");
  if (span_start) {
    e.depth = 1;
    e.span_start_ns = span_start;
    e.span_id = span_id;
    e.span_probe = 2;
  }
  return e;
}
// The dispatcher receives FINISHED.
IoEvent finish_received(const Channel& c, uint32_t seq, uint64_t ts,
                        bool handled = true) {
  return io(fixture::finished(seq, handled, 0), ts, false, c.dispatcher, c.app,
            kDispatcherPid, kDispatcherTid, "InputDispatcher");
}

// A read of a raw channel (X11, Wayland...).
IoEvent raw_read(uint64_t inode, uint64_t ts, uint32_t tid = 3000,
                 uint32_t depth = 0, uint64_t span_start = 0,
                 uint64_t span_id = 0) {
  IoEvent e;
  e.pid = 3000;
  e.tid = tid;
  e.comm = "xclient";
  e.ts_ns = ts;
  e.enter_ns = ts - 1000;
  e.exit_ns = ts;
  e.inode = inode;
  e.peer_inode = inode + 1;
  e.bytes = 32;
  e.fd = 5;
  e.op = 0;
  e.chan = LT_CHAN_RAW;
  e.depth = depth;
  e.span_start_ns = span_start;
  e.span_id = span_id;
  e.span_probe = 1;
  e.head.fill(0x11);
  return e;
}

SpanEvent span(uint32_t tid, uint64_t id, uint64_t start, uint64_t end,
               uint32_t depth = 0, uint32_t flags = 0, uint32_t pid = kAppPid) {
  SpanEvent s;
  s.pid = pid;
  s.tid = tid;
  s.comm = "app";
  s.span_id = id;
  s.start_ns = start;
  s.duration_ns = end - start;
  s.cpu_ns = s.duration_ns;
  s.probe_id = 1;
  s.role = LT_ROLE_DISPATCH;
  s.depth = depth;
  s.flags = flags;
  return s;
}

InputAnalysis run(const std::vector<Event>& evs, InputOptions opts = {}) {
  InputAnalyzer an(opts);
  for (const Event& e : evs) an.consume(e);
  return an.finish();
}

const InputEventInfo* find(const InputAnalysis& a, uint64_t channel,
                           uint32_t seq) {
  for (const InputEventInfo& e : a.events)
    if (e.channel == channel && e.seq == seq) return &e;
  return nullptr;
}

// One event's full round trip: eventTime 90, sent 100, received 102,
// handled in a dispatch from 105, FINISHED sent 110, received 111 (ms).
std::vector<Event> round_trip(const Channel& c, uint32_t seq, uint64_t t0) {
  Bytes m = fixture::key(seq, static_cast<int64_t>(t0 - 10 * kMs));
  return {sent(c, m, t0), received(c, m, t0 + 2 * kMs),
          finish_sent(c, seq, t0 + 10 * kMs, t0 + 5 * kMs, 30 + seq,
                      static_cast<int64_t>(t0 + 2 * kMs)),
          finish_received(c, seq, t0 + 11 * kMs)};
}

TEST(InputAnalysisTest, StageNamesArePerfettos) {
  EXPECT_EQ(input_stage_name(InputStage::kDispatchLatency),
            "dispatch_latency_dur");
  EXPECT_EQ(input_stage_name(InputStage::kHandlingLatency),
            "handling_latency_dur");
  EXPECT_EQ(input_stage_name(InputStage::kAckLatency), "ack_latency_dur");
  EXPECT_EQ(input_stage_name(InputStage::kTotalLatency), "total_latency_dur");
  std::vector<std::string> names;
  for (int s = 0; s < kInputStages; ++s) {
    std::string n(input_stage_name(static_cast<InputStage>(s)));
    EXPECT_NE(n, "?");
    EXPECT_TRUE(n.ends_with("_dur")) << n;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  EXPECT_TRUE(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST(InputAnalysisTest, OneCompleteEventHasEveryStage) {
  InputAnalysis a = run(round_trip(kChanA, 1, 100 * kMs));
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.channel, 200u);
  EXPECT_EQ(e.peer, 100u);
  EXPECT_EQ(e.chan_kind, static_cast<uint32_t>(LT_CHAN_INPUT));
  EXPECT_EQ(e.layout, static_cast<uint32_t>(LT_LAYOUT_CURRENT));
  EXPECT_EQ(e.seq, 1u);
  EXPECT_EQ(e.type, InputType::kKey);
  EXPECT_EQ(e.pid, kAppPid);
  EXPECT_EQ(e.tid, kAppTid);
  EXPECT_EQ(e.comm, "app");
  EXPECT_EQ(e.sender_pid, kDispatcherPid);
  EXPECT_EQ(e.sender_tid, kDispatcherTid);
  EXPECT_EQ(e.event_time_ns, static_cast<int64_t>(90 * kMs));
  EXPECT_EQ(e.sent_ns, 100 * kMs);
  EXPECT_EQ(e.received_ns, 102 * kMs);
  EXPECT_EQ(e.handling_start_ns, 105 * kMs);
  EXPECT_EQ(e.handling_span_id, 31u);
  EXPECT_EQ(e.handling_probe, 2u);
  EXPECT_EQ(e.finished_ns, 110 * kMs);
  EXPECT_EQ(e.finish_received_ns, 111 * kMs);
  EXPECT_TRUE(e.has_finish);
  EXPECT_TRUE(e.handled);
  EXPECT_EQ(e.consume_time_ns, static_cast<int64_t>(102 * kMs));

  EXPECT_EQ(e.stage(InputStage::kAgeAtDispatch), 10 * kMs);
  EXPECT_EQ(e.stage(InputStage::kDispatchLatency), 2 * kMs);
  EXPECT_EQ(e.stage(InputStage::kAgeAtReceive), 12 * kMs);
  EXPECT_EQ(e.stage(InputStage::kWaitBeforeHandling), 3 * kMs);
  EXPECT_EQ(e.stage(InputStage::kHandlingLatency), 8 * kMs);
  EXPECT_EQ(e.stage(InputStage::kAckLatency), 1 * kMs);
  EXPECT_EQ(e.stage(InputStage::kTotalLatency), 11 * kMs);
  EXPECT_EQ(e.stage(InputStage::kCount), std::nullopt);
  EXPECT_EQ(e.arrival_ns(), 100 * kMs);
  EXPECT_EQ(e.app_latency(), 10 * kMs);
  EXPECT_FALSE(e.blame.has_value());  // 10 ms is under the 100 ms default

  EXPECT_EQ(a.unmatched, 0u);
  EXPECT_EQ(a.duplicates, 0u);
  EXPECT_EQ(a.other_messages, 0u);
  EXPECT_EQ(a.legacy_messages, 0u);
  EXPECT_EQ(a.undecodable, 0u);

  ASSERT_EQ(a.channels.size(), 1u);
  const InputChannelSummary& c = a.channels[0];
  EXPECT_EQ(c.channel, 200u);
  EXPECT_EQ(c.peer, 100u);
  EXPECT_EQ(c.layout, static_cast<uint32_t>(LT_LAYOUT_CURRENT));
  EXPECT_EQ(c.pid, kAppPid);
  EXPECT_EQ(c.comm, "app");
  EXPECT_EQ(c.sender_pid, kDispatcherPid);
  EXPECT_EQ(c.events, 1u);
  EXPECT_EQ(c.keys, 1u);
  EXPECT_EQ(c.motions, 0u);
  EXPECT_EQ(c.unfinished, 0u);
  EXPECT_EQ(c.blamed, 0u);
  const Percentiles& total =
      c.stages[static_cast<size_t>(InputStage::kTotalLatency)];
  EXPECT_EQ(total.count, 1u);
  EXPECT_EQ(total.p50, 11 * kMs);
  EXPECT_EQ(total.max, 11 * kMs);
}

TEST(InputAnalysisTest, MotionEventAndUnhandledFinish) {
  Bytes m = fixture::motion(5, static_cast<int64_t>(95 * kMs), 2);
  InputAnalysis a =
      run({sent(kChanA, m, 100 * kMs), received(kChanA, m, 101 * kMs),
           finish_sent(kChanA, 5, 104 * kMs, 0, 0, 0, /*handled=*/false),
           finish_received(kChanA, 5, 105 * kMs, /*handled=*/false)});
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.type, InputType::kMotion);
  EXPECT_EQ(e.event_time_ns, static_cast<int64_t>(95 * kMs));
  EXPECT_TRUE(e.has_finish);
  EXPECT_FALSE(e.handled);
  // FINISHED sent outside any dispatch: no handling start.
  EXPECT_EQ(e.handling_start_ns, 0u);
  EXPECT_EQ(e.stage(InputStage::kWaitBeforeHandling), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kHandlingLatency), 3 * kMs);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].motions, 1u);
  EXPECT_EQ(a.channels[0].keys, 0u);
}

// Stage values of every event, in output order.
std::vector<std::vector<std::optional<uint64_t>>> stages_of(
    const InputAnalysis& a) {
  std::vector<std::vector<std::optional<uint64_t>>> out;
  for (const InputEventInfo& e : a.events) {
    std::vector<std::optional<uint64_t>> v;
    v.push_back(e.seq);
    v.push_back(e.handling_start_ns);
    for (int s = 0; s < kInputStages; ++s)
      v.push_back(e.stage(static_cast<InputStage>(s)));
    out.push_back(v);
  }
  return out;
}

TEST(InputAnalysisTest, ReorderedRecordsPairTheSame) {
  std::vector<Event> one = round_trip(kChanA, 1, 100 * kMs);
  std::vector<Event> two = round_trip(kChanA, 2, 104 * kMs);
  // In time order: send1 100, recv1 102, send2 104, recv2 106, fin1 110,
  // finrecv1 111, fin2 114, finrecv2 115.
  std::vector<Event> in_order = {one[0], one[1], two[0], two[1],
                                 one[2], one[3], two[2], two[3]};
  // As a ring buffer fed by several CPUs may deliver them: the app's
  // receive before the dispatcher's send, the dispatcher's FINISHED receive
  // before the app's FINISHED send, seq 2 interleaved before seq 1 is done.
  std::vector<Event> shuffled = {one[1], one[0], two[1], two[0],
                                 one[3], one[2], two[3], two[2]};
  InputAnalysis a = run(in_order);
  InputAnalysis b = run(shuffled);
  ASSERT_EQ(a.events.size(), 2u);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(stages_of(a), stages_of(b));
  for (const InputAnalysis* x : {&a, &b}) {
    const InputEventInfo* e1 = find(*x, 200, 1);
    const InputEventInfo* e2 = find(*x, 200, 2);
    ASSERT_TRUE(e1 && e2);
    EXPECT_EQ(e1->stage(InputStage::kDispatchLatency), 2 * kMs);
    EXPECT_EQ(e1->stage(InputStage::kTotalLatency), 11 * kMs);
    EXPECT_EQ(e2->sent_ns, 104 * kMs);
    EXPECT_EQ(e2->finish_received_ns, 115 * kMs);
    EXPECT_EQ(e2->stage(InputStage::kHandlingLatency), 8 * kMs);
    EXPECT_EQ(e2->sender_pid, kDispatcherPid);
    EXPECT_EQ(e2->pid, kAppPid);
    EXPECT_EQ(x->unmatched + x->duplicates, 0u);
  }
}

TEST(InputAnalysisTest, FinishedForASeqNeverSentIsUnmatched) {
  std::vector<Event> evs = round_trip(kChanA, 1, 100 * kMs);
  // The dispatcher acknowledges seq 9, and the app finishes seq 8: events
  // sent before tracing began.
  evs.insert(evs.begin(), finish_received(kChanA, 9, 50 * kMs));
  evs.insert(evs.begin(), finish_sent(kChanA, 8, 40 * kMs, 35 * kMs, 3));
  InputAnalysis a = run(evs);
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].seq, 1u);
  EXPECT_EQ(a.unmatched, 2u);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].events, 1u);
  EXPECT_EQ(a.channels[0].unfinished, 0u);
}

TEST(InputAnalysisTest, EventNeverFinished) {
  Bytes m = fixture::key(3, static_cast<int64_t>(90 * kMs));
  InputAnalysis a =
      run({sent(kChanA, m, 100 * kMs), received(kChanA, m, 101 * kMs)});
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.finished_ns, 0u);
  EXPECT_EQ(e.finish_received_ns, 0u);
  EXPECT_FALSE(e.has_finish);
  EXPECT_EQ(e.stage(InputStage::kDispatchLatency), 1 * kMs);
  EXPECT_EQ(e.stage(InputStage::kHandlingLatency), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kTotalLatency), std::nullopt);
  EXPECT_EQ(e.app_latency(), std::nullopt);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].events, 1u);
  EXPECT_EQ(a.channels[0].unfinished, 1u);
  EXPECT_EQ(a.channels[0]
                .stages[static_cast<size_t>(InputStage::kHandlingLatency)]
                .count,
            0u);
  EXPECT_EQ(a.unmatched, 0u);
}

TEST(InputAnalysisTest, OnlyTheAppSideTraced) {
  std::vector<Event> all = round_trip(kChanA, 1, 100 * kMs);
  // No sender records: the app's receive and FINISHED send only.
  InputAnalysis a = run({all[1], all[2]});
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.channel, 200u);
  EXPECT_EQ(e.peer, 100u);
  EXPECT_EQ(e.sent_ns, 0u);
  EXPECT_EQ(e.sender_pid, 0u);
  EXPECT_EQ(e.stage(InputStage::kDispatchLatency), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kAgeAtDispatch), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kTotalLatency), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kAckLatency), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kAgeAtReceive), 12 * kMs);
  EXPECT_EQ(e.stage(InputStage::kWaitBeforeHandling), 3 * kMs);
  EXPECT_EQ(e.stage(InputStage::kHandlingLatency), 8 * kMs);
  EXPECT_EQ(e.arrival_ns(), 102 * kMs);
  EXPECT_EQ(e.app_latency(), 8 * kMs);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].unfinished, 0u);
  EXPECT_EQ(a.channels[0].sender_pid, 0u);
  EXPECT_EQ(a.unmatched, 0u);
}

TEST(InputAnalysisTest, OnlyTheAppSideTracedWithASeqReused) {
  // Without the dispatcher's acknowledgement, the app's FINISHED closes the
  // event: the same seq received again is a new event.
  std::vector<Event> first = round_trip(kChanA, 1, 100 * kMs);
  std::vector<Event> again = round_trip(kChanA, 1, 200 * kMs);
  InputAnalysis a = run({first[1], first[2], again[1], again[2]});
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.events[0].received_ns, 102 * kMs);
  EXPECT_EQ(a.events[1].received_ns, 202 * kMs);
  EXPECT_EQ(a.events[1].finished_ns, 210 * kMs);
  EXPECT_EQ(a.duplicates, 0u);
}

TEST(InputAnalysisTest, SameReceiveTwiceIsOneEventAndADuplicate) {
  std::vector<Event> r = round_trip(kChanA, 1, 100 * kMs);
  InputAnalysis a = run({r[0], r[1], r[1], r[2], r[3]});
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.duplicates, 1u);
  EXPECT_EQ(a.events[0].received_ns, 102 * kMs);
  EXPECT_EQ(a.events[0].stage(InputStage::kTotalLatency), 11 * kMs);
  EXPECT_EQ(a.unmatched, 0u);
}

TEST(InputAnalysisTest, SeqReusedAfterFullAcknowledgementIsANewEvent) {
  std::vector<Event> evs = round_trip(kChanA, 1, 100 * kMs);
  std::vector<Event> again = round_trip(kChanA, 1, 300 * kMs);
  evs.insert(evs.end(), again.begin(), again.end());
  InputAnalysis a = run(evs);
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.duplicates, 0u);
  EXPECT_EQ(a.unmatched, 0u);
  EXPECT_EQ(a.events[0].sent_ns, 100 * kMs);
  EXPECT_EQ(a.events[0].finish_received_ns, 111 * kMs);
  EXPECT_EQ(a.events[1].sent_ns, 300 * kMs);
  EXPECT_EQ(a.events[1].finish_received_ns, 311 * kMs);
  for (const InputEventInfo& e : a.events)
    EXPECT_EQ(e.stage(InputStage::kTotalLatency), 11 * kMs);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].events, 2u);
}

TEST(InputAnalysisTest, TwoChannelsKeepSeparateSeqSpaces) {
  // Both channels use seqs 1 and 2, interleaved.
  std::vector<Event> a1 = round_trip(kChanA, 1, 100 * kMs);
  std::vector<Event> a2 = round_trip(kChanA, 2, 200 * kMs);
  Bytes b1 = fixture::key(1, static_cast<int64_t>(95 * kMs));
  Bytes b2 = fixture::motion(2, static_cast<int64_t>(195 * kMs), 1);
  std::vector<Event> evs;
  evs.push_back(sent(kChanB, b1, 101 * kMs));
  evs.insert(evs.end(), a1.begin(), a1.end());
  evs.push_back(received(kChanB, b1, 103 * kMs));
  evs.push_back(sent(kChanB, b2, 201 * kMs));
  evs.push_back(received(kChanB, b2, 202 * kMs));
  evs.insert(evs.end(), a2.begin(), a2.end());
  evs.push_back(finish_sent(kChanB, 1, 110 * kMs));
  evs.push_back(finish_received(kChanB, 1, 112 * kMs));
  evs.push_back(finish_sent(kChanB, 2, 209 * kMs));
  evs.push_back(finish_received(kChanB, 2, 211 * kMs));
  InputAnalysis a = run(evs);
  ASSERT_EQ(a.events.size(), 4u);
  EXPECT_EQ(a.unmatched + a.duplicates, 0u);
  // Ordered by channel.
  EXPECT_EQ(a.events[0].channel, 200u);
  EXPECT_EQ(a.events[1].channel, 200u);
  EXPECT_EQ(a.events[2].channel, 400u);
  EXPECT_EQ(a.events[3].channel, 400u);
  for (uint32_t seq : {1u, 2u}) {
    const InputEventInfo* ea = find(a, 200, seq);
    ASSERT_NE(ea, nullptr);
    EXPECT_EQ(ea->peer, 100u);
    EXPECT_EQ(ea->pid, kAppPid);
    EXPECT_EQ(ea->stage(InputStage::kHandlingLatency), 8 * kMs);
    EXPECT_EQ(ea->stage(InputStage::kTotalLatency), 11 * kMs);
  }
  const InputEventInfo* b1e = find(a, 400, 1);
  const InputEventInfo* b2e = find(a, 400, 2);
  ASSERT_TRUE(b1e && b2e);
  EXPECT_EQ(b1e->peer, 300u);
  EXPECT_EQ(b1e->pid, 2100u);
  EXPECT_EQ(b1e->type, InputType::kKey);
  EXPECT_EQ(b1e->stage(InputStage::kDispatchLatency), 2 * kMs);
  EXPECT_EQ(b1e->stage(InputStage::kHandlingLatency), 7 * kMs);
  EXPECT_EQ(b1e->stage(InputStage::kTotalLatency), 11 * kMs);
  EXPECT_EQ(b2e->type, InputType::kMotion);
  EXPECT_EQ(b2e->stage(InputStage::kHandlingLatency), 7 * kMs);
  EXPECT_EQ(b2e->stage(InputStage::kAckLatency), 2 * kMs);

  ASSERT_EQ(a.channels.size(), 2u);
  EXPECT_EQ(a.channels[0].channel, 200u);
  EXPECT_EQ(a.channels[0].peer, 100u);
  EXPECT_EQ(a.channels[0].events, 2u);
  EXPECT_EQ(a.channels[0].keys, 2u);
  EXPECT_EQ(a.channels[1].channel, 400u);
  EXPECT_EQ(a.channels[1].peer, 300u);
  EXPECT_EQ(a.channels[1].pid, 2100u);
  EXPECT_EQ(a.channels[1].events, 2u);
  EXPECT_EQ(a.channels[1].keys, 1u);
  EXPECT_EQ(a.channels[1].motions, 1u);
  const size_t h = static_cast<size_t>(InputStage::kHandlingLatency);
  EXPECT_EQ(a.channels[0].stages[h].p50, 8 * kMs);
  EXPECT_EQ(a.channels[1].stages[h].p50, 7 * kMs);
}

TEST(InputAnalysisTest, ChannelPercentilesAreNearestRank) {
  // 100 events with handling latencies 1..100 ms, fed in shuffled order.
  std::vector<uint32_t> seqs;
  for (uint32_t i = 1; i <= 100; ++i) seqs.push_back(i);
  std::shuffle(seqs.begin(), seqs.end(), std::mt19937(7));
  std::vector<Event> evs;
  for (uint32_t i : seqs) {
    uint64_t t = i * 1000 * kMs;
    Bytes m = (i % 2) ? fixture::key(i, static_cast<int64_t>(t - kMs))
                      : fixture::motion(i, static_cast<int64_t>(t - kMs), 1);
    evs.push_back(sent(kChanA, m, t));
    evs.push_back(received(kChanA, m, t + kMs));
    evs.push_back(finish_sent(kChanA, i, t + kMs + i * kMs));
    evs.push_back(finish_received(kChanA, i, t + 2 * kMs + i * kMs));
  }
  InputAnalysis a = run(evs);
  ASSERT_EQ(a.events.size(), 100u);
  ASSERT_EQ(a.channels.size(), 1u);
  const InputChannelSummary& c = a.channels[0];
  EXPECT_EQ(c.events, 100u);
  EXPECT_EQ(c.keys, 50u);
  EXPECT_EQ(c.motions, 50u);
  const Percentiles& h =
      c.stages[static_cast<size_t>(InputStage::kHandlingLatency)];
  EXPECT_EQ(h.count, 100u);
  EXPECT_EQ(h.p50, 50 * kMs);
  EXPECT_EQ(h.p90, 90 * kMs);
  EXPECT_EQ(h.p99, 99 * kMs);
  EXPECT_EQ(h.max, 100 * kMs);
  const Percentiles& d =
      c.stages[static_cast<size_t>(InputStage::kDispatchLatency)];
  EXPECT_EQ(d.count, 100u);
  EXPECT_EQ(d.p50, kMs);
  EXPECT_EQ(d.max, kMs);
  const Percentiles& t =
      c.stages[static_cast<size_t>(InputStage::kTotalLatency)];
  EXPECT_EQ(t.p50, 52 * kMs);
  EXPECT_EQ(t.max, 102 * kMs);
  // No FINISHED sent from inside a dispatch: no wait stage at all.
  EXPECT_EQ(
      c.stages[static_cast<size_t>(InputStage::kWaitBeforeHandling)].count, 0u);
}

TEST(InputAnalysisTest, OtherLegacyAndUndecodableMessagesAreCounted) {
  std::vector<Event> evs = round_trip(kChanA, 1, 100 * kMs);
  evs.push_back(sent(kChanA, fixture::focus(2), 120 * kMs));
  evs.push_back(received(kChanA, fixture::focus(2), 121 * kMs));
  evs.push_back(sent(kChanA, fixture::timeline(3), 130 * kMs));
  evs.push_back(received(kChanA, Bytes(104, 'A'), 140 * kMs));
  InputAnalysis a = run(evs);
  EXPECT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.other_messages, 3u);
  EXPECT_EQ(a.undecodable, 1u);
  EXPECT_EQ(a.legacy_messages, 0u);
  EXPECT_EQ(a.unmatched, 0u);
}

// Android 12+: the app sends a TIMELINE (seq 0) for an event it finished,
// once its frame was presented: the event gets that present time, and its
// stages to it. An event of a channel whose app sends them waits for its
// own past its consumption; one that never comes leaves none.
TEST(InputAnalysisTest, ATimelineGivesItsEventThePresentTime) {
  const uint64_t t0 = 100 * kMs;
  std::vector<Event> evs = round_trip(kChanA, 1, t0);  // eventId 0x5a5a
  // fixture::timeline: gpu completed 123456789 ns, presented 123999999 ns.
  evs.push_back(io(fixture::timeline(0, 0x5a5a), 130 * kMs, true, kChanA.app,
                   kChanA.dispatcher, kChanA.app_pid, kChanA.app_tid, "app"));
  Bytes k2 = fixture::key(2, static_cast<int64_t>(190 * kMs), 0x77);
  evs.push_back(sent(kChanA, k2, 200 * kMs));
  evs.push_back(received(kChanA, k2, 202 * kMs));
  evs.push_back(finish_sent(kChanA, 2, 210 * kMs));
  InputAnalysis a = run(evs);
  const InputEventInfo* e = find(a, kChanA.app, 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->event_id, 0x5a5a);
  EXPECT_EQ(e->present_ns, 123999999u);
  EXPECT_EQ(e->gpu_completed_ns, 123456789u);
  EXPECT_EQ(e->stage(InputStage::kTotalToPresent), 123999999u - 90 * kMs);
  EXPECT_EQ(e->stage(InputStage::kConsumeToPresent), 123999999u - 110 * kMs);
  const InputEventInfo* e2 = find(a, kChanA.app, 2);
  ASSERT_NE(e2, nullptr);
  EXPECT_EQ(e2->present_ns, 0u);
  EXPECT_FALSE(e2->stage(InputStage::kTotalToPresent));
  EXPECT_EQ(a.other_messages, 0u);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0]
                .stages[static_cast<size_t>(InputStage::kTotalToPresent)]
                .count,
            1u);
}

TEST(InputAnalysisTest, LegacyRoundTrip) {
  Bytes m = fixture::legacy_key(4, static_cast<int64_t>(90 * kMs));
  Bytes f = fixture::legacy_finished(4, 1);
  IoEvent fin = io(f, 110 * kMs, true, 200, 100, kAppPid, kAppTid, "app");
  fin.depth = 1;
  fin.span_start_ns = 105 * kMs;
  fin.span_id = 12;
  InputAnalysis a =
      run({sent(kChanA, m, 100 * kMs), received(kChanA, m, 102 * kMs), fin,
           io(f, 111 * kMs, false, 100, 200, kDispatcherPid, kDispatcherTid,
              "InputDispatcher")});
  EXPECT_EQ(a.legacy_messages, 4u);
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.layout, static_cast<uint32_t>(LT_LAYOUT_LEGACY));
  EXPECT_EQ(e.seq, 4u);
  EXPECT_EQ(e.type, InputType::kKey);
  EXPECT_TRUE(e.handled);
  EXPECT_EQ(e.consume_time_ns, 0);
  EXPECT_EQ(e.stage(InputStage::kAgeAtDispatch), 10 * kMs);
  EXPECT_EQ(e.stage(InputStage::kWaitBeforeHandling), 3 * kMs);
  EXPECT_EQ(e.stage(InputStage::kTotalLatency), 11 * kMs);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].layout, static_cast<uint32_t>(LT_LAYOUT_LEGACY));
}

// ---- Raw channels: bytes read, consumed by a dispatch flagged
// LT_SPAN_INPUT.

TEST(InputAnalysisTest, RawReadInsideADispatchEndsWithIt) {
  InputAnalyzer an({});
  an.consume(raw_read(500, 10 * kMs, 3000, /*depth=*/1, 9 * kMs, 7));
  an.consume(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.channel, 500u);
  EXPECT_EQ(e.peer, 501u);
  EXPECT_EQ(e.chan_kind, static_cast<uint32_t>(LT_CHAN_RAW));
  EXPECT_EQ(e.layout, 0u);
  EXPECT_EQ(e.type, InputType::kBytes);
  EXPECT_EQ(e.seq, 1u);
  EXPECT_EQ(e.pid, 3000u);
  EXPECT_EQ(e.tid, 3000u);
  EXPECT_EQ(e.sent_ns, 0u);
  EXPECT_EQ(e.received_ns, 10 * kMs);
  EXPECT_EQ(e.finished_ns, 14 * kMs);
  EXPECT_EQ(e.handling_start_ns, 9 * kMs);
  EXPECT_EQ(e.handling_span_id, 7u);
  EXPECT_EQ(e.stage(InputStage::kHandlingLatency), 4 * kMs);
  EXPECT_EQ(e.app_latency(), 4 * kMs);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].chan_kind, static_cast<uint32_t>(LT_CHAN_RAW));
  EXPECT_EQ(a.channels[0].unfinished, 0u);
}

// stream_only: each event goes to on_final once, when final (the stream
// 2 s past its last stage), and nothing of it stays for finish().
TEST(InputAnalysisTest, StreamOnlyHandsEachFinalEventOnAndKeepsNone) {
  std::vector<InputEventInfo> seen;
  InputOptions o;
  o.stream_only = true;
  o.on_final = [&seen](const InputEventInfo& e) { seen.push_back(e); };
  InputAnalyzer an(o);
  an.consume(raw_read(500, 10 * kMs, 3000, /*depth=*/1, 9 * kMs, 7));
  an.consume(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000));
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(an.pending(), 1u);
  an.consume(span(3000, 8, 3000 * kMs, 3001 * kMs, 0, 0, 3000));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(an.pending(), 0u);
  EXPECT_EQ(seen[0].stage(InputStage::kHandlingLatency), 4 * kMs);
  an.consume(raw_read(500, 4000 * kMs, 3000));  // never consumed
  InputAnalysis a = an.finish();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(a.total, 2u);
  EXPECT_TRUE(a.events.empty());
  EXPECT_TRUE(a.channels.empty());
  EXPECT_TRUE(a.timeline.empty());
}

// `monitor --dump-if 'input.STAGE OP D'`: judged on each input event as
// it becomes final (its consuming dispatch ended, the stream moved on),
// once, with the stage's value; an event under the limit fires nothing.
TEST(TriggerCheckInput, FiresOnTheEventThatMadeItsStageKnown) {
  SessionEvent session;
  session.has_input = true;
  TriggerCheck c({*parse_dump_trigger("input.handling_latency_dur > 3ms")},
                 session, FrameOptions{});
  // Read at 10 ms in a dispatch 9-14 ms: handled in 4 ms, over 3 ms.
  EXPECT_FALSE(c.check(raw_read(500, 10 * kMs, 3000, 1, 9 * kMs, 7)));
  EXPECT_FALSE(
      c.check(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000)));
  // Final once the stream moved on: this span's end says so.
  auto f = c.check(span(3000, 8, 3000 * kMs, 3001 * kMs, 0, 0, 3000));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pid, 3000u);
  EXPECT_EQ(f->tid, 3000u);
  EXPECT_EQ(f->ts_ns, 3001 * kMs);  // judged then: the dump ends there
  EXPECT_EQ(f->why, "input.handling_latency_dur 4.00ms > 3ms") << f->why;
  // Handled in 1 ms: nothing.
  EXPECT_FALSE(c.check(raw_read(500, 4000 * kMs, 3000, 1, 3999 * kMs, 9)));
  EXPECT_FALSE(
      c.check(span(3000, 9, 3999 * kMs, 4001 * kMs, 0, LT_SPAN_INPUT, 3000)));
  EXPECT_FALSE(c.check(span(3000, 10, 9000 * kMs, 9001 * kMs, 0, 0, 3000)));
  // With no record after it (a quiet system), the live clock makes it
  // final: at 2 s past its consumption, not before.
  TriggerCheck quiet({*parse_dump_trigger("input.handling_latency_dur > 3ms")},
                     session, FrameOptions{});
  EXPECT_FALSE(quiet.check(raw_read(500, 10 * kMs, 3000, 1, 9 * kMs, 7)));
  EXPECT_FALSE(
      quiet.check(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000)));
  EXPECT_FALSE(quiet.advance(1000 * kMs));
  f = quiet.advance(2100 * kMs);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->ts_ns, 2100 * kMs);          // the dump ends when it was judged
  EXPECT_FALSE(quiet.advance(2200 * kMs));  // once
  // The process exits 100 ms after: its event is judged then, not 2 s
  // later when nothing of it would be left to dump.
  TriggerCheck gone({*parse_dump_trigger("input.handling_latency_dur > 3ms")},
                    session, FrameOptions{});
  EXPECT_FALSE(gone.check(raw_read(500, 10 * kMs, 3000, 1, 9 * kMs, 7)));
  EXPECT_FALSE(
      gone.check(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000)));
  EXPECT_FALSE(gone.advance(100 * kMs));
  EXPECT_TRUE(gone.process_gone(4242).empty());  // another process's exit
  std::vector<Firing> fired = gone.process_gone(3000);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].pid, 3000u);
  EXPECT_EQ(fired[0].why, "input.handling_latency_dur 4.00ms > 3ms");
  EXPECT_TRUE(gone.process_gone(3000).empty());
  EXPECT_FALSE(gone.advance(3000 * kMs));  // once
  // Without input traced, an input trigger judges nothing.
  TriggerCheck none({*parse_dump_trigger("input.handling_latency_dur > 3ms")},
                    SessionEvent{}, FrameOptions{});
  EXPECT_FALSE(none.check(raw_read(500, 10 * kMs, 3000, 1, 9 * kMs, 7)));
  EXPECT_FALSE(
      none.check(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000)));
  EXPECT_FALSE(none.check(span(3000, 8, 3000 * kMs, 3001 * kMs, 0, 0, 3000)));
}

// 70 slow events judged at once: one fires now, 64 wait for their turn,
// and the 5 oldest of the rest are let go, counted.
TEST(TriggerCheckInput, APileUpOfFiringsIsCountedNotLostInSilence) {
  SessionEvent session;
  session.has_input = true;
  TriggerCheck c({*parse_dump_trigger("input.handling_latency_dur > 3ms")},
                 session, FrameOptions{});
  for (uint64_t i = 0; i < 70; ++i) {
    const uint64_t t = (9 + 20 * i) * kMs;
    EXPECT_FALSE(c.check(raw_read(500, t + kMs, 3000, 1, t, 100 + i)));
    EXPECT_FALSE(
        c.check(span(3000, 100 + i, t, t + 5 * kMs, 0, LT_SPAN_INPUT, 3000)));
  }
  EXPECT_TRUE(c.check(span(3000, 999, 9000 * kMs, 9001 * kMs, 0, 0, 3000)));
  EXPECT_EQ(c.dropped(), 5u);
  size_t more = 0;
  while (c.advance(9002 * kMs)) ++more;
  EXPECT_EQ(more, 64u);
}

TEST(TriggerCheckInput, StagesAreTriggerMetrics) {
  for (int s = 0; s < kInputStages; ++s) {
    const std::string metric =
        "input." + std::string(input_stage_name(static_cast<InputStage>(s)));
    auto t = parse_dump_trigger(metric + " > 100ms");
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->cond.metric, metric);
  }
  EXPECT_FALSE(parse_dump_trigger("input.nosuch_dur > 1ms").ok());
}

TEST(InputAnalysisTest, RawReadOutsideDispatchesGoesToTheNextFlaggedOne) {
  InputAnalyzer an({});
  // seq 1: read inside span 7.
  an.consume(raw_read(500, 10 * kMs, 3000, 1, 9 * kMs, 7));
  an.consume(span(3000, 7, 9 * kMs, 14 * kMs, 0, LT_SPAN_INPUT, 3000));
  // seq 2: read between dispatches.
  an.consume(raw_read(500, 20 * kMs));
  // Not flagged, or flagged but nested, or another thread's: not it.
  an.consume(span(3000, 8, 21 * kMs, 22 * kMs, 0, 0, 3000));
  an.consume(span(3000, 10, 23 * kMs, 24 * kMs, 1, LT_SPAN_INPUT, 3000));
  an.consume(span(3001, 11, 23 * kMs, 24 * kMs, 0, LT_SPAN_INPUT, 3000));
  an.consume(span(3000, 9, 25 * kMs, 30 * kMs, 0, LT_SPAN_INPUT, 3000));
  // seq 3: read and never consumed.
  an.consume(raw_read(500, 40 * kMs));
  // Another raw channel numbers its own reads; a send is not input.
  IoEvent wr = raw_read(600, 41 * kMs);
  wr.op = LT_IO_SEND;
  an.consume(wr);
  an.consume(raw_read(600, 42 * kMs));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 4u);
  const InputEventInfo* r1 = find(a, 500, 1);
  const InputEventInfo* r2 = find(a, 500, 2);
  const InputEventInfo* r3 = find(a, 500, 3);
  const InputEventInfo* o1 = find(a, 600, 1);
  ASSERT_TRUE(r1 && r2 && r3 && o1);
  EXPECT_EQ(r1->finished_ns, 14 * kMs);
  EXPECT_EQ(r2->received_ns, 20 * kMs);
  EXPECT_EQ(r2->handling_start_ns, 25 * kMs);
  EXPECT_EQ(r2->handling_span_id, 9u);
  EXPECT_EQ(r2->finished_ns, 30 * kMs);
  EXPECT_EQ(r2->stage(InputStage::kWaitBeforeHandling), 5 * kMs);
  EXPECT_EQ(r2->stage(InputStage::kHandlingLatency), 10 * kMs);
  EXPECT_EQ(r3->finished_ns, 0u);
  EXPECT_EQ(o1->type, InputType::kBytes);
  EXPECT_EQ(o1->received_ns, 42 * kMs);
  ASSERT_EQ(a.channels.size(), 2u);
  EXPECT_EQ(a.channels[0].channel, 500u);
  EXPECT_EQ(a.channels[0].events, 3u);
  EXPECT_EQ(a.channels[0].unfinished, 1u);
  EXPECT_EQ(a.channels[1].channel, 600u);
  EXPECT_EQ(a.channels[1].events, 1u);
}

// ---- Blame.

constexpr uint64_t kBlame = 100 * kMs;

// An event sent at 100 ms, received at 250, handled in dispatch 9
// [251, 252).
InputEventInfo slow_event() {
  InputEventInfo e;
  e.channel = 200;
  e.peer = 100;
  e.seq = 1;
  e.pid = kAppPid;
  e.tid = kAppTid;
  e.sent_ns = 100 * kMs;
  e.received_ns = 250 * kMs;
  e.handling_start_ns = 251 * kMs;
  e.handling_span_id = 9;
  e.finished_ns = 252 * kMs;
  e.finish_received_ns = 253 * kMs;
  e.has_finish = true;
  return e;
}

TEST(InputBlameTest, TheDispatchRunningAtArrival) {
  std::vector<SpanEvent> spans = {span(kAppTid, 5, 50 * kMs, 250 * kMs),
                                  span(kAppTid, 9, 251 * kMs, 252 * kMs)};
  auto b = select_blame(slow_event(), spans, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->own_handler);
  EXPECT_EQ(b->arrival_ns, 100 * kMs);
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 5u);
  EXPECT_TRUE(b->chain[0].running_at_arrival);
  EXPECT_EQ(b->primary, 0u);
  EXPECT_EQ(b->waited_ns, 150 * kMs);
}

// A key that arrived as another stall was ending (1 ms before its end)
// and whose own handler then ran 120 ms: its own handling is to blame,
// not the 1 ms it waited.
TEST(InputBlameTest, AShortWaitThenASlowOwnHandlingIsHandledSlowly) {
  InputEventInfo e = slow_event();
  e.sent_ns = 100 * kMs;
  e.received_ns = 101 * kMs;
  e.handling_start_ns = 101 * kMs;
  e.finished_ns = 221 * kMs;
  std::vector<SpanEvent> spans = {span(kAppTid, 5, 0, 101 * kMs),
                                  span(kAppTid, 9, 101 * kMs, 221 * kMs)};
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->own_handler);
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 9u);
  // Waiting longer than its handling took: what it waited behind.
  e.sent_ns = 30 * kMs;
  e.finished_ns = 161 * kMs;
  spans[1] = span(kAppTid, 9, 101 * kMs, 161 * kMs);
  b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->own_handler);
  EXPECT_EQ(b->chain[0].span.span_id, 5u);
}

// A key handled slowly in GTK's event whose Python handler, nested in it,
// took nearly all of its time: the handler is named; a nested span with
// less of it (or on another thread) is not.
TEST(InputBlameTest, HandledSlowlyNamesTheHandlerThatHeldItsDispatch) {
  InputEventInfo e = slow_event();
  e.sent_ns = 100 * kMs;
  e.received_ns = 101 * kMs;
  e.handling_start_ns = 101 * kMs;
  e.finished_ns = 221 * kMs;
  std::vector<SpanEvent> spans = {
      span(kAppTid, 9, 101 * kMs, 221 * kMs),
      span(kAppTid, 10, 102 * kMs, 112 * kMs, 1),
      span(kAppTid, 11, 112 * kMs, 220 * kMs, 1),
      span(kAppTid + 1, 12, 101 * kMs, 221 * kMs, 2)};
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->own_handler);
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 11u);
  spans[2] = span(kAppTid, 11, 112 * kMs, 200 * kMs, 1);  // 73 %
  b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->chain[0].span.span_id, 9u);
}

TEST(InputBlameTest, AChainOfTwoNamesTheOneRunningAtArrival) {
  InputEventInfo e = slow_event();
  e.sent_ns = 120 * kMs;
  e.received_ns = 300 * kMs;
  e.handling_start_ns = 301 * kMs;
  e.finished_ns = 302 * kMs;
  // The second is longer, but the first was running when the event came.
  std::vector<SpanEvent> spans = {span(kAppTid, 6, 180 * kMs, 300 * kMs),
                                  span(kAppTid, 5, 100 * kMs, 180 * kMs)};
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->chain.size(), 2u);
  EXPECT_EQ(b->chain[0].span.span_id, 5u);  // time order
  EXPECT_EQ(b->chain[1].span.span_id, 6u);
  EXPECT_TRUE(b->chain[0].running_at_arrival);
  EXPECT_FALSE(b->chain[1].running_at_arrival);
  EXPECT_EQ(b->primary, 0u);
  EXPECT_EQ(b->waited_ns, 60 * kMs + 120 * kMs);
}

TEST(InputBlameTest, TheBriefsChainOfTwo) {
  // [100, 180) and [180, 260), arrival at 120, handled from 261.
  InputEventInfo e = slow_event();
  e.sent_ns = 120 * kMs;
  e.received_ns = 260 * kMs;
  e.handling_start_ns = 261 * kMs;
  e.finished_ns = 262 * kMs;
  std::vector<SpanEvent> spans = {span(kAppTid, 5, 100 * kMs, 180 * kMs),
                                  span(kAppTid, 6, 180 * kMs, 260 * kMs)};
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->chain.size(), 2u);
  EXPECT_EQ(b->primary, 0u);
  EXPECT_TRUE(b->chain[0].running_at_arrival);
  EXPECT_EQ(b->waited_ns, 140 * kMs);
}

TEST(InputBlameTest, NoneRunningAtArrivalNamesTheLongest) {
  InputEventInfo e = slow_event();
  e.sent_ns = 90 * kMs;
  e.received_ns = 300 * kMs;
  e.handling_start_ns = 301 * kMs;
  e.finished_ns = 302 * kMs;
  std::vector<SpanEvent> spans = {span(kAppTid, 5, 100 * kMs, 150 * kMs),
                                  span(kAppTid, 6, 150 * kMs, 300 * kMs)};
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->chain.size(), 2u);
  EXPECT_FALSE(b->chain[0].running_at_arrival);
  EXPECT_EQ(b->primary, 1u);
  EXPECT_EQ(b->waited_ns, 200 * kMs);
}

TEST(InputBlameTest, ANestedDispatchIsPartOfTheOneAroundIt) {
  // The nested one listed first, and one starting with its parent.
  std::vector<SpanEvent> spans = {
      span(kAppTid, 11, 60 * kMs, 200 * kMs, 1),
      span(kAppTid, 12, 50 * kMs, 70 * kMs, 1),
      span(kAppTid, 5, 50 * kMs, 250 * kMs, 0),
      span(kAppTid, 9, 251 * kMs, 252 * kMs),
  };
  auto b = select_blame(slow_event(), spans, kBlame);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 5u);
  EXPECT_EQ(b->waited_ns, 150 * kMs);
}

// A dispatch that is only a wrapper (GDK's event source around
// gtk_main_do_event): the one nested in it that holds nearly all of its
// time (90 %) is named, the deepest such.
TEST(InputBlameTest, AWrapperNamesTheDispatchInsideIt) {
  std::vector<SpanEvent> spans = {
      span(kAppTid, 5, 50 * kMs, 250 * kMs, 0),
      span(kAppTid, 6, 51 * kMs, 249 * kMs, 1),
      span(kAppTid, 7, 52 * kMs, 248 * kMs, 2),
      span(kAppTid, 9, 251 * kMs, 252 * kMs),
  };
  auto b = select_blame(slow_event(), spans, kBlame);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 7u);
  EXPECT_TRUE(b->chain[0].running_at_arrival);
}

TEST(InputBlameTest, TheHandlingDispatchItselfSlow) {
  InputEventInfo e = slow_event();
  e.sent_ns = 100 * kMs;
  e.received_ns = 100 * kMs + 500'000;
  e.handling_start_ns = 101 * kMs;
  e.finished_ns = 300 * kMs;
  std::vector<SpanEvent> spans = {span(kAppTid, 9, 101 * kMs, 301 * kMs)};
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->own_handler);
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 9u);
  EXPECT_FALSE(b->chain[0].running_at_arrival);
  EXPECT_EQ(b->primary, 0u);
  EXPECT_EQ(b->waited_ns, 0u);
}

// Slow, but every dispatch in the way was too short to record: nothing to
// name, and the whole wait is unattributed.
TEST(InputBlameTest, NoRecordedDispatchLeavesTheWholeWaitUnattributed) {
  auto b = select_blame(slow_event(), {}, kBlame);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->own_handler);
  EXPECT_TRUE(b->chain.empty());
  EXPECT_EQ(b->waited_ns, 0u);
  EXPECT_EQ(b->unattributed_ns, 151 * kMs);  // sent 100 -> handled 251
}

TEST(InputBlameTest, UnderTheThresholdIsNotBlamed) {
  std::vector<SpanEvent> spans = {span(kAppTid, 5, 50 * kMs, 250 * kMs)};
  // App latency 152 ms.
  EXPECT_FALSE(select_blame(slow_event(), spans, 153 * kMs).has_value());
  EXPECT_TRUE(select_blame(slow_event(), spans, 152 * kMs).has_value());
  // Never consumed: no latency, no blame.
  InputEventInfo e = slow_event();
  e.finished_ns = 0;
  EXPECT_FALSE(select_blame(e, spans, 1).has_value());
}

TEST(InputBlameTest, AnEnclosingNestedLoopDispatchIsNotBlamed) {
  // Dispatch 1 runs a nested loop [50, 400): inside it, dispatch 2 kept the
  // event waiting and dispatch 9 handled it. Dispatch 1 ends after the
  // handling started: it did not keep the event waiting.
  InputEventInfo e = slow_event();
  e.sent_ns = 120 * kMs;
  e.received_ns = 121 * kMs;
  std::vector<SpanEvent> spans = {
      span(kAppTid, 1, 50 * kMs, 400 * kMs, 0),
      span(kAppTid, 2, 100 * kMs, 250 * kMs, 1),
      span(kAppTid, 9, 251 * kMs, 252 * kMs, 1),
  };
  auto b = select_blame(e, spans, kBlame);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->chain.size(), 1u);
  EXPECT_EQ(b->chain[0].span.span_id, 2u);
  EXPECT_TRUE(b->chain[0].running_at_arrival);
  EXPECT_EQ(b->waited_ns, 130 * kMs);
}

TEST(InputBlameTest, ThroughTheAnalyzerOnlyTheReceivingThread) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;  // --slow-input 100ms
  opts.min_span_ns = 1 * kMs;
  InputAnalyzer an(opts);
  Bytes m = fixture::key(1, static_cast<int64_t>(99 * kMs));
  // Another thread of the app and the dispatcher itself were busy too.
  an.consume(span(kAppTid + 1, 5, 40 * kMs, 249 * kMs));
  an.consume(
      span(kDispatcherTid, 5, 60 * kMs, 240 * kMs, 0, 0, kDispatcherPid));
  an.consume(sent(kChanA, m, 100 * kMs));
  an.consume(span(kAppTid, 5, 50 * kMs, 250 * kMs));
  an.consume(received(kChanA, m, 250 * kMs));
  an.consume(finish_sent(kChanA, 1, 252 * kMs - 1000, 251 * kMs, 9));
  an.consume(span(kAppTid, 9, 251 * kMs, 252 * kMs));
  an.consume(finish_received(kChanA, 1, 253 * kMs));
  // A fast event on the same channel: no blame.
  Bytes m2 = fixture::key(2, static_cast<int64_t>(299 * kMs));
  an.consume(sent(kChanA, m2, 300 * kMs));
  an.consume(received(kChanA, m2, 301 * kMs));
  an.consume(finish_sent(kChanA, 2, 305 * kMs, 302 * kMs, 10));
  an.consume(finish_received(kChanA, 2, 306 * kMs));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 2u);
  const InputEventInfo& e = a.events[0];
  ASSERT_TRUE(e.blame.has_value());
  EXPECT_FALSE(e.blame->own_handler);
  ASSERT_EQ(e.blame->chain.size(), 1u);
  EXPECT_EQ(e.blame->chain[0].span.tid, kAppTid);
  EXPECT_EQ(e.blame->chain[0].span.pid, kAppPid);
  EXPECT_EQ(e.blame->chain[0].span.span_id, 5u);
  EXPECT_EQ(e.blame->chain[0].span.start_ns, 50 * kMs);
  EXPECT_TRUE(e.blame->chain[0].running_at_arrival);
  EXPECT_EQ(e.blame->waited_ns, 150 * kMs);
  EXPECT_FALSE(a.events[1].blame.has_value());
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].blamed, 1u);
}

TEST(InputBlameTest, ThroughTheAnalyzerShortSpansAreNotKept) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  opts.min_span_ns = 300 * kMs;  // the blocking dispatch is shorter
  InputAnalyzer an(opts);
  Bytes m = fixture::key(1, static_cast<int64_t>(99 * kMs));
  an.consume(sent(kChanA, m, 100 * kMs));
  an.consume(span(kAppTid, 5, 50 * kMs, 250 * kMs));
  an.consume(received(kChanA, m, 250 * kMs));
  an.consume(finish_sent(kChanA, 1, 252 * kMs, 251 * kMs, 9));
  an.consume(finish_received(kChanA, 1, 253 * kMs));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 1u);
  // Over the threshold, but nothing recorded to name.
  ASSERT_TRUE(a.events[0].blame.has_value());
  EXPECT_TRUE(a.events[0].blame->chain.empty());
  EXPECT_FALSE(a.events[0].blame->own_handler);
}

// One event on kChanA: sent at `t`, received 1 ms later, FINISHED sent
// from dispatch `span_id` (started at `handle`) at `done`, received 1 ms
// after.
std::vector<Event> event_at(uint32_t seq, uint64_t t, uint64_t handle,
                            uint64_t done, uint64_t span_id) {
  Bytes m = fixture::motion(seq, static_cast<int64_t>(t - kMs), 1);
  return {sent(kChanA, m, t), received(kChanA, m, t + kMs),
          finish_sent(kChanA, seq, done, handle, span_id),
          finish_received(kChanA, seq, done + kMs)};
}

void feed(InputAnalyzer& an, const std::vector<Event>& evs) {
  for (const Event& e : evs) an.consume(e);
}

TEST(InputGroupsTest, ByTheDispatchWaitedBehindThenByRuns) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  InputAnalyzer an(opts);
  // Three events arrive during a 200 ms stall (50..250 ms).
  std::vector<Event> evs;
  for (uint32_t i = 0; i < 3; ++i) {
    Bytes m = fixture::motion(1 + i, static_cast<int64_t>(99 * kMs), 1);
    evs.push_back(sent(kChanA, m, (100 + 10 * i) * kMs));
  }
  evs.push_back(span(kAppTid, 5, 50 * kMs, 250 * kMs));
  for (uint32_t i = 0; i < 3; ++i) {
    Bytes m = fixture::motion(1 + i, static_cast<int64_t>(99 * kMs), 1);
    uint64_t at = (251 + 3 * i) * kMs;
    evs.push_back(received(kChanA, m, at));
    evs.push_back(finish_sent(kChanA, 1 + i, at + kMs, at, 10 + i));
    evs.push_back(finish_received(kChanA, 1 + i, at + 2 * kMs));
  }
  // Two slow ones behind nothing recorded, one after the other.
  for (uint32_t i = 0; i < 2; ++i) {
    uint64_t t = (400 + 10 * i) * kMs;
    for (const Event& e :
         event_at(4 + i, t, t + 119 * kMs, t + 120 * kMs, 20 + i))
      evs.push_back(e);
  }
  // Two fast ones.
  for (uint32_t i = 0; i < 2; ++i) {
    uint64_t t = (700 + 10 * i) * kMs;
    for (const Event& e :
         event_at(6 + i, t, t + 2 * kMs, t + (2 + i) * kMs, 30 + i))
      evs.push_back(e);
  }
  feed(an, evs);
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.channels.size(), 1u);
  const std::vector<InputGroup>& w = a.channels[0].worst;
  ASSERT_EQ(w.size(), 3u);
  // Worst first: the stall's (its first event waited longest).
  EXPECT_EQ(w[0].events, 3u);
  EXPECT_EQ(w[0].seq_lo, 1u);
  EXPECT_EQ(w[0].seq_hi, 3u);
  EXPECT_EQ(w[0].worst.seq, 1u);
  EXPECT_EQ(w[0].first_arrival_ns, 100 * kMs);
  EXPECT_EQ(w[0].last_arrival_ns, 120 * kMs);
  ASSERT_TRUE(w[0].worst.blame.has_value());
  EXPECT_EQ(w[0].worst.blame->chain.at(w[0].worst.blame->primary).span.span_id,
            5u);
  EXPECT_EQ(w[1].events, 2u);
  EXPECT_EQ(w[1].seq_lo, 4u);
  EXPECT_EQ(*w[1].worst.app_latency(), 120 * kMs);
  ASSERT_TRUE(w[1].worst.blame.has_value());
  EXPECT_TRUE(w[1].worst.blame->chain.empty());
  EXPECT_EQ(w[2].events, 2u);
  EXPECT_EQ(w[2].seq_lo, 6u);
  EXPECT_EQ(w[2].seq_hi, 7u);
  EXPECT_FALSE(w[2].worst.blame.has_value());
  EXPECT_EQ(w[2].worst.seq, 7u);
}

TEST(InputListingTest, TheFirstBlamedThenTheFirstOthersAndEveryCount) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  opts.max_listed = 4;
  opts.max_timeline = 2;
  InputAnalyzer an(opts);
  std::vector<uint64_t> handling;
  for (uint32_t i = 1; i <= 10; ++i) {
    uint64_t t = i * 1000 * kMs;
    // Events 3, 5 and 8 are consumed 150 ms or more after they arrive.
    uint64_t lat = (i == 3 || i == 5 || i == 8) ? (150 + i) * kMs : i * kMs;
    feed(an, event_at(i, t, t + kMs, t + lat, 100 + i));
    handling.push_back(lat - kMs);  // received 1 ms after sent
  }
  InputAnalysis a = an.finish();
  EXPECT_EQ(a.total, 10u);
  EXPECT_EQ(a.blamed, 3u);
  std::vector<uint32_t> listed;
  for (const InputEventInfo& e : a.events) listed.push_back(e.seq);
  EXPECT_EQ(listed, (std::vector<uint32_t>{1, 3, 5, 8}));
  EXPECT_EQ(a.not_listed, 6u);
  // The slowest two, in order.
  ASSERT_EQ(a.timeline.size(), 2u);
  EXPECT_EQ(a.timeline[0].seq, 5u);
  EXPECT_EQ(a.timeline[1].seq, 8u);
  EXPECT_EQ(a.timeline_omitted, 8u);
  EXPECT_EQ(a.first_ns, 1000 * kMs);
  EXPECT_EQ(a.last_ns, 10000 * kMs + 11 * kMs);
  // Percentiles cover all ten.
  const Percentiles& h =
      a.channels.at(0)
          .stages[static_cast<size_t>(InputStage::kHandlingLatency)];
  EXPECT_EQ(h.count, 10u);
  EXPECT_EQ(h, exact_percentiles(handling));
}

TEST(InputListingTest, PercentilesStayExactWhenTheValuesGoToDisk) {
  InputOptions opts;
  opts.spill_buffer = 4;  // nearly every value goes to the temp file
  opts.max_listed = 3;
  InputAnalyzer an(opts);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> handling;
  for (uint32_t i = 1; i <= 500; ++i) {
    uint64_t t = i * 1000 * kMs;
    uint64_t lat = 2 * kMs + rng() % (50 * kMs);
    feed(an, event_at(i, t, t + kMs, t + lat, 100 + i));
    handling.push_back(lat - kMs);
  }
  InputAnalysis a = an.finish();
  EXPECT_TRUE(a.spill_error.empty()) << a.spill_error;
  EXPECT_EQ(a.events.size(), 3u);
  const Percentiles& h =
      a.channels.at(0)
          .stages[static_cast<size_t>(InputStage::kHandlingLatency)];
  EXPECT_EQ(h, exact_percentiles(handling));
}

TEST(InputBlameTest, AtMostMaxChainDispatchesAndAlwaysThePrimary) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  opts.max_chain = 3;
  InputAnalyzer an(opts);
  Bytes m = fixture::key(1, static_cast<int64_t>(99 * kMs));
  an.consume(sent(kChanA, m, 100 * kMs));
  // Running at arrival and short, then five longer ones.
  an.consume(span(kAppTid, 1, 95 * kMs, 102 * kMs));
  for (uint64_t i = 0; i < 5; ++i)
    an.consume(
        span(kAppTid, 2 + i, (110 + 30 * i) * kMs, (130 + 30 * i + i) * kMs));
  an.consume(received(kChanA, m, 260 * kMs));
  an.consume(finish_sent(kChanA, 1, 262 * kMs, 261 * kMs, 9));
  an.consume(finish_received(kChanA, 1, 263 * kMs));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 1u);
  ASSERT_TRUE(a.events[0].blame.has_value());
  const InputBlame& b = *a.events[0].blame;
  ASSERT_EQ(b.chain.size(), 3u);
  EXPECT_EQ(b.omitted, 3u);
  // In time order: the primary, then the two longest.
  EXPECT_EQ(b.chain[b.primary].span.span_id, 1u);
  EXPECT_EQ(b.primary, 0u);
  EXPECT_EQ(b.chain[1].span.span_id, 5u);
  EXPECT_EQ(b.chain[2].span.span_id, 6u);
  // The wait covers all six.
  EXPECT_EQ(b.waited_ns, 2 * kMs + (20 + 21 + 22 + 23 + 24) * kMs);
}

TEST(InputBlameTest, ThroughTheAnalyzerTheHandlingDispatchSeenAfterFinished) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  InputAnalyzer an(opts);
  Bytes m = fixture::key(1, static_cast<int64_t>(99 * kMs));
  an.consume(sent(kChanA, m, 100 * kMs));
  an.consume(received(kChanA, m, 101 * kMs));
  // FINISHED from inside dispatch 9 (102..300 ms), which reaches the stream
  // only when it returns, after the FINISHED was received.
  an.consume(finish_sent(kChanA, 1, 250 * kMs, 102 * kMs, 9));
  an.consume(finish_received(kChanA, 1, 251 * kMs));
  an.consume(span(kAppTid, 9, 102 * kMs, 300 * kMs));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 1u);
  ASSERT_TRUE(a.events[0].blame.has_value());
  EXPECT_TRUE(a.events[0].blame->own_handler);
  ASSERT_EQ(a.events[0].blame->chain.size(), 1u);
  EXPECT_EQ(a.events[0].blame->chain[0].span.span_id, 9u);
}

TEST(InputBlameTest, AnOldDispatchIsKeptWhileAnEventThatWaitedBehindItIsOpen) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  opts.reorder_ns = 1000 * kMs;
  InputAnalyzer an(opts);
  Bytes m = fixture::key(1, static_cast<int64_t>(999 * kMs));
  an.consume(sent(kChanA, m, 1000 * kMs));
  an.consume(span(kAppTid, 5, 500 * kMs, 10000 * kMs));
  an.consume(received(kChanA, m, 10001 * kMs));
  // Ten seconds of another thread's dispatches: enough to prune.
  for (uint64_t i = 0; i < 5000; ++i)
    an.consume(span(kAppTid + 1, 100 + i, (10000 + 2 * i) * kMs,
                    (10000 + 2 * i + 1) * kMs + 1));
  an.consume(finish_sent(kChanA, 1, 20500 * kMs, 20400 * kMs, 9));
  an.consume(finish_received(kChanA, 1, 20501 * kMs));
  InputAnalysis a = an.finish();
  EXPECT_EQ(a.spans_dropped, 0u);
  ASSERT_EQ(a.events.size(), 1u);
  ASSERT_TRUE(a.events[0].blame.has_value());
  ASSERT_FALSE(a.events[0].blame->chain.empty());
  EXPECT_EQ(a.events[0].blame->chain[0].span.span_id, 5u);
}

TEST(InputBlameTest, ASeqReusedWhileItsBlameWaitsForItsHandlerIsANewEvent) {
  InputOptions opts;
  opts.blame_ns = 100 * kMs;
  opts.reorder_ns = 1 * kMs;
  InputAnalyzer an(opts);
  Bytes m = fixture::key(1, static_cast<int64_t>(99 * kMs));
  an.consume(sent(kChanA, m, 100 * kMs));
  an.consume(received(kChanA, m, 101 * kMs));
  // Handled slowly in dispatch 9, which has not returned yet.
  an.consume(finish_sent(kChanA, 1, 250 * kMs, 102 * kMs, 9));
  an.consume(finish_received(kChanA, 1, 251 * kMs));
  // Time moves on (another channel): the first now waits for dispatch 9.
  an.consume(sent(kChanB, fixture::key(5, static_cast<int64_t>(279 * kMs)),
                  280 * kMs));
  // Seq 1 again, a new event, while the first still waits.
  Bytes again = fixture::key(1, static_cast<int64_t>(299 * kMs));
  an.consume(sent(kChanA, again, 300 * kMs));
  an.consume(received(kChanA, again, 301 * kMs));
  an.consume(span(kAppTid, 9, 102 * kMs, 400 * kMs));
  an.consume(finish_sent(kChanA, 1, 405 * kMs, 401 * kMs, 10));
  an.consume(finish_received(kChanA, 1, 406 * kMs));
  an.consume(span(kAppTid, 10, 401 * kMs, 410 * kMs));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 3u);  // and seq 5 on channel B
  EXPECT_EQ(a.duplicates, 0u);
  ASSERT_EQ(a.events[0].channel, kChanA.app);
  ASSERT_TRUE(a.events[0].blame.has_value());
  EXPECT_TRUE(a.events[0].blame->own_handler);
  ASSERT_EQ(a.events[1].channel, kChanA.app);
  EXPECT_EQ(a.events[1].sent_ns, 300 * kMs);
  EXPECT_EQ(a.events[1].finish_received_ns, 406 * kMs);
}

// --- X11 channels -------------------------------------------------------

// One X11 message as the kernel frames it.
lt_x11_msg x11_msg(uint8_t type, uint32_t time, uint32_t len = 32,
                   uint16_t evtype = 0) {
  lt_x11_msg m{};
  m.type = type;
  m.time = time;
  m.len = len;
  m.evtype = evtype;
  return m;
}

IoEvent x11_read(uint64_t ts, std::vector<lt_x11_msg> msgs) {
  IoEvent e = raw_read(700, ts, kAppTid);
  e.pid = kAppPid;
  e.chan = LT_CHAN_X11;
  e.head.fill(0);
  e.x11 = std::move(msgs);
  return e;
}

// gtk_main_do_event's span: keys type (GdkEventType) and time (ms).
SpanEvent gdk_span(uint64_t id, uint64_t start, uint64_t end, int type,
                   uint32_t time) {
  SpanEvent s = span(kAppTid, id, start, end);
  s.keys[0] = static_cast<uint32_t>(type);
  s.keys[1] = time;
  return s;
}

InputOptions gdk_options() {
  InputOptions o;
  ProbeDef::InputMatch m;
  m.type_key = 1;
  m.time_key = 2;
  m.kinds = {{3, "motion"}, {8, "key_press"}, {9, "key_release"}};
  o.display_dispatch[1] = m;
  return o;
}

// A release and the next press in one read, with a reply between them:
// two events, each consumed by the dispatch of its own type and time (not
// the first dispatch after the read), the reply counted and never blamed.
TEST(InputAnalysisTest, X11EventsAreMatchedToTheirOwnDispatch) {
  const uint64_t read_at = 1006 * kMs;
  InputAnalysis a = run({x11_read(read_at, {x11_msg(3, 1000), x11_msg(1, 0, 64),
                                            x11_msg(2, 1005)}),
                         gdk_span(1, 1007 * kMs, 1007 * kMs + 400'000, 9, 1000),
                         gdk_span(2, 1008 * kMs, 1200 * kMs, 8, 1005)},
                        gdk_options());
  ASSERT_EQ(a.events.size(), 2u);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].non_input, 1u);
  EXPECT_EQ(a.channels[0].keys, 2u);
  EXPECT_EQ(a.channels[0].unfinished, 0u);
  const InputEventInfo& rel = a.events[0];
  EXPECT_EQ(rel.type, InputType::kKeyRelease);
  EXPECT_EQ(rel.position, 0u);
  EXPECT_EQ(rel.received_ns, read_at);
  EXPECT_EQ(rel.event_time_ns, static_cast<int64_t>(1000 * kMs));
  EXPECT_EQ(rel.handling_start_ns, 1007 * kMs);
  EXPECT_EQ(rel.finished_ns, 1007 * kMs + 400'000);
  EXPECT_FALSE(rel.blame.has_value());
  const InputEventInfo& press = a.events[1];
  EXPECT_EQ(press.type, InputType::kKeyPress);
  EXPECT_EQ(press.position, 2u);
  EXPECT_EQ(press.handling_start_ns, 1008 * kMs);
  EXPECT_EQ(press.finished_ns, 1200 * kMs);
  // From the event's own time: 195 ms, handled slowly.
  ASSERT_TRUE(press.blame.has_value());
  EXPECT_EQ(press.blame->arrival_ns, 1005 * kMs);
  EXPECT_TRUE(press.blame->own_handler);
}

// A display connection that brought no input (replies, window events)
// is still the reading process's: the report names it, not "pid 0".
TEST(InputAnalysisTest, AConnectionWithoutInputIsItsReadersOwn) {
  IoEvent r = x11_read(1006 * kMs, {x11_msg(1, 0, 64), x11_msg(12, 0)});
  r.comm = "meld";
  InputAnalysis a = run({r}, gdk_options());
  EXPECT_TRUE(a.events.empty());
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].non_input, 2u);
  EXPECT_EQ(a.channels[0].pid, kAppPid);
  EXPECT_EQ(a.channels[0].comm, "meld");
}

// The batch: b's press handler stalls 120 ms; meanwhile b is
// released (1050) and a pressed (1100). One read after the stall brings
// both; the release is dispatched first, briefly, then the press. The
// press is consumed at the end of its own dispatch, never at the
// release's (an earlier end); each is blamed on the stall it waited
// behind, the stalled press on its own handler.
TEST(InputAnalysisTest, X11BatchAfterAStallEachConsumedByItsOwnDispatch) {
  const uint64_t stall_end = 1121 * kMs;
  const uint64_t rel_end = stall_end + 300'000, press_end = stall_end + 650'000;
  InputOptions o = gdk_options();
  o.blame_ns = 20 * kMs;
  InputAnalysis a =
      run({x11_read(1000 * kMs + 200'000, {x11_msg(2, 1000)}),
           gdk_span(1, 1000 * kMs + 400'000, stall_end, 8, 1000),
           x11_read(stall_end + 100'000,
                    {x11_msg(3, 1050), x11_msg(1, 0, 64), x11_msg(2, 1100)}),
           // The press's dispatch reaches the stream after the release's.
           gdk_span(2, stall_end + 150'000, rel_end, 9, 1050),
           gdk_span(3, stall_end + 350'000, press_end, 8, 1100)},
          o);
  ASSERT_EQ(a.events.size(), 3u);
  const InputEventInfo& stalled = a.events[0];
  EXPECT_EQ(stalled.finished_ns, stall_end);
  ASSERT_TRUE(stalled.blame.has_value());
  EXPECT_TRUE(stalled.blame->own_handler);
  const InputEventInfo& rel = a.events[1];
  EXPECT_EQ(rel.type, InputType::kKeyRelease);
  EXPECT_EQ(rel.finished_ns, rel_end);
  EXPECT_EQ(rel.handling_start_ns, stall_end + 150'000);
  ASSERT_TRUE(rel.blame.has_value());
  EXPECT_FALSE(rel.blame->own_handler);
  ASSERT_EQ(rel.blame->chain.size(), 1u);
  EXPECT_EQ(rel.blame->chain[0].span.span_id, 1u);
  EXPECT_TRUE(rel.blame->chain[0].running_at_arrival);
  const InputEventInfo& press = a.events[2];
  EXPECT_EQ(press.type, InputType::kKeyPress);
  EXPECT_EQ(press.position, 2u);
  EXPECT_EQ(press.received_ns, rel.received_ns);
  EXPECT_EQ(press.finished_ns, press_end);
  EXPECT_EQ(press.handling_start_ns, stall_end + 350'000);
  EXPECT_EQ(press.handling_span_id, 3u);
  ASSERT_TRUE(press.blame.has_value());
  ASSERT_FALSE(press.blame->chain.empty());
  EXPECT_EQ(press.blame->chain[press.blame->primary].span.span_id, 1u);
  for (const InputEventInfo& e : a.events) {
    EXPECT_FALSE(e.ambiguous);
    EXPECT_EQ(e.dispatches, 1u);
  }
  EXPECT_EQ(a.channels[0].ambiguous, 0u);
}

// Two presses of one batch with the same type and server time (two keys
// in one millisecond): either dispatch could be either's. Both are
// consumed, in order, and said to be ambiguous; the press after them (of
// another time) is not.
TEST(InputAnalysisTest, X11TwinsInOneBatchAreMarkedAmbiguous) {
  InputAnalysis a =
      run({x11_read(2001 * kMs,
                    {x11_msg(2, 2000), x11_msg(2, 2000), x11_msg(2, 2001)}),
           gdk_span(1, 2002 * kMs, 2003 * kMs, 8, 2000),
           gdk_span(2, 2004 * kMs, 2005 * kMs, 8, 2000),
           gdk_span(3, 2006 * kMs, 2007 * kMs, 8, 2001)},
          gdk_options());
  ASSERT_EQ(a.events.size(), 3u);
  EXPECT_TRUE(a.events[0].ambiguous);
  EXPECT_EQ(a.events[0].finished_ns, 2003 * kMs);
  EXPECT_TRUE(a.events[1].ambiguous);
  EXPECT_EQ(a.events[1].finished_ns, 2005 * kMs);
  EXPECT_FALSE(a.events[2].ambiguous);
  EXPECT_EQ(a.events[2].finished_ns, 2007 * kMs);
  for (const InputEventInfo& e : a.events) EXPECT_FALSE(e.coalesced);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].ambiguous, 2u);
  EXPECT_EQ(a.channels[0].unfinished, 0u);
}

// One event dispatched twice: a dispatch of it nested in another (seen
// first: it ends first), or dispatched again later. Consumption is the
// end of the last, never of the first; handling starts with the
// earliest. A dispatch of the same type with another time (synthesized)
// takes nothing.
TEST(InputAnalysisTest, X11EventDispatchedTwiceIsConsumedAtTheLastEnd) {
  SpanEvent inner = gdk_span(2, 3002 * kMs, 3003 * kMs, 8, 3000);
  inner.depth = 1;
  InputAnalysis a =
      run({x11_read(3001 * kMs, {x11_msg(2, 3000), x11_msg(3, 3000)}), inner,
           gdk_span(1, 3001 * kMs + 500'000, 3004 * kMs, 8, 3000),
           gdk_span(3, 3005 * kMs, 3006 * kMs, 9, 3000),
           gdk_span(4, 3007 * kMs, 3008 * kMs, 9, 3000),
           gdk_span(5, 3009 * kMs, 3010 * kMs, 9, 3009)},
          gdk_options());
  ASSERT_EQ(a.events.size(), 2u);
  const InputEventInfo& press = a.events[0];
  EXPECT_EQ(press.finished_ns, 3004 * kMs);
  EXPECT_EQ(press.handling_start_ns, 3001 * kMs + 500'000);
  EXPECT_EQ(press.handling_span_id, 1u);
  EXPECT_EQ(press.dispatches, 2u);
  const InputEventInfo& rel = a.events[1];
  EXPECT_EQ(rel.finished_ns, 3008 * kMs);
  EXPECT_EQ(rel.handling_start_ns, 3005 * kMs);
  EXPECT_EQ(rel.handling_span_id, 4u);
  EXPECT_EQ(rel.dispatches, 2u);
  EXPECT_FALSE(press.ambiguous);
  EXPECT_FALSE(rel.ambiguous);
}

// Motion compressed by the toolkit: the dispatch of the last motion passes
// over the two before it (coalesced, never consumed, not charged to it); a
// dispatch of another type consumes nothing; an event never dispatched
// stays unfinished.
TEST(InputAnalysisTest, X11MotionPassedOverIsCoalesced) {
  InputAnalysis a =
      run({x11_read(2003 * kMs,
                    {x11_msg(6, 2001), x11_msg(6, 2002), x11_msg(6, 2003)}),
           gdk_span(1, 2004 * kMs, 2005 * kMs, 2, 0),
           gdk_span(2, 2005 * kMs, 2006 * kMs, 3, 2003),
           x11_read(2010 * kMs, {x11_msg(2, 2009)})},
          gdk_options());
  ASSERT_EQ(a.events.size(), 4u);
  EXPECT_TRUE(a.events[0].coalesced);
  EXPECT_EQ(a.events[0].finished_ns, 0u);
  EXPECT_TRUE(a.events[1].coalesced);
  EXPECT_FALSE(a.events[2].coalesced);
  EXPECT_EQ(a.events[2].handling_start_ns, 2005 * kMs);
  EXPECT_FALSE(a.events[3].coalesced);
  EXPECT_EQ(a.events[3].finished_ns, 0u);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].coalesced, 2u);
  EXPECT_EQ(a.channels[0].unfinished, 3u);
  EXPECT_EQ(a.channels[0].motions, 3u);
}

// XInput 2 events are GenericEvents of at least 80 bytes; another
// extension's GenericEvent of the same evtype (Present's 32-byte ones) is
// not input.
TEST(InputAnalysisTest, X11GenericEventsAreInputOnlyAsXI2DeviceEvents) {
  InputAnalysis a = run({x11_read(3001 * kMs, {x11_msg(35, 3000, 120, 2),
                                               x11_msg(35, 3000, 32, 2),
                                               x11_msg(35, 3000, 120, 19)})},
                        gdk_options());
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.events[0].type, InputType::kKeyPress);
  EXPECT_EQ(a.events[1].type, InputType::kTouchUpdate);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].non_input, 1u);
}

// With no dispatch probe that handles display input (an X client that is
// not GTK's, traced with --input-peer auto), the events are final at once:
// received, never consumed; nothing waits for a match that cannot come.
TEST(InputAnalysisTest, X11EventsWithNothingToMatchThemAreFinalAtOnce) {
  InputAnalyzer an(InputOptions{});
  an.consume(x11_read(4001 * kMs, {x11_msg(2, 4000), x11_msg(3, 4000)}));
  an.consume(x11_read(4003 * kMs, {x11_msg(6, 4002)}));
  InputAnalysis a = an.finish();
  ASSERT_EQ(a.events.size(), 3u);
  for (const InputEventInfo& e : a.events) {
    EXPECT_EQ(e.finished_ns, 0u);
    EXPECT_FALSE(e.coalesced);
    EXPECT_FALSE(e.blame.has_value());
  }
  EXPECT_EQ(a.channels[0].unfinished, 3u);
}

// The X server's write to the client of x11_read (inode 700; its own end
// is 701).
IoEvent x11_write(uint64_t enter, int64_t bytes) {
  IoEvent e = raw_read(701, enter + 20'000, 99);
  e.pid = 99;
  e.comm = "Xvfb";
  e.enter_ns = enter;
  e.ts_ns = enter;
  e.peer_inode = 700;
  e.chan = LT_CHAN_X11_SERVER;
  e.op = LT_IO_SEND | LT_IO_IOV;
  e.bytes = bytes;
  e.head.fill(0);
  return e;
}

lt_x11_msg ending_at(lt_x11_msg m, uint32_t end) {
  m.end = end;
  return m;
}

// Send paired with receive by stream offset: at a read that drains the
// socket, the client has read all the server wrote; each event's last
// byte then lies in one write, whose entry is its send. Bytes moved before
// tracing (a read of 96 bytes, 32 of them written unseen) shift both
// counts alike.
TEST(InputAnalysisTest, X11SendsFoundByStreamOffset) {
  InputOptions o = gdk_options();
  std::vector<Event> evs = {
      x11_write(100 * kMs, 64),
      x11_read(101 * kMs, {ending_at(x11_msg(2, 100), 64),
                           ending_at(x11_msg(3, 100), 96)}),
      x11_write(200 * kMs, 32), x11_write(250 * kMs, 32),
      x11_read(300 * kMs, {ending_at(x11_msg(2, 200), 32),
                           ending_at(x11_msg(3, 250), 64)})};
  auto& first = std::get<IoEvent>(evs[1]);
  first.bytes = 96;
  first.frame_flags = LT_X11_REC_DRAINED;
  auto& second = std::get<IoEvent>(evs[4]);
  second.bytes = 64;
  second.frame_flags = LT_X11_REC_DRAINED;
  InputAnalysis a = run(evs, o);
  ASSERT_EQ(a.events.size(), 4u);
  EXPECT_EQ(a.events[0].sent_ns, 100 * kMs);
  EXPECT_EQ(a.events[1].sent_ns, 100 * kMs);
  EXPECT_EQ(a.events[2].sent_ns, 200 * kMs);
  EXPECT_EQ(a.events[3].sent_ns, 250 * kMs);
  EXPECT_EQ(a.events[2].stage(InputStage::kDispatchLatency), 100 * kMs);
  ASSERT_TRUE(a.events[3].stage(InputStage::kAgeAtDispatch).has_value());
  EXPECT_EQ(*a.events[3].stage(InputStage::kAgeAtDispatch), 0u);
}

// With no read yet that drained the socket, the counts are not aligned:
// no send is claimed.
TEST(InputAnalysisTest, X11NoSendBeforeTheStreamsAreAligned) {
  InputAnalysis a = run({x11_write(100 * kMs, 32),
                         x11_read(101 * kMs, {ending_at(x11_msg(2, 100), 32)})},
                        gdk_options());
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].sent_ns, 0u);
}

// --- Wayland channels ---------------------------------------------------

lt_wl_msg wl_msg(uint8_t kind, uint32_t time, uint32_t end, uint16_t index) {
  lt_wl_msg m{};
  m.kind = kind;
  m.time = time;
  m.end = end;
  m.len = 24;
  m.index = index;
  return m;
}

IoEvent wl_read(uint64_t ts, int64_t bytes, std::vector<lt_wl_msg> msgs,
                uint32_t other) {
  IoEvent e = raw_read(800, ts, kAppTid);
  e.pid = kAppPid;
  e.chan = LT_CHAN_WAYLAND;
  e.op = LT_IO_MSGHDR;
  e.bytes = bytes;
  e.head.fill(0);
  e.wl = std::move(msgs);
  e.wl_other = other;
  e.frame_flags = LT_WL_REC_DRAINED;
  return e;
}

// The compositor's write to the client of wl_read (inode 800).
IoEvent wl_write(uint64_t enter, int64_t bytes) {
  IoEvent e = x11_write(enter, bytes);
  e.comm = "compositor";
  e.inode = 801;
  e.peer_inode = 800;
  e.chan = LT_CHAN_WAYLAND_SERVER;
  e.op = LT_IO_SEND | LT_IO_MSGHDR;
  return e;
}

// A key's handler as a client's wl_keyboard listener: state (1 pressed)
// and time.
InputOptions wl_key_options() {
  InputOptions o;
  ProbeDef::InputMatch m;
  m.type_key = 1;
  m.time_key = 2;
  m.kinds = {{1, "key_press"}, {0, "key_release"}};
  o.display_dispatch[1] = m;
  return o;
}

// A press and its release in one read, with a modifiers event: two events
// matched to their own handlers (not to the first dispatch after the
// read), sent by the compositor's writes, the other message counted.
TEST(InputAnalysisTest, WaylandEventsAreMatchedAndSent) {
  InputAnalysis a = run({wl_write(500 * kMs, 28), wl_write(540 * kMs, 24),
                         wl_read(541 * kMs, 76,
                                 {wl_msg(LT_WL_KEY_PRESS, 500, 52, 1),
                                  wl_msg(LT_WL_KEY_RELEASE, 540, 76, 2)},
                                 1),
                         gdk_span(1, 542 * kMs, 700 * kMs, 1, 500),
                         gdk_span(2, 701 * kMs, 702 * kMs, 0, 540)},
                        wl_key_options());
  ASSERT_EQ(a.events.size(), 2u);
  ASSERT_EQ(a.channels.size(), 1u);
  EXPECT_EQ(a.channels[0].chan_kind, static_cast<uint32_t>(LT_CHAN_WAYLAND));
  EXPECT_EQ(a.channels[0].non_input, 1u);
  const InputEventInfo& press = a.events[0];
  EXPECT_EQ(press.type, InputType::kKeyPress);
  EXPECT_EQ(press.position, 1u);
  EXPECT_EQ(press.server_time_ms, 500u);
  EXPECT_EQ(press.event_time_ns, static_cast<int64_t>(500 * kMs));
  EXPECT_EQ(press.finished_ns, 700 * kMs);
  // The 24 bytes written before the writes seen (the modifiers) shift
  // both counts alike.
  EXPECT_EQ(press.sent_ns, 500 * kMs);
  const InputEventInfo& rel = a.events[1];
  EXPECT_EQ(rel.type, InputType::kKeyRelease);
  EXPECT_EQ(rel.handling_start_ns, 701 * kMs);
  EXPECT_EQ(rel.finished_ns, 702 * kMs);
  EXPECT_EQ(rel.sent_ns, 540 * kMs);
  // Waited behind the press's 158 ms handler, from its send.
  ASSERT_TRUE(rel.blame.has_value());
  EXPECT_EQ(rel.blame->arrival_ns, 540 * kMs);
  EXPECT_FALSE(rel.blame->own_handler);
}

// Every kind the kernel tells apart has its type.
TEST(InputAnalysisTest, WaylandKindsAreInputTypes) {
  std::vector<lt_wl_msg> msgs;
  const uint8_t kinds[] = {
      LT_WL_KEY_PRESS,      LT_WL_KEY_RELEASE, LT_WL_BUTTON_PRESS,
      LT_WL_BUTTON_RELEASE, LT_WL_MOTION,      LT_WL_AXIS,
      LT_WL_TOUCH_DOWN,     LT_WL_TOUCH_UP,    LT_WL_TOUCH_MOTION};
  for (uint16_t i = 0; i < std::size(kinds); ++i)
    msgs.push_back(wl_msg(kinds[i], 900, 24 * (i + 1u), i));
  InputAnalysis a = run({wl_read(901 * kMs, 24 * 9, msgs, 0)}, InputOptions{});
  ASSERT_EQ(a.events.size(), 9u);
  const InputType want[] = {InputType::kKeyPress,    InputType::kKeyRelease,
                            InputType::kButtonPress, InputType::kButtonRelease,
                            InputType::kMotion,      InputType::kScroll,
                            InputType::kTouchBegin,  InputType::kTouchEnd,
                            InputType::kTouchUpdate};
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(a.events[i].type, want[i]) << i;
}

TEST(InputAnalysisTest, X11ServerTimeToMonotonic) {
  // Same clock: the ms before the read.
  EXPECT_EQ(display_time_to_monotonic(5000, 5002 * kMs + 7),
            static_cast<int64_t>(5000 * kMs));
  // 32-bit ms wrap (every 49.7 days): the latest time with those bits.
  const uint64_t received = (0x100000000ull + 10) * kMs;
  EXPECT_EQ(display_time_to_monotonic(0xfffffff0u, received),
            static_cast<int64_t>((0x100000000ull - 16) * kMs));
  // A clock that is evidently another one (hours off): unknown.
  EXPECT_EQ(display_time_to_monotonic(5000, 50'000'000 * kMs), 0);
}

// Input to frame: events and frames fed as Analysis does (a frame span is
// told to frame() before consume()).
InputAnalysis run_with_frames(const std::vector<Event>& evs,
                              const std::vector<uint64_t>& frame_ids,
                              InputOptions opts = {}) {
  opts.frames = true;
  InputAnalyzer an(opts);
  for (const Event& e : evs) {
    const auto* sp = std::get_if<SpanEvent>(&e);
    if (sp && std::find(frame_ids.begin(), frame_ids.end(), sp->span_id) !=
                  frame_ids.end())
      an.frame(*sp);
    an.consume(e);
  }
  return an.finish();
}

// Consumed at 110 ms (event time 90): a frame that started before it is
// not its frame, the first one started after it is, a later one is not.
TEST(InputAnalysisTest, FrameEndIsTheFirstFrameStartedAfterConsumption) {
  std::vector<Event> evs = round_trip(kChanA, 1, 100 * kMs);
  evs.push_back(span(kAppTid, 70, 108 * kMs, 112 * kMs));
  evs.push_back(span(kAppTid, 71, 113 * kMs, 121 * kMs));
  evs.push_back(span(kAppTid, 72, 125 * kMs, 130 * kMs));
  InputAnalysis a = run_with_frames(evs, {70, 71, 72});
  EXPECT_TRUE(a.frames);
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.frame_end_ns, 121 * kMs);
  EXPECT_EQ(e.stage(InputStage::kConsumeToFrame), 11 * kMs);
  EXPECT_EQ(e.stage(InputStage::kTotalToFrame), 31 * kMs);
  EXPECT_EQ(a.last_ns, 121 * kMs);
  ASSERT_EQ(a.channels.size(), 1u);
  const Percentiles& p =
      a.channels[0].stages[static_cast<size_t>(InputStage::kTotalToFrame)];
  EXPECT_EQ(p.count, 1u);
  EXPECT_EQ(p.max, 31 * kMs);
  EXPECT_EQ(input_stage_name(InputStage::kConsumeToFrame),
            "consume_to_frame_dur");
  EXPECT_EQ(input_stage_name(InputStage::kTotalToFrame), "total_to_frame_dur");
}

// No frame started after it (one before, one of another thread, one still
// drawing when tracing stopped): none, and no frame stage.
TEST(InputAnalysisTest, NoFrameAfterConsumptionIsNone) {
  std::vector<Event> evs = round_trip(kChanA, 1, 100 * kMs);
  evs.push_back(span(kAppTid, 70, 104 * kMs, 109 * kMs));
  evs.push_back(span(kAppTid + 5, 71, 113 * kMs, 121 * kMs));
  SpanEvent drawing = span(kAppTid, 72, 115 * kMs, 140 * kMs);
  drawing.in_flight = true;
  evs.push_back(drawing);
  InputAnalysis a = run_with_frames(evs, {70, 71, 72});
  ASSERT_EQ(a.events.size(), 1u);
  const InputEventInfo& e = a.events[0];
  EXPECT_EQ(e.frame_end_ns, 0u);
  EXPECT_EQ(e.stage(InputStage::kConsumeToFrame), std::nullopt);
  EXPECT_EQ(e.stage(InputStage::kTotalToFrame), std::nullopt);
  EXPECT_EQ(a.channels[0]
                .stages[static_cast<size_t>(InputStage::kConsumeToFrame)]
                .count,
            0u);
  // Without frames traced there is no frame to wait for or show.
  InputAnalysis none = run(round_trip(kChanA, 1, 100 * kMs));
  EXPECT_FALSE(none.frames);
  EXPECT_EQ(none.events[0].frame_end_ns, 0u);
}

// An event past the reorder window waits for its thread's next frame, up
// to frame_wait_ns after its consumption; a frame later than that is not
// its frame.
TEST(InputAnalysisTest, FrameIsWaitedForUpToTheFrameWait) {
  InputOptions o;
  o.reorder_ns = 1 * kMs;
  o.frame_wait_ns = 100 * kMs;
  auto events = [](uint64_t frame_start) {
    std::vector<Event> evs = round_trip(kChanA, 1, 100 * kMs);
    // The thread drew before (it is a thread that draws frames), and the
    // stream moves on on another thread meanwhile.
    evs.insert(evs.begin(), span(kAppTid, 70, 50 * kMs, 55 * kMs));
    for (uint64_t t = 120; t < frame_start / kMs; t += 20)
      evs.push_back(span(kAppTid + 5, 80 + t, t * kMs, (t + 1) * kMs));
    evs.push_back(span(kAppTid, 71, frame_start, frame_start + 5 * kMs));
    return evs;
  };
  InputAnalysis soon = run_with_frames(events(180 * kMs), {70, 71}, o);
  ASSERT_EQ(soon.events.size(), 1u);
  EXPECT_EQ(soon.events[0].frame_end_ns, 185 * kMs);
  InputAnalysis late = run_with_frames(events(300 * kMs), {70, 71}, o);
  ASSERT_EQ(late.events.size(), 1u);
  EXPECT_EQ(late.events[0].frame_end_ns, 0u);
}

}  // namespace
}  // namespace looptrace
