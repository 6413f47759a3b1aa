// Address -> function name, per process. The report depends only on this
// interface, so unit tests can use a fake.
#pragma once

#include <cstdint>
#include <string>

#include "model/frame.h"

namespace looptrace {

class Symbolizer {
 public:
  virtual ~Symbolizer() = default;
  virtual Frame symbolize(uint32_t pid, uint64_t addr) = 0;
};

}  // namespace looptrace
