// Writes a JSON report whose largest arrays are made one element at a time,
// so that a run with a hundred thousand input events never holds them all
// as a JSON tree. The output is byte for byte what nlohmann's dump(2) gives
// for the same document.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace looptrace {

// Calls `emit` once per element, in order.
using JsonElements =
    std::function<void(const std::function<void(const nlohmann::json&)>& emit)>;

// Writes the object `top` plus, under each key of `arrays`, the array its
// function makes (a key in both is an error of the caller: the array wins).
// Keys come out sorted, as nlohmann's objects keep them. No trailing newline.
void write_json_object(std::ostream& os, const nlohmann::json& top,
                       const std::map<std::string, JsonElements>& arrays);

}  // namespace looptrace
