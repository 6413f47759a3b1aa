// Virtual calls inside one function, found by decoding its x86-64 code
// (capstone): where the span of a dispatch that is a virtual call starts
// and returns. AOSP's Looper::pollInner runs each native message as
// `handler->handleMessage(message)`, compiled to `mov (%rdi),%rax; ...;
// call *0x10(%rax)`: no function of the library is the dispatch, the call
// instruction and the one after it are (two plain uprobes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace::elf {

class ElfFile;
struct SymbolMatch;

struct CallSite {
  uint64_t vaddr = 0;   // the call instruction
  uint32_t length = 0;  // its bytes: it returns to vaddr + length
  int64_t slot = 0;     // a virtual call's vtable offset (0x10)
  uint64_t target = 0;  // a direct call's destination
  // The width of the last write to the first argument after `this`
  // (%rsi, %esi) before the call, in the same few instructions: 64 for a
  // pointer (AOSP's handleMessage(const Message&)), 32 for an int
  // (handleEvent(int fd, ...)); 0 when not seen.
  int arg1_bits = 0;
  std::string text;  // "call qword ptr [rax + 0x10]", for messages
};

// The calls through memory, `call *DISP(%REG)`, in `n` bytes of code at
// `vaddr` whose REG was loaded, within the few instructions before, from
// the first word of the object the call passes as `this` (%rdi, unchanged
// since): virtual calls, in address order. An indirect call whose register
// has another origin (a function pointer in a struct) is not one.
// Decoding stops at the first byte capstone cannot decode (padding after
// the function's end).
std::vector<CallSite> virtual_calls(const uint8_t* code, size_t n,
                                    uint64_t vaddr);

// The same for function `m` of `file` (its symbol's size bytes). Errors:
// the function's size is unknown, or its bytes cannot be read.
Result<std::vector<CallSite>> virtual_calls(const ElfFile& file,
                                            const SymbolMatch& m);

// The direct calls, `call ADDRESS`, in `n` bytes of code at `vaddr`, each
// with its target, in address order.
std::vector<CallSite> direct_calls(const uint8_t* code, size_t n,
                                   uint64_t vaddr);

// The function a PLT stub of `file` at `vaddr` jumps to: the symbol
// relocated into the slot its `jmp *SLOT(%rip)` reads; nullopt for
// anything else.
std::optional<std::string> plt_target(const ElfFile& file, uint64_t vaddr);

// The direct calls function `m` of `file` makes to the function named
// `callee`: defined in the file, or another object's through the PLT.
// Errors as virtual_calls'.
Result<std::vector<CallSite>> calls_to(const ElfFile& file,
                                       const SymbolMatch& m,
                                       const std::string& callee);

}  // namespace looptrace::elf
