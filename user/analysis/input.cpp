#include "analysis/input.h"

#include <algorithm>
#include <type_traits>
#include <variant>

namespace looptrace {
namespace {

uint64_t span_end(const SpanEvent& s) { return s.start_ns + s.duration_ns; }

}  // namespace

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
  // Dispatches that ran after the event arrived and ended before its
  // handling began: the loop was busy with them instead.
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
  // Outermost only: a nested dispatch is part of the one around it.
  uint64_t covered_to = 0;
  for (const SpanEvent* s : cand) {
    if (!b.chain.empty() && span_end(*s) <= covered_to) continue;
    BlameSpan bs;
    bs.span = *s;
    bs.running_at_arrival = s->start_ns <= a && a < span_end(*s);
    b.chain.push_back(std::move(bs));
    covered_to = std::max(covered_to, span_end(*s));
  }
  if (!b.chain.empty()) {
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
      if (b.chain[i].span.duration_ns > b.chain[best].span.duration_ns)
        best = i;
    }
    b.primary = best;
    return b;
  }
  // Nothing ran in between: the handling itself was slow.
  for (const SpanEvent& s : spans) {
    if (ev.handling_span_id && s.span_id == ev.handling_span_id) {
      b.own_handler = true;
      b.chain.push_back(BlameSpan{s, false});
      return b;
    }
  }
  // Over the threshold, but no recorded dispatch to name: the whole wait
  // was behind dispatches too short to record.
  b.unattributed_ns = h > a ? h - a : 0;
  return b;
}

InputAnalyzer::InputAnalyzer(InputOptions options) : options_(options) {}

void InputAnalyzer::consume(const Event& ev) {
  if (const auto* io = std::get_if<IoEvent>(&ev)) {
    on_io(*io);
  } else if (const auto* sp = std::get_if<SpanEvent>(&ev)) {
    on_span(*sp);
  }
}

InputEventInfo& InputAnalyzer::open_event(uint64_t channel, uint32_t seq) {
  auto [it, fresh] = open_.try_emplace({channel, seq}, events_.size());
  if (fresh) {
    InputEventInfo e;
    e.channel = channel;
    e.seq = seq;
    events_.push_back(std::move(e));
  }
  return events_[it->second];
}

void InputAnalyzer::on_io(const IoEvent& io) {
  if (io.chan == LT_CHAN_RAW) {
    on_raw(io);
    return;
  }
  std::optional<InputMessageInfo> m =
      decode_input_message(io.head.data(), io.head.size(), io.bytes);
  if (!m) {
    ++stats_.undecodable;
    return;
  }
  if (m->layout == LT_LAYOUT_LEGACY) ++stats_.legacy_messages;
  const bool send = io.is_send();
  uint64_t channel = 0, peer = 0;
  if (m->is_event()) {
    // Events go dispatcher -> app: the app's end names the channel.
    channel = send ? io.peer_inode : io.inode;
    peer = send ? io.inode : io.peer_inode;
  } else if (m->type == InputType::kFinished) {
    channel = send ? io.inode : io.peer_inode;
    peer = send ? io.peer_inode : io.inode;
  } else {
    ++stats_.other_messages;
    return;
  }
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
  InputEventInfo* e = &open_event(channel, m->seq);
  if (slot(*e) != 0) {
    bool consumed = e->has_finish || e->finish_received_ns != 0;
    if (!m->is_event() || !consumed) {
      ++stats_.duplicates;
      return;
    }
    open_.erase({channel, m->seq});
    e = &open_event(channel, m->seq);
  }
  slot(*e) = io.ts_ns;
  if (e->peer == 0) e->peer = peer;
  e->layout = m->layout;
  if (m->is_event()) {
    e->type = m->type;
    e->event_time_ns = m->event_time_ns;
  }
  const bool app_side = m->is_event() != send;  // receives events, sends ACKs
  if (app_side) {
    if (e->pid == 0 || (m->is_event() && !send)) {
      e->pid = io.pid;
      e->tid = io.tid;
      e->comm = io.comm;
    }
  } else if (e->sender_pid == 0) {
    e->sender_pid = io.pid;
    e->sender_tid = io.tid;
  }
  if (m->type == InputType::kFinished) {
    if (send) {
      e->has_finish = true;
      e->handled = m->handled;
      e->consume_time_ns = m->consume_time_ns;
      if (io.depth > 0) {
        e->handling_start_ns = io.span_start_ns;
        e->handling_span_id = io.span_id;
        e->handling_probe = io.span_probe;
      }
    } else {
      e->has_finish = true;
      if (!e->handled) e->handled = m->handled;
    }
    if (e->finished_ns && e->finish_received_ns) open_.erase({channel, m->seq});
  }
}

void InputAnalyzer::on_raw(const IoEvent& io) {
  if (io.is_send()) return;
  InputEventInfo e;
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
  raw_pending_[{io.pid, io.tid}].push_back(events_.size());
  events_.push_back(std::move(e));
}

void InputAnalyzer::on_span(const SpanEvent& sp) {
  ThreadKey tk{sp.pid, sp.tid};
  if ((sp.flags & LT_SPAN_INPUT) != 0 && !sp.in_flight) {
    auto it = raw_pending_.find(tk);
    if (it != raw_pending_.end()) {
      std::vector<size_t> left;
      for (size_t idx : it->second) {
        InputEventInfo& e = events_[idx];
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
      }
      it->second = std::move(left);
    }
  }
  if (sp.role != LT_ROLE_DISPATCH && sp.role != LT_ROLE_IDLE) return;
  if (sp.duration_ns >= options_.min_span_ns || (sp.flags & LT_SPAN_INPUT))
    spans_[tk].push_back(sp);
}

InputAnalysis InputAnalyzer::finish() {
  InputAnalysis out = stats_;
  static const std::vector<SpanEvent> kNone;
  // In place: a long trace holds millions of events, never two copies.
  auto never_seen = [](const InputEventInfo& e) {
    return e.sent_ns == 0 && e.received_ns == 0;
  };
  auto kept = std::remove_if(events_.begin(), events_.end(), never_seen);
  // Acknowledgements of events we never saw.
  out.unmatched += static_cast<uint64_t>(events_.end() - kept);
  events_.erase(kept, events_.end());
  for (InputEventInfo& e : events_) {
    auto it = spans_.find({e.pid, e.tid});
    e.blame = select_blame(e, it == spans_.end() ? kNone : it->second,
                           options_.blame_ns);
  }
  out.events = std::move(events_);
  events_.clear();
  open_.clear();
  spans_.clear();
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const InputEventInfo& a, const InputEventInfo& b) {
                     return a.channel < b.channel;
                   });
  std::map<uint64_t, std::pair<InputChannelSummary,
                               std::array<std::vector<uint64_t>, kInputStages>>>
      chans;
  for (const InputEventInfo& e : out.events) {
    auto& [c, vals] = chans[e.channel];
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
    if (e.type == InputType::kKey) ++c.keys;
    if (e.type == InputType::kMotion) ++c.motions;
    if (e.finished_ns == 0) ++c.unfinished;
    if (e.blame) ++c.blamed;
    for (int s = 0; s < kInputStages; ++s)
      if (auto v = e.stage(static_cast<InputStage>(s))) vals[s].push_back(*v);
  }
  for (auto& [id, cv] : chans) {
    auto& [c, vals] = cv;
    for (int s = 0; s < kInputStages; ++s)
      c.stages[s] = exact_percentiles(std::move(vals[s]));
    out.channels.push_back(std::move(c));
  }
  return out;
}

}  // namespace looptrace
