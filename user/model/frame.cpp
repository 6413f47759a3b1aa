#include "model/frame.h"

#include <fmt/format.h>

namespace looptrace {

std::string Frame::to_string() const {
  if (known())
    return offset ? fmt::format("{}+{:#x}", function, offset) : function;
  if (!module.empty()) return fmt::format("{:#x} ({})", addr, module);
  return fmt::format("{:#x} [unknown]", addr);
}

}  // namespace looptrace
