// The streamed JSON writer gives exactly what nlohmann's dump(2) gives for
// the whole document, whatever the arrays hold.
#include "report/json_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace looptrace {
namespace {

using nlohmann::json;

std::string streamed(const json& top,
                     const std::map<std::string, json>& arrays) {
  std::map<std::string, JsonElements> lazy;
  for (const auto& [k, arr] : arrays)
    lazy[k] = [&arr](const auto& emit) {
      for (const json& e : arr) emit(e);
    };
  std::ostringstream os;
  write_json_object(os, top, lazy);
  return os.str();
}

std::string whole(json top, const std::map<std::string, json>& arrays) {
  for (const auto& [k, arr] : arrays) top[k] = arr;
  return top.dump(2);
}

TEST(JsonStream, SameBytesAsDumpWithNestedValues) {
  json top = {{"version", 3},
              {"lost", {{"ringbuf_full", 0}, {"hist_full", 2}}},
              {"threads", json::array({{{"tid", 1}, {"p50", nullptr}}})},
              {"empty_obj", json::object()},
              {"empty_arr", json::array()},
              {"text", "quote \" and\nnewline \u00e9"}};
  std::map<std::string, json> arrays = {
      {"input_events",
       json::array(
           {{{"seq", 1},
             {"stages", {{"a", 1}, {"b", nullptr}}},
             {"blame",
              {{"dispatches",
                json::array({{{"stack", json::array({"f", "g"})}}})}}}},
            {{"seq", 2}, {"stages", json::object()}, {"blame", nullptr}},
            json::array({1, json::array()})})},
      {"aaa_first", json::array({"x"})}};
  EXPECT_EQ(streamed(top, arrays), whole(top, arrays));
  EXPECT_EQ(json::parse(streamed(top, arrays))["input_events"].size(), 3u);
}

TEST(JsonStream, EmptyArraysAndObjects) {
  EXPECT_EQ(streamed(json::object(), {}), json::object().dump(2));
  std::map<std::string, json> empty = {{"input_events", json::array()}};
  EXPECT_EQ(streamed(json::object(), empty), whole(json::object(), empty));
  json top = {{"z", 1}};
  EXPECT_EQ(streamed(top, empty), whole(top, empty));
}

TEST(JsonStream, ElementsAreMadeOneAtATime) {
  // The writer asks for elements in order and writes each as it comes.
  std::ostringstream os;
  size_t written_before_last = 0;
  write_json_object(os, json{{"a", 1}}, {{"events", [&](const auto& emit) {
                                            emit(json{{"i", 0}});
                                            written_before_last =
                                                os.str().size();
                                            emit(json{{"i", 1}});
                                          }}});
  EXPECT_NE(os.str().substr(0, written_before_last).find("\"i\": 0"),
            std::string::npos);
}

}  // namespace
}  // namespace looptrace
