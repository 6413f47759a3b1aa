// Input-to-consumption latency: input-channel messages (IoEvents) paired by
// channel and seq into events, each with its stage timestamps, Perfetto's
// stage names (android_input_events), and the dispatches it waited behind.
// Pure: fed by any event stream (live, replayed or synthetic).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/histogram.h"
#include "analysis/list_limits.h"
#include "analysis/value_spill.h"
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
  // With frames traced (analysis/frames.h): to the end of the first frame
  // its thread started after consuming it (a frame end, not a present).
  kConsumeToFrame,  // frame end - finished
  kTotalToFrame,    // frame end - event time (arrival without one)
  // Android 12+: the present time of the frame that showed it, as the app
  // sent it back (a TIMELINE message).
  kConsumeToPresent,  // present - finished
  kTotalToPresent,    // present - event time
  kCount,
};
constexpr int kInputStages = static_cast<int>(InputStage::kCount);

// "dispatch_latency_dur" etc.
std::string_view input_stage_name(InputStage s);

// A display server's event time (ms, 32 bits: X11's server time,
// Wayland's event time) as CLOCK_MONOTONIC ns, given when the event was
// read; 0 if the server's clock is evidently another one.
int64_t display_time_to_monotonic(uint32_t server_ms, uint64_t received_ns);

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
  // dispatch itself (own_handler). Each is named by what ran in it: a
  // nested span holding 90 % of its time (a Python handler in GTK's event).
  std::vector<BlameSpan> chain;
  // Dispatches left out of chain (InputOptions::max_chain): the longest
  // are kept, with the primary one, in time order.
  size_t omitted = 0;
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
  // Display channels (X11, Wayland): the server's timestamp (ms, its clock) and
  // the message's place in the read that brought it; coalesced: a later event
  // of its kind was handled and it never was (motion compression, a key
  // the toolkit swallowed).
  uint32_t server_time_ms = 0;
  uint32_t position = 0;
  bool coalesced = false;
  // Another event of its kind and server time waited for a dispatch with
  // it: which dispatch was whose is not known (matched in order).
  bool ambiguous = false;
  // Dispatches of its kind and time that handled it (an outer one around
  // the first, an input method's re-dispatch): consumed at the last one's
  // end, handled from the first one's start.
  uint32_t dispatches = 0;
  // Where its last byte is in the client's stream (bytes read since the
  // channel was first seen), and the latest read before it that drained
  // the socket (its return, the stream offset then): to find the server's
  // write that sent it.
  uint64_t stream_end = 0;
  uint64_t anchor_ns = 0, anchor_off = 0;
  int64_t consume_time_ns = 0;  // from FINISHED (current layout)
  // The end of the first frame its thread (pid, tid) started at or after
  // finished_ns; 0 if none was seen (no frame came, or frames not traced).
  uint64_t frame_end_ns = 0;
  // Android channels (current layout): its eventId, and the graphics
  // timeline the app sent back for it in a TIMELINE message (Android
  // 12+): when the GPU completed, and when the display presented, the
  // frame that showed it; 0: none seen.
  int32_t event_id = 0;
  uint64_t gpu_completed_ns = 0;
  uint64_t present_ns = 0;
  std::optional<InputBlame> blame;

  // A stage's duration, if both its ends were seen.
  std::optional<uint64_t> stage(InputStage s) const;
  // Arrival at the app: sent if the sender was traced, else (a display
  // event) the event's own time, else received.
  uint64_t arrival_ns() const {
    if (sent_ns) return sent_ns;
    if (is_display_chan(chan_kind) && event_time_ns > 0 &&
        static_cast<uint64_t>(event_time_ns) <= received_ns)
      return static_cast<uint64_t>(event_time_ns);
    return received_ns;
  }
  // Consumed: FINISHED sent (or the consuming dispatch's end).
  uint64_t consumed_ns() const { return finished_ns; }
  // Arrival to consumption: what the app made the user wait.
  std::optional<uint64_t> app_latency() const;
};

// Events of one channel that are one entry of its "worst" list: those
// that waited behind the same slow dispatch, or that were consumed one
// after another with no slow dispatch to name (a queue draining after a
// stall), the slow ones apart from the others.
struct InputGroup {
  InputEventInfo worst;  // the longest from arrival to consumption
  uint64_t events = 0;
  uint32_t seq_lo = UINT32_MAX, seq_hi = 0;
  uint64_t first_arrival_ns = UINT64_MAX, last_arrival_ns = 0;
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
  uint64_t coalesced = 0;   // of those, passed over for a later one
  uint64_t ambiguous = 0;   // matched in order among twins (display)
  uint64_t non_input = 0;   // display messages that are not input events
  uint64_t blamed = 0;      // over the threshold, with a blame
  std::array<Percentiles, kInputStages> stages{};
  // Consumed events, grouped; the worst groups first, at most
  // InputOptions::max_worst.
  std::vector<InputGroup> worst;
};

// Counts, percentiles and groups cover every event; of the events
// themselves only those the reports list are kept, so that a long run's
// memory stays bounded (docs/looptrace.md, "Memory").
struct InputAnalysis {
  uint64_t total = 0;   // every event
  uint64_t blamed = 0;  // of them, with a blame
  // The listed events, by channel, then first-seen order: all of them, or
  // the first max_listed blamed ones and then the first unblamed ones.
  std::vector<InputEventInfo> events;
  uint64_t not_listed = 0;  // total - events.size()
  // The max_timeline slowest to be consumed (never consumed first), in the
  // same order; and how many others there were.
  std::vector<InputEventInfo> timeline;
  uint64_t timeline_omitted = 0;
  // Earliest and latest stage timestamp of any event, 0 if none.
  uint64_t first_ns = 0, last_ns = 0;
  std::vector<InputChannelSummary> channels;
  // Seqs whose messages matched no event (counted once per seq): a
  // FINISHED for an event sent before tracing began, or one whose event
  // records were lost.
  uint64_t unmatched = 0;
  uint64_t duplicates = 0;  // a seq seen twice in the same role
  // FOCUS, CAPTURE, DRAG, TOUCH_MODE; a TIMELINE of no event seen live
  uint64_t other_messages = 0;
  uint64_t legacy_messages = 0;
  uint64_t undecodable = 0;  // records whose bytes did not decode
  // X11 reads not framed (tracing began inside a message; the stream
  // went out of step) and times the framing was lost; Wayland's the same.
  uint64_t unframed_reads = 0;
  uint64_t framing_lost = 0;
  uint64_t wl_unframed_reads = 0;
  uint64_t wl_framing_lost = 0;
  // Dispatches dropped from the blame window (InputOptions::max_spans).
  uint64_t spans_dropped = 0;
  // Frames were traced (a probe with the frame role): frame_end_ns and the
  // frame stages mean something; without, they are not shown.
  bool frames = false;
  // Set when the temp file for stage durations failed: they were kept in
  // memory instead (exact, unbounded).
  std::string spill_error;
};

struct InputOptions {
  // Events whose app latency is at least this get a blame.
  uint64_t blame_ns = Thresholds::kSlowInputNs;
  // Spans kept for blame: at least this long (or consuming raw input).
  uint64_t min_span_ns = 1'000'000;
  // What the analysis keeps (analysis/list_limits.h): listed events, the
  // timeline's, dispatches per blame, worst groups per channel.
  size_t max_listed = limits::kJsonMaxInputEvents;
  size_t max_timeline = limits::kMaxTimelineInputs;
  size_t max_chain = limits::kJsonMaxRelated;
  size_t max_worst = limits::kMaxWorstGroups;
  // Dispatches kept per thread for blames still to come; beyond it the
  // oldest go (InputAnalysis::spans_dropped).
  size_t max_spans = 100'000;
  // How far the stream may run ahead of a dispatch that an event still to
  // be seen could have waited behind (records reach the ring buffer in
  // roughly time order).
  uint64_t reorder_ns = 2'000'000'000;
  // Stage values held in memory per channel and stage before they go to
  // an unlinked temp file.
  size_t spill_buffer = 8192;
  // Dispatch probes that handle display input events, by probe id.
  std::map<uint32_t, ProbeDef::InputMatch> display_dispatch;
  // Called with each event as it becomes final: a live consumer's view
  // (the monitor's metrics).
  std::function<void(const InputEventInfo&)> on_final;
  // Keep of final events their count only, not their blames, stage values,
  // groups or lists (which grow with the run): for an on_final consumer
  // that runs for days. finish() then lists no events and no channels.
  bool stream_only = false;
  // Frames are traced (InputAnalyzer::frame is told of them): an event
  // consumed on a thread that draws frames waits for its frame, at most
  // frame_wait_ns past its consumption, before it is final.
  bool frames = false;
  uint64_t frame_wait_ns = 5'000'000'000;
  // On a channel whose app sends TIMELINE messages, an event waits this
  // long past its consumption for its own, before it is final.
  uint64_t timeline_wait_ns = 2'000'000'000;
  // Frames kept per thread for events still to be consumed.
  size_t max_frames = 4096;
};

// The options a run's probes and thresholds set: the input blame
// threshold, the shortest span blame can name (slow ones cross the ring
// buffer), and the dispatch probes that handle display input.
InputOptions input_options(const std::vector<ProbeDef>& probes,
                           const Thresholds& thresholds);

class InputAnalyzer {
 public:
  explicit InputAnalyzer(InputOptions options);
  ~InputAnalyzer();

  void consume(const Event& ev);
  // A span that is a frame (analysis/frames.h), told before consume(ev)
  // of the same span: the next frame of the events consumed before it.
  void frame(const SpanEvent& s);
  // The stream's clock moved on to now_ns with no record (a quiet
  // system; the live source's clock): events complete since are final
  // once it is reorder_ns past them, as if a record had come.
  void advance(uint64_t now_ns);
  // Process pid exited: its events complete so far are final now (no
  // frame, no later record of it will come); the others stay open.
  void process_gone(uint32_t pid);
  // Input events seen so far, each once, when its first message or read
  // came: at the end, InputAnalysis::total.
  uint64_t events_seen() const { return next_idx_; }
  // Events not final yet: waiting for their consumption, acknowledgement
  // or the stream to move on (never consumed: until finish()).
  size_t pending() const { return live_.size(); }
  // Call once, after the last event (spans still in flight included).
  InputAnalysis finish();

 private:
  using ChanSeq = std::pair<uint64_t, uint32_t>;
  using ThreadKey = std::pair<uint32_t, uint32_t>;
  using SpanKey = std::tuple<uint32_t, uint32_t, uint64_t>;
  using OrderKey = std::pair<uint64_t, uint64_t>;  // channel, first seen
  struct Channel;

  void on_io(const IoEvent& io);
  // A message of an Android InputChannel (an event or its FINISHED).
  void on_input_channel(const IoEvent& io);
  void on_raw(const IoEvent& io);
  void on_x11(const IoEvent& io);
  void on_wayland(const IoEvent& io);
  void note_reader(Channel& ch, const IoEvent& io);
  void on_display_server(const IoEvent& io);
  void find_display_send(InputEventInfo& e);
  struct DisplayStream;
  // A display read's start (its stream offset before it), its flags
  // counted; the stream of the client's end.
  DisplayStream& display_read(const IoEvent& io, uint64_t* read_from);
  // One input event of a display read: type, server time, where it ends in
  // the read, its place among the read's messages.
  void add_display_event(const IoEvent& io, const DisplayStream& stream,
                         uint64_t read_from, InputType type, uint32_t server_ms,
                         uint32_t end, uint32_t position);
  void match_display(const SpanEvent& sp, const ProbeDef::InputMatch& m);
  void consume_display(uint64_t idx, const SpanEvent& sp);
  void redispatch(const SpanEvent& sp, InputType kind, uint32_t time);
  Channel& channel(uint64_t inode);
  void on_span(const SpanEvent& sp);
  uint64_t open_event(uint64_t channel, uint32_t seq);
  // An event that is consumed and acknowledged: final once the stream has
  // moved on far enough.
  void done(uint64_t idx);
  void settle_ready();
  // An event that can change no more: finalize it, or wait for its
  // handling dispatch if its blame may be that.
  void settle(uint64_t idx);
  void release_pending(const ThreadKey& tk, const SpanEvent& sp);
  void finalize(uint64_t idx);
  void add_to_group(Channel& c, const InputEventInfo& e);
  void list(uint64_t idx, InputEventInfo&& e);
  void prune_spans();
  void note_time(uint64_t ns) { now_ns_ = std::max(now_ns_, ns); }
  // The end of the first frame of e's thread that started at or after its
  // consumption, 0 if none seen.
  uint64_t next_frame_end(const InputEventInfo& e) const;
  // Whether e, consumed on a thread that draws frames, may still see its
  // frame come.
  bool awaits_frame(const InputEventInfo& e) const;
  // A TIMELINE message: the graphics timeline of an event of its channel.
  void on_timeline(const IoEvent& io, const InputMessageInfo& m);
  // Whether e, on a channel that sends TIMELINEs, may still get its own.
  bool awaits_timeline(const InputEventInfo& e) const;

  InputOptions options_;
  uint64_t next_idx_ = 0;
  // Events that may still change, by first-seen order.
  std::map<uint64_t, InputEventInfo> live_;
  std::map<ChanSeq, uint64_t> open_;  // by seq, until finalized
  std::deque<uint64_t> settling_;     // done, in the order they were
  std::set<uint64_t> settling_set_;
  std::map<uint64_t, uint32_t> raw_seq_;
  // Raw reads waiting for their consuming dispatch, per thread.
  std::map<ThreadKey, std::vector<uint64_t>> raw_pending_;
  // Display input events waiting for the dispatch that handles them, per
  // thread, in arrival order.
  std::map<ThreadKey, std::deque<uint64_t>> display_pending_;
  // Display input events consumed per thread, still open: a later
  // dispatch of the same event moves their consumption.
  std::map<ThreadKey, std::deque<uint64_t>> display_consumed_;
  // A display connection's two byte counts: what the client read, what
  // the server wrote (each write: its entry, return, and the count after).
  struct DisplayWrite {
    uint64_t enter_ns, exit_ns, begin_off, end_off;
  };
  struct DisplayStream {
    uint64_t read_off = 0;
    uint64_t anchor_ns = 0, anchor_off = 0;  // 0: no draining read yet
    uint64_t write_off = 0;
    std::deque<DisplayWrite> writes;
  };
  std::map<uint64_t, DisplayStream> display_streams_;  // by client inode
  // Consumed events whose blame may be their own handling dispatch, not
  // yet seen, per thread.
  std::map<ThreadKey, std::vector<uint64_t>> pending_blame_;
  std::map<ThreadKey, std::vector<SpanEvent>> spans_;
  // Frames per thread (start, end), by arrival.
  std::map<ThreadKey, std::deque<std::pair<uint64_t, uint64_t>>> frames_;
  // Live events of Android channels by (channel, eventId), for TIMELINE;
  // and the channels whose app has sent one.
  std::map<std::pair<uint64_t, int32_t>, uint64_t> by_event_id_;
  std::set<uint64_t> timeline_channels_;
  size_t spans_since_prune_ = 0;
  uint64_t now_ns_ = 0;
  std::unique_ptr<SpillFile> spill_;
  std::map<uint64_t, std::unique_ptr<Channel>> channels_;
  // The listed events (InputAnalysis::events) still in the running.
  std::map<OrderKey, InputEventInfo> listed_blamed_, listed_unblamed_;
  // The timeline's: latency (inverted: never consumed first), order.
  using TimelineKey = std::tuple<uint64_t, uint64_t, uint64_t>;
  std::map<TimelineKey, InputEventInfo> timeline_;
  InputAnalysis stats_;
};

// Picks the blame of `ev` among `spans` (one loop thread's, any order),
// or nullopt when it is under `blame_ns` or nothing can be named.
std::optional<InputBlame> select_blame(const InputEventInfo& ev,
                                       const std::vector<SpanEvent>& spans,
                                       uint64_t blame_ns);

}  // namespace looptrace
