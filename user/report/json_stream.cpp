#include "report/json_stream.h"

#include <set>

#include "base/json_text.h"

namespace looptrace {
namespace {

constexpr int kIndent = 2;

// `v` as dump(2) writes it at nesting `level`: its inner lines indented by
// the level's spaces.
void write_nested(std::ostream& os, const nlohmann::json& v, int level) {
  const std::string text = json_text(v, kIndent);
  const std::string pad(static_cast<size_t>(level * kIndent), ' ');
  size_t from = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos;
       nl = text.find('\n', from)) {
    os.write(text.data() + from, static_cast<std::streamsize>(nl + 1 - from));
    os << pad;
    from = nl + 1;
  }
  os.write(text.data() + from,
           static_cast<std::streamsize>(text.size() - from));
}

}  // namespace

void write_json_object(std::ostream& os, const nlohmann::json& top,
                       const std::map<std::string, JsonElements>& arrays,
                       JsonElementLayout layout) {
  std::set<std::string> keys;
  for (const auto& [k, v] : top.items()) keys.insert(k);
  for (const auto& [k, f] : arrays) keys.insert(k);
  if (keys.empty()) {
    os << "{}";
    return;
  }
  const std::string pad1(kIndent, ' '), pad2(2 * kIndent, ' ');
  os << "{\n";
  bool first_key = true;
  for (const std::string& k : keys) {
    if (!first_key) os << ",\n";
    first_key = false;
    os << pad1 << json_text(k) << ": ";
    auto lazy = arrays.find(k);
    if (lazy == arrays.end()) {
      write_nested(os, top.at(k), 1);
      continue;
    }
    bool empty = true;
    lazy->second([&](const nlohmann::json& e) {
      os << (empty ? "[\n" : ",\n") << pad2;
      empty = false;
      if (layout == JsonElementLayout::kOneLine)
        os << json_text(e);
      else
        write_nested(os, e, 2);
    });
    os << (empty ? "[]" : "\n" + pad1 + "]");
  }
  os << "\n}";
}

}  // namespace looptrace
