#include "record/codec.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <vector>

#include "profiles/key_expr.h"

namespace looptrace::rec {
namespace {

using nlohmann::json;

// More than the kernel walks today (LT_MAX_STACK): a recording may carry
// stacks unwound in userspace.
constexpr uint32_t kMaxFrames = 1024;

// Fixed-width little-endian fields (x86-64 and the BPF side are little
// endian; a big-endian reader would swap here).
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_->append(b, sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_->append(s);
  }
  void put_frames(const std::vector<uint64_t>& f) {
    put<uint32_t>(static_cast<uint32_t>(f.size()));
    if (!f.empty())
      out_->append(reinterpret_cast<const char*>(f.data()), f.size() * 8);
  }
  template <size_t N>
  void put_keys(const std::array<uint64_t, N>& k) {
    out_->append(reinterpret_cast<const char*>(k.data()), N * 8);
  }
  template <size_t N>
  void put_raw(const std::array<uint8_t, N>& b) {
    out_->append(reinterpret_cast<const char*>(b.data()), N);
  }
  // Straight into the block, no copy.
  void put_cbor(const json& j) { json::to_cbor(j, *out_); }

 private:
  std::string* out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  bool get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool get_bool(bool* v) {
    uint8_t b;
    if (!get(&b) || b > 1) return false;
    *v = b != 0;
    return true;
  }
  bool get_str(std::string* s) {
    uint32_t n;
    if (!get(&n) || static_cast<size_t>(end_ - p_) < n) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool get_frames(std::vector<uint64_t>* f) {
    uint32_t n;
    if (!get(&n) || n > kMaxFrames || static_cast<size_t>(end_ - p_) < n * 8ull)
      return false;
    f->resize(n);
    if (n) std::memcpy(f->data(), p_, n * 8ull);
    p_ += n * 8ull;
    return true;
  }
  template <size_t N>
  bool get_keys(std::array<uint64_t, N>* k) {
    if (static_cast<size_t>(end_ - p_) < N * 8) return false;
    std::memcpy(k->data(), p_, N * 8);
    p_ += N * 8;
    return true;
  }
  template <size_t N>
  bool get_raw(std::array<uint8_t, N>* k) {
    if (static_cast<size_t>(end_ - p_) < N) return false;
    std::memcpy(k->data(), p_, N);
    p_ += N;
    return true;
  }
  // Every byte consumed: a payload longer than its type is malformed.
  bool done() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

void put_span(Writer& w, const SpanEvent& e) {
  w.put(e.pid);
  w.put(e.tid);
  w.put_str(e.comm);
  w.put(e.span_id);
  w.put(e.start_ns);
  w.put(e.duration_ns);
  w.put(e.cpu_ns);
  w.put(e.runq_ns);
  w.put(e.steal_ns);
  w.put(e.probe_id);
  w.put(e.role);
  w.put(e.depth);
  w.put(e.key_fault_mask);
  w.put_keys(e.keys);
  w.put(e.flags);
  w.put<uint8_t>(e.in_flight);
  w.put_str(e.key_str);
}

bool get_span(Reader& r, SpanEvent* e) {
  return r.get(&e->pid) && r.get(&e->tid) && r.get_str(&e->comm) &&
         r.get(&e->span_id) && r.get(&e->start_ns) && r.get(&e->duration_ns) &&
         r.get(&e->cpu_ns) && r.get(&e->runq_ns) && r.get(&e->steal_ns) &&
         r.get(&e->probe_id) && r.get(&e->role) && r.get(&e->depth) &&
         r.get(&e->key_fault_mask) && r.get_keys(&e->keys) &&
         r.get(&e->flags) && r.get_bool(&e->in_flight) &&
         // Recordings before str keys end here.
         (r.done() || (r.get_str(&e->key_str) &&
                       e->key_str.size() < LT_KEY_STR_LEN && r.done()));
}

// A framed read's messages: their count, then each as the kernel sent it.
template <typename M>
void put_msgs(Writer& w, const std::vector<M>& msgs) {
  w.put<uint32_t>(static_cast<uint32_t>(msgs.size()));
  for (const M& m : msgs) w.put(m);
}

template <typename M>
bool get_msgs(Reader& r, std::vector<M>* msgs, uint32_t max) {
  uint32_t n = 0;
  if (!r.get(&n) || n > max) return false;
  msgs->resize(n);
  for (M& m : *msgs)
    if (!r.get(&m)) return false;
  return true;
}

void put_io(Writer& w, const IoEvent& e) {
  w.put(e.pid);
  w.put(e.tid);
  w.put_str(e.comm);
  w.put(e.ts_ns);
  w.put(e.enter_ns);
  w.put(e.exit_ns);
  w.put(e.inode);
  w.put(e.peer_inode);
  w.put(e.bytes);
  w.put(e.fd);
  w.put(e.op);
  w.put(e.chan);
  w.put(e.depth);
  w.put(e.span_start_ns);
  w.put(e.span_id);
  w.put(e.span_probe);
  w.put_raw(e.head);
  if (e.chan == LT_CHAN_WAYLAND) {
    w.put(e.frame_flags);
    w.put(e.wl_other);
    put_msgs(w, e.wl);
  } else if (e.chan == LT_CHAN_X11) {
    w.put(e.frame_flags);
    put_msgs(w, e.x11);
  }
}

bool get_io(Reader& r, IoEvent* e) {
  if (!(r.get(&e->pid) && r.get(&e->tid) && r.get_str(&e->comm) &&
        r.get(&e->ts_ns) && r.get(&e->enter_ns) && r.get(&e->exit_ns) &&
        r.get(&e->inode) && r.get(&e->peer_inode) && r.get(&e->bytes) &&
        r.get(&e->fd) && r.get(&e->op) && r.get(&e->chan) && r.get(&e->depth) &&
        r.get(&e->span_start_ns) && r.get(&e->span_id) &&
        r.get(&e->span_probe) && r.get_raw(&e->head)))
    return false;
  if (e->chan == LT_CHAN_WAYLAND)
    return r.get(&e->frame_flags) && r.get(&e->wl_other) &&
           get_msgs(r, &e->wl, LT_WL_MAX_MSGS) && r.done();
  if (e->chan == LT_CHAN_X11)
    return r.get(&e->frame_flags) && get_msgs(r, &e->x11, LT_X11_MAX_MSGS) &&
           r.done();
  return r.done();
}

// --- CBOR events -----------------------------------------------------------

json probe_json(const ProbeDef& p) {
  json keys = json::array();
  for (const KeyDef& k : p.keys) {
    keys.push_back({{"name", k.name},
                    // [[value, name], ...]: a map with integer keys.
                    {"names", k.names},
                    {"expr", k.expr},
                    {"format", static_cast<int>(k.format)},
                    {"spec", json::binary(std::vector<uint8_t>(
                                 reinterpret_cast<const uint8_t*>(&k.spec),
                                 reinterpret_cast<const uint8_t*>(&k.spec) +
                                     sizeof k.spec))}});
  }
  json out = {{"id", p.id},
              {"outermost", p.outermost},
              {"role", p.role},
              {"binary", p.binary},
              {"symbol", p.symbol},
              {"label", p.label},
              {"path", p.path},
              {"resolved_symbol", p.resolved_symbol},
              {"file_offset", p.file_offset},
              {"async_mask", p.async_mask},
              {"msghdr", p.msghdr},
              {"keys", keys}};
  if (p.input)
    out["input"] = {{"type_key", p.input->type_key},
                    {"time_key", p.input->time_key},
                    {"kinds", p.input->kinds}};
  return out;
}

ProbeDef probe_from(const json& j) {
  ProbeDef p;
  p.id = j.at("id").get<uint32_t>();
  p.role = j.at("role").get<uint32_t>();
  p.binary = j.at("binary").get<std::string>();
  p.symbol = j.at("symbol").get<std::string>();
  // Recordings before labels existed have none.
  if (j.contains("label")) p.label = j.at("label").get<std::string>();
  p.path = j.at("path").get<std::string>();
  p.resolved_symbol = j.at("resolved_symbol").get<std::string>();
  p.file_offset = j.at("file_offset").get<uint64_t>();
  p.async_mask = j.at("async_mask").get<uint32_t>();
  p.msghdr = j.at("msghdr").get<bool>();
  if (j.contains("outermost")) p.outermost = j.at("outermost").get<bool>();
  for (const json& k : j.at("keys")) {
    KeyDef d;
    d.name = k.at("name").get<std::string>();
    d.role = key_role_for(d.name);
    d.expr = k.at("expr").get<std::string>();
    int f = k.at("format").get<int>();
    if (f < 0 || f > static_cast<int>(KeyFormat::kString))
      throw std::out_of_range("key format");
    // Recordings before enum formats have no names.
    if (k.contains("names"))
      d.names = k.at("names").get<std::map<int64_t, std::string>>();
    d.format = static_cast<KeyFormat>(f);
    const auto& bin = k.at("spec").get_binary();
    if (bin.size() != sizeof d.spec) throw std::out_of_range("key spec size");
    std::memcpy(&d.spec, bin.data(), sizeof d.spec);
    p.keys.push_back(std::move(d));
  }
  if (j.contains("input")) {
    const json& in = j.at("input");
    ProbeDef::InputMatch m;
    m.type_key = in.at("type_key").get<uint32_t>();
    m.time_key = in.at("time_key").get<uint32_t>();
    m.kinds = in.at("kinds").get<std::map<int64_t, std::string>>();
    if (m.type_key == 0 || m.type_key > p.keys.size() ||
        m.time_key > p.keys.size())
      throw std::out_of_range("input key");
    p.input = std::move(m);
  }
  return p;
}

json thresholds_json(const Thresholds& t) {
  return {{"slow_ns", t.slow_ns},
          {"sample_after_ns", t.sample_after_ns},
          {"sample_hz", t.sample_hz},
          {"record_all", t.record_all},
          {"delivery_drain_ns", t.delivery_drain_ns},
          {"slow_input_ns", t.slow_input_ns},
          {"barrier_stall_ns", t.barrier_stall_ns}};
}

Thresholds thresholds_from(const json& j) {
  Thresholds t;
  t.slow_ns = j.at("slow_ns").get<std::array<uint64_t, LT_ROLE_MAX>>();
  t.sample_after_ns = j.at("sample_after_ns").get<uint64_t>();
  t.sample_hz = j.at("sample_hz").get<uint32_t>();
  t.record_all = j.at("record_all").get<bool>();
  t.delivery_drain_ns = j.at("delivery_drain_ns").get<uint64_t>();
  t.slow_input_ns = j.at("slow_input_ns").get<uint64_t>();
  t.barrier_stall_ns = j.at("barrier_stall_ns").get<uint64_t>();
  return t;
}

json session_json(const SessionEvent& s) {
  json probes = json::array();
  for (const ProbeDef& p : s.probes) probes.push_back(probe_json(p));
  return {{"abi_version", s.abi_version},
          {"looptrace_version", s.looptrace_version},
          {"thresholds", thresholds_json(s.thresholds)},
          {"probes", probes},
          {"command_line", s.command_line},
          {"target_pid", s.target_pid},
          {"has_input", s.has_input},
          {"input_hook", s.input_hook},
          {"start_ns", s.start_ns},
          {"hostname", s.hostname},
          {"kernel", s.kernel},
          {"start_realtime_ns", s.start_realtime_ns},
          {"ringbuf_bytes", s.ringbuf_bytes}};
}

SessionEvent session_from(const json& j) {
  SessionEvent s;
  s.abi_version = j.at("abi_version").get<uint32_t>();
  s.looptrace_version = j.at("looptrace_version").get<std::string>();
  s.thresholds = thresholds_from(j.at("thresholds"));
  for (const json& p : j.at("probes")) s.probes.push_back(probe_from(p));
  s.command_line = j.at("command_line").get<std::string>();
  s.target_pid = j.at("target_pid").get<int32_t>();
  s.has_input = j.at("has_input").get<bool>();
  s.input_hook = j.at("input_hook").get<std::string>();
  s.start_ns = j.at("start_ns").get<uint64_t>();
  s.hostname = j.at("hostname").get<std::string>();
  s.kernel = j.at("kernel").get<std::string>();
  s.start_realtime_ns = j.at("start_realtime_ns").get<uint64_t>();
  // Recordings before the field: unknown.
  s.ringbuf_bytes = j.value("ringbuf_bytes", uint32_t{0});
  return s;
}

json mappings_json(const MappingsEvent& m) {
  json maps = json::array();
  for (const proc::MapEntry& e : m.maps)
    maps.push_back(
        {e.start, e.end, e.pgoff, e.perms, e.dev, e.inode, e.path, e.deleted});
  return {{"pid", m.pid}, {"tid", m.tid}, {"ts_ns", m.ts_ns}, {"maps", maps}};
}

MappingsEvent mappings_from(const json& j) {
  MappingsEvent m;
  m.pid = j.at("pid").get<uint32_t>();
  m.tid = j.at("tid").get<uint32_t>();
  m.ts_ns = j.at("ts_ns").get<uint64_t>();
  for (const json& e : j.at("maps")) {
    proc::MapEntry me;
    me.start = e.at(0).get<uint64_t>();
    me.end = e.at(1).get<uint64_t>();
    me.pgoff = e.at(2).get<uint64_t>();
    me.perms = e.at(3).get<std::string>();
    me.dev = e.at(4).get<std::string>();
    me.inode = e.at(5).get<uint64_t>();
    me.path = e.at(6).get<std::string>();
    me.deleted = e.at(7).get<bool>();
    m.maps.push_back(std::move(me));
  }
  return m;
}

json symbol_json(const SymbolEvent& s) {
  return {s.pid, s.frame.addr, s.frame.module, s.frame.function,
          s.frame.offset};
}

SymbolEvent symbol_from(const json& j) {
  SymbolEvent s;
  s.pid = j.at(0).get<uint32_t>();
  s.frame.addr = j.at(1).get<uint64_t>();
  s.frame.module = j.at(2).get<std::string>();
  s.frame.function = j.at(3).get<std::string>();
  s.frame.offset = j.at(4).get<uint64_t>();
  return s;
}

json end_json(const EndEvent& e) {
  json hists = json::array();
  for (const ThreadHistogram& h : e.hists)
    hists.push_back({{"pid", h.pid},
                     {"tid", h.tid},
                     {"comm", h.comm},
                     {"probe_id", h.probe_id},
                     {"role", h.role},
                     {"count", h.count},
                     {"sum_ns", h.sum_ns},
                     {"max_ns", h.max_ns},
                     {"slots", h.slots}});
  return {{"end_ns", e.end_ns},
          {"stop_reason", e.stop_reason},
          {"hists", hists},
          {"counters", e.counters.bpf},
          {"decode_errors", e.counters.decode_errors},
          {"hook_misses", e.counters.hook_misses}};
}

EndEvent end_from(const json& j) {
  EndEvent e;
  e.end_ns = j.at("end_ns").get<uint64_t>();
  e.stop_reason = j.at("stop_reason").get<std::string>();
  for (const json& h : j.at("hists")) {
    ThreadHistogram t;
    t.pid = h.at("pid").get<uint32_t>();
    t.tid = h.at("tid").get<uint32_t>();
    t.comm = h.at("comm").get<std::string>();
    t.probe_id = h.at("probe_id").get<uint32_t>();
    t.role = h.at("role").get<uint32_t>();
    t.count = h.at("count").get<uint64_t>();
    t.sum_ns = h.at("sum_ns").get<uint64_t>();
    t.max_ns = h.at("max_ns").get<uint64_t>();
    t.slots = h.at("slots").get<std::array<uint64_t, LT_HIST_SLOTS>>();
    e.hists.push_back(std::move(t));
  }
  // A newer build may count more: the counters this build knows.
  std::vector<uint64_t> c = j.at("counters").get<std::vector<uint64_t>>();
  for (size_t i = 0; i < c.size() && i < e.counters.bpf.size(); ++i)
    e.counters.bpf[i] = c[i];
  e.counters.decode_errors = j.at("decode_errors").get<uint64_t>();
  // Recordings before the count was kept have none.
  if (j.contains("hook_misses"))
    e.counters.hook_misses = j.at("hook_misses").get<uint64_t>();
  return e;
}

// No record holds a float, and reading one out of range as an integer is
// undefined behaviour in get<>(): a document with any is refused. The walk
// keeps its own stack; the nesting comes from the file.
bool has_float(const json& root) {
  std::vector<const json*> todo{&root};
  while (!todo.empty()) {
    const json* j = todo.back();
    todo.pop_back();
    if (j->is_number_float()) return true;
    if (j->is_structured())
      for (const auto& child : *j) todo.push_back(&child);
  }
  return false;
}

template <typename F>
bool from_cbor(const uint8_t* data, size_t size, F&& make, Event* out) {
  try {
    // Even without exceptions the DOM parser throws for an absurd array
    // size (out_of_range.408).
    json j = json::from_cbor(data, data + size, true, false);
    if (j.is_discarded() || has_float(j)) return false;
    *out = make(j);
  } catch (const json::exception&) {
    return false;
  } catch (const std::out_of_range&) {
    return false;
  }
  return true;
}

}  // namespace

void encode_event(const Event& ev, std::string* out) {
  size_t at = out->size();
  out->append(5, '\0');  // type and length, filled in below
  Writer w(out);
  uint8_t type = 0;
  std::visit(
      [&](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, SpanEvent>) {
          type = kSpan;
          put_span(w, e);
        } else if constexpr (std::is_same_v<T, SampleEvent>) {
          type = kSample;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.ts_ns);
          w.put(e.span_id);
          w.put(e.probe_id);
          w.put_frames(e.frames);
          w.put<uint8_t>(static_cast<uint8_t>(e.unwind));
          w.put<uint8_t>(e.truncated);
        } else if constexpr (std::is_same_v<T, SpanDropEvent>) {
          type = kSpanDrop;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.span_id);
        } else if constexpr (std::is_same_v<T, PointEvent>) {
          type = kPoint;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.ts_ns);
          w.put(e.ret);
          w.put(e.probe_id);
          w.put(e.role);
          w.put(e.key_fault_mask);
          w.put_keys(e.keys);
          w.put_frames(e.frames);
        } else if constexpr (std::is_same_v<T, IoEvent>) {
          type = kIo;
          put_io(w, e);
        } else if constexpr (std::is_same_v<T, ExecEvent>) {
          type = kExec;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.ts_ns);
        } else if constexpr (std::is_same_v<T, SessionEvent>) {
          type = kSession;
          w.put_cbor(session_json(e));
        } else if constexpr (std::is_same_v<T, MappingsEvent>) {
          type = kMappings;
          w.put_cbor(mappings_json(e));
        } else if constexpr (std::is_same_v<T, SymbolEvent>) {
          type = kSymbol;
          w.put_cbor(symbol_json(e));
        } else if constexpr (std::is_same_v<T, QueueEvent>) {
          type = kQueue;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.queue);
          w.put(e.ts_ns);
          w.put(e.waiting);
          w.put(e.oldest_due_ns);
        } else if constexpr (std::is_same_v<T, TickEvent>) {
          type = kTick;
          w.put(e.ts_ns);
        } else if constexpr (std::is_same_v<T, EndEvent>) {
          type = kEnd;
          w.put_cbor(end_json(e));
        } else if constexpr (std::is_same_v<T, HangEvent>) {
          type = kHang;
          put_span(w, e.span);
        } else if constexpr (std::is_same_v<T, BlockEvent>) {
          type = kBlock;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.ts_ns);
          w.put(e.span_id);
          w.put(e.probe_id);
          w.put(e.seq);
          w.put_frames(e.frames);
          w.put_frames(e.kframes);
          w.put<uint8_t>(static_cast<uint8_t>(e.unwind));
          w.put<uint8_t>(e.truncated);
        } else if constexpr (std::is_same_v<T, WakeEvent>) {
          type = kWake;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.ts_ns);
          w.put(e.wake_id);
          w.put<uint8_t>(e.from_irq);
          w.put(e.waker_pid);
          w.put(e.waker_tid);
          w.put_str(e.waker_comm);
          w.put_frames(e.frames);
          w.put_frames(e.kframes);
          w.put<uint8_t>(static_cast<uint8_t>(e.unwind));
          w.put<uint8_t>(e.truncated);
        } else if constexpr (std::is_same_v<T, WokenEvent>) {
          type = kWoken;
          w.put(e.pid);
          w.put(e.tid);
          w.put(e.ts_ns);
          w.put(e.seq);
          w.put(e.wake_id);
        }
      },
      ev);
  (*out)[at] = static_cast<char>(type);
  uint32_t len = static_cast<uint32_t>(out->size() - at - 5);
  std::memcpy(&(*out)[at + 1], &len, 4);
}

bool decode_event(uint8_t type, const uint8_t* data, size_t size, Event* out) {
  Reader r(data, size);
  switch (type) {
    case kSpan: {
      SpanEvent e;
      if (!get_span(r, &e)) return false;
      *out = std::move(e);
      return true;
    }
    case kSample: {
      SampleEvent e;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.ts_ns) &&
            r.get(&e.span_id) && r.get(&e.probe_id) && r.get_frames(&e.frames)))
        return false;
      // How it was unwound: absent from recordings before --call-graph.
      if (!r.done()) {
        uint8_t unwind = 0;
        if (!(r.get(&unwind) && unwind <= 1 && r.get_bool(&e.truncated) &&
              r.done()))
          return false;
        e.unwind = static_cast<Unwind>(unwind);
      }
      *out = std::move(e);
      return true;
    }
    case kSpanDrop: {
      SpanDropEvent e;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.span_id) && r.done()))
        return false;
      *out = e;
      return true;
    }
    case kPoint: {
      PointEvent e;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.ts_ns) &&
            r.get(&e.ret) && r.get(&e.probe_id) && r.get(&e.role) &&
            r.get(&e.key_fault_mask) && r.get_keys(&e.keys) &&
            r.get_frames(&e.frames) && r.done()))
        return false;
      *out = std::move(e);
      return true;
    }
    case kIo: {
      IoEvent e;
      if (!get_io(r, &e)) return false;
      *out = std::move(e);
      return true;
    }
    case kExec: {
      ExecEvent e;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.ts_ns) && r.done()))
        return false;
      *out = e;
      return true;
    }
    case kQueue: {
      QueueEvent e;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.queue) &&
            r.get(&e.ts_ns) && r.get(&e.waiting) && r.get(&e.oldest_due_ns) &&
            r.done()))
        return false;
      *out = e;
      return true;
    }
    case kTick: {
      TickEvent e;
      if (!(r.get(&e.ts_ns) && r.done())) return false;
      *out = e;
      return true;
    }
    case kHang: {
      HangEvent e;
      if (!get_span(r, &e.span)) return false;
      e.pid = e.span.pid;
      e.tid = e.span.tid;
      *out = std::move(e);
      return true;
    }
    case kBlock: {
      BlockEvent e;
      uint8_t unwind = 0;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.ts_ns) &&
            r.get(&e.span_id) && r.get(&e.probe_id) && r.get(&e.seq) &&
            r.get_frames(&e.frames) && r.get_frames(&e.kframes) &&
            r.get(&unwind) && unwind <= 1 && r.get_bool(&e.truncated) &&
            r.done()))
        return false;
      e.unwind = static_cast<Unwind>(unwind);
      *out = std::move(e);
      return true;
    }
    case kWake: {
      WakeEvent e;
      uint8_t unwind = 0;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.ts_ns) &&
            r.get(&e.wake_id) && r.get_bool(&e.from_irq) &&
            r.get(&e.waker_pid) && r.get(&e.waker_tid) &&
            r.get_str(&e.waker_comm) && r.get_frames(&e.frames) &&
            r.get_frames(&e.kframes) && r.get(&unwind) && unwind <= 1 &&
            r.get_bool(&e.truncated) && r.done()))
        return false;
      e.unwind = static_cast<Unwind>(unwind);
      *out = std::move(e);
      return true;
    }
    case kWoken: {
      WokenEvent e;
      if (!(r.get(&e.pid) && r.get(&e.tid) && r.get(&e.ts_ns) &&
            r.get(&e.seq) && r.get(&e.wake_id) && r.done()))
        return false;
      *out = e;
      return true;
    }
    case kSession:
      return from_cbor(data, size, session_from, out);
    case kMappings:
      return from_cbor(data, size, mappings_from, out);
    case kSymbol:
      return from_cbor(data, size, symbol_from, out);
    case kEnd:
      return from_cbor(data, size, end_from, out);
    default:
      return false;
  }
}

}  // namespace looptrace::rec
