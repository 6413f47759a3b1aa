// Address -> function name, per process. The report depends only on this
// interface, so unit tests can use a fake.
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

class Symbolizer {
 public:
  virtual ~Symbolizer() = default;
  virtual Frame symbolize(uint32_t pid, uint64_t addr) = 0;
};

}  // namespace looptrace
