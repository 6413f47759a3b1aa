// C++ class names from RTTI: what names an object's class when its
// vtable has no symbol (a stripped program, a class in an anonymous
// namespace of one, a generated binding module such as PyQt's).
#pragma once

#include <cstdint>
#include <string>

namespace looptrace::elf {

class ElfFile;

// The class of the vtable an object's vtable pointer `vaddr` points into
// (its first virtual function's slot), as the Itanium C++ ABI lays it out:
// the word before the slot is the class's std::type_info, whose second
// word points to the class's mangled type name ("N12_GLOBAL__N_111Tick
// HandlerE"), demangled ("(anonymous namespace)::TickHandler"). The
// words are read as the loaded file holds them (its dynamic relocations;
// ElfFile::pointer_at). Empty when they are not that: no relocation or
// bytes there, or no mangled class name at the end.
std::string class_of_vtable(const ElfFile& file, uint64_t vaddr);

}  // namespace looptrace::elf
