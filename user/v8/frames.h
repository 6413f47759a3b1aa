// JavaScript frames in stacks: the frames the kernel found in a V8 (Node)
// thread's frame-pointer chain (trace/events.h JsStack: a pc and the
// SharedFunctionInfo of each), named from the process's memory with the
// layout its V8 build exports (v8/metadata.h): the function's name, its
// script and line (the line the frame is at for an interpreted frame, the
// function's first line otherwise). Each named frame stands in a stack as
// an address of its own (kJsFrameTag | index) that JsSymbolizer resolves,
// in place of the native frame of the same pc (JIT code, the interpreter's
// trampoline), as Python frames do (python/frames.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "looptrace/abi.h"
#include "model/frame.h"
#include "model/mapping.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"
#include "v8/metadata.h"

namespace looptrace::v8 {

// JavaScript frames' addresses: above any user or kernel address, apart
// from Python's 0xfe (python/frames.h).
inline constexpr uint64_t kJsFrameTag = 0xfd00'0000'0000'0000ull;
inline bool is_js_frame(uint64_t addr) { return (addr >> 56) == 0xfd; }

// Reads `len` bytes at `addr` of a process; false unless all of them.
using MemoryReader =
    std::function<bool(uint32_t pid, uint64_t addr, void* out, size_t len)>;

// What the kernel needs of a layout to walk its frames (abi.h
// lt_v8_proc). An error (one line) names what does not fit: pointer
// compression (its heap fields are not pointers), a frame slot out of the
// window the kernel reads.
Result<lt_v8_proc> kernel_layout(const V8Layout& l);

// The 1-based line of script offset `pos` given the offsets of the
// script's line ends (each line's '\n'); 0 for a negative pos.
int line_of(const std::vector<int32_t>& line_ends, int pos);

// The script offset where bytecode `offset` is, from a BytecodeArray's
// source position table (V8's encoding: per entry a zigzag VLQ of the
// bytecode offset's delta, negative for an expression, then one of the
// raw SourcePosition's delta, the script offset above its bit 0); nullopt
// when the table has no entry at or before it.
std::optional<int> source_position(const std::string& table, int offset);
// The same entry's raw SourcePosition (a compiled code's table: its
// script offset and inlining id).
std::optional<int64_t> source_position_raw(const std::string& table,
                                           int offset);
// A raw SourcePosition's parts: bit 0 "external", the script offset above
// it (30 bits), then the inlining id plus one (0: not inlined) in 16 bits.
inline int script_offset(int64_t raw) {
  return static_cast<int>((raw >> 1) & ((int64_t{1} << 30) - 1));
}
inline int inlining_id(int64_t raw) {
  return static_cast<int>((raw >> 31) & 0xffff) - 1;
}

// The native frames with the JavaScript frames put in: JS frame j (its
// kernel pc pcs[j], innermost first) takes the place of the first native
// frame after the last placed one with the same pc; the innermost native
// frame (the sampled pc) keeps its place and the JS frame follows it when
// `native_code` says the pc is in a file's code (a builtin, V8's C++), not
// JIT code. A JS frame found in no native frame goes just before the next
// placed one, or after the last (at the end when none was placed).
// `addrs[j]` are the frames JS frame j stands for, innermost first (more
// than one: functions its compiled code inlined; none: skip it).
std::vector<uint64_t> place(const std::vector<uint64_t>& native,
                            const std::vector<uint64_t>& pcs,
                            const std::vector<std::vector<uint64_t>>& addrs,
                            const std::function<bool(uint64_t)>& native_code);

// What a SharedFunctionInfo says about its function.
struct FunctionInfo {
  bool ok = false;          // it was one (a moved or freed object is not)
  std::string name;         // "(anonymous)" when it has none
  std::string script;       // its script's name; "" when none
  uint64_t script_obj = 0;  // the Script (tagged), 0 when none
  int start_pos = -1;       // script offset of the function; -1: unknown
};

class JsFrames {
 public:
  explicit JsFrames(MemoryReader read);
  JsFrames();

  // What the kernel needs to read the JavaScript frames of pid (its
  // mappings `maps`): nullopt when it runs no V8 looptrace can read (a
  // line says why, once per file, when it runs a Node whose metadata it
  // does not know).
  std::optional<lt_v8_proc> attach(uint32_t pid,
                                   const std::vector<MapEntry>& maps);
  // pid exec'd or exited: what was known of it no longer holds.
  void forget(uint32_t pid);

  // A stack whose kernel walk found no JavaScript frame (the thread ran
  // native code built without frame pointers: a V8 runtime function, a
  // Node binding) but that has the copy of its top: st->js from the
  // frames the copy holds, found as the kernel walks (from rbp: for a copy
  // taken otherwise, by ptrace) or else from the exit frame V8 pushed where
  // JavaScript called out (its marker, then the frame-pointer chain), each
  // frame's function read from the process. Before fix_stack drops the
  // copy.
  void recover(uint32_t pid, Stack* st);

  // Names st->js's frames and puts them among st->frames; drops st->js.
  void merge(uint32_t pid, Stack* st);

  // The frame an address from merge() stands for.
  Frame frame(uint64_t addr) const;

  // SharedFunctionInfos read, and frames the kernel found that were none.
  uint64_t functions_read() const { return functions_read_; }
  // Stacks whose JavaScript frames came from their copy (recover).
  uint64_t recovered() const { return recovered_; }
  // Stacks merged, their JavaScript frames, and the time merge() took
  // (names and lines read, or found in the caches, and placed).
  uint64_t merged() const { return merged_; }
  uint64_t merged_frames() const { return merged_frames_; }
  uint64_t merge_ns() const { return merge_ns_; }
  uint64_t not_functions() const { return not_functions_; }
  // Time spent reading the process's memory for names and lines.
  uint64_t read_ns() const { return read_ns_; }

  // The function an SFI of pid is (cached per SFI).
  const FunctionInfo& function(uint32_t pid, uint64_t sfi);

 private:
  struct Proc {
    std::shared_ptr<const V8Layout> layout;
    // The executable mappings of files at attach: a pc there is not JIT
    // code.
    std::vector<std::pair<uint64_t, uint64_t>> file_code;
  };
  class Heap;

  // The frames JS frame f stands for (innermost: f.pc is the sampled pc).
  std::vector<uint64_t> addresses_of(uint32_t pid, const Proc& p,
                                     const lt_jsframe& f, bool innermost);
  // The frame of function `sfi` at script offset pos (-1: its start).
  uint64_t address_of(uint32_t pid, const Heap& h, uint64_t sfi, int pos);
  int line_at(uint32_t pid, const Heap& h, uint64_t script, int pos);
  std::optional<int> bytecode_position(uint32_t pid, const Heap& h,
                                       const lt_jsframe& f);
  // A compiled frame's functions and script offsets, innermost first:
  // those its code inlined at f.pc, then its own; empty when unknown.
  std::vector<std::pair<uint64_t, int>> code_frames(uint32_t pid, const Heap& h,
                                                    const lt_jsframe& f,
                                                    bool innermost);
  // The ByteArray in field `field` of obj, cached per obj.
  const std::string& table(uint32_t pid, const Heap& h, uint64_t obj,
                           int32_t field);

  MemoryReader read_;
  std::map<uint32_t, Proc> procs_;
  // Layouts by path (an error: the file is no V8 looptrace reads).
  std::map<std::string, Result<std::shared_ptr<const V8Layout>>> layouts_;
  std::set<std::string> refused_;  // files whose line was said
  std::map<std::pair<uint32_t, uint64_t>, FunctionInfo> functions_;
  // (pid, script) -> its line ends.
  std::map<std::pair<uint32_t, uint64_t>, std::vector<int32_t>> lines_;
  // (pid, bytecode array or code) -> its source position table.
  std::map<std::pair<uint32_t, uint64_t>, std::string> tables_;
  // A frame as the kernel found it (pid, sfi, function, pc, bytecode
  // array and offset, innermost) -> the frames it stands for.
  std::map<std::tuple<uint32_t, uint64_t, uint64_t, uint64_t, uint64_t,
                      uint64_t, bool>,
           std::vector<uint64_t>>
      placed_;
  // (pid, sfi, line) -> index in frames_.
  std::map<std::tuple<uint32_t, uint64_t, int>, uint64_t> index_;
  std::vector<Frame> frames_;
  uint64_t functions_read_ = 0;
  uint64_t recovered_ = 0;
  uint64_t merged_ = 0;
  uint64_t merged_frames_ = 0;
  uint64_t merge_ns_ = 0;
  uint64_t not_functions_ = 0;
  uint64_t read_ns_ = 0;
};

// JavaScript frames' addresses by JsFrames, the rest by `inner`.
class JsSymbolizer : public Symbolizer {
 public:
  JsSymbolizer(Symbolizer* inner, const JsFrames* js)
      : inner_(inner), js_(js) {}
  Frame symbolize(uint32_t pid, uint64_t addr) override {
    return is_js_frame(addr) ? js_->frame(addr) : inner_->symbolize(pid, addr);
  }

 private:
  Symbolizer* inner_;
  const JsFrames* js_;
};

}  // namespace looptrace::v8
