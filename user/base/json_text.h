// JSON as looptrace writes it. nlohmann refuses to dump a string that is
// not UTF-8 (type_error.316: an abort that loses every output), and any
// string a traced process or a recording supplies may not be: every JSON
// writer (the report, --events lines, the Perfetto trace, the HTML page's
// data, the resolve cache) dumps through json_text(), which writes each
// invalid sequence as U+FFFD. Control bytes are escaped by JSON itself.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace looptrace {

// j as JSON text: on one line (indent < 0) or indented by `indent` spaces.
std::string json_text(const nlohmann::json& j, int indent = -1);

}  // namespace looptrace
