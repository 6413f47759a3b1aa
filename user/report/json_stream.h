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

// How the elements of the streamed arrays are laid out.
enum class JsonElementLayout {
  kIndented,  // as dump(2) writes them (the JSON report)
  kOneLine,   // one compact element a line: a trace of a million events
              // stays smaller and greppable
};

// Writes the object `top` plus, under each key of `arrays`, the array its
// function makes (a key in both is an error of the caller: the array wins).
// Keys come out sorted, as nlohmann's objects keep them. No trailing newline.
// Strings that are not valid UTF-8 (a thread's name is any bytes) are
// written with U+FFFD in place of the bad bytes instead of throwing.
void write_json_object(std::ostream& os, const nlohmann::json& top,
                       const std::map<std::string, JsonElements>& arrays,
                       JsonElementLayout layout = JsonElementLayout::kIndented);

}  // namespace looptrace
