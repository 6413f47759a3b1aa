#include "v8/frames.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "base/text.h"
#include "proc/process.h"
#include "python/frames.h"

namespace looptrace::v8 {
namespace {

// Bounds on what a process supplies.
constexpr size_t kMaxName = 256;          // characters of a function name
constexpr size_t kMaxScriptName = 1024;   // of a script's name
constexpr int32_t kMaxSource = 64 << 20;  // a script's source scanned for lines
constexpr int32_t kMaxLines = 4 << 20;    // line ends read from V8's table
constexpr int32_t kMaxTable = 1 << 20;    // a source position table's bytes
constexpr int kMaxStringDepth = 16;       // cons and thin strings followed
constexpr size_t kMaxPlaced = 1 << 16;    // frame states cached

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

void append_utf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    *out += static_cast<char>(c);
  } else if (c < 0x800) {
    *out += static_cast<char>(0xc0 | (c >> 6));
    *out += static_cast<char>(0x80 | (c & 63));
  } else if (c < 0x10000) {
    *out += static_cast<char>(0xe0 | (c >> 12));
    *out += static_cast<char>(0x80 | ((c >> 6) & 63));
    *out += static_cast<char>(0x80 | (c & 63));
  } else {
    *out += static_cast<char>(0xf0 | (c >> 18));
    *out += static_cast<char>(0x80 | ((c >> 12) & 63));
    *out += static_cast<char>(0x80 | ((c >> 6) & 63));
    *out += static_cast<char>(0x80 | (c & 63));
  }
}

std::string base_name(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

// A file a Node may keep V8 in: node, nodejs, libnode.so.
bool node_like(const std::string& path) {
  const std::string b = base_name(path);
  return b.rfind("node", 0) == 0 || b.rfind("libnode", 0) == 0;
}

// The word index of frame offset `off` in a window starting at `window`.
bool slot_of(int32_t off, int32_t window, uint32_t len, uint8_t* out) {
  if (off == kAbsent || off < window || off + 8 > window + int32_t(len) ||
      (off - window) % 8 != 0)
    return false;
  *out = static_cast<uint8_t>((off - window) / 8);
  return true;
}

}  // namespace

Result<lt_v8_proc> kernel_layout(const V8Layout& l) {
  if (l.tagging.tagged_size != kAbsent && l.tagging.tagged_size != 8)
    return Status::Error(fmt::format(
        "{}: V8 {} uses pointer compression, which looptrace does not read",
        l.path, l.v8_version));
  const FrameOffsets& f = l.frame;
  int32_t lo = std::min({f.function, f.context_or_frame_type, f.bytecode_array,
                         f.bytecode_offset, 0});
  lt_v8_proc p{};
  p.window = static_cast<int16_t>(lo);
  p.window_len = static_cast<uint16_t>(16 - lo);
  if (lo < -LT_JS_WINDOW + 16 || p.window_len > LT_JS_WINDOW)
    return Status::Error(fmt::format(
        "{}: V8 {}'s frame slots span {} bytes, more than looptrace reads",
        l.path, l.v8_version, 16 - lo));
  if (!slot_of(0, lo, p.window_len, &p.slot_saved_fp) ||
      !slot_of(8, lo, p.window_len, &p.slot_ret) ||
      !slot_of(f.context_or_frame_type, lo, p.window_len, &p.slot_marker) ||
      !slot_of(f.function, lo, p.window_len, &p.slot_function) ||
      !slot_of(f.bytecode_array, lo, p.window_len, &p.slot_bytecode_array) ||
      !slot_of(f.bytecode_offset, lo, p.window_len, &p.slot_bytecode_offset))
    return Status::Error(fmt::format(
        "{}: V8 {}'s frame slots are not 8-byte words looptrace reads", l.path,
        l.v8_version));
  if (l.objects.js_function_shared < 0 || l.objects.js_function_shared > 4096 ||
      l.tagging.heap_object_tag < 0 || l.tagging.heap_object_tag_mask <= 0)
    return Status::Error(
        fmt::format("{}: V8 {}'s JSFunction layout is not one looptrace reads",
                    l.path, l.v8_version));
  p.js_function_shared = static_cast<uint16_t>(l.objects.js_function_shared);
  p.heap_object_tag = static_cast<uint64_t>(l.tagging.heap_object_tag);
  p.heap_object_tag_mask =
      static_cast<uint64_t>(l.tagging.heap_object_tag_mask);
  return p;
}

int line_of(const std::vector<int32_t>& line_ends, int pos) {
  if (pos < 0) return 0;
  auto it = std::lower_bound(line_ends.begin(), line_ends.end(), pos);
  return static_cast<int>(it - line_ends.begin()) + 1;
}

std::optional<int64_t> source_position_raw(const std::string& table,
                                           int offset) {
  size_t i = 0;
  auto next = [&](int64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; i < table.size() && shift < 64; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(table[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
        return true;
      }
    }
    return false;
  };
  int64_t code = 0, raw = 0;
  std::optional<int64_t> found;
  while (i < table.size()) {
    int64_t dc = 0, dp = 0;
    if (!next(&dc) || !next(&dp)) break;
    code += dc >= 0 ? dc : -dc - 1;
    raw += dp;
    if (code > offset) break;
    found = raw;
  }
  return found;
}

std::optional<int> source_position(const std::string& table, int offset) {
  std::optional<int64_t> raw = source_position_raw(table, offset);
  if (!raw) return std::nullopt;
  return script_offset(*raw);
}

std::vector<uint64_t> place(const std::vector<uint64_t>& native,
                            const std::vector<uint64_t>& pcs,
                            const std::vector<std::vector<uint64_t>>& addrs,
                            const std::function<bool(uint64_t)>& native_code) {
  const size_t n = std::min(pcs.size(), addrs.size());
  // The native frame each JS frame takes (npos: none found).
  constexpr size_t npos = SIZE_MAX;
  std::vector<size_t> at(n, npos);
  std::vector<size_t> by_native(native.size(), npos);
  for (size_t j = 0, from = 0; j < n; ++j) {
    if (addrs[j].empty()) continue;
    for (size_t i = from; i < native.size(); ++i)
      if (native[i] == pcs[j]) {
        at[j] = i;
        by_native[i] = j;
        from = i + 1;
        break;
      }
  }
  std::vector<uint64_t> out;
  size_t next = 0;  // the first JS frame not yet put
  auto put_unplaced = [&](size_t upto) {
    for (; next < upto; ++next)
      if (at[next] == npos)
        out.insert(out.end(), addrs[next].begin(), addrs[next].end());
  };
  for (size_t i = 0; i < native.size(); ++i) {
    const size_t j = by_native[i];
    if (j == npos) {
      out.push_back(native[i]);
      continue;
    }
    if (i == 0 && native_code(native[0])) out.push_back(native[0]);
    put_unplaced(j);  // inner to j: before it
    out.insert(out.end(), addrs[j].begin(), addrs[j].end());
    next = j + 1;
    // The outer ones left follow the last placed frame.
    if (std::none_of(at.begin() + long(j) + 1, at.end(),
                     [](size_t x) { return x != npos; }))
      put_unplaced(n);
  }
  put_unplaced(n);  // none was placed
  return out;
}

// A process's V8 heap, read through a MemoryReader with one layout.
class JsFrames::Heap {
 public:
  Heap(const V8Layout& l, const MemoryReader& read, uint32_t pid)
      : l_(l), read_(read), pid_(pid) {}

  bool is_heap(uint64_t w) const {
    return (w & uint64_t(l_.tagging.heap_object_tag_mask)) ==
           uint64_t(l_.tagging.heap_object_tag);
  }
  bool is_smi(uint64_t w) const {
    return (w & uint64_t(l_.tagging.smi_tag_mask)) ==
           uint64_t(l_.tagging.smi_tag);
  }
  int64_t smi(uint64_t w) const {
    return static_cast<int64_t>(w) >>
           (l_.tagging.smi_value_shift + l_.tagging.smi_shift_size);
  }
  // The object's untagged address.
  uint64_t at(uint64_t obj) const {
    return obj - uint64_t(l_.tagging.heap_object_tag);
  }
  bool read(uint64_t addr, void* out, size_t n) const {
    return read_(pid_, addr, out, n);
  }
  std::optional<uint64_t> word(uint64_t obj, int32_t field) const {
    uint64_t w = 0;
    if (!is_heap(obj) || field == kAbsent || !read(at(obj) + field, &w, 8))
      return std::nullopt;
    return w;
  }
  std::optional<int32_t> i32(uint64_t obj, int32_t field) const {
    int32_t v = 0;
    if (!is_heap(obj) || field == kAbsent || !read(at(obj) + field, &v, 4))
      return std::nullopt;
    return v;
  }
  // The object's instance type; -1 when it is none or unreadable.
  int type(uint64_t obj) const {
    auto map = word(obj, l_.objects.heap_object_map);
    uint16_t t = 0;
    if (!map || !is_heap(*map) ||
        !read(at(*map) + l_.objects.map_instance_type, &t, 2))
      return -1;
    return t;
  }
  bool is_string_type(int t) const {
    return t >= 0 && t < l_.types.first_nonstring;
  }

  // The string as UTF-8, at most max characters (then "..."); nullopt when
  // it is none or a kind not read.
  std::optional<std::string> string(uint64_t obj, size_t max) const {
    std::u32string chars;
    if (!chars_of(obj, 0, max + 1, &chars, 0)) return std::nullopt;
    std::string out;
    for (size_t i = 0; i < chars.size() && i < max; ++i)
      append_utf8(chars[i], &out);
    out = printable(out);
    if (chars.size() > max) out += "...";
    return out;
  }

  // Characters [from, from + n) of a string into out (fewer at its end).
  bool chars_of(uint64_t obj, int32_t from, size_t n, std::u32string* out,
                int depth) const {
    const int t = type(obj);
    if (!is_string_type(t) || depth > kMaxStringDepth) return false;
    auto len = i32(obj, l_.objects.string_length);
    if (!len || *len < 0) return false;
    if (from >= *len || n == 0) return true;
    const size_t want = std::min<size_t>(n, size_t(*len - from));
    const int rep = t & l_.strings.representation_mask;
    const bool one_byte = (t & l_.strings.encoding_mask) == l_.strings.one_byte;
    if (rep == l_.strings.seq) {
      const int32_t chars_off = one_byte ? l_.objects.seq_one_byte_string_chars
                                         : l_.objects.seq_two_byte_string_chars;
      if (chars_off == kAbsent) return false;
      const size_t unit = one_byte ? 1 : 2;
      std::string bytes(want * unit, '\0');
      if (!read(at(obj) + chars_off + size_t(from) * unit, bytes.data(),
                bytes.size()))
        return false;
      for (size_t i = 0; i < want; ++i) {
        uint32_t c = one_byte ? uint8_t(bytes[i])
                              : uint32_t(uint8_t(bytes[2 * i])) |
                                    uint32_t(uint8_t(bytes[2 * i + 1])) << 8;
        // A surrogate pair as one code point; a lone one as U+FFFD.
        if (!one_byte && c >= 0xd800 && c < 0xdc00 && i + 1 < want) {
          uint32_t lo = uint32_t(uint8_t(bytes[2 * i + 2])) |
                        uint32_t(uint8_t(bytes[2 * i + 3])) << 8;
          if (lo >= 0xdc00 && lo < 0xe000) {
            c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
            ++i;
          }
        }
        if (c >= 0xd800 && c < 0xe000) c = 0xfffd;
        out->push_back(c);
      }
      return true;
    }
    if (rep == l_.strings.thin) {
      auto actual = word(obj, l_.objects.thin_string_actual);
      return actual && chars_of(*actual, from, n, out, depth + 1);
    }
    if (rep == l_.strings.cons) {
      auto first = word(obj, l_.objects.cons_string_first);
      auto second = word(obj, l_.objects.cons_string_second);
      if (!first || !second) return false;
      auto first_len = i32(*first, l_.objects.string_length);
      if (!first_len || *first_len < 0) return false;
      if (from < *first_len) {
        if (!chars_of(*first, from, want, out, depth + 1)) return false;
        const size_t got = std::min<size_t>(want, size_t(*first_len - from));
        if (got < want) return chars_of(*second, 0, want - got, out, depth + 1);
        return true;
      }
      return chars_of(*second, from - *first_len, want, out, depth + 1);
    }
    if (rep == l_.strings.sliced) {
      auto parent = word(obj, l_.objects.sliced_string_parent);
      auto offset = word(obj, l_.objects.sliced_string_offset);
      if (!parent || !offset || !is_smi(*offset)) return false;
      return chars_of(*parent, from + int32_t(smi(*offset)), want, out,
                      depth + 1);
    }
    if (rep == l_.strings.external &&
        l_.objects.external_string_resource != kAbsent &&
        l_.tagging.system_pointer_size == 8 && !(t & kUncachedExternal)) {
      // V8 9..11 caches the resource's data pointer after it (not
      // exported); an "uncached" one has none.
      auto data = word(obj, l_.objects.external_string_resource + 8);
      if (!data || *data == 0) return false;
      const size_t unit = one_byte ? 1 : 2;
      std::string bytes(want * unit, '\0');
      if (!read(*data + size_t(from) * unit, bytes.data(), bytes.size()))
        return false;
      for (size_t i = 0; i < want; ++i)
        out->push_back(one_byte ? uint8_t(bytes[i])
                                : uint32_t(uint8_t(bytes[2 * i])) |
                                      uint32_t(uint8_t(bytes[2 * i + 1])) << 8);
      return true;
    }
    return false;
  }

  const V8Layout& layout() const { return l_; }

 private:
  // kUncachedExternalStringMask (V8 9..11).
  static constexpr int kUncachedExternal = 0x10;
  const V8Layout& l_;
  const MemoryReader& read_;
  uint32_t pid_;
};

JsFrames::JsFrames(MemoryReader read) : read_(std::move(read)) {}
JsFrames::JsFrames() : read_(python::read_process_memory) {}

std::optional<lt_v8_proc> JsFrames::attach(uint32_t pid,
                                           const std::vector<MapEntry>& maps) {
  const Result<std::string> exe = proc::exe_path(pid);
  Proc p;
  std::string chosen;
  std::optional<lt_v8_proc> kernel;
  for (const MapEntry& m : maps) {
    if (!m.is_file() || !m.executable()) continue;
    p.file_code.emplace_back(m.start, m.end);
    if (kernel) continue;
    const bool is_exe = exe.ok() && *exe == m.path;
    if (!is_exe && !node_like(m.path)) continue;
    auto [it, fresh] = layouts_.try_emplace(m.path, Status::Error("not read"));
    if (fresh) {
      Result<V8Layout> l = read_v8_layout(m.path);
      if (l.ok())
        it->second = std::make_shared<const V8Layout>(std::move(*l));
      else
        it->second = l.status();
    }
    if (!it->second.ok()) {
      if (node_like(m.path) && refused_.insert(m.path).second)
        log::warn("pid {}: JavaScript frames stay native frames: {}", pid,
                  it->second.status().message());
      continue;
    }
    Result<lt_v8_proc> k = kernel_layout(**it->second);
    if (!k.ok()) {
      if (refused_.insert(m.path).second)
        log::warn("pid {}: JavaScript frames stay native frames: {}", pid,
                  k.status().message());
      continue;
    }
    kernel = *k;
    p.layout = *it->second;
    chosen = m.path;
  }
  if (!kernel) return std::nullopt;
  log::debug("v8", "pid {}: V8 {} in {}", pid, p.layout->v8_version, chosen);
  procs_[pid] = std::move(p);
  return kernel;
}

void JsFrames::forget(uint32_t pid) {
  procs_.erase(pid);
  std::erase_if(functions_,
                [pid](const auto& e) { return e.first.first == pid; });
  std::erase_if(lines_, [pid](const auto& e) { return e.first.first == pid; });
  std::erase_if(tables_, [pid](const auto& e) { return e.first.first == pid; });
  std::erase_if(index_,
                [pid](const auto& e) { return std::get<0>(e.first) == pid; });
  std::erase_if(placed_,
                [pid](const auto& e) { return std::get<0>(e.first) == pid; });
}

const FunctionInfo& JsFrames::function(uint32_t pid, uint64_t sfi) {
  auto [it, fresh] = functions_.try_emplace({pid, sfi});
  if (!fresh) return it->second;
  FunctionInfo& fi = it->second;
  auto proc = procs_.find(pid);
  if (proc == procs_.end()) return fi;
  const V8Layout& l = *proc->second.layout;
  Heap h(l, read_, pid);
  const uint64_t t0 = now_ns();
  ++functions_read_;
  if (h.type(sfi) != l.types.shared_function_info) {
    ++not_functions_;
    read_ns_ += now_ns() - t0;
    return fi;
  }
  fi.ok = true;
  auto nsi = h.word(sfi, l.objects.sfi_name_or_scope_info);
  const int nsi_type = nsi ? h.type(*nsi) : -1;
  std::optional<std::string> name;
  if (h.is_string_type(nsi_type)) {
    name = h.string(*nsi, kMaxName);
  } else if (nsi_type == l.types.scope_info &&
             l.scope.scope_info_first_vars != kAbsent) {
    // A function's ScopeInfo (V8 9..11): its header's slots, then a name
    // and an info per context local, then the function's own name and
    // slot, the inferred name, then its start and end positions (Smis).
    const uint64_t base = h.at(*nsi) + 8;
    auto slot = [&](int64_t i) -> std::optional<uint64_t> {
      uint64_t w = 0;
      if (i < 0 || i > 4096 || !h.read(base + 8 * uint64_t(i), &w, 8))
        return std::nullopt;
      return w;
    };
    auto ncl_w = slot(l.scope.scope_info_ncontextlocals);
    const int64_t ncl = ncl_w && h.is_smi(*ncl_w) ? h.smi(*ncl_w) : int64_t{-1};
    if (ncl >= 0 && ncl < 1024) {
      // Up to 75 names inline, else one hash table.
      const int64_t names = ncl < 75 ? ncl : 1;
      int64_t i = l.scope.scope_info_first_vars + names + ncl;
      // The name (a String; an empty one or a Smi 0 when none), then the
      // slot index Smi; a saved class variable may come first.
      for (int k = 0; k < 2 && !name; ++k, ++i) {
        auto w = slot(i);
        if (w && h.is_heap(*w) && h.is_string_type(h.type(*w)))
          name = h.string(*w, kMaxName);
      }
      // The inferred name ("obj.method" for an anonymous function) and the
      // positions: the first Smi pair after the name's slot index.
      for (int k = 0; k < 4; ++k, ++i) {
        auto w = slot(i);
        if (!w) break;
        if (h.is_heap(*w)) {
          if (name && name->empty() && h.is_string_type(h.type(*w)))
            name = h.string(*w, kMaxName);
          continue;
        }
        if (k == 0) continue;  // the function's slot index
        auto end = slot(i + 1);
        if (end && h.is_smi(*end) && h.smi(*w) >= 0 && h.smi(*w) <= h.smi(*end))
          fi.start_pos = static_cast<int>(h.smi(*w));
        break;
      }
    }
  }
  fi.name = name && !name->empty() ? *name : "(anonymous)";
  auto script = h.word(sfi, l.objects.sfi_script_or_debug_info);
  if (script && h.type(*script) == l.types.script) {
    fi.script_obj = *script;
    auto sname = h.word(*script, l.objects.script_name);
    if (sname && h.is_heap(*sname) && h.is_string_type(h.type(*sname)))
      fi.script = h.string(*sname, kMaxScriptName).value_or("");
  }
  read_ns_ += now_ns() - t0;
  return fi;
}

int JsFrames::line_at(uint32_t pid, const Heap& h, uint64_t script, int pos) {
  if (pos < 0 || script == 0) return 0;
  const V8Layout& l = h.layout();
  auto [it, fresh] = lines_.try_emplace({pid, script});
  std::vector<int32_t>& ends = it->second;
  if (fresh) {
    // V8's own table when it has made one (a FixedArray of Smis), else
    // the source's newlines.
    auto le = h.word(script, l.objects.script_line_ends);
    if (le && h.is_heap(*le) && h.type(*le) == l.types.fixed_array) {
      auto n = h.word(*le, l.objects.fixed_array_base_length);
      if (n && h.is_smi(*n) && h.smi(*n) >= 0 && h.smi(*n) <= kMaxLines) {
        std::vector<uint64_t> words(size_t(h.smi(*n)));
        if (words.empty() || h.read(h.at(*le) + l.objects.fixed_array_data,
                                    words.data(), words.size() * 8))
          for (uint64_t w : words) ends.push_back(int32_t(h.smi(w)));
      }
    } else if (auto src = h.word(script, l.objects.script_source);
               src && h.is_heap(*src)) {
      auto len = h.i32(*src, l.objects.string_length);
      std::u32string chars;
      if (len && *len > 0 && *len <= kMaxSource &&
          h.chars_of(*src, 0, size_t(*len), &chars, 0))
        for (size_t i = 0; i < chars.size(); ++i)
          if (chars[i] == '\n') ends.push_back(int32_t(i));
    }
  }
  return line_of(ends, pos);
}

std::optional<int> JsFrames::bytecode_position(uint32_t pid, const Heap& h,
                                               const lt_jsframe& f) {
  const V8Layout& l = h.layout();
  if (!h.is_heap(f.bytecode_array) || !h.is_smi(f.bytecode_offset) ||
      h.type(f.bytecode_array) != l.types.bytecode_array ||
      l.objects.bytecode_array_data == kAbsent)
    return std::nullopt;
  // The frame holds the offset from the tagged array's start.
  const int64_t offset =
      h.smi(f.bytecode_offset) -
      (l.objects.bytecode_array_data - l.tagging.heap_object_tag);
  if (offset < 0) return std::nullopt;  // the function's entry
  // V8 11 exports no BytecodeArray::source_position_table: its fourth
  // tagged field (after length, constant pool and handler table).
  int32_t field = l.objects.bytecode_array_source_position_table;
  if (field == kAbsent && l.objects.fixed_array_base_length == 8 &&
      l.v8_version.rfind("11.", 0) == 0)
    field = 32;
  if (field == kAbsent) return std::nullopt;
  const std::string& t = table(pid, h, f.bytecode_array, field);
  if (t.empty()) return std::nullopt;
  return source_position(t, static_cast<int>(offset));
}

const std::string& JsFrames::table(uint32_t pid, const Heap& h, uint64_t obj,
                                   int32_t field) {
  const V8Layout& l = h.layout();
  auto [it, fresh] = tables_.try_emplace({pid, obj});
  if (fresh) {
    auto t = h.word(obj, field);
    auto n = t ? h.word(*t, l.objects.fixed_array_base_length) : std::nullopt;
    if (n && h.is_smi(*n) && h.smi(*n) > 0 && h.smi(*n) <= kMaxTable) {
      std::string bytes(size_t(h.smi(*n)), '\0');
      // A ByteArray's bytes follow its length, as a FixedArray's data.
      if (h.read(h.at(*t) + l.objects.fixed_array_data, bytes.data(),
                 bytes.size()))
        it->second = std::move(bytes);
    }
  }
  return it->second;
}

std::vector<std::pair<uint64_t, int>> JsFrames::code_frames(uint32_t pid,
                                                            const Heap& h,
                                                            const lt_jsframe& f,
                                                            bool innermost) {
  const V8Layout& l = h.layout();
  std::vector<std::pair<uint64_t, int>> out;
  // V8 11 (Node 20) exports neither JSFunction::code nor the Code fields
  // that place its instructions; these are its layout, checked against
  // the deoptimization data's index V8 does export.
  if (l.v8_version.rfind("11.", 0) != 0 || l.tagging.tagged_size != 8 ||
      l.objects.deoptimization_data_sfi_index != 6 ||
      l.code_kinds.baseline == kAbsent ||
      l.objects.code_source_position_table == kAbsent ||
      l.objects.code_deoptimization_data == kAbsent)
    return out;
  constexpr int32_t kFunctionCode = 48, kInstructionStart = 40,
                    kInstructionSize = 56, kCodeFlags = 48;
  constexpr int64_t kLiteralArray = 2, kInliningPositions = 7;
  auto code = h.word(f.function, kFunctionCode);
  if (!code || h.type(*code) != l.types.code) return out;
  auto flags = h.i32(*code, kCodeFlags);
  const int kind =
      flags ? (*flags & l.code_kinds.field_mask) >> l.code_kinds.field_shift
            : -1;
  // Maglev and TurboFan follow Sparkplug in CodeKind.
  if (kind != l.code_kinds.baseline + 1 && kind != l.code_kinds.baseline + 2)
    return out;
  auto start = h.word(*code, kInstructionStart);
  auto size = h.i32(*code, kInstructionSize);
  if (!start || !size || f.pc < *start || f.pc >= *start + uint64_t(*size))
    return out;
  // A caller's pc is the return address: the call is before it.
  const int offset = int(f.pc - *start) - (innermost ? 0 : 1);
  const std::string& positions =
      table(pid, h, *code, l.objects.code_source_position_table);
  std::optional<int64_t> raw = source_position_raw(positions, offset);
  if (!raw) return out;
  auto deopt = h.word(*code, l.objects.code_deoptimization_data);
  auto element = [&](uint64_t array, int64_t i) -> std::optional<uint64_t> {
    uint64_t w = 0;
    if (!h.is_heap(array) ||
        !h.read(h.at(array) + l.objects.fixed_array_data + 8 * uint64_t(i), &w,
                8))
      return std::nullopt;
    return w;
  };
  // Inlined frames, innermost first: each inlining id names the inlined
  // function (in the literal array) and where its caller called it.
  for (int depth = 0; depth < 64; ++depth) {
    const int inlining = inlining_id(*raw);
    if (inlining < 0) break;
    auto inl = deopt ? element(*deopt, kInliningPositions) : std::nullopt;
    auto lits = deopt ? element(*deopt, kLiteralArray) : std::nullopt;
    struct {
      int64_t position;
      int32_t function_id;
      int32_t pad;
    } entry{};
    if (!inl || !lits || !h.is_heap(*inl) ||
        !h.read(
            h.at(*inl) + l.objects.fixed_array_data + 16 * uint64_t(inlining),
            &entry, sizeof(entry)))
      return {};
    if (entry.function_id < 0) return {};
    auto sfi = element(*lits, entry.function_id);
    if (!sfi) return {};
    // A weak reference's tag.
    out.emplace_back(*sfi & ~uint64_t{2}, script_offset(*raw));
    raw = entry.position;
  }
  out.emplace_back(f.sfi, script_offset(*raw));
  return out;
}

std::vector<uint64_t> JsFrames::addresses_of(uint32_t pid, const Proc& p,
                                             const lt_jsframe& f,
                                             bool innermost) {
  auto key = std::make_tuple(pid, f.sfi, f.function, f.pc, f.bytecode_array,
                             f.bytecode_offset, innermost);
  // Each closure is a function of its own: a run that lasts (monitor)
  // would keep them all. The names stay cached per SFI.
  if (placed_.size() >= kMaxPlaced) placed_.clear();
  auto [it, fresh] = placed_.try_emplace(key);
  if (!fresh) return it->second;
  std::vector<uint64_t>& out = it->second;
  if (!function(pid, f.sfi).ok) return out;
  Heap h(*p.layout, read_, pid);
  const uint64_t t0 = now_ns();
  std::vector<std::pair<uint64_t, int>> frames;
  if (std::optional<int> pos = bytecode_position(pid, h, f))
    frames.emplace_back(f.sfi, *pos);
  else
    frames = code_frames(pid, h, f, innermost);
  if (frames.empty()) frames.emplace_back(f.sfi, -1);
  read_ns_ += now_ns() - t0;
  for (const auto& [sfi, pos] : frames) {
    const uint64_t a = address_of(pid, h, sfi, pos);
    if (a) out.push_back(a);
  }
  return out;
}

uint64_t JsFrames::address_of(uint32_t pid, const Heap& h, uint64_t sfi,
                              int pos) {
  const FunctionInfo& fi = function(pid, sfi);
  if (!fi.ok) return 0;
  const uint64_t t0 = now_ns();
  const int line =
      line_at(pid, h, fi.script_obj, pos >= 0 ? pos : fi.start_pos);
  read_ns_ += now_ns() - t0;
  auto key = std::make_tuple(pid, sfi, line);
  auto [it, fresh] = index_.try_emplace(key, frames_.size());
  if (fresh) {
    Frame fr;
    fr.addr = kJsFrameTag | frames_.size();
    fr.module = fi.script.empty() ? "[js]" : fi.script;
    // A file by its base name, as Python's; node:internal/timers whole.
    const std::string where = fi.script.empty()     ? "?"
                              : fi.script[0] == '/' ? base_name(fi.script)
                                                    : fi.script;
    fr.function = line > 0 ? fmt::format("{} ({}:{})", fi.name, where, line)
                           : fmt::format("{} ({})", fi.name, where);
    frames_.push_back(std::move(fr));
  }
  return kJsFrameTag | it->second;
}

void JsFrames::recover(uint32_t pid, Stack* st) {
  auto it = procs_.find(pid);
  if (!st->ustack || (st->js && !st->js->frames.empty()) || it == procs_.end())
    return;
  const V8Layout& l = *it->second.layout;
  const UserStack& u = *st->ustack;
  const uint64_t sp = u.regs[7];
  const size_t len = u.bytes.size() & ~size_t{7};
  auto word = [&](uint64_t addr, uint64_t* out) {
    if (addr < sp || addr + 8 > sp + len) return false;
    std::memcpy(out, &u.bytes[addr - sp], 8);
    return true;
  };
  Heap h(l, read_, pid);
  // Markers are Smis of the frame's type in the tag's bits only.
  const int shift = l.tagging.smi_value_shift;
  std::vector<uint64_t> exits;
  for (int32_t t : {l.frame_types.exit, l.frame_types.builtin_exit})
    if (t != kAbsent) exits.push_back(uint64_t(t) << shift);
  const int32_t marker_off = l.frame.context_or_frame_type;
  // The frame-pointer chain from fp (its code at pc), within the copy; the
  // first frame is skipped when it is an exit frame. Whether it found a
  // function.
  auto walk = [&](uint64_t fp, uint64_t pc, bool skip_first) {
    auto js = std::make_shared<JsStack>();
    uint64_t saved = 0;
    for (int i = 0; i < LT_JS_WALK; ++i) {
      uint64_t marker = 0, fn = 0, ret = 0;
      if (!word(fp, &saved) || !word(fp + 8, &ret)) break;
      if ((i > 0 || !skip_first) && word(fp + marker_off, &marker) &&
          word(fp + l.frame.function, &fn) && h.is_heap(marker) &&
          h.is_heap(fn)) {
        auto sfi = h.word(fn, l.objects.js_function_shared);
        if (js->frames.size() >= LT_MAX_JSFRAMES) {
          js->flags |= LT_JS_CUT;
          break;
        }
        lt_jsframe f{};
        f.pc = pc;
        f.sfi = sfi.value_or(0);
        f.function = fn;
        uint64_t ba = 0, bo = 0;
        word(fp + l.frame.bytecode_array, &ba);
        word(fp + l.frame.bytecode_offset, &bo);
        f.bytecode_array = ba;
        f.bytecode_offset = bo;
        js->frames.push_back(f);
      }
      pc = ret;
      if (saved <= fp) break;
      fp = saved;
    }
    // A marker's value in some other word: no function there.
    if (std::none_of(js->frames.begin(), js->frames.end(),
                     [&](const lt_jsframe& f) {
                       return f.sfi && function(pid, f.sfi).ok;
                     }))
      return false;
    st->js = std::move(js);
    ++recovered_;
    return true;
  };
  // As the kernel walks (a copy taken by ptrace, a test's), then from
  // each exit frame's marker.
  if (walk(u.regs[6], u.regs[16], false)) return;
  for (size_t off = 0; off + 8 <= len; off += 8) {
    uint64_t w = 0;
    std::memcpy(&w, &u.bytes[off], 8);
    if (std::find(exits.begin(), exits.end(), w) == exits.end()) continue;
    // The exit frame's fp, its marker below it.
    if (walk(sp + off - uint64_t(marker_off), 0, true)) return;
  }
}

void JsFrames::merge(uint32_t pid, Stack* st) {
  std::shared_ptr<const JsStack> js = std::move(st->js);
  auto it = procs_.find(pid);
  if (!js || js->frames.empty() || it == procs_.end()) return;
  const Proc& p = it->second;
  const uint64_t t0 = now_ns();
  std::vector<uint64_t> pcs;
  std::vector<std::vector<uint64_t>> addrs;
  const uint64_t sampled = st->frames.empty() ? 0 : st->frames[0];
  for (const lt_jsframe& f : js->frames) {
    pcs.push_back(f.pc);
    addrs.push_back(addresses_of(pid, p, f, f.pc == sampled));
  }
  st->frames = place(st->frames, pcs, addrs, [&p](uint64_t pc) {
    return std::any_of(
        p.file_code.begin(), p.file_code.end(),
        [pc](const auto& r) { return pc >= r.first && pc < r.second; });
  });
  // A cut walk (LT_JS_CUT) is counted by the kernel (lost.js_cut); the
  // stack's native frames are whole.
  ++merged_;
  merged_frames_ += js->frames.size();
  merge_ns_ += now_ns() - t0;
}

Frame JsFrames::frame(uint64_t addr) const {
  const uint64_t i = addr & ~kJsFrameTag;
  if (i < frames_.size()) return frames_[i];
  Frame f;
  f.addr = addr;
  return f;
}

}  // namespace looptrace::v8
