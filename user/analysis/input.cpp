#include "analysis/input.h"

#include <algorithm>
#include <type_traits>
#include <variant>

namespace looptrace {
namespace {

uint64_t span_end(const SpanEvent& s) { return s.start_ns + s.duration_ns; }

// An X11 message that is an input event: its kind. Core events 2-6, and
// XInput 2's device events (a GenericEvent of at least the 80 bytes of
// xXIDeviceEvent, evtypes as the core ones, and touches 18-20); the
// extension's opcode is the server's choice, so the size tells XI2 apart
// from other extensions' GenericEvents of those evtypes.
std::optional<InputType> x11_input_type(const lt_x11_msg& m) {
  uint32_t t = m.type;
  if (m.type == LT_X11_GENERIC) {
    if (m.len < 80) return std::nullopt;
    t = m.evtype;
  }
  switch (t) {
    case 2:
      return InputType::kKeyPress;
    case 3:
      return InputType::kKeyRelease;
    case 4:
      return InputType::kButtonPress;
    case 5:
      return InputType::kButtonRelease;
    case 6:
      return InputType::kMotion;
  }
  if (m.type == LT_X11_GENERIC) {
    if (t == 18) return InputType::kTouchBegin;
    if (t == 19) return InputType::kTouchUpdate;
    if (t == 20) return InputType::kTouchEnd;
  }
  return std::nullopt;
}

// A Wayland input event's type.
InputType wl_input_type(uint8_t kind) {
  switch (kind) {
    case LT_WL_KEY_PRESS:
      return InputType::kKeyPress;
    case LT_WL_KEY_RELEASE:
      return InputType::kKeyRelease;
    case LT_WL_BUTTON_PRESS:
      return InputType::kButtonPress;
    case LT_WL_BUTTON_RELEASE:
      return InputType::kButtonRelease;
    case LT_WL_TOUCH_DOWN:
      return InputType::kTouchBegin;
    case LT_WL_TOUCH_UP:
      return InputType::kTouchEnd;
    case LT_WL_TOUCH_MOTION:
      return InputType::kTouchUpdate;
    case LT_WL_AXIS:
      return InputType::kScroll;
    default:
      return InputType::kMotion;
  }
}

}  // namespace

// Display input events waiting per thread for their dispatch, at most.
constexpr size_t kMaxDisplayPending = 4096;
// Consumed display events per thread that a later dispatch of the same
// event may still claim, at most.
constexpr size_t kMaxDisplayConsumed = 64;
// A display server's writes to one client kept to find sends in, at most.
constexpr size_t kMaxDisplayWrites = 65536;

int64_t display_time_to_monotonic(uint32_t server_ms, uint64_t received_ns) {
  // The server's clock in ms, 32 bits: the latest time with those low bits
  // not after the read (a little after: clocks read at different moments).
  // Xvfb and Xorg read CLOCK_MONOTONIC, as Wayland compositors do (libinput's
  // times); a server whose clock is not that is seen far off, and its times
  // are not used.
  const uint64_t received_ms = received_ns / 1'000'000;
  const int32_t behind =
      static_cast<int32_t>(static_cast<uint32_t>(received_ms) - server_ms);
  if (behind < -1000 || behind > 3'600'000) return 0;
  const int64_t ms = static_cast<int64_t>(received_ms) - behind;
  return ms > 0 ? ms * 1'000'000 : 0;
}

InputOptions input_options(const std::vector<ProbeDef>& probes,
                           const Thresholds& thresholds) {
  InputOptions o;
  o.blame_ns = thresholds.slow_input_ns;
  // Blame can name only spans that crossed the ring buffer: slow ones.
  o.min_span_ns = std::min(thresholds.slow_ns[LT_ROLE_DISPATCH],
                           thresholds.slow_ns[LT_ROLE_IDLE]);
  for (const ProbeDef& p : probes)
    if (p.input && p.role == LT_ROLE_DISPATCH)
      o.display_dispatch[p.id] = *p.input;
  return o;
}

std::string_view input_stage_name(InputStage s) {
  switch (s) {
    case InputStage::kAgeAtDispatch:
      return "age_at_dispatch_dur";
    case InputStage::kDispatchLatency:
      return "dispatch_latency_dur";
    case InputStage::kAgeAtReceive:
      return "age_at_receive_dur";
    case InputStage::kWaitBeforeHandling:
      return "wait_before_handling_dur";
    case InputStage::kHandlingLatency:
      return "handling_latency_dur";
    case InputStage::kAckLatency:
      return "ack_latency_dur";
    case InputStage::kTotalLatency:
      return "total_latency_dur";
    case InputStage::kConsumeToFrame:
      return "consume_to_frame_dur";
    case InputStage::kTotalToFrame:
      return "total_to_frame_dur";
    case InputStage::kConsumeToPresent:
      return "consume_to_present_dur";
    case InputStage::kTotalToPresent:
      return "total_to_present_dur";
    case InputStage::kCount:
      break;
  }
  return "?";
}

std::optional<uint64_t> InputEventInfo::stage(InputStage s) const {
  auto diff = [](uint64_t from, uint64_t to) -> std::optional<uint64_t> {
    if (from == 0 || to == 0) return std::nullopt;
    return to > from ? to - from : 0;
  };
  uint64_t et = event_time_ns > 0 ? static_cast<uint64_t>(event_time_ns) : 0;
  switch (s) {
    case InputStage::kAgeAtDispatch:
      return diff(et, sent_ns);
    case InputStage::kDispatchLatency:
      return diff(sent_ns, received_ns);
    case InputStage::kAgeAtReceive:
      return diff(et, received_ns);
    case InputStage::kWaitBeforeHandling:
      return diff(received_ns, handling_start_ns);
    case InputStage::kHandlingLatency:
      return diff(received_ns, finished_ns);
    case InputStage::kAckLatency:
      return diff(finished_ns, finish_received_ns);
    case InputStage::kTotalLatency:
      return diff(sent_ns, finish_received_ns);
    case InputStage::kConsumeToFrame:
      return diff(finished_ns, frame_end_ns);
    case InputStage::kTotalToFrame:
      return diff(et ? et : arrival_ns(), frame_end_ns);
    case InputStage::kConsumeToPresent:
      return diff(finished_ns, present_ns);
    case InputStage::kTotalToPresent:
      return diff(et ? et : arrival_ns(), present_ns);
    case InputStage::kCount:
      break;
  }
  return std::nullopt;
}

std::optional<uint64_t> InputEventInfo::app_latency() const {
  uint64_t a = arrival_ns();
  if (a == 0 || finished_ns == 0) return std::nullopt;
  return finished_ns > a ? finished_ns - a : 0;
}

namespace {

// Dispatches that ran after the event arrived (at `a`) and ended before its
// handling began (at `h`): the loop was busy with them instead. In start
// order, outer ones first.
std::vector<const SpanEvent*> ran_instead(const InputEventInfo& ev,
                                          const std::vector<SpanEvent>& spans,
                                          uint64_t a, uint64_t h) {
  std::vector<const SpanEvent*> cand;
  for (const SpanEvent& s : spans) {
    if (s.role != LT_ROLE_DISPATCH && s.role != LT_ROLE_IDLE) continue;
    if (ev.handling_span_id && s.span_id == ev.handling_span_id) continue;
    if (s.start_ns < h && span_end(s) > a && span_end(s) <= h)
      cand.push_back(&s);
  }
  std::sort(cand.begin(), cand.end(),
            [](const SpanEvent* x, const SpanEvent* y) {
              return x->start_ns != y->start_ns ? x->start_ns < y->start_ns
                                                : x->depth < y->depth;
            });
  return cand;
}

// What ran in `outer`: the deepest span of `cand` nested in it that holds
// nearly all of its time (90 %), the outer ones wrappers (GDK's event
// source around gtk_main_do_event around a Python handler); else `outer`.
const SpanEvent* specific(const SpanEvent* outer,
                          const std::vector<const SpanEvent*>& cand) {
  const SpanEvent* best = outer;
  for (const SpanEvent* s : cand)
    if (s->tid == outer->tid && s->depth > best->depth &&
        s->start_ns >= outer->start_ns && span_end(*s) <= span_end(*outer) &&
        s->duration_ns * 10 >= outer->duration_ns * 9)
      best = s;
  return best;
}

// Outermost only: a nested dispatch is part of the one around it (a nested
// main loop's), unless it is what ran in it (specific).
std::vector<BlameSpan> outermost(const std::vector<const SpanEvent*>& cand,
                                 uint64_t a) {
  std::vector<BlameSpan> chain;
  uint64_t covered_to = 0;
  for (const SpanEvent* s : cand) {
    if (!chain.empty() && span_end(*s) <= covered_to) continue;
    BlameSpan bs;
    bs.span = *specific(s, cand);
    bs.running_at_arrival = bs.span.start_ns <= a && a < span_end(bs.span);
    chain.push_back(std::move(bs));
    covered_to = std::max(covered_to, span_end(*s));
  }
  return chain;
}

// How long the event waited behind `b.chain` between arrival (`a`) and
// handling (`h`), how long behind nothing named, and which dispatch of the
// chain to name first: the one running at arrival, else the longest.
void weigh_chain(InputBlame& b, uint64_t a, uint64_t h) {
  uint64_t waited = 0, upto = a;
  for (const BlameSpan& bs : b.chain) {
    uint64_t from = std::max(upto, bs.span.start_ns);
    uint64_t to = std::min(h, span_end(bs.span));
    if (to > from) waited += to - from;
    upto = std::max(upto, to);
  }
  b.waited_ns = waited;
  b.unattributed_ns = h > a && h - a > waited ? h - a - waited : 0;
  size_t best = 0;
  for (size_t i = 0; i < b.chain.size(); ++i) {
    if (b.chain[i].running_at_arrival) {
      best = i;
      break;
    }
    if (b.chain[i].span.duration_ns > b.chain[best].span.duration_ns) best = i;
  }
  b.primary = best;
}

}  // namespace

std::optional<InputBlame> select_blame(const InputEventInfo& ev,
                                       const std::vector<SpanEvent>& spans,
                                       uint64_t blame_ns) {
  std::optional<uint64_t> lat = ev.app_latency();
  if (!lat || *lat < blame_ns) return std::nullopt;
  InputBlame b;
  b.arrival_ns = ev.arrival_ns();
  const uint64_t a = b.arrival_ns;
  const uint64_t h =
      ev.handling_start_ns ? ev.handling_start_ns : std::max(ev.received_ns, a);
  const SpanEvent* own = nullptr;
  for (const SpanEvent& s : spans)
    if (ev.handling_span_id && s.span_id == ev.handling_span_id) own = &s;
  b.chain = outermost(ran_instead(ev, spans, a, h), a);
  // What ran in between is to blame, unless the event's own handling took
  // longer than all of its wait: then that is what was slow (a key that
  // arrived as another stall ended, and stalled itself).
  if (!b.chain.empty() && (own == nullptr || own->duration_ns <= h - a)) {
    weigh_chain(b, a, h);
    return b;
  }
  if (own != nullptr) {
    // Named by what ran in it: the Python handler inside GTK's event.
    std::vector<const SpanEvent*> inside;
    for (const SpanEvent& s : spans)
      if (s.depth > own->depth && s.start_ns >= own->start_ns &&
          span_end(s) <= span_end(*own) &&
          (s.role == LT_ROLE_DISPATCH || s.role == LT_ROLE_IDLE))
        inside.push_back(&s);
    b.chain.assign(1, BlameSpan{*specific(own, inside), false});
    b.own_handler = true;
    b.waited_ns = 0;
    b.unattributed_ns = 0;
    return b;
  }
  // Over the threshold, but no recorded dispatch to name: the whole wait
  // was behind dispatches too short to record.
  b.unattributed_ns = h > a ? h - a : 0;
  return b;
}

// Per channel: what is summed over every event as it is finalized.
struct InputAnalyzer::Channel {
  InputChannelSummary summary;
  std::vector<ValueSpill> values;  // per stage
  // Worst groups: by the dispatch they waited behind, and runs of events
  // with none to name (the one still open last), the closed ones trimmed
  // to the worst.
  std::map<SpanKey, InputGroup> named;
  std::vector<InputGroup> runs;
  enum Kind { kNamed, kUnnamed, kUnblamed } prev = kNamed;
};

InputAnalyzer::InputAnalyzer(InputOptions options)
    : options_(options), spill_(std::make_unique<SpillFile>()) {}

InputAnalyzer::~InputAnalyzer() = default;

void InputAnalyzer::consume(const Event& ev) {
  if (const auto* io = std::get_if<IoEvent>(&ev)) {
    note_time(io->ts_ns);
    on_io(*io);
  } else if (const auto* sp = std::get_if<SpanEvent>(&ev)) {
    if (!sp->in_flight) note_time(span_end(*sp));
    on_span(*sp);
  } else {
    return;
  }
  settle_ready();
}

uint64_t InputAnalyzer::open_event(uint64_t channel, uint32_t seq) {
  auto [it, fresh] = open_.try_emplace({channel, seq}, next_idx_);
  if (fresh) {
    InputEventInfo& e = live_[next_idx_++];
    e.channel = channel;
    e.seq = seq;
  }
  return it->second;
}

namespace {

// The channel an input channel's message belongs to (the app's end of the
// socket) and the other end; nullopt for a message that is neither an
// event nor its FINISHED.
std::optional<std::pair<uint64_t, uint64_t>> message_ends(
    const InputMessageInfo& m, const IoEvent& io) {
  const bool send = io.is_send();
  // Events go dispatcher -> app: the app's end names the channel.
  if (m.is_event())
    return send ? std::pair(io.peer_inode, io.inode)
                : std::pair(io.inode, io.peer_inode);
  if (m.type == InputType::kFinished)
    return send ? std::pair(io.inode, io.peer_inode)
                : std::pair(io.peer_inode, io.inode);
  return std::nullopt;
}

// What the message `m`, sent or received in `io`, says about its event:
// its kind, who handles it, who sent it, how it was finished.
void note_message(InputEventInfo& e, const InputMessageInfo& m,
                  const IoEvent& io) {
  const bool send = io.is_send();
  e.layout = m.layout;
  if (m.is_event()) {
    e.type = m.type;
    e.event_time_ns = m.event_time_ns;
    e.event_id = m.event_id;
  }
  const bool app_side = m.is_event() != send;  // receives events, sends ACKs
  if (app_side) {
    if (e.pid == 0 || (m.is_event() && !send)) {
      e.pid = io.pid;
      e.tid = io.tid;
      e.comm = io.comm;
    }
  } else if (e.sender_pid == 0) {
    e.sender_pid = io.pid;
    e.sender_tid = io.tid;
  }
  if (m.type != InputType::kFinished) return;
  e.has_finish = true;
  if (!send) {
    if (!e.handled) e.handled = m.handled;
    return;
  }
  e.handled = m.handled;
  e.consume_time_ns = m.consume_time_ns;
  if (io.depth > 0) {
    e.handling_start_ns = io.span_start_ns;
    e.handling_span_id = io.span_id;
    e.handling_probe = io.span_probe;
  }
}

}  // namespace

void InputAnalyzer::on_io(const IoEvent& io) {
  if (io.chan == LT_CHAN_RAW) {
    on_raw(io);
    return;
  }
  if (io.chan == LT_CHAN_X11) {
    on_x11(io);
    return;
  }
  if (io.chan == LT_CHAN_WAYLAND) {
    on_wayland(io);
    return;
  }
  if (is_display_server_chan(io.chan)) {
    on_display_server(io);
    return;
  }
  on_input_channel(io);
}

void InputAnalyzer::on_input_channel(const IoEvent& io) {
  std::optional<InputMessageInfo> m =
      decode_input_message(io.head.data(), io.head.size(), io.bytes);
  if (!m) {
    ++stats_.undecodable;
    return;
  }
  if (m->layout == LT_LAYOUT_LEGACY) ++stats_.legacy_messages;
  if (m->type == InputType::kTimeline) {
    on_timeline(io, *m);
    return;
  }
  const bool send = io.is_send();
  std::optional<std::pair<uint64_t, uint64_t>> ends = message_ends(*m, io);
  if (!ends) {
    ++stats_.other_messages;
    return;
  }
  auto [channel, peer] = *ends;
  if (channel == 0 || m->seq == 0) {
    ++stats_.unmatched;
    return;
  }
  // The field this message fills; a seq whose event was already consumed
  // starts a new event (seq numbers may be reused), anything else twice is
  // a duplicate.
  auto slot = [&](InputEventInfo& e) -> uint64_t& {
    if (m->is_event()) return send ? e.sent_ns : e.received_ns;
    return send ? e.finished_ns : e.finish_received_ns;
  };
  uint64_t idx = open_event(channel, m->seq);
  InputEventInfo* e = &live_.at(idx);
  if (slot(*e) != 0) {
    bool consumed = e->has_finish || e->finish_received_ns != 0;
    if (!m->is_event() || !consumed) {
      ++stats_.duplicates;
      return;
    }
    open_.erase({channel, m->seq});
    done(idx);
    idx = open_event(channel, m->seq);
    e = &live_.at(idx);
  }
  slot(*e) = io.ts_ns;
  if (e->peer == 0) e->peer = peer;
  note_message(*e, *m, io);
  if (m->is_event() && m->layout == LT_LAYOUT_CURRENT)
    by_event_id_[{channel, m->event_id}] = idx;
  // Done when each side that was seen at all has finished its part: the
  // app sent FINISHED, the sender received it. (An untraced side never
  // will.)
  const bool app_done = e->received_ns == 0 || e->finished_ns != 0;
  const bool sender_done = e->sent_ns == 0 || e->finish_received_ns != 0;
  if (e->has_finish && app_done && sender_done) done(idx);
}

void InputAnalyzer::advance(uint64_t now_ns) {
  note_time(now_ns);
  settle_ready();
}

void InputAnalyzer::process_gone(uint32_t pid) {
  std::vector<uint64_t> now;
  std::erase_if(settling_, [&](uint64_t idx) {
    auto it = live_.find(idx);
    if (it == live_.end() || it->second.pid != pid) return false;
    now.push_back(idx);
    return true;
  });
  for (uint64_t idx : now) {
    settling_set_.erase(idx);
    settle(idx);
  }
  // Their handling dispatch will not come either.
  for (auto it = pending_blame_.begin(); it != pending_blame_.end();) {
    if (it->first.first != pid) {
      ++it;
      continue;
    }
    std::vector<uint64_t> idxs = std::move(it->second);
    it = pending_blame_.erase(it);
    for (uint64_t idx : idxs)
      if (live_.count(idx)) finalize(idx);
  }
}

void InputAnalyzer::done(uint64_t idx) {
  if (settling_set_.insert(idx).second) settling_.push_back(idx);
}

void InputAnalyzer::settle_ready() {
  // Records from several CPUs reach the stream a little out of order: an
  // event is final once the stream is reorder_ns past its last stage.
  while (!settling_.empty()) {
    uint64_t idx = settling_.front();
    auto it = live_.find(idx);
    if (it != live_.end()) {
      const InputEventInfo& e = it->second;
      uint64_t last = std::max(
          {e.sent_ns, e.received_ns, e.finished_ns, e.finish_received_ns});
      if (last + options_.reorder_ns > now_ns_) return;
      if (awaits_frame(e) || awaits_timeline(e)) return;
    }
    settling_.pop_front();
    settling_set_.erase(idx);
    if (it != live_.end()) settle(idx);
  }
}

void InputAnalyzer::frame(const SpanEvent& s) {
  // A frame still drawing when tracing stopped has no end to give.
  if (s.unfinished()) return;
  auto& v = frames_[{s.pid, s.tid}];
  v.emplace_back(s.start_ns, span_end(s));
  if (v.size() > options_.max_frames) v.pop_front();
}

uint64_t InputAnalyzer::next_frame_end(const InputEventInfo& e) const {
  if (e.finished_ns == 0) return 0;
  auto it = frames_.find({e.pid, e.tid});
  if (it == frames_.end()) return 0;
  // Records of one thread arrive by their end, so nearly by start; the
  // earliest start is taken all the same.
  const std::pair<uint64_t, uint64_t>* best = nullptr;
  for (const auto& f : it->second)
    if (f.first >= e.finished_ns && (!best || f.first < best->first)) best = &f;
  return best ? best->second : 0;
}

void InputAnalyzer::on_timeline(const IoEvent& io, const InputMessageInfo& m) {
  // The app sends it back to the dispatcher, as it does FINISHED: the
  // app's end names the channel.
  const uint64_t channel = io.is_send() ? io.inode : io.peer_inode;
  auto it = by_event_id_.find({channel, m.event_id});
  auto lit = it == by_event_id_.end() ? live_.end() : live_.find(it->second);
  if (channel == 0 || lit == live_.end()) {
    ++stats_.other_messages;  // an event not seen, or already final
    return;
  }
  timeline_channels_.insert(channel);
  InputEventInfo& e = lit->second;
  // Both sides may be traced: the first seen holds. A time not yet known
  // to the app is -1 or 0.
  if (e.present_ns == 0 && m.present_ns > 0)
    e.present_ns = static_cast<uint64_t>(m.present_ns);
  if (e.gpu_completed_ns == 0 && m.gpu_completed_ns > 0)
    e.gpu_completed_ns = static_cast<uint64_t>(m.gpu_completed_ns);
  // consume() notes the time and settles what is ready, as for any record.
}

bool InputAnalyzer::awaits_timeline(const InputEventInfo& e) const {
  if (e.present_ns != 0 || e.finished_ns == 0) return false;
  if (!timeline_channels_.count(e.channel)) return false;
  return now_ns_ < e.finished_ns + options_.timeline_wait_ns;
}

bool InputAnalyzer::awaits_frame(const InputEventInfo& e) const {
  if (!options_.frames || e.finished_ns == 0) return false;
  if (!frames_.count({e.pid, e.tid})) return false;
  if (now_ns_ >= e.finished_ns + options_.frame_wait_ns) return false;
  return next_frame_end(e) == 0;
}

void InputAnalyzer::on_raw(const IoEvent& io) {
  if (io.is_send()) return;
  uint64_t idx = next_idx_++;
  InputEventInfo& e = live_[idx];
  e.channel = io.inode;
  e.peer = io.peer_inode;
  e.chan_kind = LT_CHAN_RAW;
  e.seq = ++raw_seq_[io.inode];
  e.type = InputType::kBytes;
  e.pid = io.pid;
  e.tid = io.tid;
  e.comm = io.comm;
  e.received_ns = io.ts_ns;
  if (io.depth > 0) {
    e.handling_start_ns = io.span_start_ns;
    e.handling_span_id = io.span_id;
    e.handling_probe = io.span_probe;
  }
  raw_pending_[{io.pid, io.tid}].push_back(idx);
}

InputAnalyzer::Channel& InputAnalyzer::channel(uint64_t inode) {
  std::unique_ptr<Channel>& cp = channels_[inode];
  if (!cp) {
    cp = std::make_unique<Channel>();
    cp->summary.channel = inode;
    for (int s = 0; s < kInputStages; ++s)
      cp->values.emplace_back(spill_.get(), options_.spill_buffer);
  }
  return *cp;
}

void InputAnalyzer::on_display_server(const IoEvent& io) {
  // The server's write to a client: the client's end names the stream.
  if (!io.is_send() || io.peer_inode == 0 || io.bytes <= 0) return;
  DisplayStream& s = display_streams_[io.peer_inode];
  const uint64_t begin = s.write_off;
  s.write_off += static_cast<uint64_t>(io.bytes);
  s.writes.push_back({io.enter_ns, io.exit_ns, begin, s.write_off});
  // Bounded: an event's send is found within the last writes (they are
  // looked up within the reorder window of its read).
  if (s.writes.size() > kMaxDisplayWrites)
    s.writes.erase(s.writes.begin(),
                   s.writes.begin() + static_cast<long>(kMaxDisplayWrites / 2));
}

// The server's write that sent e's last byte. At a read that drained the
// socket, the client had read every byte the server had written: the two
// counts differ by a constant from there on (their starts differ by what
// moved before tracing).
void InputAnalyzer::find_display_send(InputEventInfo& e) {
  auto it = display_streams_.find(e.channel);
  if (it == display_streams_.end() || e.anchor_ns == 0 || e.stream_end == 0)
    return;
  const std::deque<DisplayWrite>& w = it->second.writes;
  if (w.empty()) return;
  // Written by the anchor: the writes that had returned by then.
  auto after = std::upper_bound(
      w.begin(), w.end(), e.anchor_ns,
      [](uint64_t t, const DisplayWrite& x) { return t < x.exit_ns; });
  if (after == w.begin()) return;  // the server's writes were not seen yet
  const uint64_t written = std::prev(after)->end_off;
  const uint64_t last = e.stream_end - 1 + written - e.anchor_off;
  auto cover = std::upper_bound(
      w.begin(), w.end(), last,
      [](uint64_t off, const DisplayWrite& x) { return off < x.end_off; });
  // Not among the writes seen (written before them, or not yet seen), or
  // after the read that got it: the counts are out of step.
  if (cover == w.end() || cover->begin_off > last) return;
  if (cover->enter_ns == 0 || cover->enter_ns > e.received_ns) return;
  e.sent_ns = cover->enter_ns;
}

// One read's flags, whichever the framing: the bits are the same.
static_assert(LT_WL_REC_UNFRAMED == LT_X11_REC_UNFRAMED &&
              LT_WL_REC_LOST == LT_X11_REC_LOST &&
              LT_WL_REC_DRAINED == LT_X11_REC_DRAINED);

InputAnalyzer::DisplayStream& InputAnalyzer::display_read(const IoEvent& io,
                                                          uint64_t* read_from) {
  DisplayStream& stream = display_streams_[io.inode];
  *read_from = stream.read_off;
  stream.read_off += static_cast<uint64_t>(io.bytes);
  if (io.frame_flags & LT_X11_REC_DRAINED) {
    stream.anchor_ns = io.exit_ns;
    stream.anchor_off = stream.read_off;
  }
  const bool wl = io.chan == LT_CHAN_WAYLAND;
  if (io.frame_flags & LT_X11_REC_UNFRAMED)
    ++(wl ? stats_.wl_unframed_reads : stats_.unframed_reads);
  if (io.frame_flags & LT_X11_REC_LOST)
    ++(wl ? stats_.wl_framing_lost : stats_.framing_lost);
  Channel& ch = channel(io.inode);
  ch.summary.chan_kind = io.chan;
  if (ch.summary.peer == 0) ch.summary.peer = io.peer_inode;
  return stream;
}

void InputAnalyzer::add_display_event(const IoEvent& io,
                                      const DisplayStream& stream,
                                      uint64_t read_from, InputType type,
                                      uint32_t server_ms, uint32_t end,
                                      uint32_t position) {
  uint64_t idx = next_idx_++;
  InputEventInfo& e = live_[idx];
  e.channel = io.inode;
  e.peer = io.peer_inode;
  e.chan_kind = io.chan;
  e.seq = ++raw_seq_[io.inode];
  e.type = type;
  e.pid = io.pid;
  e.tid = io.tid;
  e.comm = io.comm;
  e.received_ns = io.exit_ns;
  e.server_time_ms = server_ms;
  e.position = position;
  e.event_time_ns = display_time_to_monotonic(server_ms, io.exit_ns);
  e.stream_end = read_from + end;
  e.anchor_ns = stream.anchor_ns;
  e.anchor_off = stream.anchor_off;
  // No dispatch probe says which event it handles: it cannot be matched
  // (its receive is all there is to know).
  if (options_.display_dispatch.empty()) {
    done(idx);
    return;
  }
  std::deque<uint64_t>& q = display_pending_[{io.pid, io.tid}];
  q.push_back(idx);
  // Events the loop never handled (not the toolkit's, or swallowed) must
  // not pile up: the oldest are final, unconsumed.
  if (q.size() > kMaxDisplayPending) {
    done(q.front());
    q.pop_front();
  }
}

// The process reading a display connection owns it, whether or not any
// input came through it.
void InputAnalyzer::note_reader(Channel& ch, const IoEvent& io) {
  if (ch.summary.pid != 0) return;
  ch.summary.pid = io.pid;
  ch.summary.comm = io.comm;
}

void InputAnalyzer::on_x11(const IoEvent& io) {
  if (io.is_send()) return;  // the client's requests
  uint64_t read_from = 0;
  DisplayStream& stream = display_read(io, &read_from);
  Channel& ch = channel(io.inode);
  note_reader(ch, io);
  for (size_t i = 0; i < io.x11.size(); ++i) {
    const lt_x11_msg& m = io.x11[i];
    std::optional<InputType> type = x11_input_type(m);
    if (!type) {
      ++ch.summary.non_input;  // replies, errors, window events: never blamed
      continue;
    }
    add_display_event(io, stream, read_from, *type, m.time, m.end,
                      static_cast<uint32_t>(i));
  }
}

void InputAnalyzer::on_wayland(const IoEvent& io) {
  // The client's requests are framed in the kernel, never recorded.
  if (io.is_send()) return;
  uint64_t read_from = 0;
  DisplayStream& stream = display_read(io, &read_from);
  Channel& ch = channel(io.inode);
  note_reader(ch, io);
  ch.summary.non_input += io.wl_other;
  for (const lt_wl_msg& m : io.wl)
    add_display_event(io, stream, read_from, wl_input_type(m.kind), m.time,
                      m.end, m.index);
}

// A dispatch of a display input event consumes the waiting event of its
// kind and server time (the oldest of its kind when the probe reads no
// time); older ones of that kind were passed over. Two waiting events of
// the same kind and time could each be the one: matched in order, both
// marked ambiguous. A dispatch of an event already consumed (the same
// kind and time, none waiting: an outer dispatch around the first, an
// input method's re-dispatch) handled it later: consumption moves to its
// end, never stays at an earlier one.
void InputAnalyzer::match_display(const SpanEvent& sp,
                                  const ProbeDef::InputMatch& m) {
  if (m.type_key == 0 || m.type_key > LT_MAX_KEYS) return;
  const int64_t value =
      static_cast<int32_t>(static_cast<uint32_t>(sp.keys[m.type_key - 1]));
  auto kind_it = m.kinds.find(value);
  if (kind_it == m.kinds.end()) return;
  std::optional<InputType> kind = display_input_type(kind_it->second);
  if (!kind) return;
  const ThreadKey tk{sp.pid, sp.tid};
  const bool by_time = m.time_key != 0 && m.time_key <= LT_MAX_KEYS;
  const uint32_t time =
      by_time ? static_cast<uint32_t>(sp.keys[m.time_key - 1]) : 0;
  auto same_kind = [&](uint64_t idx) {
    const InputEventInfo& e = live_.at(idx);
    return e.type == *kind && e.received_ns <= sp.start_ns;
  };
  auto same = [&](uint64_t idx) {
    return same_kind(idx) && (!by_time || live_.at(idx).server_time_ms == time);
  };
  auto pit = display_pending_.find(tk);
  if (pit == display_pending_.end() ||
      std::none_of(pit->second.begin(), pit->second.end(), same)) {
    // Synthesized, read before tracing began, or dispatched again.
    if (by_time) redispatch(sp, *kind, time);
    return;
  }
  std::deque<uint64_t>& q = pit->second;
  auto hit = std::find_if(q.begin(), q.end(), same);
  if (by_time && std::count_if(q.begin(), q.end(), same) > 1)
    for (uint64_t idx : q)
      if (same(idx)) live_.at(idx).ambiguous = true;
  const uint64_t handled = *hit;
  std::vector<uint64_t> passed;
  std::deque<uint64_t> left;
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (it == hit) continue;
    if (it < hit && same_kind(*it))
      passed.push_back(*it);
    else
      left.push_back(*it);
  }
  consume_display(handled, sp);
  for (uint64_t idx : passed) live_.at(idx).coalesced = true;
  if (left.empty())
    display_pending_.erase(pit);
  else
    q = std::move(left);
  // q (and hit with it) may be gone now.
  for (uint64_t idx : passed) done(idx);
  done(handled);
}

void InputAnalyzer::consume_display(uint64_t idx, const SpanEvent& sp) {
  InputEventInfo& e = live_.at(idx);
  e.finished_ns = span_end(sp);
  e.handling_start_ns = sp.start_ns;
  e.handling_span_id = sp.span_id;
  e.handling_probe = sp.probe_id;
  e.dispatches = 1;
  std::deque<uint64_t>& c = display_consumed_[{sp.pid, sp.tid}];
  c.push_back(idx);
  if (c.size() > kMaxDisplayConsumed) c.pop_front();
}

// A dispatch of (kind, time) with no such event waiting: the latest one
// consumed on the thread, still open, that ended before this dispatch did.
void InputAnalyzer::redispatch(const SpanEvent& sp, InputType kind,
                               uint32_t time) {
  auto cit = display_consumed_.find({sp.pid, sp.tid});
  if (cit == display_consumed_.end()) return;
  std::deque<uint64_t>& c = cit->second;
  // Events finalized since are no longer open: forget them.
  c.erase(std::remove_if(c.begin(), c.end(),
                         [&](uint64_t idx) { return !live_.count(idx); }),
          c.end());
  for (auto it = c.rbegin(); it != c.rend(); ++it) {
    InputEventInfo& e = live_.at(*it);
    if (e.type != kind || e.server_time_ms != time ||
        e.received_ns > sp.start_ns || e.finished_ns >= span_end(sp))
      continue;
    e.finished_ns = span_end(sp);
    e.handling_start_ns = std::min(e.handling_start_ns, sp.start_ns);
    e.handling_span_id = sp.span_id;
    e.handling_probe = sp.probe_id;
    ++e.dispatches;
    return;
  }
  if (c.empty()) display_consumed_.erase(cit);
}

void InputAnalyzer::on_span(const SpanEvent& sp) {
  ThreadKey tk{sp.pid, sp.tid};
  if (!sp.in_flight && !options_.display_dispatch.empty()) {
    auto m = options_.display_dispatch.find(sp.probe_id);
    if (m != options_.display_dispatch.end()) match_display(sp, m->second);
  }
  const bool blame_role =
      sp.role == LT_ROLE_DISPATCH || sp.role == LT_ROLE_IDLE;
  if (blame_role &&
      (sp.duration_ns >= options_.min_span_ns || (sp.flags & LT_SPAN_INPUT))) {
    std::vector<SpanEvent>& kept = spans_[tk];
    kept.push_back(sp);
    if (kept.size() > options_.max_spans) {
      kept.erase(kept.begin());
      ++stats_.spans_dropped;
    }
    if (++spans_since_prune_ >= 1024) prune_spans();
  }
  if ((sp.flags & LT_SPAN_INPUT) != 0 && !sp.in_flight) {
    auto it = raw_pending_.find(tk);
    if (it != raw_pending_.end()) {
      std::vector<uint64_t> left, consumed;
      for (uint64_t idx : it->second) {
        InputEventInfo& e = live_.at(idx);
        bool mine = e.handling_span_id
                        ? e.handling_span_id == sp.span_id
                        : sp.depth == 0 && sp.start_ns >= e.received_ns;
        if (!mine) {
          left.push_back(idx);
          continue;
        }
        // No FINISHED message here: consumption is the end of the
        // dispatch that read the bytes (or the next one to start).
        e.finished_ns = span_end(sp);
        e.handling_start_ns = sp.start_ns;
        e.handling_span_id = sp.span_id;
        e.handling_probe = sp.probe_id;
        consumed.push_back(idx);
      }
      it->second = std::move(left);
      if (it->second.empty()) raw_pending_.erase(it);
      for (uint64_t idx : consumed) done(idx);
    }
  }
  release_pending(tk, sp);
}

void InputAnalyzer::settle(uint64_t idx) {
  auto lit = live_.find(idx);
  if (lit == live_.end()) return;
  InputEventInfo& e = lit->second;
  if (is_display_chan(e.chan_kind) && e.sent_ns == 0) find_display_send(e);
  // Whatever it waited behind ended before its handling began, on its own
  // thread, so reached the stream before its FINISHED did. Only the
  // handling dispatch itself comes later: wait for it when it could be
  // the blame.
  std::optional<uint64_t> lat = e.app_latency();
  if (lat && *lat >= options_.blame_ns && e.handling_span_id != 0) {
    ThreadKey tk{e.pid, e.tid};
    auto it = spans_.find(tk);
    bool seen = false;
    if (it != spans_.end())
      for (const SpanEvent& s : it->second)
        seen = seen || s.span_id == e.handling_span_id;
    std::optional<InputBlame> b = select_blame(
        e, it == spans_.end() ? std::vector<SpanEvent>{} : it->second,
        options_.blame_ns);
    if (!seen && b && b->chain.empty()) {
      pending_blame_[tk].push_back(idx);
      return;
    }
  }
  finalize(idx);
}

void InputAnalyzer::release_pending(const ThreadKey& tk, const SpanEvent& sp) {
  auto it = pending_blame_.find(tk);
  if (it == pending_blame_.end() || sp.in_flight) return;
  // The handling dispatch itself, or an outermost one that began after it
  // (so it has ended, seen or too short to record).
  std::vector<uint64_t> left, done;
  for (uint64_t idx : it->second) {
    auto lit = live_.find(idx);
    if (lit == live_.end()) continue;  // finalized another way
    const InputEventInfo& e = lit->second;
    if (sp.span_id == e.handling_span_id ||
        (sp.depth == 0 && sp.start_ns > e.handling_start_ns))
      done.push_back(idx);
    else
      left.push_back(idx);
  }
  it->second = std::move(left);
  if (it->second.empty()) pending_blame_.erase(it);
  for (uint64_t idx : done) finalize(idx);
}

void InputAnalyzer::prune_spans() {
  spans_since_prune_ = 0;
  // A dispatch that ended before every event still to be finalized
  // arrived, and long enough ago that no event still to be seen arrived
  // before it ended, can be no one's blame.
  uint64_t keep_from =
      now_ns_ > options_.reorder_ns ? now_ns_ - options_.reorder_ns : 0;
  for (const auto& [idx, e] : live_)
    if (e.arrival_ns() != 0) keep_from = std::min(keep_from, e.arrival_ns());
  for (auto it = spans_.begin(); it != spans_.end();) {
    std::vector<SpanEvent>& v = it->second;
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const SpanEvent& s) {
                             return !s.in_flight && span_end(s) <= keep_from;
                           }),
            v.end());
    it = v.empty() ? spans_.erase(it) : std::next(it);
  }
  // A frame that started before every event still to be finalized
  // arrived is no one's next frame (the thread stays known to draw).
  for (auto& [tk, v] : frames_)
    while (!v.empty() && v.front().first < keep_from) v.pop_front();
}

void InputAnalyzer::finalize(uint64_t idx) {
  auto node = live_.extract(idx);
  if (node.empty()) return;  // already final (a seq reused while pending)
  InputEventInfo& e = node.mapped();
  auto oit = open_.find({e.channel, e.seq});
  if (oit != open_.end() && oit->second == idx) open_.erase(oit);
  auto bit = by_event_id_.find({e.channel, e.event_id});
  if (bit != by_event_id_.end() && bit->second == idx) by_event_id_.erase(bit);
  if (e.sent_ns == 0 && e.received_ns == 0) {
    // An acknowledgement of an event never seen.
    ++stats_.unmatched;
    return;
  }
  e.frame_end_ns = next_frame_end(e);
  if (is_display_chan(e.chan_kind) && e.sent_ns == 0) find_display_send(e);
  if (options_.on_final) options_.on_final(e);
  if (options_.stream_only) {
    ++stats_.total;
    return;
  }
  static const std::vector<SpanEvent> kNone;
  auto sit = spans_.find({e.pid, e.tid});
  e.blame = select_blame(e, sit == spans_.end() ? kNone : sit->second,
                         options_.blame_ns);
  if (e.blame && e.blame->chain.size() > options_.max_chain) {
    // Too many to name: the primary one, then the longest.
    InputBlame& b = *e.blame;
    std::vector<size_t> all(b.chain.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    std::vector<size_t> kept = limits::keep_best(
        all, options_.max_chain,
        [&b](size_t x, size_t y) {
          return std::make_tuple(x == b.primary, b.chain[x].span.duration_ns) >
                 std::make_tuple(y == b.primary, b.chain[y].span.duration_ns);
        },
        &b.omitted);
    std::vector<BlameSpan> chain;
    for (size_t i : kept) {
      if (i == b.primary) b.primary = chain.size();
      chain.push_back(std::move(b.chain[i]));
    }
    b.chain = std::move(chain);
  }

  Channel& ch = channel(e.channel);
  InputChannelSummary& c = ch.summary;
  c.channel = e.channel;
  if (c.peer == 0) c.peer = e.peer;
  c.chan_kind = e.chan_kind;
  if (e.layout) c.layout = e.layout;
  if (c.pid == 0 && e.pid) {
    c.pid = e.pid;
    c.comm = e.comm;
  }
  if (c.sender_pid == 0) c.sender_pid = e.sender_pid;
  ++c.events;
  if (e.type == InputType::kKey || e.type == InputType::kKeyPress ||
      e.type == InputType::kKeyRelease)
    ++c.keys;
  if (e.type == InputType::kMotion) ++c.motions;
  if (e.finished_ns == 0) ++c.unfinished;
  if (e.coalesced) ++c.coalesced;
  if (e.ambiguous) ++c.ambiguous;
  if (e.blame) ++c.blamed;
  for (int s = 0; s < kInputStages; ++s)
    if (auto v = e.stage(static_cast<InputStage>(s))) ch.values[s].add(*v);
  for (uint64_t ns : {e.sent_ns, e.received_ns, e.finished_ns,
                      e.finish_received_ns, e.frame_end_ns, e.present_ns}) {
    if (ns == 0) continue;
    if (stats_.first_ns == 0 || ns < stats_.first_ns) stats_.first_ns = ns;
    stats_.last_ns = std::max(stats_.last_ns, ns);
  }
  ++stats_.total;
  if (e.blame) ++stats_.blamed;
  add_to_group(ch, e);
  list(idx, std::move(e));
}

void InputAnalyzer::add_to_group(Channel& c, const InputEventInfo& e) {
  std::optional<uint64_t> lat = e.app_latency();
  if (!lat) return;
  auto add = [&e, lat](InputGroup& g) {
    if (g.events == 0 || *lat > *g.worst.app_latency()) g.worst = e;
    ++g.events;
    g.seq_lo = std::min(g.seq_lo, e.seq);
    g.seq_hi = std::max(g.seq_hi, e.seq);
    g.first_arrival_ns = std::min(g.first_arrival_ns, e.arrival_ns());
    g.last_arrival_ns = std::max(g.last_arrival_ns, e.arrival_ns());
  };
  auto kind = !e.blame                 ? Channel::kUnblamed
              : e.blame->chain.empty() ? Channel::kUnnamed
                                       : Channel::kNamed;
  if (kind == Channel::kNamed) {
    const SpanEvent& p = e.blame->chain[e.blame->primary].span;
    add(c.named[{p.pid, p.tid, p.span_id}]);
  } else if (kind == c.prev) {
    add(c.runs.back());
  } else {
    // A run closes: of the closed ones only the worst can be listed.
    if (c.runs.size() > 2 * options_.max_worst + 1) {
      InputGroup open = std::move(c.runs.back());
      c.runs.pop_back();
      std::stable_sort(c.runs.begin(), c.runs.end(),
                       [](const InputGroup& x, const InputGroup& y) {
                         return *x.worst.app_latency() > *y.worst.app_latency();
                       });
      c.runs.resize(options_.max_worst);
      c.runs.push_back(std::move(open));
    }
    add(c.runs.emplace_back());
  }
  c.prev = kind;
}

void InputAnalyzer::list(uint64_t idx, InputEventInfo&& e) {
  const OrderKey key{e.channel, idx};
  auto latency = e.app_latency();
  // Never consumed first, then the slowest; ties: the earlier.
  TimelineKey tkey{latency ? ~*latency : 0, e.channel, idx};
  if (timeline_.size() < options_.max_timeline ||
      (!timeline_.empty() && tkey < timeline_.rbegin()->first)) {
    timeline_.emplace(tkey, e);
    if (timeline_.size() > options_.max_timeline)
      timeline_.erase(std::prev(timeline_.end()));
  }
  // The first max_listed blamed events in order, then as many of the
  // unblamed ones as there is room for: room that only shrinks.
  auto keep_first = [](std::map<OrderKey, InputEventInfo>& m, size_t cap,
                       const OrderKey& k, InputEventInfo&& ev) {
    if (cap == 0) return;
    if (m.size() >= cap && !(k < m.rbegin()->first)) return;
    m.emplace(k, std::move(ev));
    if (m.size() > cap) m.erase(std::prev(m.end()));
  };
  const size_t blamed_room =
      std::min<uint64_t>(stats_.blamed, options_.max_listed);
  if (e.blame) {
    keep_first(listed_blamed_, options_.max_listed, key, std::move(e));
  } else {
    keep_first(listed_unblamed_, options_.max_listed - blamed_room, key,
               std::move(e));
  }
  while (listed_unblamed_.size() > options_.max_listed - blamed_room)
    listed_unblamed_.erase(std::prev(listed_unblamed_.end()));
}

InputAnalysis InputAnalyzer::finish() {
  // Whatever is still waiting, in order: its handling dispatch never came,
  // or it was never consumed.
  pending_blame_.clear();
  raw_pending_.clear();
  display_pending_.clear();
  display_consumed_.clear();
  settling_.clear();
  settling_set_.clear();
  open_.clear();
  by_event_id_.clear();
  while (!live_.empty()) finalize(live_.begin()->first);
  spans_.clear();
  frames_.clear();

  InputAnalysis out = std::move(stats_);
  stats_ = InputAnalysis{};
  out.frames = options_.frames;
  for (auto& [id, cp] : channels_) {
    Channel& ch = *cp;
    InputChannelSummary& c = ch.summary;
    for (int s = 0; s < kInputStages; ++s)
      c.stages[s] = ch.values[s].percentiles();
    std::vector<InputGroup>& g = ch.runs;
    for (auto& [key, named] : ch.named) g.push_back(std::move(named));
    std::stable_sort(g.begin(), g.end(),
                     [](const InputGroup& x, const InputGroup& y) {
                       return *x.worst.app_latency() > *y.worst.app_latency();
                     });
    if (g.size() > options_.max_worst) g.resize(options_.max_worst);
    c.worst = std::move(g);
    out.channels.push_back(std::move(c));
  }
  channels_.clear();
  if (spill_->failed()) out.spill_error = spill_->error();
  // Both lists are in (channel, first seen) order; so is their merge.
  auto b = listed_blamed_.begin(), u = listed_unblamed_.begin();
  while (b != listed_blamed_.end() || u != listed_unblamed_.end()) {
    bool take_b = u == listed_unblamed_.end() ||
                  (b != listed_blamed_.end() && b->first < u->first);
    auto& it = take_b ? b : u;
    out.events.push_back(std::move(it->second));
    ++it;
  }
  listed_blamed_.clear();
  listed_unblamed_.clear();
  out.not_listed = out.total - out.events.size();
  std::map<OrderKey, InputEventInfo> by_order;
  for (auto& [key, e] : timeline_)
    by_order.emplace(OrderKey{std::get<1>(key), std::get<2>(key)},
                     std::move(e));
  timeline_.clear();
  for (auto& [key, e] : by_order) out.timeline.push_back(std::move(e));
  out.timeline_omitted = out.total - out.timeline.size();
  return out;
}

}  // namespace looptrace
