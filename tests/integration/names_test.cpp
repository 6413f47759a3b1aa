// Names a traced process chooses are hostile: a thread name that is not
// UTF-8 and holds a terminal escape and a newline (prctl PR_SET_NAME), a
// `str` key pointing at such bytes, a name longer than the kernel reads.
// Every output survives them (an invalid byte made nlohmann abort the
// tracer, exit 134, losing every output), the terminal sees them escaped
// (ESC[2J cleared the screen, a newline forged a report line), JSON holds
// them as valid UTF-8, and a cut name says so. Ground truth: the names
// tests/programs/hostile_names logs, in hex.
#include <string>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using nlohmann::json;

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// What a terminal would act on, or print as garbage: a control byte other
// than a newline, DEL, or a byte that starts no UTF-8 character.
void expect_terminal_safe(const std::string& text, const char* what) {
  for (size_t i = 0; i < text.size(); ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    bool bad = (u < 0x20 && u != '\n') || u == 0x7f || u >= 0xf5 || u == 0xc0 ||
               u == 0xc1;
    ASSERT_FALSE(bad) << what << ": byte " << int(u) << " at " << i << ":\n"
                      << text;
  }
}

// The log's bytes as looptrace's JSON holds them: each invalid byte (the
// names' only ones are 0xff and 0xfe) as U+FFFD.
std::string as_json_text(const std::string& raw) {
  std::string out;
  for (char c : raw) {
    auto u = static_cast<unsigned char>(c);
    out += u == 0xff || u == 0xfe ? std::string("\xef\xbf\xbd")
                                  : std::string(1, c);
  }
  return out;
}

TEST(HostileNames, EveryOutputSurvivesAndTheTerminalSeesThemEscaped) {
  LT_REQUIRE_BPF();
  TempDir dir;
  const std::string bin = std::string(LT_TEST_PROGRAMS_DIR) + "/hostile_names";
  const std::string js = dir.file("r.json"), ev = dir.file("ev.jsonl"),
                    rec = dir.file("r.ltrec"), pf = dir.file("r.perfetto"),
                    html = dir.file("r.html"), log = dir.file("app.jsonl");
  RunResult r = run({looptrace_bin(),
                     "record",
                     "--dispatch",
                     bin + ":hn_dispatch",
                     "--key",
                     "name=arg0:str",
                     "--slow",
                     "5ms",
                     "--hang",
                     "30ms",
                     "--live",
                     "--events",
                     ev,
                     "--json",
                     js,
                     "--perfetto",
                     pf,
                     "--html",
                     html,
                     "-o",
                     rec,
                     "--",
                     bin,
                     "--dispatches",
                     "4",
                     "--busy-ms",
                     "150",
                     "--log",
                     log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> app = read_jsonl(log);
  ASSERT_EQ(app.size(), 5u);
  const std::string comm = unhex(app[0]["comm_hex"]);
  std::vector<std::string> names;
  for (size_t i = 1; i < app.size(); ++i)
    names.push_back(unhex(app[i]["name_hex"]));

  // The terminal: the live slow lines and the hang lines (stderr), the
  // text report (stdout).
  const std::string term = r.out + r.err;
  expect_terminal_safe(term, "record's output");
  EXPECT_NE(r.err.find("\\x1b[2J\\nlooptrace: forged line pid "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("\\x1b[2J\\nlooptrace: forged line"), std::string::npos)
      << r.out;
  EXPECT_EQ(term.find("\nlooptrace: forged line"), std::string::npos);
  EXPECT_NE(r.err.find("(\\xff\\xfe\\x1b[2J\\nhn)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("looptrace: HANG dispatch"), std::string::npos) << r.err;

  // JSON: valid, the names as they were but for the invalid bytes; the
  // GLib name whole (it was cut at 31 bytes), the longest cut and marked.
  // The probe has no label: its first key is the target.
  json report = read_json(js);
  ASSERT_EQ(report["slow_dispatches"].size(), names.size()) << report.dump();
  std::vector<std::string> targets;
  for (const json& s : report["slow_dispatches"]) {
    EXPECT_EQ(s["comm"], as_json_text(comm));
    targets.push_back(s["target"]);
  }
  auto has = [&](const std::string& t) {
    for (const std::string& x : targets)
      if (x == t) return true;
    return false;
  };
  EXPECT_TRUE(has(names[2])) << names[2];
  EXPECT_EQ(names[3].size(), 200u);
  EXPECT_TRUE(has(names[3].substr(0, 127) + "\u2026"));
  EXPECT_TRUE(has("\\xff\\xfe not UTF-8"));
  std::vector<json> lines = read_jsonl(ev);
  size_t hangs = 0;
  for (const json& l : lines) {
    if (l["event"] != "hang") continue;
    ++hangs;
    EXPECT_EQ(l["comm"], as_json_text(comm));
  }
  EXPECT_GE(hangs, 1u) << read_file(ev);
  EXPECT_TRUE(read_json(pf).is_object());
  EXPECT_NE(read_file(html).find("</html>"), std::string::npos);

  // The recording replays to the same escaped lines.
  RunResult rep = run({looptrace_bin(), "report", rec, "--json", js});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  expect_terminal_safe(rep.out + rep.err, "report's output");
  EXPECT_NE(rep.out.find("\\x1b[2J\\nlooptrace: forged line"),
            std::string::npos)
      << rep.out;
  EXPECT_EQ(read_json(js)["slow_dispatches"].size(), names.size());
}

}  // namespace
}  // namespace lt_test
