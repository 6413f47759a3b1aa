// Key lines (report/key_frames.h): which frame of a stack is the program's
// own code, by default and with --app-code; a span's stacks merged by
// function; and how the text and JSON reports show them.
#include "report/key_frames.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "python/frames.h"
#include "report/report.h"

namespace looptrace {
namespace {

using report::AppCode;

// Every frame of the fixtures by address: native ones below 1 << 48,
// Python ones tagged as PyFrames tags them.
class TableSymbolizer : public Symbolizer {
 public:
  uint64_t native(std::string module, std::string function,
                  uint64_t offset = 0x10) {
    return add(next_native_ += 0x1000, std::move(module), std::move(function),
               offset);
  }
  uint64_t py(std::string file, std::string qualname, int line) {
    std::string base = file.substr(file.rfind('/') + 1);
    return add(python::kPyFrameTag | next_py_++, std::move(file),
               fmt::format("{} ({}:{})", qualname, base, line), 0);
  }
  Frame symbolize(uint32_t, uint64_t addr) override {
    auto it = frames_.find(addr);
    if (it != frames_.end()) return it->second;
    Frame f;
    f.addr = addr;
    return f;
  }

 private:
  uint64_t add(uint64_t addr, std::string module, std::string function,
               uint64_t offset) {
    Frame f;
    f.addr = addr;
    f.module = std::move(module);
    f.function = std::move(function);
    f.offset = offset;
    frames_[addr] = f;
    return addr;
  }
  std::map<uint64_t, Frame> frames_;
  uint64_t next_native_ = 0x400000;
  uint64_t next_py_ = 0;
};

Frame native(std::string module) {
  Frame f;
  f.module = std::move(module);
  f.function = "f";
  return f;
}

TEST(AppCode, ByDefaultTheProgramsFilesAreItsOwnAndTheSystemsAreNot) {
  AppCode app;
  std::string by;
  // Python source files.
  EXPECT_TRUE(app.owns(native("/home/u/app/main.py"), true, &by));
  EXPECT_EQ(by, "default");
  EXPECT_TRUE(app.owns(native("glib_loop.py"), true));   // python3 glib_loop.py
  EXPECT_TRUE(app.owns(native("/usr/bin/meld"), true));  // a script
  EXPECT_FALSE(app.owns(native("/usr/lib/python3.11/json/decoder.py"), true));
  EXPECT_FALSE(app.owns(
      native("/usr/lib/python3/dist-packages/gi/overrides/GLib.py"), true));
  EXPECT_FALSE(app.owns(
      native("/home/u/.venv/lib/python3.11/site-packages/requests/api.py"),
      true));
  EXPECT_FALSE(
      app.owns(native("/usr/local/lib/python3.11/threading.py"), true));
  EXPECT_FALSE(app.owns(native("<frozen importlib._bootstrap>"), true));
  EXPECT_FALSE(app.owns(native("[python]"), true));  // unreadable code
  // Native modules.
  EXPECT_TRUE(app.owns(native("/work/build/refapp/refapp"), false));
  EXPECT_TRUE(app.owns(native("/usr/bin/gnome-calculator"), false));
  EXPECT_TRUE(app.owns(native("/opt/app/lib/libapp.so"), false));
  EXPECT_FALSE(app.owns(native("/usr/bin/python3.11"), false));
  EXPECT_FALSE(app.owns(native("/usr/bin/node"), false));
  EXPECT_FALSE(
      app.owns(native("/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0"), false));
  EXPECT_FALSE(app.owns(native("/lib/x86_64-linux-gnu/libc.so.6"), false));
  EXPECT_FALSE(app.owns(native("/lib64/ld-linux-x86-64.so.2"), false));
  for (const char* m : {"[vdso]", "[anon]", "[heap]", "", "/memfd:jit"})
    EXPECT_FALSE(app.owns(native(m), false)) << m;
  // A relative path is no mapped file.
  EXPECT_FALSE(app.owns(native("refapp"), false));
}

TEST(AppCode, PatternsReplaceTheDefault) {
  // An installed Python application: its package is under dist-packages.
  AppCode app({"meld/*", "/opt/tool/*,libapp.so*"});
  ASSERT_EQ(app.patterns().size(), 3u);
  std::string by;
  EXPECT_TRUE(app.owns(
      native("/usr/lib/python3/dist-packages/meld/filediff.py"), true, &by));
  EXPECT_EQ(by, "meld/*");
  EXPECT_TRUE(app.owns(native("/opt/tool/bin/tool"), false, &by));
  EXPECT_EQ(by, "/opt/tool/*");
  EXPECT_TRUE(app.owns(native("/usr/lib/libapp.so.1"), false, &by));
  EXPECT_EQ(by, "libapp.so*");
  // Anchored: a leading '/' is the whole path.
  EXPECT_FALSE(app.owns(native("/srv/opt/tool/bin/tool"), false));
  // The default rule no longer applies.
  EXPECT_FALSE(app.owns(native("/home/u/app/main.py"), true));
  EXPECT_FALSE(app.owns(native("/work/build/refapp/refapp"), false));
  // A tail starts after a '/': "meld/*" is not "xmeld/...".
  EXPECT_FALSE(app.owns(native("/usr/lib/xmeld/a.py"), true));
}

TEST(AppCode, CheckRefusesEmptyLongAndTooManyPatterns) {
  EXPECT_TRUE(report::check_app_code({"myapp/*", "a.py,b.py"}).ok());
  EXPECT_TRUE(report::check_app_code({}).ok());
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{
           {""}, {"a,,b"}, {"a,"}, {std::string(5000, 'x')}}) {
    Status st = report::check_app_code(bad);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.kind(), ErrorKind::kUsage);
    EXPECT_NE(st.message().find("--app-code"), std::string::npos)
        << st.message();
  }
  std::vector<std::string> many(65, "x");
  EXPECT_FALSE(report::check_app_code(many).ok());
}

// A python3 GLib loop: a busy callback in the program's file under GLib's
// dispatch, PyGObject's overrides and the interpreter.
struct PyStacks {
  TableSymbolizer sym;
  const std::string app = "/home/u/app/loop.py";
  uint64_t vdso = sym.native("[vdso]", "__vdso_clock_gettime");
  uint64_t libc =
      sym.native("/lib/x86_64-linux-gnu/libc.so.6", "__clock_gettime");
  uint64_t eval = sym.native("/usr/bin/python3.11", "_PyEval_EvalFrameDefault");
  uint64_t eval2 =
      sym.native("/usr/bin/python3.11", "_PyEval_EvalFrameDefault", 0x8f0);
  uint64_t stdlib = sym.py("/usr/lib/python3.11/json/encoder.py", "encode", 9);
  uint64_t now = sym.py(app, "now_ns", 12);
  uint64_t busy64 = sym.py(app, "busy_for", 64);
  uint64_t busy65 = sym.py(app, "busy_for", 65);
  uint64_t cb = sym.py(app, "on_timeout", 22);
  uint64_t gi = sym.py("/usr/lib/python3/dist-packages/gi/overrides/GLib.py",
                       "MainLoop.run", 497);
  uint64_t dispatch = sym.native("/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0",
                                 "g_main_context_dispatch");
  uint64_t main = sym.py(app, "<module>", 80);
};

StackGroup group(std::vector<uint64_t> frames, uint32_t count) {
  StackGroup g;
  g.frames = std::move(frames);
  g.count = count;
  return g;
}

TEST(KeyFrame, IsTheInnermostFrameOfTheProgramsOwnCode) {
  PyStacks p;
  report::FrameNames names(&p.sym);
  AppCode app;
  std::vector<uint64_t> frames = {p.vdso, p.libc, p.eval,     p.now, p.busy64,
                                  p.cb,   p.gi,   p.dispatch, p.main};
  auto k = report::key_frame(1, frames, app, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 3u);  // now_ns, not the vdso, libc or python3.11
  EXPECT_EQ(k->by, "default");
  // In the standard library called from the callback: the callback.
  k = report::key_frame(1, {p.stdlib, p.eval, p.cb, p.gi}, app, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 2u);
  // Nothing of the program's own.
  EXPECT_FALSE(
      report::key_frame(1, {p.vdso, p.libc, p.gi, p.dispatch}, app, names));
  EXPECT_FALSE(report::key_frame(1, {}, app, names));
  // --app-code naming the overrides: they are the program's now.
  AppCode gi({"gi/overrides/*"});
  k = report::key_frame(1, frames, gi, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 6u);
  EXPECT_EQ(k->by, "gi/overrides/*");
}

// 14 samples: busy_for at two lines under one caller (3 + 5), and in
// now_ns (6) under busy_for.
SlowSpan busy_span(const PyStacks& p) {
  SlowSpan s;
  s.span.pid = 1;
  s.span.tid = 1;
  s.span.comm = "python3";
  s.span.duration_ns = 150'000'000;
  s.span.cpu_ns = 150'000'000;
  s.nsamples = 14;
  s.stacks = {
      group({p.vdso, p.libc, p.now, p.busy64, p.cb, p.gi, p.dispatch, p.main},
            6),
      group({p.eval2, p.busy65, p.cb, p.gi, p.dispatch, p.main}, 5),
      group({p.eval, p.busy64, p.cb, p.gi, p.dispatch, p.main}, 3),
  };
  return s;
}

// An application the distribution installed keeps its code in
// dist-packages/NAME/ and runs it from /usr/bin/NAME (Debian's meld): by
// default that package is its own code, found from the main script (the
// outermost Python frame); other installed packages are not.
TEST(KeyFrame, AnInstalledApplicationsPackageIsItsOwnCode) {
  TableSymbolizer sym;
  report::FrameNames names(&sym);
  const std::string dist = "/usr/lib/python3/dist-packages/";
  const uint64_t eval =
      sym.native("/usr/bin/python3.11", "_PyEval_EvalFrameDefault");
  const uint64_t tmpl =
      sym.py(dist + "gi/_gtktemplate.py", "init_template", 160);
  const uint64_t init =
      sym.py(dist + "meld/newdifftab.py", "NewDiffTab.__init__", 68);
  const uint64_t action =
      sym.py(dist + "meld/meldwindow.py", "MeldWindow.action_new_tab", 520);
  const uint64_t run =
      sym.py(dist + "gi/overrides/Gio.py", "Application.run", 40);
  const uint64_t app_main = sym.py("/usr/bin/meld", "run_application", 448);
  const uint64_t other = sym.py(dist + "meldx/util.py", "helper", 3);
  AppCode app;
  std::vector<uint64_t> frames = {eval, tmpl, init, action, run, app_main};
  auto k = report::key_frame(1, frames, app, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 2u);  // NewDiffTab.__init__, not the template code
  EXPECT_EQ(k->by, "default");
  // A package whose name only starts like the script's is not its own.
  k = report::key_frame(1, {other, app_main}, app, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 1u);
  // Without the main script in the stack (a cut stack), no package is.
  k = report::key_frame(1, {eval, tmpl, init, run}, app, names);
  EXPECT_FALSE(k);
  // A script named like a package is found with '-' as '_'.
  const uint64_t tweak = sym.py("/usr/bin/my-tool", "main", 9);
  const uint64_t lib = sym.py(dist + "my_tool/core.py", "work", 5);
  k = report::key_frame(1, {eval, lib, tweak}, app, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 1u);
  // --app-code replaces the default, the package rule too.
  AppCode gi({"gi/*"});
  k = report::key_frame(1, frames, gi, names);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->index, 1u);
}

TEST(FunctionStacks, MergeStacksThatDifferInLinesAndOffsetsOnly) {
  PyStacks p;
  report::FrameNames names(&p.sym);
  EXPECT_EQ(names.function(1, p.busy64), "busy_for (loop.py)");
  EXPECT_EQ(names.function(1, p.eval2), "_PyEval_EvalFrameDefault");
  EXPECT_EQ(names.name(1, p.busy64), "busy_for (loop.py:64)");
  const SlowSpan s = busy_span(p);
  std::vector<report::FunctionStack> g = report::function_stacks(s, names);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].samples, 8u);  // busy_for's two lines
  EXPECT_EQ(g[0].stacks, 2u);
  EXPECT_EQ(g[0].shown, &s.stacks[1]);  // the commonest of the two
  EXPECT_EQ(g[1].samples, 6u);
  EXPECT_EQ(g[1].shown, &s.stacks[0]);

  AppCode app;
  report::StuckHere h = report::stuck_here(s, app, names);
  EXPECT_EQ(h.stack, &s.stacks[1]);
  EXPECT_EQ(h.samples, 8u);
  EXPECT_EQ(h.other_stacks, 1u);
  ASSERT_TRUE(h.key);
  EXPECT_EQ(h.key->index, 1u);   // busy_for (loop.py:65)
  EXPECT_EQ(h.key_samples, 8u);  // now_ns is the key of the other 6
}

ReportContext context(Symbolizer* sym, std::vector<std::string> app_code) {
  ReportContext ctx;
  ctx.symbolizer = sym;
  ctx.slow_ns.fill(16'000'000);
  ctx.app_code = std::move(app_code);
  return ctx;
}

TEST(KeyLinesReport, TextMarksTheKeyFrameAndGroupsSpansByIt) {
  PyStacks p;
  DispatchAnalysis a;
  a.slow = {busy_span(p), busy_span(p), busy_span(p)};
  a.slow[1].span.duration_ns = 200'000'000;
  // The third spent its time in now_ns.
  a.slow[2].stacks[0].count = 10;
  a.slow[2].nsamples = 18;
  std::ostringstream os;
  write_text_report(os, a, context(&p.sym, {}));
  const std::string text = os.str();
  EXPECT_NE(text.find("stuck here: 8 of 14 samples (2 stacks with these "
                      "functions)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    > busy_for (loop.py:65)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("    > now_ns (loop.py:12)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("key line in 8 of 14 samples: busy_for (loop.py)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("SLOW DISPATCHES BY KEY LINE"), std::string::npos);
  EXPECT_NE(text.find("    2    350ms    200ms  busy_for (loop.py:65)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    1    150ms    150ms  now_ns (loop.py:12)\n"),
            std::string::npos)
      << text;
  // Nothing of the program's own: said, with how to name it.
  std::ostringstream none;
  write_text_report(none, a, context(&p.sym, {"/nowhere/*"}));
  EXPECT_EQ(none.str().find("    > "), std::string::npos) << none.str();
  EXPECT_NE(none.str().find("    3    500ms    200ms  (no frame of the "
                            "program's own code)"),
            std::string::npos)
      << none.str();
  EXPECT_NE(none.str().find("--app-code PATTERN"), std::string::npos);
}

TEST(KeyLinesReport, TextShowsAKeyFramePastTheFramesShown) {
  TableSymbolizer sym;
  std::vector<uint64_t> frames;
  for (int i = 0; i < 20; ++i)
    frames.push_back(
        sym.native("/usr/lib/libdeep.so", fmt::format("deep{}", i)));
  frames.push_back(sym.native("/opt/app/app", "app_handler"));
  frames.push_back(sym.native("/usr/lib/libc.so.6", "__libc_start_main"));
  DispatchAnalysis a;
  SlowSpan s;
  s.span.pid = 1;
  s.span.duration_ns = 50'000'000;
  s.nsamples = 4;
  s.stacks = {group(frames, 4)};
  a.slow = {s};
  std::ostringstream os;
  write_text_report(os, a, context(&sym, {}));
  const std::string text = os.str();
  EXPECT_NE(text.find("      deep11+0x10\n      ... 8 more frames\n"
                      "    > app_handler+0x10\n      ... 1 more frame\n"),
            std::string::npos)
      << text;
}

TEST(KeyLinesReport, JsonCarriesTheKeyFramePerStackAndTheStuckStack) {
  PyStacks p;
  DispatchAnalysis a;
  a.slow = {busy_span(p)};
  a.listed[LT_ROLE_DISPATCH] = {0};
  nlohmann::json j = to_json(a, context(&p.sym, {}));
  EXPECT_EQ(j["app_code"], nlohmann::json::array());
  const nlohmann::json& s = j["slow_dispatches"][0];
  ASSERT_EQ(s["stacks"].size(), 3u);
  EXPECT_EQ(s["stacks"][0]["key_frame"], 2);  // now_ns
  EXPECT_EQ(s["stacks"][0]["key_frame_by"], "default");
  EXPECT_EQ(s["stacks"][1]["key_frame"], 1);
  EXPECT_EQ(s["stacks"][0]["frames"][2], "now_ns (loop.py:12)");
  // The exact stacks stay; the merged one is stuck_here.
  EXPECT_EQ(s["stuck_here"]["samples"], 8);
  EXPECT_EQ(s["stuck_here"]["stacks"], 2);
  EXPECT_EQ(s["stuck_here"]["key_frame"], 1);
  EXPECT_EQ(s["stuck_here"]["key_line"], "busy_for (loop.py:65)");
  EXPECT_EQ(s["stuck_here"]["key_line_samples"], 8);
  EXPECT_EQ(s["stuck_here"]["frames"][1], "busy_for (loop.py:65)");

  // --app-code naming the overrides.
  j = to_json(a, context(&p.sym, {"GLib.py"}));
  EXPECT_EQ(j["app_code"], nlohmann::json::array({"GLib.py"}));
  const nlohmann::json& o = j["slow_dispatches"][0];
  EXPECT_EQ(o["stacks"][0]["key_frame"], 5);
  EXPECT_EQ(o["stacks"][0]["key_frame_by"], "GLib.py");
  EXPECT_EQ(o["stuck_here"]["key_line"], "MainLoop.run (GLib.py:497)");
  // No pattern matches: null.
  j = to_json(a, context(&p.sym, {"nothing.py"}));
  EXPECT_TRUE(j["slow_dispatches"][0]["stacks"][0]["key_frame"].is_null());
  EXPECT_TRUE(j["slow_dispatches"][0]["stuck_here"]["key_line"].is_null());
}

}  // namespace
}  // namespace looptrace
