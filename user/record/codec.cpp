#include "record/codec.h"

#include <concepts>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "base/text.h"
#include "profiles/key_expr.h"

namespace looptrace {
// Types a CBOR document nests, through nlohmann's hooks (found by ADL;
// this file's own).
static void to_json(nlohmann::json& j, const Thresholds& t);
static void from_json(const nlohmann::json& j, Thresholds& t);
static void to_json(nlohmann::json& j, const ProbeDef& p);
static void from_json(const nlohmann::json& j, ProbeDef& p);
}  // namespace looptrace

namespace looptrace::rec {
namespace {

using nlohmann::json;

// More than the kernel walks today (LT_MAX_STACK): a recording may carry
// stacks unwound in userspace.
constexpr uint32_t kMaxFrames = 1024;
// The longest string a fixed-field record holds: the kernel's comm and a
// str key's string (LT_KEY_STR_LEN, NUL included) are shorter; a longer
// one is a malformed payload, not memory to take.
constexpr uint32_t kMaxFixedString = LT_KEY_STR_LEN - 1;
// A symbol's function and module names are kept up to this (a demangled
// C++ name runs to a few KiB; a path to PATH_MAX), cut with kCutMark past
// it: every symbol of a recording is kept while it is replayed.
constexpr size_t kMaxSymbolText = 4096;

// Fixed-width little-endian fields (x86-64 and the BPF side are little
// endian; a big-endian reader would swap here). Writer and Reader take the
// same calls, so that one field list (Codec<E>::fields below) drives both:
// a(fields...) writes or reads them in order; a.optional(f) is a trailing
// part that older recordings lack; a.check(ok) refuses what was read.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename... T>
  bool operator()(const T&... v) {
    (put(v), ...);
    return true;
  }
  template <typename F>
  bool optional(F&& part) {
    return part();
  }
  bool check(bool) { return true; }
  // Straight into the block, no copy.
  void put_cbor(const json& j) { json::to_cbor(j, *out_); }

 private:
  // Integers, bool and Unwind as one byte, arrays and the kernel's message
  // structs as they are in memory.
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void put(const T& v) {
    out_->append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    out_->append(s);
  }
  // The count, then the elements.
  template <typename T>
  void put(const std::vector<T>& v) {
    put(static_cast<uint32_t>(v.size()));
    if (!v.empty())
      out_->append(reinterpret_cast<const char*>(v.data()),
                   v.size() * sizeof(T));
  }

  std::string* out_;
};

static_assert(sizeof(bool) == 1 && sizeof(Unwind) == 1);

// The most elements a vector field may have: more is a malformed payload.
template <typename T>
constexpr uint32_t kMaxCount = 0;
template <>
constexpr uint32_t kMaxCount<uint64_t> = kMaxFrames;
template <>
constexpr uint32_t kMaxCount<lt_x11_msg> = LT_X11_MAX_MSGS;
template <>
constexpr uint32_t kMaxCount<lt_wl_msg> = LT_WL_MAX_MSGS;

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <typename... T>
  bool operator()(T&... v) {
    return (get(v) && ...);
  }
  template <typename F>
  bool optional(F&& part) {
    return done() || part();
  }
  bool check(bool ok) { return ok; }
  // Every byte consumed: a payload longer than its type is malformed.
  bool done() const { return p_ == end_; }

 private:
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  bool get(T& v) {
    if (left() < sizeof(T)) return false;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool get(bool& v) {
    uint8_t b = 0;
    if (!get(b) || b > 1) return false;
    v = b != 0;
    return true;
  }
  bool get(Unwind& v) {
    uint8_t b = 0;
    if (!get(b) || b > static_cast<uint8_t>(Unwind::kDwarf)) return false;
    v = static_cast<Unwind>(b);
    return true;
  }
  bool get(std::string& s) {
    uint32_t n = 0;
    if (!get(n) || n > kMaxFixedString || left() < n) return false;
    s.assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  template <typename T>
  bool get(std::vector<T>& v) {
    static_assert(kMaxCount<T> > 0, "a vector field needs a kMaxCount");
    uint32_t n = 0;
    if (!get(n) || n > kMaxCount<T> || left() < n * sizeof(T)) return false;
    v.resize(n);
    if (n) std::memcpy(v.data(), p_, n * sizeof(T));
    p_ += n * sizeof(T);
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

// E, written (const) or read into.
template <typename E, typename T>
concept Is = std::same_as<std::remove_const_t<E>, T>;

// Each event's record type and its payload: fixed fields in this order
// (docs/recording.md), or a CBOR document (doc/from below).
template <typename T>
struct Codec;

template <>
struct Codec<SpanEvent> {
  static constexpr RecordType kType = kSpan;
  template <typename A, Is<SpanEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.comm, e.span_id, e.start_ns, e.duration_ns,
             e.cpu_ns, e.runq_ns, e.steal_ns, e.probe_id, e.role, e.depth,
             e.key_fault_mask, e.keys, e.flags, e.in_flight) &&
           // Recordings before str keys end here.
           a.optional([&] {
             return a(e.key_str) && a.check(e.key_str.size() < LT_KEY_STR_LEN);
           });
  }
};

template <>
struct Codec<SampleEvent> {
  static constexpr RecordType kType = kSample;
  template <typename A, Is<SampleEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns, e.span_id, e.probe_id, e.stack.frames) &&
           // How it was unwound: absent from recordings before --call-graph.
           a.optional([&] { return a(e.stack.unwind, e.stack.truncated); });
  }
};

template <>
struct Codec<SpanDropEvent> {
  static constexpr RecordType kType = kSpanDrop;
  template <typename A, Is<SpanDropEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.span_id);
  }
};

template <>
struct Codec<PointEvent> {
  static constexpr RecordType kType = kPoint;
  template <typename A, Is<PointEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns, e.ret, e.probe_id, e.role, e.key_fault_mask,
             e.keys, e.frames);
  }
};

template <>
struct Codec<IoEvent> {
  static constexpr RecordType kType = kIo;
  template <typename A, Is<IoEvent> E>
  static bool fields(A& a, E& e) {
    if (!a(e.pid, e.tid, e.comm, e.ts_ns, e.enter_ns, e.exit_ns, e.inode,
           e.peer_inode, e.bytes, e.fd, e.op, e.chan, e.depth, e.span_start_ns,
           e.span_id, e.span_probe, e.head))
      return false;
    // A framed read's messages: their count, then each as the kernel sent
    // it.
    if (e.chan == LT_CHAN_WAYLAND) return a(e.frame_flags, e.wl_other, e.wl);
    if (e.chan == LT_CHAN_X11) return a(e.frame_flags, e.x11);
    return true;
  }
};

template <>
struct Codec<ExecEvent> {
  static constexpr RecordType kType = kExec;
  template <typename A, Is<ExecEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns);
  }
};

template <>
struct Codec<QueueEvent> {
  static constexpr RecordType kType = kQueue;
  template <typename A, Is<QueueEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.queue, e.ts_ns, e.waiting, e.oldest_due_ns);
  }
};

template <>
struct Codec<TickEvent> {
  static constexpr RecordType kType = kTick;
  template <typename A, Is<TickEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.ts_ns);  // run-wide: no pid or tid
  }
};

template <>
struct Codec<HangEvent> {
  static constexpr RecordType kType = kHang;
  template <typename A, Is<HangEvent> E>
  static bool fields(A& a, E& e) {
    if (!Codec<SpanEvent>::fields(a, e.span)) return false;
    // The hang's thread is its span's.
    if constexpr (!std::is_const_v<E>) {
      e.pid = e.span.pid;
      e.tid = e.span.tid;
    }
    return true;
  }
};

template <>
struct Codec<BlockEvent> {
  static constexpr RecordType kType = kBlock;
  template <typename A, Is<BlockEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns, e.span_id, e.probe_id, e.seq,
             e.stack.frames, e.kframes, e.stack.unwind, e.stack.truncated);
  }
};

template <>
struct Codec<WakeEvent> {
  static constexpr RecordType kType = kWake;
  template <typename A, Is<WakeEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns, e.wake_id, e.from_irq, e.waker_pid,
             e.waker_tid, e.waker_comm, e.stack.frames, e.kframes,
             e.stack.unwind, e.stack.truncated);
  }
};

template <>
struct Codec<WokenEvent> {
  static constexpr RecordType kType = kWoken;
  template <typename A, Is<WokenEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns, e.seq, e.wake_id);
  }
};

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

// A CBOR document's named fields, listed once per type: DocOut writes each
// into an object, DocIn reads each back. A field marked optional may be
// absent (recordings from before it); the others are required.
struct DocOut {
  json& j;
  template <typename T>
  void operator()(const char* name, const T& v, bool /*optional*/ = false) {
    j[name] = v;
  }
};
struct DocIn {
  const json& j;
  template <typename T>
  void operator()(const char* name, T& v, bool optional = false) {
    if (optional && !j.contains(name)) return;
    v = j.at(name).get<T>();
  }
};

template <typename F, typename T>
void thresholds_fields(F&& f, T& t) {
  f("slow_ns", t.slow_ns);
  f("sample_after_ns", t.sample_after_ns);
  f("sample_hz", t.sample_hz);
  f("record_all", t.record_all);
  f("delivery_drain_ns", t.delivery_drain_ns);
  f("slow_input_ns", t.slow_input_ns);
  f("barrier_stall_ns", t.barrier_stall_ns);
}

template <typename F, typename S>
void session_fields(F&& f, S& s) {
  f("abi_version", s.abi_version);
  f("looptrace_version", s.looptrace_version);
  f("thresholds", s.thresholds);
  f("probes", s.probes);
  f("command_line", s.command_line);
  f("target_pid", s.target_pid);
  f("has_input", s.has_input);
  f("input_hook", s.input_hook);
  f("start_ns", s.start_ns);
  f("hostname", s.hostname);
  f("kernel", s.kernel);
  f("start_realtime_ns", s.start_realtime_ns);
  f("ringbuf_bytes", s.ringbuf_bytes, true);  // 0: unknown
}

json session_json(const SessionEvent& s) {
  json j = json::object();
  session_fields(DocOut{j}, s);
  return j;
}

SessionEvent session_from(const json& j) {
  SessionEvent s;
  session_fields(DocIn{j}, s);
  return s;
}

json mappings_json(const MappingsEvent& m) {
  json maps = json::array();
  for (const MapEntry& e : m.maps)
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
    MapEntry me;
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
  s.frame.module =
      cut_name(j.at(2).get_ref<const std::string&>(), kMaxSymbolText);
  s.frame.function =
      cut_name(j.at(3).get_ref<const std::string&>(), kMaxSymbolText);
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

template <>
struct Codec<SessionEvent> {
  static constexpr RecordType kType = kSession;
  static json doc(const SessionEvent& e) { return session_json(e); }
  static SessionEvent from(const json& j) { return session_from(j); }
};

template <>
struct Codec<MappingsEvent> {
  static constexpr RecordType kType = kMappings;
  static json doc(const MappingsEvent& e) { return mappings_json(e); }
  static MappingsEvent from(const json& j) { return mappings_from(j); }
};

template <>
struct Codec<SymbolEvent> {
  static constexpr RecordType kType = kSymbol;
  static json doc(const SymbolEvent& e) { return symbol_json(e); }
  static SymbolEvent from(const json& j) { return symbol_from(j); }
};

template <>
struct Codec<EndEvent> {
  static constexpr RecordType kType = kEnd;
  static json doc(const EndEvent& e) { return end_json(e); }
  static EndEvent from(const json& j) { return end_from(j); }
};

template <typename E>
constexpr bool kCbor = requires(const E& e) {
  Codec<E>::doc(e);
};

template <typename E>
void write(Writer& w, const E& e) {
  if constexpr (kCbor<E>)
    w.put_cbor(Codec<E>::doc(e));
  else
    Codec<E>::fields(w, e);
}

template <typename E>
bool read(const uint8_t* data, size_t size, Event* out) {
  if constexpr (kCbor<E>) {
    try {
      // Even without exceptions the DOM parser throws for an absurd array
      // size (out_of_range.408).
      json j = json::from_cbor(data, data + size, true, false);
      if (j.is_discarded() || has_float(j)) return false;
      *out = Codec<E>::from(j);
    } catch (const json::exception&) {
      return false;
    } catch (const std::out_of_range&) {
      return false;
    }
    return true;
  } else {
    Reader r(data, size);
    E e;
    if (!(Codec<E>::fields(r, e) && r.done())) return false;
    *out = std::move(e);
    return true;
  }
}

// The event type whose Codec has `type`, read; false if none has.
template <size_t... I>
bool read_type(uint8_t type, const uint8_t* data, size_t size, Event* out,
               std::index_sequence<I...>) {
  bool ok = false;
  // Stops at the first type that matches; the result is `ok`.
  (void)((type == Codec<std::variant_alternative_t<I, Event>>::kType &&
          (ok = read<std::variant_alternative_t<I, Event>>(data, size, out),
           true)) ||
         ...);
  return ok;
}

}  // namespace

void encode_event(const Event& ev, std::string* out) {
  size_t at = out->size();
  out->append(5, '\0');  // type and length, filled in below
  Writer w(out);
  uint8_t type = std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        write(w, e);
        return static_cast<uint8_t>(Codec<E>::kType);
      },
      ev);
  (*out)[at] = static_cast<char>(type);
  uint32_t len = static_cast<uint32_t>(out->size() - at - 5);
  std::memcpy(&(*out)[at + 1], &len, 4);
}

bool decode_event(uint8_t type, const uint8_t* data, size_t size, Event* out) {
  return read_type(type, data, size, out,
                   std::make_index_sequence<std::variant_size_v<Event>>());
}

}  // namespace looptrace::rec

namespace looptrace {

static void to_json(nlohmann::json& j, const Thresholds& t) {
  j = nlohmann::json::object();
  rec::thresholds_fields(rec::DocOut{j}, t);
}
static void from_json(const nlohmann::json& j, Thresholds& t) {
  rec::thresholds_fields(rec::DocIn{j}, t);
}
static void to_json(nlohmann::json& j, const ProbeDef& p) {
  j = rec::probe_json(p);
}
static void from_json(const nlohmann::json& j, ProbeDef& p) {
  p = rec::probe_from(j);
}

}  // namespace looptrace
