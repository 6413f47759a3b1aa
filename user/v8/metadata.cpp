#include "v8/metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "elf/elf_file.h"

namespace looptrace::v8 {
namespace {

enum class Need : uint8_t { kRequired, kOptional };

// One constant of the layout: the symbols that may hold it (without the
// "v8dbg_" prefix, space-separated: V8 renames a field's type suffix now
// and then, "__Object" became "__Tagged_Object_" in V8 12), whether a walker
// cannot do without it, and the field it fills.
struct Slot {
  const char* names;
  Need need;
  int32_t& (*field)(V8Layout&);
};

#define LT_FIELD(member) [](V8Layout& l) -> int32_t& { return l.member; }
constexpr Need R = Need::kRequired;
constexpr Need O = Need::kOptional;

// The order is the order of the checks: a file with no metadata at all is
// refused for the first entry, the frame's function.
const Slot kSlots[] = {
    {"off_fp_function", R, LT_FIELD(frame.function)},
    {"off_fp_context_or_frame_type", R, LT_FIELD(frame.context_or_frame_type)},
    {"off_fp_context", O, LT_FIELD(frame.context)},
    {"off_fp_bytecode_array", R, LT_FIELD(frame.bytecode_array)},
    {"off_fp_bytecode_offset", R, LT_FIELD(frame.bytecode_offset)},
    {"off_fp_args", O, LT_FIELD(frame.args)},

    {"frametype_EntryFrame", R, LT_FIELD(frame_types.entry)},
    {"frametype_ConstructEntryFrame", O, LT_FIELD(frame_types.construct_entry)},
    {"frametype_ExitFrame", R, LT_FIELD(frame_types.exit)},
    {"frametype_BuiltinExitFrame", O, LT_FIELD(frame_types.builtin_exit)},
    {"frametype_InterpretedFrame", R, LT_FIELD(frame_types.interpreted)},
    {"frametype_BaselineFrame", O, LT_FIELD(frame_types.baseline)},
    {"frametype_MaglevFrame", O, LT_FIELD(frame_types.maglev)},
    {"frametype_TurbofanFrame frametype_OptimizedFrame", R,
     LT_FIELD(frame_types.turbofan)},
    {"frametype_StubFrame", O, LT_FIELD(frame_types.stub)},
    {"frametype_TurbofanStubWithContextFrame", O,
     LT_FIELD(frame_types.turbofan_stub_with_context)},
    {"frametype_BuiltinFrame", O, LT_FIELD(frame_types.builtin)},
    {"frametype_ConstructFrame", O, LT_FIELD(frame_types.construct)},
    {"frametype_InternalFrame", O, LT_FIELD(frame_types.internal)},
    {"frametype_BuiltinContinuationFrame", O,
     LT_FIELD(frame_types.builtin_continuation)},
    {"frametype_JavaScriptBuiltinContinuationFrame", O,
     LT_FIELD(frame_types.js_builtin_continuation)},
    {"frametype_JavaScriptBuiltinContinuationWithCatchFrame", O,
     LT_FIELD(frame_types.js_builtin_continuation_with_catch)},
    {"frametype_NativeFrame", O, LT_FIELD(frame_types.native)},

    {"HeapObjectTag", R, LT_FIELD(tagging.heap_object_tag)},
    {"HeapObjectTagMask", R, LT_FIELD(tagging.heap_object_tag_mask)},
    {"SmiTag", R, LT_FIELD(tagging.smi_tag)},
    {"SmiTagMask", R, LT_FIELD(tagging.smi_tag_mask)},
    {"SmiShiftSize", R, LT_FIELD(tagging.smi_shift_size)},
    {"SmiValueShift", O, LT_FIELD(tagging.smi_value_shift)},
    {"TaggedSize", O, LT_FIELD(tagging.tagged_size)},
    {"SystemPointerSize", O, LT_FIELD(tagging.system_pointer_size)},

    {"class_HeapObject__map__Map class_HeapObject__map__Tagged_Map_", R,
     LT_FIELD(objects.heap_object_map)},
    {"class_Map__instance_type__uint16_t", R,
     LT_FIELD(objects.map_instance_type)},
    {"class_JSFunction__shared__SharedFunctionInfo "
     "class_JSFunction__shared__Tagged_SharedFunctionInfo_",
     R, LT_FIELD(objects.js_function_shared)},
    {"class_JSFunction__context__Context "
     "class_JSFunction__context__Tagged_Context_",
     O, LT_FIELD(objects.js_function_context)},
    {"class_SharedFunctionInfo__name_or_scope_info__Object "
     "class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_ "
     "class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
     R, LT_FIELD(objects.sfi_name_or_scope_info)},
    {"class_SharedFunctionInfo__script_or_debug_info__HeapObject "
     "class_SharedFunctionInfo__script_or_debug_info__Object "
     "class_SharedFunctionInfo__script__Tagged_HeapObject_",
     R, LT_FIELD(objects.sfi_script_or_debug_info)},
    {"class_SharedFunctionInfo__function_data__Object "
     "class_SharedFunctionInfo__function_data__Tagged_Object_",
     O, LT_FIELD(objects.sfi_function_data)},
    {"class_Script__name__Object class_Script__name__Tagged_Object_", R,
     LT_FIELD(objects.script_name)},
    {"class_Script__line_ends__Object class_Script__line_ends__Tagged_Object_",
     O, LT_FIELD(objects.script_line_ends)},
    {"class_Script__source__Object class_Script__source__Tagged_Object_", O,
     LT_FIELD(objects.script_source)},
    {"class_String__length__int32_t", R, LT_FIELD(objects.string_length)},
    {"class_SeqOneByteString__chars__char", R,
     LT_FIELD(objects.seq_one_byte_string_chars)},
    {"class_SeqTwoByteString__chars__char", O,
     LT_FIELD(objects.seq_two_byte_string_chars)},
    {"class_ConsString__first__String class_ConsString__first__Tagged_String_",
     O, LT_FIELD(objects.cons_string_first)},
    {"class_ConsString__second__String "
     "class_ConsString__second__Tagged_String_",
     O, LT_FIELD(objects.cons_string_second)},
    {"class_ThinString__actual__String "
     "class_ThinString__actual__Tagged_String_",
     O, LT_FIELD(objects.thin_string_actual)},
    {"class_SlicedString__parent__String "
     "class_SlicedString__parent__Tagged_String_",
     O, LT_FIELD(objects.sliced_string_parent)},
    {"class_SlicedString__offset__SMI", O,
     LT_FIELD(objects.sliced_string_offset)},
    {"class_ExternalString__resource__Object", O,
     LT_FIELD(objects.external_string_resource)},
    {"class_FixedArrayBase__length__SMI", O,
     LT_FIELD(objects.fixed_array_base_length)},
    {"class_FixedArray__data__uintptr_t", O,
     LT_FIELD(objects.fixed_array_data)},
    {"class_BytecodeArray__data__uintptr_t", O,
     LT_FIELD(objects.bytecode_array_data)},
    {"class_BytecodeArray__source_position_table__Object "
     "class_BytecodeArray__source_position_table__Tagged_HeapObject_",
     O, LT_FIELD(objects.bytecode_array_source_position_table)},
    {"class_Code__source_position_table__ByteArray "
     "class_Code__source_position_table__Tagged_ByteArray_",
     O, LT_FIELD(objects.code_source_position_table)},
    {"class_Code__deoptimization_data__FixedArray "
     "class_Code__deoptimization_data__Tagged_FixedArray_",
     O, LT_FIELD(objects.code_deoptimization_data)},
    {"class_Code__bytecode_or_interpreter_data__HeapObject", O,
     LT_FIELD(objects.code_bytecode_or_interpreter_data)},
    {"class_InstructionStream__instruction_start__uintptr_t", O,
     LT_FIELD(objects.instruction_stream_instruction_start)},
    {"class_UncompiledData__inferred_name__String", O,
     LT_FIELD(objects.uncompiled_data_inferred_name)},
    {"class_UncompiledData__start_position__int32_t", O,
     LT_FIELD(objects.uncompiled_data_start_position)},
    {"class_UncompiledData__end_position__int32_t", O,
     LT_FIELD(objects.uncompiled_data_end_position)},
    {"DeoptimizationDataSharedFunctionInfoIndex", O,
     LT_FIELD(objects.deoptimization_data_sfi_index)},

    {"type_JSFunction__JS_FUNCTION_TYPE", R, LT_FIELD(types.js_function)},
    {"type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", R,
     LT_FIELD(types.shared_function_info)},
    {"type_Script__SCRIPT_TYPE", R, LT_FIELD(types.script)},
    {"type_ScopeInfo__SCOPE_INFO_TYPE", O, LT_FIELD(types.scope_info)},
    {"type_BytecodeArray__BYTECODE_ARRAY_TYPE", O,
     LT_FIELD(types.bytecode_array)},
    {"type_Code__CODE_TYPE", O, LT_FIELD(types.code)},
    {"type_FixedArray__FIXED_ARRAY_TYPE", O, LT_FIELD(types.fixed_array)},
    {"type_Map__MAP_TYPE", O, LT_FIELD(types.map)},
    {"FirstNonstringType", R, LT_FIELD(types.first_nonstring)},

    {"IsNotStringMask", O, LT_FIELD(strings.is_not_string_mask)},
    {"StringRepresentationMask", R, LT_FIELD(strings.representation_mask)},
    {"StringEncodingMask", R, LT_FIELD(strings.encoding_mask)},
    {"SeqStringTag", R, LT_FIELD(strings.seq)},
    {"ConsStringTag", O, LT_FIELD(strings.cons)},
    {"SlicedStringTag", O, LT_FIELD(strings.sliced)},
    {"ThinStringTag", O, LT_FIELD(strings.thin)},
    {"ExternalStringTag", O, LT_FIELD(strings.external)},
    {"OneByteStringTag", R, LT_FIELD(strings.one_byte)},
    {"TwoByteStringTag", R, LT_FIELD(strings.two_byte)},

    {"scopeinfo_idx_first_vars", O, LT_FIELD(scope.scope_info_first_vars)},
    {"scopeinfo_idx_ncontextlocals", O,
     LT_FIELD(scope.scope_info_ncontextlocals)},
    {"scopeinfo_idx_nparams", O, LT_FIELD(scope.scope_info_nparams)},
    {"context_idx_scope_info", O, LT_FIELD(scope.context_scope_info)},

    {"CodeKindBaseline", O, LT_FIELD(code_kinds.baseline)},
    {"CodeKindInterpretedFunction", O,
     LT_FIELD(code_kinds.interpreted_function)},
    {"CodeKindBytecodeHandler", O, LT_FIELD(code_kinds.bytecode_handler)},
    {"CodeKindFieldMask", O, LT_FIELD(code_kinds.field_mask)},
    {"CodeKindFieldShift", O, LT_FIELD(code_kinds.field_shift)},
};

#undef LT_FIELD

constexpr std::string_view kPrefix = "v8dbg_";

// v8::internal::Version's fields: V8's own version, which a walker's
// version rules (fields the metadata lacks) will key on.
constexpr const char* kVersionSymbols[] = {
    "_ZN2v88internal7Version6major_E",
    "_ZN2v88internal7Version6minor_E",
    "_ZN2v88internal7Version6build_E",
    "_ZN2v88internal7Version6patch_E",
};

std::vector<std::string> alternatives(const Slot& slot) {
  std::vector<std::string> out;
  std::string_view rest = slot.names;
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    out.push_back(std::string(kPrefix) + std::string(rest.substr(0, sp)));
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  return out;
}

// An int constant's value from the file: its bytes when the file has them,
// 0 for one in a segment's zero-filled tail (.bss), which the loader
// clears and only code run in the process could change.
Status read_int(const elf::ElfFile& file, const elf::Symbol& sym,
                int32_t* value, Origin* origin) {
  if (sym.size != 0 && sym.size != sizeof(int32_t))
    return Status::Error(fmt::format("{}: {} is {} bytes, not an int",
                                     file.path(), sym.name, sym.size));
  for (const elf::Segment& s : file.segments()) {
    if (sym.vaddr < s.vaddr || sym.vaddr - s.vaddr >= s.memsz) continue;
    const uint64_t at = sym.vaddr - s.vaddr;
    if (at + sizeof(int32_t) <= s.filesz) {
      LT_RETURN_IF_ERROR(file.read_bytes(sym.vaddr, value, sizeof(int32_t)));
      *origin = Origin::kFile;
      return Status::Ok();
    }
    if (at >= s.filesz) {
      *value = 0;
      *origin = Origin::kProcess;
      return Status::Ok();
    }
  }
  return Status::Error(fmt::format("{}: {} at {:#x} is in no loaded segment",
                                   file.path(), sym.name, sym.vaddr));
}

// Fills what the metadata leaves out but other constants determine.
void derive(V8Layout* l) {
  for (Constant& c : l->constants) {
    int32_t& field = kSlots[c.slot].field(*l);
    Tagging& t = l->tagging;
    // V8 exports the Smi tag's size as SmiValueShift (the value sits
    // above it and SmiShiftSize more bits).
    if (&field == &t.smi_value_shift &&
        (c.origin == Origin::kAbsent || c.origin == Origin::kDerived) &&
        t.smi_tag_mask != kAbsent) {
      field = std::popcount(static_cast<uint32_t>(t.smi_tag_mask));
      c.value = field;
      c.origin = Origin::kDerived;
    }
  }
}

// A layout a walker could follow: the checks a misread or an unknown V8
// would fail.
Status check(const V8Layout& l) {
  const std::string& p = l.path;
  // Frame markers tell frame kinds apart; StackFrame::Type is a small enum.
  std::unordered_map<int32_t, const Constant*> seen;
  for (const Constant& c : l.constants) {
    if (c.origin == Origin::kAbsent ||
        c.symbol.rfind("v8dbg_frametype_", 0) != 0)
      continue;
    if (c.value < 0 || c.value >= 64)
      return Status::Error(fmt::format("{}: {} is {}, not a V8 frame type", p,
                                       c.symbol, c.value));
    auto [it, fresh] = seen.emplace(c.value, &c);
    if (!fresh)
      return Status::Error(fmt::format("{}: {} and {} are both {}", p,
                                       it->second->symbol, c.symbol, c.value));
  }
  const Tagging& t = l.tagging;
  if ((t.heap_object_tag & ~t.heap_object_tag_mask) != 0 ||
      (t.smi_tag & ~t.smi_tag_mask) != 0 ||
      (t.heap_object_tag & t.smi_tag_mask) == t.smi_tag)
    return Status::Error(fmt::format(
        "{}: V8 tagging makes no sense (heap object tag {} mask {}, smi tag "
        "{} mask {})",
        p, t.heap_object_tag, t.heap_object_tag_mask, t.smi_tag,
        t.smi_tag_mask));
  if (t.tagged_size != kAbsent && t.tagged_size != 4 && t.tagged_size != 8)
    return Status::Error(fmt::format("{}: V8 tagged size {} is neither 4 nor 8",
                                     p, t.tagged_size));
  // Frame slots lie within a few words of the frame pointer, fields within
  // an object's first hundreds of bytes: a value beyond is no offset.
  for (size_t i = 0; i < l.constants.size(); ++i) {
    const Constant& c = l.constants[i];
    if (c.origin == Origin::kAbsent) continue;
    const bool frame = c.symbol.rfind("v8dbg_off_fp_", 0) == 0;
    const bool field = c.symbol.rfind("v8dbg_class_", 0) == 0;
    if ((frame && (c.value < -256 || c.value > 256)) ||
        (field && (c.value < 0 || c.value > 4096)))
      return Status::Error(
          fmt::format("{}: {} is {}, not an offset", p, c.symbol, c.value));
  }
  return Status::Ok();
}

}  // namespace

Result<V8Layout> read_v8_layout(const std::string& path) {
  // V8 exports its v8dbg_ constants: .dynsym has them, without reading
  // Node's .symtab (a fifth of the time).
  Result<elf::ElfFile> opened =
      elf::ElfFile::Open(path, elf::ElfFile::Read::kDynsym);
  if (!opened.ok()) return opened.status();
  const elf::ElfFile& file = *opened;

  // One pass over the symbols (Node has hundreds of thousands) instead of a
  // lookup per name.
  std::unordered_map<std::string_view, const elf::Symbol*> syms;
  for (const elf::Symbol& s : file.symbols()) {
    if (s.is_func || s.hidden_version) continue;
    if (std::string_view(s.name).substr(0, kPrefix.size()) == kPrefix ||
        s.name.rfind("_ZN2v88internal7Version", 0) == 0)
      syms.emplace(s.name, &s);
  }

  V8Layout l;
  l.path = path;
  l.build_id = file.build_id();

  uint32_t version[4] = {};
  bool have_version = true;
  for (size_t i = 0; i < 4; ++i) {
    auto it = syms.find(kVersionSymbols[i]);
    int32_t v = 0;
    Origin o = Origin::kAbsent;
    if (it == syms.end() || !read_int(file, *it->second, &v, &o).ok()) {
      // The patch level alone may be missing (or 0, in .bss).
      if (i < 3) have_version = false;
      continue;
    }
    version[i] = static_cast<uint32_t>(v);
  }
  if (have_version) {
    // V8's own spelling (Version::GetString): the patch level only when
    // there is one.
    l.v8_version = version[3] ? fmt::format("{}.{}.{}.{}", version[0],
                                            version[1], version[2], version[3])
                              : fmt::format("{}.{}.{}", version[0], version[1],
                                            version[2]);
  }

  const bool any = std::any_of(syms.begin(), syms.end(), [](const auto& kv) {
    return kv.first.substr(0, kPrefix.size()) == kPrefix;
  });
  for (size_t i = 0; i < std::size(kSlots); ++i) {
    const Slot& slot = kSlots[i];
    const std::vector<std::string> names = alternatives(slot);
    Constant c;
    c.slot = i;
    c.symbol = names.front();
    for (const std::string& n : names) {
      auto it = syms.find(n);
      if (it == syms.end()) continue;
      c.symbol = n;
      c.vaddr = it->second->vaddr;
      LT_RETURN_IF_ERROR(read_int(file, *it->second, &c.value, &c.origin));
      break;
    }
    if (c.origin == Origin::kAbsent && slot.need == Need::kRequired) {
      if (!any)
        return Status::Error(fmt::format(
            "{}: no V8 post-mortem metadata ({} missing)", path, c.symbol));
      return Status::Error(fmt::format(
          "{}: V8 {}post-mortem metadata this reader does not know ({} "
          "missing)",
          path, l.v8_version.empty() ? "" : l.v8_version + " ", c.symbol));
    }
    slot.field(l) = c.value;
    l.constants.push_back(c);
    if (c.origin == Origin::kProcess) l.process_resident.push_back(c);
  }
  derive(&l);
  LT_RETURN_IF_ERROR(check(l));
  return l;
}

Status fill_from_process(
    V8Layout* layout,
    const std::function<bool(uint64_t addr, void* out, size_t n)>& read) {
  V8Layout l = *layout;
  for (Constant& pc : l.process_resident) {
    int32_t v = 0;
    if (!read(pc.vaddr, &v, sizeof(v)))
      return Status::Error(
          fmt::format("{}: cannot read {} at {:#x} in the "
                      "process",
                      l.path, pc.symbol, pc.vaddr));
    pc.value = v;
    kSlots[pc.slot].field(l) = v;
    for (Constant& c : l.constants)
      if (c.slot == pc.slot) c.value = v;
  }
  derive(&l);
  LT_RETURN_IF_ERROR(check(l));
  l.process_filled = true;
  *layout = std::move(l);
  return Status::Ok();
}

const Constant* find_constant(const V8Layout& layout,
                              const std::string& symbol) {
  for (const Constant& c : layout.constants)
    if (c.symbol == symbol) return &c;
  return nullptr;
}

}  // namespace looptrace::v8
