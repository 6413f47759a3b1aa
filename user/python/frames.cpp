#include "python/frames.h"

#include <fmt/format.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "base/log.h"
#include "python/linetable.h"

namespace looptrace::python {
namespace {

constexpr size_t kMaxName = 256;
constexpr size_t kMaxFile = 1024;
constexpr size_t kMaxLineTable = 64 * 1024;

template <typename T>
bool read_at(const MemoryReader& read, uint32_t pid, uint64_t addr, T* out) {
  return read(pid, addr, out, sizeof(T));
}

// Code point `c` as UTF-8, control characters and what is no character
// escaped.
void append_code_point(uint32_t c, std::string* out) {
  if (c < 0x20 || c == 0x7f || c == '\\') {
    *out += fmt::format("\\x{:02x}", c);
  } else if (c < 0x80) {
    *out += static_cast<char>(c);
  } else if (c < 0x800) {
    *out += static_cast<char>(0xc0 | (c >> 6));
    *out += static_cast<char>(0x80 | (c & 63));
  } else if (c < 0x10000 && (c < 0xd800 || c > 0xdfff)) {
    *out += static_cast<char>(0xe0 | (c >> 12));
    *out += static_cast<char>(0x80 | ((c >> 6) & 63));
    *out += static_cast<char>(0x80 | (c & 63));
  } else if (c >= 0x10000 && c < 0x110000) {
    *out += static_cast<char>(0xf0 | (c >> 18));
    *out += static_cast<char>(0x80 | ((c >> 12) & 63));
    *out += static_cast<char>(0x80 | ((c >> 6) & 63));
    *out += static_cast<char>(0x80 | (c & 63));
  } else {
    *out += fmt::format("\\u{:04x}", c);
  }
}

// The bytes of a str's characters (`kind` bytes each: 1, 2 or 4) as
// UTF-8, "..." after them when the str has more than they hold (`length`).
std::string chars_to_utf8(const uint8_t* bytes, size_t nbytes, uint32_t kind,
                          int64_t length) {
  const size_t n = std::min<size_t>(length, nbytes / kind);
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, &bytes[i * kind], kind);  // little-endian
    append_code_point(c, &out);
  }
  if (static_cast<size_t>(length) > n) out += "...";
  return out;
}

// A str's state bits (PyASCIIObject.state; interned:2, kind:3, compact:1,
// ascii:1 in 3.11): its kind (1, 2 or 4 bytes a character), 0 for a str
// looptrace cannot read (not compact).
uint32_t str_kind(uint32_t state) {
  const uint32_t kind = (state >> 2) & 7;
  const bool compact = (state >> 5) & 1;
  return compact && (kind == 1 || kind == 2 || kind == 4) ? kind : 0;
}

// A compact str object (PyASCIIObject / PyCompactUnicodeObject: its
// characters follow it) as UTF-8, at most `max` characters; nullopt when
// it cannot be read or is not compact.
std::optional<std::string> read_str(const MemoryReader& read, uint32_t pid,
                                    const CodeLayout& l, uint64_t obj,
                                    size_t max) {
  int64_t length = 0;
  uint32_t state = 0;
  if (!obj || !read_at(read, pid, obj + l.unicode_length, &length) ||
      !read_at(read, pid, obj + l.unicode_state, &state) || length < 0)
    return std::nullopt;
  const uint32_t kind = str_kind(state);
  const bool ascii = (state >> 6) & 1;
  if (!kind) return std::nullopt;
  const size_t n = std::min<size_t>(length, max);
  std::vector<uint8_t> bytes(n * kind);
  const uint64_t data = obj + (ascii ? l.ascii_size : l.compact_size);
  if (n && !read(pid, data, bytes.data(), bytes.size())) return std::nullopt;
  return chars_to_utf8(bytes.data(), bytes.size(), kind, length);
}

// A str as the kernel sent it (lt_py_str and its bytes, at most `max`).
std::optional<std::string> kernel_str(const lt_py_str& s, const uint8_t* bytes,
                                      size_t max) {
  const uint32_t kind = str_kind(s.state);
  if (!kind || s.length < 0 || s.nbytes > max ||
      (s.length > 0 && s.nbytes == 0))
    return std::nullopt;
  return chars_to_utf8(bytes, s.nbytes, kind, s.length);
}

std::string base_name(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

}  // namespace

bool read_process_memory(uint32_t pid, uint64_t addr, void* out, size_t len) {
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  return process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(len);
}

CodeInfo read_code(const MemoryReader& read, uint32_t pid, const Layout& lay,
                   uint64_t code_type, uint64_t code) {
  const CodeLayout& l = lay.code;
  CodeInfo c;
  uint64_t type = 0, qualname = 0, filename = 0, table = 0;
  int32_t first = 0;
  if (!read_at(read, pid, code + l.ob_type, &type) || type != code_type ||
      !read_at(read, pid, code + l.co_qualname, &qualname) ||
      !read_at(read, pid, code + l.co_filename, &filename) ||
      !read_at(read, pid, code + l.co_linetable, &table) ||
      !read_at(read, pid, code + l.co_firstlineno, &first))
    return c;
  auto q = read_str(read, pid, l, qualname, kMaxName);
  auto f = read_str(read, pid, l, filename, kMaxFile);
  int64_t size = 0;
  if (!q || !f || !read_at(read, pid, table + l.bytes_size, &size) ||
      size < 0 || static_cast<size_t>(size) > kMaxLineTable)
    return c;
  c.linetable.resize(size);
  if (size && !read(pid, table + l.bytes_sval, c.linetable.data(), size))
    return c;
  c.qualname = std::move(*q);
  c.filename = std::move(*f);
  c.firstlineno = first;
  c.ok = true;
  return c;
}

std::optional<KernelCode> decode_code_record(const void* data, size_t size) {
  auto r = std::make_unique<lt_py_code_rec>();
  if (size < sizeof(*r)) return std::nullopt;
  std::memcpy(r.get(), data, sizeof(*r));
  if (r->hdr.type != LT_REC_PYCODE || r->hdr.size != sizeof(*r) ||
      r->table_nbytes > LT_PY_TABLE_BYTES || r->table_size < 0 ||
      r->table_nbytes > static_cast<uint64_t>(r->table_size) || !r->code)
    return std::nullopt;
  KernelCode k;
  k.pid = r->hdr.pid;
  k.code = r->code;
  auto q = kernel_str(r->qualname, r->qualname_bytes, LT_PY_NAME_BYTES);
  auto f = kernel_str(r->filename, r->filename_bytes, LT_PY_FILE_BYTES);
  // A str the kernel could not read: the code is named from the
  // process's memory instead (ok stays false).
  if (!q || !f) return k;
  k.info.qualname = std::move(*q);
  k.info.filename = std::move(*f);
  k.info.firstlineno = r->firstlineno;
  k.info.linetable.assign(reinterpret_cast<const char*>(r->table),
                          r->table_nbytes);
  k.info.ok = true;
  return k;
}

std::vector<uint64_t> interleave(const std::vector<uint64_t>& native,
                                 const std::vector<lt_pyframe>& py,
                                 const std::vector<uint64_t>& py_addrs,
                                 const std::function<bool(uint64_t)>& is_eval) {
  std::vector<uint64_t> out;
  size_t next = 0;  // the next Python frame to place
  // One eval call's run, innermost first: up to the entry frame.
  auto put_run = [&] {
    for (; next < py.size(); ++next) {
      if (py_addrs[next]) out.push_back(py_addrs[next]);
      if (py[next].code & LT_PYFRAME_ENTRY) {
        ++next;
        break;
      }
    }
  };
  size_t placed_at = std::string::npos;  // where the last run went
  for (uint64_t addr : native) {
    const bool eval = next < py.size() && is_eval(addr);
    if (eval) put_run();
    out.push_back(addr);
    if (eval) placed_at = out.size();
  }
  if (next < py.size()) {
    std::vector<uint64_t> rest;
    std::swap(out, rest);
    const size_t at = placed_at == std::string::npos ? rest.size() : placed_at;
    out.assign(rest.begin(), rest.begin() + at);
    while (next < py.size()) put_run();
    out.insert(out.end(), rest.begin() + at, rest.end());
  }
  return out;
}

std::optional<lt_py_proc> PyFrames::attach(uint32_t pid,
                                           const std::vector<MapEntry>& maps) {
  forget(pid);
  auto in = find_interpreter(pid, maps);
  if (!in.ok()) {
    if (refused_.insert(in.status().message()).second)
      log::warn("pid {}: {}", pid, in.status().message());
    return std::nullopt;
  }
  if (!*in) return std::nullopt;
  log::debug("python", "pid {}: CPython {} in {}, _PyRuntime at {:#x}", pid,
             version_string((*in)->version_hex), (*in)->path, (*in)->runtime);
  lt_py_proc p{};
  p.runtime = (*in)->runtime;
  p.function_type = (*in)->function_type;
  p.method_type = (*in)->method_type;
  p.code_type = (*in)->code_type;
  p.off = (*in)->frames;
  p.code = (*in)->code;
  add(pid, std::move(**in));
  return p;
}

void PyFrames::add(uint32_t pid, Interpreter in) {
  forget(pid);
  procs_[pid] = std::move(in);
}

void PyFrames::forget(uint32_t pid) {
  procs_.erase(pid);
  codes_.erase(codes_.lower_bound({pid, 0}), codes_.lower_bound({pid + 1, 0}));
  // Its frames named so far keep their addresses (stacks hold them); new
  // ones are named afresh.
  constexpr int64_t kLow = INT64_MIN;
  index_.erase(index_.lower_bound({pid, 0, kLow}),
               index_.lower_bound({pid + 1, 0, kLow}));
}

void PyFrames::learn(const KernelCode& k) {
  if (!k.info.ok || !procs_.count(k.pid)) return;
  ++kernel_names_;
  codes_[{k.pid, k.code}] = k.info;
  // Another code object at the address of one named before (that one was
  // freed): frames of it are named afresh.
  constexpr int64_t kLow = INT64_MIN;
  index_.erase(index_.lower_bound({k.pid, k.code, kLow}),
               index_.lower_bound({k.pid, k.code + 1, kLow}));
}

const CodeInfo& PyFrames::code(uint32_t pid, const Interpreter& in,
                               uint64_t code) {
  auto [it, fresh] = codes_.try_emplace({pid, code});
  if (fresh) {
    // Not sent by the kernel (its record lost, or the code seen before an
    // exec): read now, if it is still there.
    ++late_reads_;
    it->second = read_code(read_, pid, *in.layout, in.code_type, code);
  }
  return it->second;
}

uint64_t PyFrames::address_of(uint32_t pid, const Interpreter& in,
                              const lt_pyframe& f) {
  const uint64_t code_addr = f.code & ~LT_PYFRAME_ENTRY;
  if (!code_addr) return 0;
  const CodeInfo& c = code(pid, in, code_addr);
  const uint64_t start = code_addr + in.layout->code.co_code_adaptive;
  // prev_instr is one unit before the code while the first one starts.
  const int64_t offset =
      f.instr >= start ? static_cast<int64_t>(f.instr - start) : -1;
  auto key = std::make_tuple(pid, c.ok ? code_addr : 0, c.ok ? offset : 0);
  auto [it, fresh] = index_.try_emplace(key, frames_.size());
  if (fresh) {
    Frame fr;
    fr.addr = kPyFrameTag | frames_.size();
    if (c.ok) {
      int line = offset < 0 ? c.firstlineno
                            : line_at(c.linetable, c.firstlineno, offset);
      if (line < 0) line = c.firstlineno;
      fr.module = c.filename;
      fr.function =
          fmt::format("{} ({}:{})", c.qualname, base_name(c.filename), line);
    } else {
      fr.module = "[python]";
      fr.function = "(unknown)";
    }
    frames_.push_back(std::move(fr));
  }
  return kPyFrameTag | it->second;
}

uint64_t PyFrames::callable_address(uint32_t pid, uint64_t code) {
  auto it = procs_.find(pid);
  if (!code || it == procs_.end()) return 0;
  // Before its first instruction: the function's own line.
  return address_of(pid, it->second, lt_pyframe{code, 0});
}

void PyFrames::merge(uint32_t pid, Stack* st) {
  std::shared_ptr<const PyStack> py = std::move(st->py);
  auto it = procs_.find(pid);
  if (!py || py->frames.empty() || it == procs_.end()) return;
  const Interpreter& in = it->second;
  std::vector<uint64_t> addrs;
  for (const lt_pyframe& f : py->frames)
    addrs.push_back(address_of(pid, in, f));
  st->frames = interleave(st->frames, py->frames, addrs, [&](uint64_t a) {
    return a >= in.eval_start && a <= in.eval_end;
  });
  if (py->flags & LT_PY_CUT) st->python_cut = true;
}

Frame PyFrames::frame(uint64_t addr) const {
  const uint64_t i = addr & ~kPyFrameTag;
  if (i < frames_.size()) return frames_[i];
  Frame f;
  f.addr = addr;
  return f;
}

}  // namespace looptrace::python
