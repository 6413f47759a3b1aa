// Key expressions (--key NAME=EXPR[:FORMAT] and a profile's "expr"): any
// text parses or is one usage line; a parsed spec is within the ABI's
// limits and prints back to an expression that parses to the same spec.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_check.h"
#include "profiles/key_expr.h"

namespace {

void check_spec(const lt_key_spec& spec) {
  LT_FUZZ_CHECK(spec.base >= LT_KEY_ARG0 && spec.base <= LT_KEY_SP);
  LT_FUZZ_CHECK(spec.nderef <= LT_MAX_DEREF);
  LT_FUZZ_CHECK(spec.size == 0 || spec.size == 1 || spec.size == 2 ||
                spec.size == 4);
  LT_FUZZ_CHECK(spec.size == 0 || spec.nderef > 0);
  std::string text = looptrace::format_key_expr(spec);
  auto again = looptrace::parse_key_expr(text);
  LT_FUZZ_CHECK(again.ok());
  LT_FUZZ_CHECK(std::memcmp(&*again, &spec, sizeof(spec)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = looptrace::parse_key_expr(text);
  if (spec.ok())
    check_spec(*spec);
  else
    LT_FUZZ_CHECK(spec.status().kind() == looptrace::ErrorKind::kUsage);
  auto def = looptrace::parse_key_def(text);
  if (def.ok()) {
    LT_FUZZ_CHECK(!def->name.empty());
    check_spec(def->spec);
  } else {
    LT_FUZZ_CHECK(def.status().kind() == looptrace::ErrorKind::kUsage);
  }
  return 0;
}
