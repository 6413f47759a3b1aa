// A Symbolizer for unit tests: functions at given start addresses, 0x100
// bytes each, in one binary; optional ranges of a library without symbols.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "symbolize/symbolizer.h"

namespace looptrace::fixture {

class FakeSymbolizer : public Symbolizer {
 public:
  explicit FakeSymbolizer(std::map<uint64_t, std::string> syms)
      : syms_(std::move(syms)) {}

  // Addresses in [start, end) are in `path`, which has no symbols.
  void add_library(uint64_t start, uint64_t end, std::string path) {
    libs_.emplace_back(start, end, std::move(path));
  }

  Frame symbolize(uint32_t, uint64_t addr) override {
    calls++;
    Frame f;
    f.addr = addr;
    for (const auto& [start, end, path] : libs_)
      if (addr >= start && addr < end) {
        f.module = path;
        return f;
      }
    auto it = syms_.upper_bound(addr);
    if (it == syms_.begin()) return f;
    --it;
    if (addr - it->first >= 0x100) return f;
    f.module = "/usr/bin/refapp";
    f.function = it->second;
    f.offset = addr - it->first;
    return f;
  }
  int calls = 0;

 private:
  std::map<uint64_t, std::string> syms_;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> libs_;
};

}  // namespace looptrace::fixture
