// C++ (Itanium ABI) demangling.
#pragma once

#include <string>

namespace looptrace {

// "_ZN7lt_test6Widget4drawEi" -> "lt_test::Widget::draw(int)". Anything that
// is not a mangled name ("main", "lt_plain_function") or that fails to
// demangle comes back unchanged.
std::string demangle(const std::string& name);

}  // namespace looptrace
