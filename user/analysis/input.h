// Input-to-consumption latency: input-channel messages (IoEvents) paired by
// channel and seq into events, each with its stage timestamps, Perfetto's
// stage names (android_input_events), and the dispatches it waited behind.
// Pure: fed by any event stream (live, replayed or synthetic).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "analysis/histogram.h"
#include "trace/events.h"
#include "trace/input_message.h"

namespace looptrace {

// The measured stages, in pipeline order.
enum class InputStage {
  kAgeAtDispatch,       // sent - event_time: the event's age when dispatched
  kDispatchLatency,     // received - sent (Perfetto dispatch_latency_dur)
  kAgeAtReceive,        // received - event_time (app side only)
  kWaitBeforeHandling,  // handling dispatch start - received
  kHandlingLatency,     // finished - received (Perfetto handling_latency_dur)
  kAckLatency,          // finish_received - finished (Perfetto ack_latency_dur)
  kTotalLatency,        // finish_received - sent (Perfetto total_latency_dur)
  kCount,
};
constexpr int kInputStages = static_cast<int>(InputStage::kCount);

// "dispatch_latency_dur" etc.
std::string_view input_stage_name(InputStage s);

// A dispatch an input event waited behind (or was handled in).
struct BlameSpan {
  SpanEvent span;
  bool running_at_arrival = false;  // on the loop thread when it arrived
};

struct InputBlame {
  // Handled slowly in its own dispatch rather than kept waiting.
  bool own_handler = false;
  uint64_t arrival_ns = 0;  // sent, or received if the sender is untraced
  uint64_t waited_ns = 0;   // of [arrival, handling start) covered by chain
  // The rest of [arrival, handling start): dispatches too short to record,
  // and the loop's own work between them.
  uint64_t unattributed_ns = 0;
  // Outermost dispatches that ran on the loop thread between the event's
  // arrival and the start of its handling, in time order; or the handling
  // dispatch itself (own_handler).
  std::vector<BlameSpan> chain;
  // The one to name: running at arrival, else the longest.
  size_t primary = 0;
};

struct InputEventInfo {
  uint64_t channel = 0;  // the app end's socket inode
  uint64_t peer = 0;     // the sender's end, 0 if unknown
  uint32_t chan_kind = LT_CHAN_INPUT;
  uint32_t layout = 0;  // LT_LAYOUT_*; 0 for raw channels
  uint32_t seq = 0;
  InputType type = InputType::kKey;
  // The app (receiver) and the dispatcher (sender), 0 if unseen.
  uint32_t pid = 0, tid = 0;
  std::string comm;
  uint32_t sender_pid = 0, sender_tid = 0;
  // CLOCK_MONOTONIC; 0 = not seen.
  int64_t event_time_ns = 0;  // from the message itself
  uint64_t sent_ns = 0;
  uint64_t received_ns = 0;
  uint64_t finished_ns = 0;  // FINISHED sent; raw: end of consuming dispatch
  uint64_t finish_received_ns = 0;
  uint64_t handling_start_ns = 0;  // start of the dispatch that consumed it
  uint64_t handling_span_id = 0;
  uint32_t handling_probe = 0;
  bool has_finish = false;  // a FINISHED message was seen
  bool handled = false;
  int64_t consume_time_ns = 0;  // from FINISHED (current layout)
  std::optional<InputBlame> blame;

  // A stage's duration, if both its ends were seen.
  std::optional<uint64_t> stage(InputStage s) const;
  // Arrival at the app: sent if the sender was traced, else received.
  uint64_t arrival_ns() const { return sent_ns ? sent_ns : received_ns; }
  // Consumed: FINISHED sent (or the consuming dispatch's end).
  uint64_t consumed_ns() const { return finished_ns; }
  // Arrival to consumption: what the app made the user wait.
  std::optional<uint64_t> app_latency() const;
};

struct InputChannelSummary {
  uint64_t channel = 0;
  uint64_t peer = 0;
  uint32_t chan_kind = LT_CHAN_INPUT;
  uint32_t layout = 0;
  uint32_t pid = 0;
  std::string comm;
  uint32_t sender_pid = 0;
  uint64_t events = 0;  // KEY and MOTION (or raw reads)
  uint64_t keys = 0, motions = 0;
  uint64_t unfinished = 0;  // never consumed while traced
  uint64_t blamed = 0;      // over the threshold, with a blame
  std::array<Percentiles, kInputStages> stages{};
};

struct InputAnalysis {
  std::vector<InputEventInfo> events;  // by channel, then first-seen order
  std::vector<InputChannelSummary> channels;
  // Seqs whose messages matched no event (counted once per seq): a
  // FINISHED for an event sent before tracing began, or one whose event
  // records were lost.
  uint64_t unmatched = 0;
  uint64_t duplicates = 0;      // a seq seen twice in the same role
  uint64_t other_messages = 0;  // FOCUS, CAPTURE, DRAG, TIMELINE, TOUCH_MODE
  uint64_t legacy_messages = 0;
  uint64_t undecodable = 0;  // records whose bytes did not decode
};

struct InputOptions {
  // Events whose app latency is at least this get a blame.
  uint64_t blame_ns = Thresholds::kSlowInputNs;
  // Spans kept for blame: at least this long (or consuming raw input).
  uint64_t min_span_ns = 1'000'000;
};

class InputAnalyzer {
 public:
  explicit InputAnalyzer(InputOptions options);

  void consume(const Event& ev);
  // Call once, after the last event (spans still in flight included).
  InputAnalysis finish();

 private:
  using ChanSeq = std::pair<uint64_t, uint32_t>;
  using ThreadKey = std::pair<uint32_t, uint32_t>;

  void on_io(const IoEvent& io);
  void on_raw(const IoEvent& io);
  void on_span(const SpanEvent& sp);
  InputEventInfo& open_event(uint64_t channel, uint32_t seq);

  InputOptions options_;
  std::vector<InputEventInfo> events_;
  std::map<ChanSeq, size_t> open_;  // not yet FINISHED-received
  std::map<uint64_t, uint32_t> raw_seq_;
  // Raw reads waiting for their consuming dispatch, per thread.
  std::map<ThreadKey, std::vector<size_t>> raw_pending_;
  std::map<ThreadKey, std::vector<SpanEvent>> spans_;
  InputAnalysis stats_;
};

// Picks the blame of `ev` among `spans` (one loop thread's, any order),
// or nullopt when it is under `blame_ns` or nothing can be named.
std::optional<InputBlame> select_blame(const InputEventInfo& ev,
                                       const std::vector<SpanEvent>& spans,
                                       uint64_t blame_ns);

}  // namespace looptrace
