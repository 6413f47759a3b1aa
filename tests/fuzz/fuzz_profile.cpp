// Profile files: JSON text -> Profile. Every input gives a profile or one
// usage line; a profile's keys print back to expressions that parse to the
// same spec.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_check.h"
#include "profiles/key_expr.h"
#include "profiles/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  looptrace::Result<looptrace::Profile> p =
      looptrace::parse_profile(text, "fuzz.json");
  if (!p.ok()) {
    const std::string& m = p.status().message();
    LT_FUZZ_CHECK(p.status().kind() == looptrace::ErrorKind::kUsage);
    LT_FUZZ_CHECK(m.rfind("profile fuzz.json: ", 0) == 0);
    return 0;
  }
  LT_FUZZ_CHECK(!p->probes.empty() && p->probes.size() <= LT_MAX_PROBES);
  for (const looptrace::ProbeDef& d : p->probes) {
    LT_FUZZ_CHECK(!d.binary.empty() && !d.symbol.empty());
    LT_FUZZ_CHECK(d.keys.size() <= LT_MAX_KEYS);
    for (const looptrace::KeyDef& k : d.keys) {
      auto again =
          looptrace::parse_key_expr(looptrace::format_key_expr(k.spec));
      LT_FUZZ_CHECK(again.ok());
      LT_FUZZ_CHECK(std::memcmp(&*again, &k.spec, sizeof(k.spec)) == 0);
    }
  }
  return 0;
}
