// V8's post-mortem metadata: the v8dbg_* constants a V8 build exports
// (gen-postmortem-metadata.py; Node builds it in) that describe its frames
// and heap objects. With them a walker outside the process can name the
// JavaScript function a frame runs (frame -> JSFunction -> SharedFunctionInfo
// -> name and Script) without the process having been started with any
// flag. This reads them from the ELF file into a V8Layout; docs/v8.md says
// which ones and from where.
//
// Most constants are initialized ints in .data, their values in the file. A
// constant whose value is 0 lands in .bss instead (the compiler does not
// store zeros), so the file has no bytes for it: read_v8_layout gives it
// the 0 the loader fills .bss with and lists it in process_resident;
// fill_from_process reads what the running process holds there, in case a
// build computes one at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace::v8 {

// A constant the binary does not export (an optional one, or a frame kind
// this V8 version does not have). No real offset, marker or type is this.
inline constexpr int32_t kAbsent = INT32_MIN;

// Where a constant's value came from.
enum class Origin : uint8_t {
  kAbsent,   // no symbol: the field holds kAbsent
  kFile,     // the symbol's bytes in the file (.data, .rodata)
  kProcess,  // a .bss symbol: 0 from the file, the process's value once
             // fill_from_process has run
  kDerived,  // computed from other constants (a rule in metadata.cpp)
};

struct Constant {
  std::string symbol;  // the v8dbg_ name found, or the first one tried
  uint64_t vaddr = 0;  // the symbol's address in the file; 0 when none
  int32_t value = kAbsent;
  Origin origin = Origin::kAbsent;
  size_t slot = 0;  // which V8Layout field it fills (metadata.cpp's table)
};

// Byte offsets from a JavaScript frame's frame pointer (negative: below
// it, where V8 pushes them).
struct FrameOffsets {
  int32_t function = kAbsent;  // the JSFunction (tagged)
  // A JS frame's context, or a typed frame's marker (a Smi of its type).
  int32_t context_or_frame_type = kAbsent;
  int32_t context = kAbsent;
  int32_t bytecode_array = kAbsent;   // interpreted and baseline frames
  int32_t bytecode_offset = kAbsent;  // a Smi; interpreted frames
  int32_t args = kAbsent;             // above fp: the caller's arguments
};

// StackFrame::Type numbers: a typed frame stores (type << 1) as a Smi in
// its context_or_frame_type slot. kAbsent for a kind this version lacks.
struct FrameTypes {
  int32_t entry = kAbsent;  // C++ calls into JS here: a walk's end
  int32_t construct_entry = kAbsent;
  int32_t exit = kAbsent;          // JS calls out to C++ (an API callback)
  int32_t builtin_exit = kAbsent;  // a C++ builtin called from JS
  int32_t interpreted = kAbsent;   // Ignition
  int32_t baseline = kAbsent;      // Sparkplug
  int32_t maglev = kAbsent;
  int32_t turbofan = kAbsent;  // TurbofanFrame, OptimizedFrame before 11.x
  int32_t stub = kAbsent;
  int32_t turbofan_stub_with_context = kAbsent;
  int32_t builtin = kAbsent;
  int32_t construct = kAbsent;
  int32_t internal = kAbsent;
  int32_t builtin_continuation = kAbsent;
  int32_t js_builtin_continuation = kAbsent;
  int32_t js_builtin_continuation_with_catch = kAbsent;
  int32_t native = kAbsent;
};

// How a tagged word says what it is: a heap object pointer has
// (word & heap_object_tag_mask) == heap_object_tag; a Smi (small integer)
// has (word & smi_tag_mask) == smi_tag and its value at bit
// smi_value_shift + smi_shift_size (smi_value_shift is the tag's size, as
// V8 exports it: 1 + 31 on 64-bit without pointer compression).
struct Tagging {
  int32_t heap_object_tag = kAbsent;
  int32_t heap_object_tag_mask = kAbsent;
  int32_t smi_tag = kAbsent;
  int32_t smi_tag_mask = kAbsent;
  int32_t smi_shift_size = kAbsent;
  int32_t smi_value_shift = kAbsent;
  int32_t tagged_size = kAbsent;  // 4 with pointer compression, else 8
  int32_t system_pointer_size = kAbsent;
};

// Byte offsets of fields from the start of an object (its untagged
// address). Each names the V8 class and field.
struct ObjectOffsets {
  int32_t heap_object_map = kAbsent;    // HeapObject::map: every object's
  int32_t map_instance_type = kAbsent;  // Map::instance_type, uint16
  int32_t js_function_shared = kAbsent;
  int32_t js_function_context = kAbsent;
  int32_t sfi_name_or_scope_info = kAbsent;  // a String or a ScopeInfo
  int32_t sfi_script_or_debug_info = kAbsent;
  int32_t sfi_function_data = kAbsent;  // BytecodeArray, UncompiledData...
  int32_t script_name = kAbsent;
  int32_t script_line_ends = kAbsent;  // FixedArray of Smi offsets
  int32_t script_source = kAbsent;
  int32_t string_length = kAbsent;  // int32
  int32_t seq_one_byte_string_chars = kAbsent;
  int32_t seq_two_byte_string_chars = kAbsent;
  int32_t cons_string_first = kAbsent;
  int32_t cons_string_second = kAbsent;
  int32_t thin_string_actual = kAbsent;
  int32_t sliced_string_parent = kAbsent;
  int32_t sliced_string_offset = kAbsent;  // a Smi
  int32_t external_string_resource = kAbsent;
  int32_t fixed_array_base_length = kAbsent;  // a Smi
  int32_t fixed_array_data = kAbsent;
  int32_t bytecode_array_data = kAbsent;  // the bytecodes
  // BytecodeArray::source_position_table: V8 11 exports none (the walker
  // will need a version rule for it).
  int32_t bytecode_array_source_position_table = kAbsent;
  int32_t code_source_position_table = kAbsent;
  int32_t code_deoptimization_data = kAbsent;  // inlined functions
  int32_t code_bytecode_or_interpreter_data = kAbsent;
  int32_t instruction_stream_instruction_start = kAbsent;
  int32_t uncompiled_data_inferred_name = kAbsent;
  int32_t uncompiled_data_start_position = kAbsent;
  int32_t uncompiled_data_end_position = kAbsent;
  // An index, not an offset: DeoptimizationData's element that holds the
  // compiled function's SharedFunctionInfo (the walker's check that the
  // rest of that array's layout is the one it knows).
  int32_t deoptimization_data_sfi_index = kAbsent;
};

// Map::instance_type values.
struct InstanceTypes {
  int32_t js_function = kAbsent;
  int32_t shared_function_info = kAbsent;
  int32_t script = kAbsent;
  int32_t scope_info = kAbsent;
  int32_t bytecode_array = kAbsent;
  int32_t code = kAbsent;
  int32_t fixed_array = kAbsent;
  int32_t map = kAbsent;
  int32_t first_nonstring = kAbsent;  // every type below it is a string
};

// A string's instance type says how to read it: (type &
// representation_mask) is seq, cons, sliced, thin or external; (type &
// encoding_mask) is one_byte or two_byte.
struct StringTags {
  int32_t is_not_string_mask = kAbsent;
  int32_t representation_mask = kAbsent;
  int32_t encoding_mask = kAbsent;
  int32_t seq = kAbsent;
  int32_t cons = kAbsent;
  int32_t sliced = kAbsent;
  int32_t thin = kAbsent;
  int32_t external = kAbsent;
  int32_t one_byte = kAbsent;
  int32_t two_byte = kAbsent;
};

// Indices (in tagged slots) into a ScopeInfo and a Context. V8 exports no
// slot for a ScopeInfo's function name: a walker names a function whose
// SFI holds a ScopeInfo by a version rule, as the other readers do.
struct ScopeIndices {
  int32_t scope_info_first_vars = kAbsent;
  int32_t scope_info_ncontextlocals = kAbsent;
  int32_t scope_info_nparams = kAbsent;
  int32_t context_scope_info = kAbsent;
};

// CodeKind numbers and where a Code's flags keep its kind: a baseline
// (Sparkplug) frame's code is told from an optimized one's by it.
struct CodeKinds {
  int32_t baseline = kAbsent;
  int32_t interpreted_function = kAbsent;
  int32_t bytecode_handler = kAbsent;
  int32_t field_mask = kAbsent;
  int32_t field_shift = kAbsent;
};

struct V8Layout {
  std::string path;
  std::string build_id;    // hex of NT_GNU_BUILD_ID; empty when none
  std::string v8_version;  // "11.3.244.8"; empty when the file lacks it
  FrameOffsets frame;
  FrameTypes frame_types;
  Tagging tagging;
  ObjectOffsets objects;
  InstanceTypes types;
  StringTags strings;
  ScopeIndices scope;
  CodeKinds code_kinds;
  // Every constant read or tried, in metadata.cpp's table order.
  std::vector<Constant> constants;
  // The .bss ones (a copy of their constants entries): 0 until
  // fill_from_process reads them.
  std::vector<Constant> process_resident;
  bool process_filled = false;
};

// The layout the V8 in the ELF file `path` describes. Errors (one line):
// the file's own ("open /x: No such file or directory"), "/x: no V8
// post-mortem metadata (v8dbg_off_fp_function missing)" when it exports
// none, or, for a layout this reader does not know, the first required
// symbol it lacks or the constant that makes no sense.
Result<V8Layout> read_v8_layout(const std::string& path);

// Reads layout->process_resident from a running process. read(vaddr, out,
// n) copies n bytes at the file's virtual address vaddr as the process has
// them (the caller adds the load bias of path's mapping) and returns
// false when it cannot. An error names the symbol it could not read or the
// value that makes no sense; the layout is unchanged then.
Status fill_from_process(
    V8Layout* layout,
    const std::function<bool(uint64_t addr, void* out, size_t n)>& read);

// The entry of `symbol` ("v8dbg_SmiTag") in layout.constants, or nullptr.
const Constant* find_constant(const V8Layout& layout,
                              const std::string& symbol);

}  // namespace looptrace::v8
