// JavaScript frames with no flag: `looptrace record -p PID` on a Node
// started as every production Node is (no --perf-basic-prof, no
// --interpreted-frames-native-stack) names each JavaScript frame of its
// slow dispatches from V8's own metadata: function, script, line. Ground
// truth: the program's log (tests/programs/node_js_frames.js) of each
// stall, CLOCK_MONOTONIC, with the err.stack of an Error made inside it on
// the line that calls the hot function: V8's own names and lines.
#include <unistd.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

constexpr char kNode[] = "/usr/bin/node";
constexpr int kRuns = 2;
constexpr int kBusyMs = 200;

// A JavaScript frame as err.stack prints it: "    at Timeout.onTimer [as
// _onTimeout] (/path/node_js_frames.js:54:3)" -> {"onTimer", 54}.
struct JsFrame {
  std::string function;
  int line = 0;
};
std::vector<JsFrame> program_frames(const std::string& stack,
                                    const std::string& file) {
  std::vector<JsFrame> out;
  static const std::regex at(
      R"(^\s+at (?:\S+\.)?([A-Za-z_$][\w$]*)(?: \[as \w+\])? \((.*):(\d+):\d+\)$)");
  size_t pos = 0;
  while (pos < stack.size()) {
    size_t nl = std::min(stack.find('\n', pos), stack.size());
    std::smatch m;
    std::string line = stack.substr(pos, nl - pos);
    if (std::regex_match(line, m, at) && m[2] == file)
      out.push_back({m[1], std::stoi(m[3])});
    pos = nl + 1;
  }
  return out;
}

// "stall (node_js_frames.js:46)" -> {"stall", 46}; line 0 if it has none.
bool parse_looptrace_frame(const std::string& frame, JsFrame* out) {
  static const std::regex re(R"(^(\S+) \(node_js_frames\.js(?::(\d+))?\)$)");
  std::smatch m;
  if (!std::regex_match(frame, m, re)) return false;
  out->function = m[1];
  out->line = m[2].matched ? std::stoi(m[2]) : 0;
  return true;
}

TEST(NodeJsFrames, EveryFrameNamedWithNoFlagAsErrStackNamesIt) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_INSTALLED(access(kNode, X_OK) == 0, kNode);
  LT_REQUIRE_SYSTEM_PYTHON();
  if (IsSkipped() || HasFatalFailure()) return;
  TempDir dir;
  const std::string log = dir.file("node.jsonl"), out = dir.file("r.json");
  const std::string program = tests_dir() + "/programs/node_js_frames.js";
  Process node(
      {kNode, program, log, std::to_string(kRuns), std::to_string(kBusyMs)},
      dir.file("node.out"), dir.file("node.err"));
  ASSERT_TRUE(wait_for_text(log, "\"ready\"", 20000))
      << read_file(dir.file("node.err"));
  const json ready = events(read_jsonl(log), "ready").at(0);
  const int port = ready["port"];
  int64_t steal_before = steal_ns();
  // The default path: -p and nothing else.
  Process lt({looptrace_bin(), "record", "-p", std::to_string(node.pid()),
              "--json", out},
             dir.file("lt.out"), dir.file("lt.err"));
  // Attached by the first stall (2.5 s after "ready"): then a request to
  // the server, whose handler stalls too.
  ASSERT_TRUE(wait_for_text(log, "\"stall\"", 30000))
      << read_file(dir.file("lt.err"));
  RunResult get = run({"/usr/bin/python3", "-c",
                       "import urllib.request,sys; "
                       "urllib.request.urlopen(sys.argv[1], timeout=30).read()",
                       "http://127.0.0.1:" + std::to_string(port) + "/"});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  ASSERT_EQ(node.wait(60000), 0) << read_file(dir.file("node.err"));
  ASSERT_EQ(lt.wait(60000), 0) << read_file(dir.file("lt.err"));
  const int64_t tol = 30'000'000 + (steal_ns() - steal_before);
  const std::string text = read_file(dir.file("lt.out"));
  // Named: no hint to restart node with a flag.
  EXPECT_EQ(text.find("hint: JavaScript frames are unnamed"), std::string::npos)
      << text;

  const json report = read_json(out);
  expect_split_adds_up(report);
  const LineRange busy = {line_of(program, "function busy(ms) {"),
                          line_of(program, "// The middle level")};
  ASSERT_GT(busy.first, 0);
  std::vector<json> stalls = events(read_jsonl(log), "stall");
  ASSERT_EQ(stalls.size(), static_cast<size_t>(2 * kRuns + 1));
  std::set<std::string> vias;
  for (const json& st : stalls) {
    SCOPED_TRACE(st.dump());
    const json logged = {
        {"start_ns", std::stoull(st["start_ns"].get<std::string>())},
        {"end_ns", std::stoull(st["end_ns"].get<std::string>())}};
    const json* span = span_holding(report["slow_dispatches"], logged, tol);
    ASSERT_NE(span, nullptr) << report["slow_dispatches"].dump();
    vias.insert(st["via"].get<std::string>());
    // V8's frames of the stall in the program's file, innermost first:
    // stall, then onTimer, onImmediate or handleRequest.
    const std::vector<JsFrame> truth = program_frames(st["stack"], program);
    ASSERT_EQ(truth.size(), 2u) << st["stack"];
    int64_t samples = 0, in_busy = 0;
    for (const json& g : (*span)["stacks"]) {
      std::vector<JsFrame> ours;
      std::string all;
      for (const json& f : g["frames"]) {
        const std::string frame = f.get<std::string>();
        all += frame + "\n";
        // No JavaScript frame left as anonymous memory.
        EXPECT_EQ(frame.find("[anon]"), std::string::npos) << all;
        JsFrame js;
        if (parse_looptrace_frame(frame, &js)) ours.push_back(js);
      }
      samples += g["count"].get<int64_t>();
      if (ours.empty() || ours[0].function != "busy") continue;
      in_busy += g["count"].get<int64_t>();
      // busy (optimized), at a line of its body; then stall and its caller
      // at the lines err.stack gives.
      ASSERT_EQ(ours.size(), 3u) << all;
      EXPECT_TRUE(busy.holds(ours[0].line)) << all;
      for (size_t i = 0; i < truth.size(); ++i) {
        EXPECT_EQ(ours[i + 1].function, truth[i].function) << all;
        EXPECT_EQ(ours[i + 1].line, truth[i].line) << all;
      }
    }
    // The span's JavaScript identity: the program's callback that Node
    // called (err.stack's outermost frame in the program), with nearly
    // all of its samples.
    const json& cbs = (*span)["js_callbacks"];
    ASSERT_FALSE(cbs.empty()) << span->dump();
    EXPECT_EQ(cbs[0]["function"],
              truth.back().function + " (node_js_frames.js)")
        << cbs.dump();
    EXPECT_GE(cbs[0]["samples"].get<int64_t>() * 10, samples * 9) << cbs.dump();
    // The stall is busy's: almost every sample is in it.
    EXPECT_GE(in_busy * 10, samples * 9) << span->dump();
    EXPECT_GT(in_busy, 0);
  }
  EXPECT_EQ(vias, (std::set<std::string>{"timer", "immediate", "http"}));
  // JSON says which frames are JavaScript, with their script and line.
  const json& first = report["slow_dispatches"].at(0)["stacks"].at(0);
  bool js_detail = false;
  for (const json& d : first["frames_detail"])
    if (d["kind"] == "js" && d["script"] == program && d["line"].is_number())
      js_detail = true;
  EXPECT_TRUE(js_detail) << first["frames_detail"].dump();
}

}  // namespace
}  // namespace lt_test
