#include "base/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace looptrace {

std::string demangle(const std::string& name) {
  // __cxa_demangle also decodes bare type names ("i" -> "int"), so only
  // symbols with the mangled-name prefix are passed to it.
  if (name.size() < 3 || name.compare(0, 2, "_Z") != 0) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || !out) return name;
  return out.get();
}

}  // namespace looptrace
