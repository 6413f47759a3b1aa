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
// Part of an array field, as it is in memory: a recording's fixed layout
// kept when the array grew (IoEvent::head).
template <typename P>
struct ByteRange {
  P* p;
  size_t n;
};
template <typename P>
ByteRange<P> byte_range(P* p, size_t n) {
  return {p, n};
}

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
  void put(const ByteRange<const uint8_t>& b) {
    out_->append(reinterpret_cast<const char*>(b.p), b.n);
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
  bool get(ByteRange<uint8_t>& b) {
    if (left() < b.n) return false;
    std::memcpy(b.p, p_, b.n);
    p_ += b.n;
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
           }) &&
           // Recordings before the stopped split end here.
           a.optional([&] {
             return a(e.stopped_ns) && a.check(e.stopped_ns <= e.duration_ns);
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
           a.optional([&] { return a(e.stack.unwind, e.stack.truncated); }) &&
           // Recordings before the Python cut had its own flag end here.
           a.optional([&] { return a(e.stack.python_cut); });
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

// IoEvent::head's bytes recorded before LT_IO_HEAD grew to 32.
constexpr size_t kIoHeadFirst = 24;

template <>
struct Codec<IoEvent> {
  static constexpr RecordType kType = kIo;
  template <typename A, Is<IoEvent> E>
  static bool fields(A& a, E& e) {
    // The message's first kIoHeadFirst bytes where recordings always had
    // them; the rest (a TIMELINE's present time) last, absent from
    // recordings made before.
    static_assert(LT_IO_HEAD > kIoHeadFirst);
    auto first = byte_range(e.head.data(), kIoHeadFirst);
    auto rest =
        byte_range(e.head.data() + kIoHeadFirst, LT_IO_HEAD - kIoHeadFirst);
    if (!a(e.pid, e.tid, e.comm, e.ts_ns, e.enter_ns, e.exit_ns, e.inode,
           e.peer_inode, e.bytes, e.fd, e.op, e.chan, e.depth, e.span_start_ns,
           e.span_id, e.span_probe, first))
      return false;
    // A framed read's messages: their count, then each as the kernel sent
    // it.
    if (e.chan == LT_CHAN_WAYLAND) return a(e.frame_flags, e.wl_other, e.wl);
    if (e.chan == LT_CHAN_X11) return a(e.frame_flags, e.x11);
    return a.optional([&] { return a(rest); });
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
             e.stack.frames, e.kframes, e.stack.unwind, e.stack.truncated) &&
           a.optional([&] { return a(e.stack.python_cut); });
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

template <>
struct Codec<StopEvent> {
  static constexpr RecordType kType = kStop;
  template <typename A, Is<StopEvent> E>
  static bool fields(A& a, E& e) {
    return a(e.pid, e.tid, e.ts_ns, e.start_ns) &&
           a.check(e.start_ns <= e.ts_ns);
  }
};

// --- CBOR events -----------------------------------------------------------
//
// A CBOR document's fields, listed once per type by doc_fields(f, v): f(name,
// member[, optional]) for each. DocOut writes them, DocIn reads them back,
// into an object by name or, for the bulky kPositional types (a process's
// mappings, symbols), into an array in the order listed. A field marked
// optional may be absent (recordings from before it); the others are
// required. Nested types (kDoc), and lists of them, are written by their
// own list; after_read() checks and derives what a list cannot say.

template <typename T>
constexpr bool kPositional = false;
template <>
constexpr bool kPositional<MapEntry> = true;
template <>
constexpr bool kPositional<SymbolEvent> = true;

// The types with a field list (doc_fields below), nested ones included.
template <typename T>
constexpr bool kDoc = false;
template <typename T>
requires(std::is_same_v<T, MapEntry> || std::is_same_v<T, MappingsEvent> ||
         std::is_same_v<T, SymbolEvent> || std::is_same_v<T, ThreadHistogram> ||
         std::is_same_v<T, EndEvent> || std::is_same_v<T, Thresholds> ||
         std::is_same_v<T, SessionEvent> || std::is_same_v<T, KeyDef> ||
         std::is_same_v<T, ProbeDef::InputMatch> ||
         std::is_same_v<T, ProbeDef::FrameMatch> ||
         std::is_same_v<T, ProbeDef>) constexpr bool kDoc<T> = true;

template <typename T>
json to_doc(const T& v);
template <typename T>
T from_doc(const json& j);

// A trivially copyable struct (a key's compiled spec) as a CBOR byte string
// of its exact size.
template <typename T>
struct Raw {
  T& v;
};
template <typename T>
Raw(T&) -> Raw<T>;

// The kernel's counters: a newer build may count more, an older fewer;
// those this build knows are read.
template <typename T>
struct Prefix {
  T& v;
};
template <typename T>
Prefix(T&) -> Prefix<T>;

struct DocOut {
  json& j;
  template <typename T>
  void operator()(const char* name, const T& v, bool /*optional*/ = false) {
    put(name, to(v));
  }
  template <typename T>
  void operator()(const char* name, const std::optional<T>& v, bool = false) {
    if (v) put(name, to(*v));
  }

 private:
  template <typename T>
  static json to(const T& v) {
    if constexpr (kDoc<T>) {
      return to_doc(v);
    } else if constexpr (requires { requires kDoc<typename T::value_type>; }) {
      json a = json::array();
      for (const auto& e : v) a.push_back(to_doc(e));
      return a;
    } else {
      return v;
    }
  }
  template <typename T>
  static json to(const Raw<T>& r) {
    const auto* b = reinterpret_cast<const uint8_t*>(&r.v);
    return json::binary(std::vector<uint8_t>(b, b + sizeof(T)));
  }
  template <typename T>
  static json to(const Prefix<T>& p) {
    return p.v;
  }
  void put(const char* name, json v) {
    if (j.is_array())
      j.push_back(std::move(v));
    else
      j[name] = std::move(v);
  }
};

struct DocIn {
  const json& j;
  size_t next = 0;  // kPositional: the index of the next field
  template <typename T>
  void operator()(const char* name, T&& v, bool optional = false) {
    const json* f = find(name);
    if (!f) {
      if (optional) return;
      throw std::out_of_range(name);
    }
    from(*f, v);
  }

 private:
  const json* find(const char* name) {
    if (j.is_array()) return next < j.size() ? &j[next++] : nullptr;
    auto it = j.find(name);
    return it == j.end() ? nullptr : &*it;
  }
  template <typename T>
  static void from(const json& f, T& v) {
    if constexpr (kDoc<T>) {
      v = from_doc<T>(f);
    } else if constexpr (requires { requires kDoc<typename T::value_type>; }) {
      if (!f.is_array()) throw std::out_of_range("not a list");
      v.clear();
      for (const json& e : f) v.push_back(from_doc<typename T::value_type>(e));
    } else {
      v = f.get<T>();
    }
  }
  template <typename T>
  static void from(const json& f, std::optional<T>& v) {
    T t;
    from(f, t);
    v = std::move(t);
  }
  template <typename T>
  static void from(const json& f, Raw<T> r) {
    const auto& bin = f.get_binary();
    if (bin.size() != sizeof(T)) throw std::out_of_range("raw field size");
    std::memcpy(&r.v, bin.data(), sizeof(T));
  }
  template <typename T>
  static void from(const json& f, Prefix<T> p) {
    auto c = f.get<std::vector<typename T::value_type>>();
    for (size_t i = 0; i < c.size() && i < p.v.size(); ++i) p.v[i] = c[i];
  }
};

template <typename F, Is<MapEntry> E>
void doc_fields(F&& f, E& e) {
  f("start", e.start);
  f("end", e.end);
  f("pgoff", e.pgoff);
  f("perms", e.perms);
  f("dev", e.dev);
  f("inode", e.inode);
  f("path", e.path);
  f("deleted", e.deleted);
}

template <typename F, Is<MappingsEvent> E>
void doc_fields(F&& f, E& e) {
  f("pid", e.pid);
  f("tid", e.tid);
  f("ts_ns", e.ts_ns);
  f("maps", e.maps);
}

template <typename F, Is<SymbolEvent> E>
void doc_fields(F&& f, E& e) {
  f("pid", e.pid);
  f("addr", e.frame.addr);
  f("module", e.frame.module);
  f("function", e.frame.function);
  f("offset", e.frame.offset);
}

template <typename F, Is<ThreadHistogram> E>
void doc_fields(F&& f, E& e) {
  f("pid", e.pid);
  f("tid", e.tid);
  f("comm", e.comm);
  f("probe_id", e.probe_id);
  f("role", e.role);
  f("count", e.count);
  f("sum_ns", e.sum_ns);
  f("max_ns", e.max_ns);
  f("slots", e.slots);
}

template <typename F, Is<EndEvent> E>
void doc_fields(F&& f, E& e) {
  f("end_ns", e.end_ns);
  f("stop_reason", e.stop_reason);
  f("hists", e.hists);
  f("counters", Prefix{e.counters.bpf});
  f("decode_errors", e.counters.decode_errors);
  f("hook_misses", e.counters.hook_misses, true);
}

template <typename F, Is<Thresholds> T>
void doc_fields(F&& f, T& t) {
  f("slow_ns", t.slow_ns);
  f("sample_after_ns", t.sample_after_ns);
  f("sample_hz", t.sample_hz);
  f("record_all", t.record_all);
  f("delivery_drain_ns", t.delivery_drain_ns);
  f("slow_input_ns", t.slow_input_ns);
  f("barrier_stall_ns", t.barrier_stall_ns);
  f("refresh_ns", t.refresh_ns, true);  // none before frames: 60 Hz
}

template <typename F, Is<SessionEvent> S>
void doc_fields(F&& f, S& s) {
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

template <typename F, Is<KeyDef> K>
void doc_fields(F&& f, K& k) {
  f("name", k.name);
  f("names", k.names, true);  // [[value, name], ...]; none before enums
  f("expr", k.expr);
  f("format", k.format);
  f("spec", Raw{k.spec});
}

template <typename F, Is<ProbeDef::InputMatch> M>
void doc_fields(F&& f, M& m) {
  f("type_key", m.type_key);
  f("time_key", m.time_key);
  f("kinds", m.kinds);
}

template <typename F, Is<ProbeDef::FrameMatch> M>
void doc_fields(F&& f, M& m) {
  f("names", m.names);
  f("end", m.end, true);  // none before --frame-end
}

template <typename F, Is<ProbeDef> P>
void doc_fields(F&& f, P& p) {
  f("id", p.id);
  f("outermost", p.outermost, true);          // none before nesting
  f("only_if", p.only_if, true);              // none before GObject closures
  f("return_offset", p.return_offset, true);  // none before call sites
  f("role", p.role);
  f("binary", p.binary);
  f("symbol", p.symbol);
  f("label", p.label, true);      // none before labels
  f("profile", p.profile, true);  // none before the monitor's metrics
  f("path", p.path);
  f("resolved_symbol", p.resolved_symbol);
  f("file_offset", p.file_offset);
  f("async_mask", p.async_mask);
  f("msghdr", p.msghdr);
  f("keys", p.keys);
  f("input", p.input, true);
  f("frame", p.frame, true);  // none before frames
  f("phase", p.phase, true);  // none before phases
}

// What a field list cannot say: values checked, fields derived.
template <typename T>
void after_read(T&) {}
void after_read(KeyDef& k) {
  if (k.format < KeyFormat{} || k.format > KeyFormat::kPyFunc)
    throw std::out_of_range("key format");
  k.role = key_role_for(k.name);
}
// A symbol's names are kept up to kMaxSymbolText (a recording's replay
// keeps every symbol).
void after_read(SymbolEvent& s) {
  s.frame.module = cut_name(s.frame.module, kMaxSymbolText);
  s.frame.function = cut_name(s.frame.function, kMaxSymbolText);
}
void after_read(ProbeDef& p) {
  if (p.input && (p.input->type_key == 0 || p.input->type_key > p.keys.size() ||
                  p.input->time_key > p.keys.size()))
    throw std::out_of_range("input key");
  if (p.frame && p.frame->names.size() > LT_FRAME_NAMES)
    throw std::out_of_range("frame names");
}

template <typename T>
json to_doc(const T& v) {
  json j = kPositional<T> ? json::array() : json::object();
  doc_fields(DocOut{j}, v);
  return j;
}

template <typename T>
T from_doc(const json& j) {
  if (j.is_array() != kPositional<T>) throw std::out_of_range("document shape");
  T v;
  doc_fields(DocIn{j}, v);
  after_read(v);
  return v;
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

// Records' documents nest a few levels; nlohmann's CBOR reader recurses
// once per level, so a hostile record of 20 000 nested arrays overflowed
// the stack (the record_decode fuzzer). The DOM parser, refusing deeper.
constexpr int kMaxDocDepth = 32;

class BoundedDom : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  explicit BoundedDom(json& root) : Base(root, false) {}
  bool start_object(std::size_t n) {
    return ++depth_ <= kMaxDocDepth && Base::start_object(n);
  }
  bool end_object() {
    --depth_;
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    return ++depth_ <= kMaxDocDepth && Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }

 private:
  int depth_ = 0;
};

// A record's CBOR document; discarded when malformed or too deep.
json parse_doc(const uint8_t* data, size_t size) {
  json j;
  BoundedDom dom(j);
  if (!json::sax_parse(data, data + size, &dom, json::input_format_t::cbor,
                       true))
    return json(json::value_t::discarded);
  return j;
}

template <>
struct Codec<SessionEvent> {
  static constexpr RecordType kType = kSession;
  static json doc(const SessionEvent& e) { return to_doc(e); }
  static SessionEvent from(const json& j) { return from_doc<SessionEvent>(j); }
};

template <>
struct Codec<MappingsEvent> {
  static constexpr RecordType kType = kMappings;
  static json doc(const MappingsEvent& e) { return to_doc(e); }
  static MappingsEvent from(const json& j) {
    return from_doc<MappingsEvent>(j);
  }
};

template <>
struct Codec<SymbolEvent> {
  static constexpr RecordType kType = kSymbol;
  static json doc(const SymbolEvent& e) { return to_doc(e); }
  static SymbolEvent from(const json& j) { return from_doc<SymbolEvent>(j); }
};

template <>
struct Codec<EndEvent> {
  static constexpr RecordType kType = kEnd;
  static json doc(const EndEvent& e) { return to_doc(e); }
  static EndEvent from(const json& j) { return from_doc<EndEvent>(j); }
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
      json j = parse_doc(data, size);
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
