// Python frames in stacks: the code objects and instructions the kernel
// read from a CPython thread's frame chain (trace/events.h PyStack), named
// from the process's memory (qualname, file, line: each code object read
// once) and interleaved with the native frames where the interpreter runs
// them. Each named Python frame stands in a stack as an address of its
// own (kPyFrameTag | index) that PySymbolizer resolves: the recording, the
// analyses and the reports carry it like any other frame.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "model/frame.h"
#include "model/mapping.h"
#include "python/interpreter.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"

namespace looptrace::python {

// Python frames' addresses: above any user or kernel address of x86-64
// and arm64 (kernel addresses start at 0xffff...; this tag's 0xfe is no
// canonical address's top byte).
inline constexpr uint64_t kPyFrameTag = 0xfe00'0000'0000'0000ull;
inline bool is_py_frame(uint64_t addr) { return (addr >> 56) == 0xfe; }

// What a code object says about itself.
struct CodeInfo {
  bool ok = false;  // read (a freed or unreadable one is not)
  std::string qualname;
  std::string filename;
  int firstlineno = 0;
  std::string linetable;  // co_linetable's bytes
};

// Reads `len` bytes at `addr` of a process; false unless all of them.
using MemoryReader =
    std::function<bool(uint32_t pid, uint64_t addr, void* out, size_t len)>;

// process_vm_readv.
bool read_process_memory(uint32_t pid, uint64_t addr, void* out, size_t len);

// The code object at `code` of an interpreter with layout `l` (`code_type`:
// its PyCode_Type), through `read`. Names are cut at 256 bytes, file names
// at 1024, the location table at 64 KiB; bytes that are not printable
// ASCII or UTF-8 text are escaped.
CodeInfo read_code(const MemoryReader& read, uint32_t pid, const Layout& l,
                   uint64_t code_type, uint64_t code);

// A code object's names as the kernel read them (LT_REC_PYCODE) when a
// frame of it was first seen in process `pid`.
struct KernelCode {
  uint32_t pid = 0;
  uint64_t code = 0;
  CodeInfo info;  // not ok: a name the kernel could not read
};

// An LT_REC_PYCODE record of `size` bytes; nullopt when it is malformed
// (its names are escaped and cut as read_code's).
std::optional<KernelCode> decode_code_record(const void* data, size_t size);

// The native frames with the Python frames put in: each run of Python
// frames one call of the eval loop executes (innermost first, up to and
// including a frame marked LT_PYFRAME_ENTRY) comes just inside that
// call's native frame (`is_eval`), innermost run first. Runs left over
// (a native walk that stopped early) follow the last eval frame that got
// one, or end the stack when none did. `py_addrs[i]` is the address standing
// for py.frames[i] (0: skip it).
std::vector<uint64_t> interleave(const std::vector<uint64_t>& native,
                                 const std::vector<lt_pyframe>& py,
                                 const std::vector<uint64_t>& py_addrs,
                                 const std::function<bool(uint64_t)>& is_eval);

class PyFrames {
 public:
  explicit PyFrames(MemoryReader read = read_process_memory)
      : read_(std::move(read)) {}

  // What the kernel needs to read the Python frames of pid (its mappings
  // `maps`): nullopt when it runs no CPython looptrace can read (a line
  // says why, once per file, when it runs one).
  std::optional<lt_py_proc> attach(uint32_t pid,
                                   const std::vector<MapEntry>& maps);
  // What attach found in pid: its frames are named with `in` from now on.
  void add(uint32_t pid, Interpreter in);
  // pid exec'd or exited: what was known of it no longer holds.
  void forget(uint32_t pid);

  // What the kernel read of a code object: frames of it are named from
  // this from now on, rather than from the process's memory.
  void learn(const KernelCode& k);

  // Names st->py's frames and puts them among st->frames (python_cut when
  // the kernel cut them); drops st->py.
  void merge(uint32_t pid, Stack* st);

  // Code objects named from the kernel's records, and from the process's
  // memory after the fact (no record came).
  uint64_t kernel_names() const { return kernel_names_; }
  uint64_t late_reads() const { return late_reads_; }

  // The address standing for a Python callable whose code object the
  // kernel read (LT_KEY_OP_PYCODE): "qualname (file:first line)". 0 for
  // no code or a process not attached.
  uint64_t callable_address(uint32_t pid, uint64_t code);

  // The frame an address from merge() stands for.
  Frame frame(uint64_t addr) const;

 private:
  uint64_t address_of(uint32_t pid, const Interpreter& in, const lt_pyframe& f);
  const CodeInfo& code(uint32_t pid, const Interpreter& in, uint64_t code);

  MemoryReader read_;
  std::map<uint32_t, Interpreter> procs_;
  std::set<std::string> refused_;  // files whose line was said
  std::map<std::pair<uint32_t, uint64_t>, CodeInfo> codes_;
  // (pid, code, instruction offset) -> index in frames_.
  std::map<std::tuple<uint32_t, uint64_t, int64_t>, uint64_t> index_;
  std::vector<Frame> frames_;
  uint64_t kernel_names_ = 0;
  uint64_t late_reads_ = 0;
};

// Python frames' addresses by PyFrames, the rest by `inner`.
class PySymbolizer : public Symbolizer {
 public:
  PySymbolizer(Symbolizer* inner, const PyFrames* py)
      : inner_(inner), py_(py) {}
  Frame symbolize(uint32_t pid, uint64_t addr) override {
    return is_py_frame(addr) ? py_->frame(addr) : inner_->symbolize(pid, addr);
  }

 private:
  Symbolizer* inner_;
  const PyFrames* py_;
};

}  // namespace looptrace::python
