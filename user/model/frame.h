// What an address of a process is: its module and function. Symbolizers
// (symbolize/) resolve frames; events, analyses and reports carry them.
#pragma once

#include <cstdint>
#include <string>

namespace looptrace {

struct Frame {
  uint64_t addr = 0;
  std::string module;    // path or [vdso], [anon], empty when unknown
  std::string function;  // demangled; empty when unknown
  uint64_t offset = 0;   // addr - function start, when function is known

  bool known() const { return !function.empty(); }
  // "ns::Foo::bar(int)+0x1a" or "0x7f12.. (libfoo.so)" or "0x7f12.. [unknown]".
  std::string to_string() const;
};

}  // namespace looptrace
