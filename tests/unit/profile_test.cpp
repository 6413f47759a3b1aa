// Profile files: roles (input roles included), and clear errors.
#include "profiles/profile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace looptrace {
namespace {

TEST(Profile, BuiltinRefappHasEveryLoopRole) {
  auto p = load_profile("refapp");
  ASSERT_TRUE(p.ok()) << p.status().message();
  bool dispatch = false, idle = false, enqueue = false;
  for (const ProbeDef& d : p->probes) {
    dispatch = dispatch || d.role == LT_ROLE_DISPATCH;
    idle = idle || d.role == LT_ROLE_IDLE;
    enqueue = enqueue || d.role == LT_ROLE_ENQUEUE;
  }
  EXPECT_TRUE(dispatch && idle && enqueue);
}

// Every source kind GLib exports a GSourceFuncs table for, its dispatch
// slot, named by a label; the callback is the first key.
TEST(Profile, BuiltinGlibProbesEachSourceKindByItsTable) {
  auto p = load_profile("glib");
  ASSERT_TRUE(p.ok()) << p.status().message();
  std::vector<std::string> tables;
  for (const ProbeDef& d : p->probes) {
    EXPECT_EQ(d.binary, "libglib-2.0.so.0");
    EXPECT_EQ(d.profile, "glib");  // the metrics' profile label
    EXPECT_EQ(d.label.rfind("GLib ", 0), 0u) << d.label;
    ASSERT_FALSE(d.keys.empty());
    EXPECT_EQ(d.keys[0].name, "callback");
    EXPECT_EQ(d.keys[0].format, KeyFormat::kSymbol);
    EXPECT_EQ(d.role, d.symbol == "*(g_idle_funcs+16)" ? LT_ROLE_IDLE
                                                       : LT_ROLE_DISPATCH);
    tables.push_back(d.symbol);
  }
  EXPECT_EQ(tables,
            (std::vector<std::string>{
                "*(g_timeout_funcs+16)", "*(g_idle_funcs+16)",
                "*(g_io_watch_funcs+16)", "*(g_unix_fd_source_funcs+16)",
                "*(g_child_watch_funcs+16)", "*(g_unix_signal_funcs+16)"}));
}

// Qt 5: the outermost notifyInternal2, the receiver's class and the
// event's type named from QEvent::Type.
TEST(Profile, BuiltinQt5NamesEventTypes) {
  auto p = load_profile("qt5");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->probes.size(), 1u);
  const ProbeDef& d = p->probes[0];
  EXPECT_EQ(d.binary, "libQt5Core.so.5");
  EXPECT_TRUE(d.outermost);
  ASSERT_EQ(d.keys.size(), 3u);
  EXPECT_EQ(d.keys[0].format, KeyFormat::kVtable);
  EXPECT_EQ(d.keys[1].format, KeyFormat::kEnum);
  EXPECT_EQ(d.keys[1].spec.size, 2);
  EXPECT_EQ(d.keys[1].names.at(1), "Timer");
  EXPECT_EQ(d.keys[1].names.at(6), "KeyPress");
  EXPECT_EQ(d.keys[1].names.at(43), "MetaCall");
  EXPECT_EQ(d.keys[1].names.at(1000), "User");
}

// Qt 6: the same probe on libQt6Core, QEvent::t at 8 (Qt 5: 16), the same
// type names.
TEST(Profile, BuiltinQt6ReadsTheTypeWhereQt6KeepsIt) {
  auto p5 = load_profile("qt5");
  auto p6 = load_profile("qt6");
  ASSERT_TRUE(p5.ok() && p6.ok()) << p6.status().message();
  ASSERT_EQ(p6->probes.size(), 1u);
  const ProbeDef& d = p6->probes[0];
  EXPECT_EQ(p6->name, "qt6");
  EXPECT_EQ(d.binary, "libQt6Core.so.6");
  EXPECT_EQ(d.symbol, p5->probes[0].symbol);
  EXPECT_TRUE(d.outermost);
  ASSERT_EQ(d.keys.size(), 3u);
  // u16 *(arg1+8): one dereference, 8 added before it.
  EXPECT_EQ(d.keys[1].spec.nderef, 1);
  EXPECT_EQ(d.keys[1].spec.off[0], 8);
  EXPECT_EQ(p5->probes[0].keys[1].spec.off[0], 16);
  EXPECT_EQ(d.keys[1].names, p5->probes[0].keys[1].names);
  EXPECT_EQ(p6->description.find("@"), std::string::npos) << p6->description;
}

// GTK 3: glib's probes first, then every GDK event by its type.
TEST(Profile, BuiltinGtk3HasGlibsProbesAndGdkEvents) {
  auto glib = load_profile("glib");
  auto p = load_profile("gtk3");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(glib.ok());
  ASSERT_EQ(p->probes.size(), glib->probes.size() + 2);
  for (size_t i = 0; i < glib->probes.size(); ++i)
    EXPECT_EQ(p->probes[i].symbol, glib->probes[i].symbol);
  // Python signal handlers: PyGClosure's callable, spans only for those.
  const ProbeDef& h = p->probes.back();
  EXPECT_EQ(h.binary, "libgobject-2.0.so.0");
  EXPECT_EQ(h.symbol, "g_closure_invoke");
  ASSERT_EQ(h.keys.size(), 1u);
  EXPECT_EQ(h.keys[0].format, KeyFormat::kPyFunc);
  EXPECT_EQ(h.only_if, 1u);
  const ProbeDef& d = p->probes[p->probes.size() - 2];
  EXPECT_EQ(d.binary, "libgtk-3.so.0");
  EXPECT_EQ(d.symbol, "gtk_main_do_event");
  ASSERT_EQ(d.keys.size(), 3u);
  EXPECT_EQ(d.keys[0].format, KeyFormat::kEnum);
  // GdkEventKey/Button/Motion's time (guint32 at 20): the X server's.
  EXPECT_EQ(d.keys[2].name, "time");
  ASSERT_TRUE(d.input.has_value());
  EXPECT_EQ(d.input->type_key, 1u);
  EXPECT_EQ(d.input->time_key, 3u);
  EXPECT_EQ(d.input->kinds.at(8), "key_press");
  EXPECT_EQ(d.input->kinds.at(9), "key_release");
  EXPECT_EQ(d.input->kinds.count(2), 0u);  // GDK_EXPOSE is not input
  EXPECT_EQ(d.keys[0].spec.size, 4);
  EXPECT_EQ(d.keys[0].names.at(8), "GDK_KEY_PRESS");
  EXPECT_EQ(d.keys[0].names.at(-1), "GDK_NOTHING");
  EXPECT_EQ(d.keys[0].names.at(5), "GDK_2BUTTON_PRESS");
  // GTK 3 paints a frame as GDK_EXPOSE events: they are its phases.
  EXPECT_TRUE(d.phase);
  EXPECT_EQ(p->name, "gtk3");
}

// GTK 4: glib's probes, and a frame's phases from what GTK exports.
TEST(Profile, BuiltinGtk4HasGlibsProbesAndFramePhases) {
  auto glib = load_profile("glib");
  auto p = load_profile("gtk4");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(glib.ok());
  ASSERT_EQ(p->probes.size(), glib->probes.size() + 3);
  std::vector<std::string> phases;
  for (size_t i = glib->probes.size(); i < p->probes.size(); ++i) {
    const ProbeDef& d = p->probes[i];
    EXPECT_EQ(d.binary, "libgtk-4.so.1");
    EXPECT_TRUE(d.phase) << d.symbol;
    phases.push_back(d.label);
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"layout", "snapshot", "render"}));
}

// "only_if" names one of the probe's keys, on a span probe.
TEST(ProfileTypes, OnlyIfNamesAKeyOfASpanProbe) {
  auto parse = [](const std::string& role, const std::string& only) {
    return parse_profile(
        R"({"probes": [{"role": ")" + role +
            R"j(", "binary": "b", "symbol": "s", "keys": [{"name": "python",
            "expr": "*(arg0+32)", "format": "pyfunc"}], "only_if": )j" +
            only + "}]}",
        "p.json");
  };
  auto ok = parse("dispatch", "\"python\"");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->probes[0].only_if, 1u);
  auto unknown = parse("dispatch", "\"py\"");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find(
                "probes[0].only_if: \"py\": no key of this probe"),
            std::string::npos)
      << unknown.status().message();
  auto point = parse("enqueue", "\"python\"");
  ASSERT_FALSE(point.ok());
  EXPECT_NE(point.status().message().find("only for the dispatch and idle"),
            std::string::npos)
      << point.status().message();
  EXPECT_FALSE(parse("dispatch", "1").ok());
}

// The android built-in's loop waits: pollInner's call to epoll_wait, and
// Looper::wake() as what ends them.
TEST(Profile, BuiltinAndroidWaitsInEpollWaitAndWakesByWake) {
  auto p = load_profile("android");
  ASSERT_TRUE(p.ok()) << p.status().message();
  const ProbeDef* wait = nullptr;
  const ProbeDef* wake = nullptr;
  for (const ProbeDef& d : p->probes) {
    if (d.role == LT_ROLE_WAIT) wait = &d;
    if (d.role == LT_ROLE_WAKE) wake = &d;
  }
  ASSERT_NE(wait, nullptr);
  ASSERT_NE(wake, nullptr);
  EXPECT_EQ(wait->symbol, "android::Looper::pollInner(int)");
  ASSERT_TRUE(wait->call.has_value());
  EXPECT_EQ(wait->call->to, "epoll_wait");
  EXPECT_EQ(wake->symbol, "android::Looper::wake()");
  EXPECT_FALSE(wake->call.has_value());
}

// "call": {"to": NAME} is a direct call, never with a virtual call's
// fields; a wait or wake probe reads no keys.
TEST(ProfileTypes, WaitsAreDirectCallsWithoutKeys) {
  auto parse = [](const std::string& role, const std::string& rest) {
    return parse_profile(R"({"probes": [{"role": ")" + role +
                             R"(", "binary": "b", "symbol": "s")" + rest +
                             "}]}",
                         "p.json");
  };
  auto ok = parse("wait", R"(, "call": {"to": "epoll_wait"})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->probes[0].role, static_cast<uint32_t>(LT_ROLE_WAIT));
  EXPECT_EQ(ok->probes[0].call->to, "epoll_wait");
  EXPECT_TRUE(parse("wake", "").ok());
  const std::pair<std::string, std::string> bad[] = {
      {R"(, "call": {"to": "epoll_wait", "slot": 16})",
       "profile p.json: probes[0].call: \"to\" names a direct call: not "
       "with \"slot\" or \"arg1\" (virtual calls)"},
      {R"(, "call": {"to": ""})",
       "profile p.json: probes[0].call.to: expected the name of the function "
       "called (a string)"},
      {R"(, "keys": [{"name": "fd", "expr": "arg0", "format": "int"}])",
       "profile p.json: probes[0].keys: none for the wait and wake roles: "
       "they record no values, only counts and times per thread"},
  };
  for (const auto& [rest, message] : bad) {
    auto r = parse("wait", rest);
    ASSERT_FALSE(r.ok()) << rest;
    EXPECT_EQ(r.status().message(), message);
  }
  auto enqueue = parse("enqueue", R"(, "call": {"to": "f"})");
  ASSERT_FALSE(enqueue.ok());
  EXPECT_NE(enqueue.status().message().find(
                "only for the dispatch, idle and wait roles"),
            std::string::npos)
      << enqueue.status().message();
}

TEST(ProfileTypes, EnumKeysNeedTheirNames) {
  auto parse = [](const std::string& key) {
    return parse_profile(
        R"({"probes": [{"binary": "a", "symbol": "f", "keys": [)" + key +
            "]}]}",
        "p.json");
  };
  auto ok = parse(
      R"j({"name": "t", "expr": "u16 *(arg1+16)", "format": "enum",
          "names": {"1": "Timer", "-2": "Neg"}})j");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->probes[0].keys[0].names.at(-2), "Neg");
  const std::pair<const char*, const char*> bad[] = {
      {R"j({"name": "t", "expr": "arg0", "format": "enum"})j",
       "profile p.json: probes[0].keys[0].names: missing (an enum key names "
       "its values: {\"1\": \"Timer\", ...})"},
      {R"j({"name": "t", "expr": "arg0", "format": "enum", "names": []})j",
       "profile p.json: probes[0].keys[0].names: expected a non-empty "
       "object, got array"},
      {R"j({"name": "t", "expr": "arg0", "format": "enum", "names": {}})j",
       "profile p.json: probes[0].keys[0].names: expected a non-empty "
       "object, got object"},
      {R"j({"name": "t", "expr": "arg0", "format": "enum",
           "names": {"x1": "A"}})j",
       "profile p.json: probes[0].keys[0].names.x1: expected a decimal "
       "integer as the name's key"},
      {R"j({"name": "t", "expr": "arg0", "format": "enum",
           "names": {"1": 5}})j",
       "profile p.json: probes[0].keys[0].names.1: expected a non-empty "
       "string, got number"},
      {R"j({"name": "t", "expr": "arg0", "format": "int",
           "names": {"1": "A"}})j",
       "profile p.json: probes[0].keys[0].names: only with \"format\": "
       "\"enum\""},
  };
  for (const auto& [key, want] : bad) {
    auto r = parse(key);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().message(), want) << key;
  }
}

TEST(ProfileTypes, OneStrKeyPerProbe) {
  auto r = parse_profile(
      R"j({"probes": [{"binary": "a", "symbol": "f", "keys": [
          {"name": "a", "expr": "*(arg0+80)", "format": "str"},
          {"name": "b", "expr": "*(arg1+80)", "format": "str"}]}]})j",
      "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "profile p.json: probes[0].keys: at most one key of format "
            "\"str\" per probe");
}

TEST(ProfileTypes, OutermostIsABooleanOfSpanRoles) {
  auto parse = [](const std::string& fields) {
    return parse_profile(
        R"({"probes": [{"binary": "a", "symbol": "f", )" + fields + "}]}",
        "p.json");
  };
  auto ok = parse(R"("role": "idle", "outermost": true)");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->probes[0].outermost);
  auto r = parse(R"("outermost": 1)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "profile p.json: probes[0].outermost: expected true or false, "
            "got number");
  r = parse(R"("role": "enqueue", "outermost": true)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "profile p.json: probes[0].outermost: only for the dispatch and "
            "idle roles (spans)");
}

TEST(ProfileTypes, PhaseIsABooleanOfSpanRolesThatAreNoFrames) {
  auto parse = [](const std::string& fields) {
    return parse_profile(
        R"({"probes": [{"binary": "a", "symbol": "f", )" + fields + "}]}",
        "p.json");
  };
  auto ok = parse(R"("role": "dispatch", "phase": true)");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->probes[0].phase);
  auto r = parse(R"("phase": "yes")");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "profile p.json: probes[0].phase: expected true or false, got "
            "string");
  r = parse(R"("role": "barrier.post", "phase": true)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "profile p.json: probes[0].phase: only for the dispatch and idle "
            "roles (spans)");
  r = parse(R"("phase": true, "frame": {})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "profile p.json: probes[0].phase: not with \"frame\": a span is a "
            "frame or a phase of one");
}

// GTK 3 and 4 draw each frame from a GLib timeout their frame clock names:
// the glib profile's timeout probe declares those names as frames (and no
// other probe has frames: the flush-events idle is not one).
TEST(Profile, BuiltinGlibTimeoutsNamedForGtksFrameClockAreFrames) {
  auto p = load_profile("glib");
  ASSERT_TRUE(p.ok()) << p.status().message();
  size_t frames = 0;
  for (const ProbeDef& d : p->probes) {
    if (!d.frame) continue;
    ++frames;
    EXPECT_EQ(d.symbol, "*(g_timeout_funcs+16)");
    EXPECT_EQ(d.frame->names,
              (std::vector<std::string>{"[gtk+] gdk_frame_clock_paint_idle",
                                        "[gtk] gdk_frame_clock_paint_idle"}));
    EXPECT_TRUE(std::any_of(d.keys.begin(), d.keys.end(), [](const KeyDef& k) {
      return k.role == KeyRole::kDueUs;
    }));
    // The name is matched once per callback and Python function.
    std::vector<std::string> by;
    for (uint32_t k : d.frame->by) by.push_back(d.keys.at(k - 1).name);
    EXPECT_EQ(by, (std::vector<std::string>{"callback", "python"}));
  }
  EXPECT_EQ(frames, 1u);
}

// Qt Quick's frames end at each frameSwapped(), on top of Qt's events;
// their phases are the scene graph's polish, sync and render.
TEST(Profile, BuiltinQtQuickFramesEndAtEachSwap) {
  for (const char* v : {"5", "6"}) {
    auto p = load_profile(std::string("qtquick") + v);
    ASSERT_TRUE(p.ok()) << p.status().message();
    auto qt = load_profile(std::string("qt") + v);
    ASSERT_TRUE(qt.ok()) << qt.status().message();
    ASSERT_GT(p->probes.size(), qt->probes.size());
    EXPECT_EQ(p->probes[0].symbol, qt->probes[0].symbol);
    std::vector<std::string> frames, phases;
    for (const ProbeDef& d : p->probes) {
      if (d.frame) {
        EXPECT_TRUE(d.frame->end);
        frames.push_back(d.symbol);
      }
      if (d.phase) phases.push_back(d.label);
      if (d.frame || d.phase) {
        EXPECT_EQ(d.binary, std::string("libQt") + v + "Quick.so." + v);
      }
    }
    EXPECT_EQ(frames, std::vector<std::string>{"QQuickWindow::frameSwapped()"});
    EXPECT_EQ(phases, (std::vector<std::string>{"polish", "sync", "render"}));
  }
}

TEST(ProfileTypes, FrameNamesAreCheckedAsTheKernelMatchesThem) {
  auto parse = [](const std::string& fields) {
    return parse_profile(
        R"({"probes": [{"binary": "a", "symbol": "f", )" + fields + "}]}",
        "p.json");
  };
  const std::string str_key =
      R"x("keys": [{"name": "name", "expr": "*(arg0+80)", "format": "str"}], )x";
  auto every = parse(R"("role": "idle", "frame": {})");
  ASSERT_TRUE(every.ok()) << every.status().message();
  ASSERT_TRUE(every->probes[0].frame);
  EXPECT_TRUE(every->probes[0].frame->names.empty());
  auto named = parse(str_key + R"("frame": {"names": ["paint"]})");
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->probes[0].frame->names, std::vector<std::string>{"paint"});
  EXPECT_TRUE(named->probes[0].frame->by.empty());
  const std::string two_keys =
      R"x("keys": [{"name": "cb", "expr": "arg1", "format": "sym"},)x"
      R"x( {"name": "name", "expr": "*(arg0+80)", "format": "str"}], )x";
  auto by =
      parse(two_keys + R"("frame": {"names": ["p"], "by": ["name", "cb"]})");
  ASSERT_TRUE(by.ok()) << by.status().message();
  EXPECT_EQ(by->probes[0].frame->by, (std::vector<uint32_t>{2, 1}));
  auto ends = parse(R"("frame": {"end": true})");
  ASSERT_TRUE(ends.ok()) << ends.status().message();
  EXPECT_TRUE(ends->probes[0].frame->end);
  EXPECT_FALSE(every->probes[0].frame->end);
  struct Case {
    std::string fields;
    const char* message;
  };
  const std::vector<Case> cases = {
      {R"("role": "enqueue", "frame": {})",
       "probes[0].frame: only for the dispatch and idle roles (spans)"},
      {R"("frame": true)", "probes[0].frame: expected an object, got boolean"},
      {R"("frame": {"name": "x"})",
       "probes[0].frame: unknown field \"name\" (expected \"names\", "
       "\"by\", \"end\")"},
      {R"("frame": {"end": 1})",
       "probes[0].frame.end: expected true or false, got number"},
      {str_key + R"("frame": {"names": ["p"], "end": true})",
       "probes[0].frame.end: not with \"names\""},
      {two_keys + R"("frame": {"by": ["cb"]})",
       "probes[0].frame.by: only with \"names\""},
      {two_keys + R"("frame": {"names": ["p"], "by": []})",
       "probes[0].frame.by: expected an array of 1 to 2 key names"},
      {two_keys + R"("frame": {"names": ["p"], "by": ["cb", "name", "cb"]})",
       "probes[0].frame.by: expected an array of 1 to 2 key names"},
      {two_keys + R"("frame": {"names": ["p"], "by": "cb"})",
       "probes[0].frame.by: expected an array of 1 to 2 key names"},
      {two_keys + R"("frame": {"names": ["p"], "by": ["what"]})",
       "probes[0].frame.by[0]: expected the name of one of the probe's keys"},
      {two_keys + R"("frame": {"names": ["p"], "by": [3]})",
       "probes[0].frame.by[0]: expected the name of one of the probe's keys"},
      {two_keys + R"("frame": {"names": ["p"], "by": ["cb", "cb"]})",
       "probes[0].frame.by[1]: a key named twice"},
      {R"("frame": {"names": ["paint"]})",
       "probes[0].frame.names: the probe needs a key of format \"str\" to "
       "match names against"},
      {str_key + R"("frame": {"names": []})",
       "probes[0].frame.names: expected an array of 1 to 2 strings"},
      {str_key + R"("frame": {"names": ["a", "b", "c"]})",
       "probes[0].frame.names: expected an array of 1 to 2 strings"},
      {str_key + R"("frame": {"names": [""]})",
       "probes[0].frame.names[0]: expected a string of 1 to 39 bytes"},
      {str_key + R"("frame": {"names": [")" + std::string(40, 'x') + R"("]})",
       "probes[0].frame.names[0]: expected a string of 1 to 39 bytes"},
      {str_key + R"("frame": {"names": [7]})",
       "probes[0].frame.names[0]: expected a string of 1 to 39 bytes"},
  };
  for (const Case& c : cases) {
    auto r = parse(c.fields);
    ASSERT_FALSE(r.ok()) << c.fields;
    EXPECT_EQ(r.status().kind(), ErrorKind::kUsage);
    EXPECT_EQ(r.status().message(), std::string("profile p.json: ") + c.message)
        << c.fields;
  }
}

TEST(Profile, LabelIsAString) {
  auto p = parse_profile(
      R"({"probes": [{"binary": "a", "symbol": "f", "label": "GLib idle"}]})",
      "test");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->probes[0].label, "GLib idle");
}

TEST(Profile, InputRolesWithTheirBufferKind) {
  auto p = parse_profile(R"({"name": "static", "probes": [
      {"role": "input.recv", "binary": "./app", "symbol": "my_recv"},
      {"role": "input.send", "binary": "./app", "symbol": "my_sendmsg",
       "buffer": "msghdr"}]})",
                         "test.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->probes.size(), 2u);
  EXPECT_EQ(p->probes[0].role, static_cast<uint32_t>(LT_ROLE_INPUT_RECV));
  EXPECT_FALSE(p->probes[0].msghdr);
  EXPECT_EQ(p->probes[1].role, static_cast<uint32_t>(LT_ROLE_INPUT_SEND));
  EXPECT_TRUE(p->probes[1].msghdr);
  EXPECT_STREQ(role_name(LT_ROLE_INPUT_RECV), "input.recv");
  EXPECT_STREQ(role_name(LT_ROLE_INPUT_SEND), "input.send");
}

TEST(Profile, BadRoleAndBadBufferAreOneLineErrors) {
  auto bad_role = parse_profile(
      R"({"probes": [{"role": "input.ack", "binary": "a", "symbol": "f"}]})",
      "p.json");
  ASSERT_FALSE(bad_role.ok());
  EXPECT_NE(bad_role.status().message().find("input.recv"), std::string::npos)
      << bad_role.status().message();
  auto bad_buffer = parse_profile(
      R"({"probes": [{"role": "input.recv", "binary": "a", "symbol": "f",
                      "buffer": "iovec"}]})",
      "p.json");
  ASSERT_FALSE(bad_buffer.ok());
  EXPECT_NE(bad_buffer.status().message().find("msghdr"), std::string::npos)
      << bad_buffer.status().message();
  EXPECT_EQ(bad_buffer.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace looptrace

namespace looptrace {
namespace {

// One clear line, exit code 2 (usage), naming `where`.
void expect_one_line_usage(const Result<Profile>& p, const std::string& where) {
  ASSERT_FALSE(p.ok()) << where;
  const std::string& m = p.status().message();
  EXPECT_EQ(p.status().kind(), ErrorKind::kUsage) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find(where), std::string::npos)
      << "expected '" << where << "' in: " << m;
}

TEST(ProfileTypes, WrongTypesNameTheField) {
  struct Case {
    const char* json;
    const char* where;
  };
  const Case cases[] = {
      {R"({"name": 5, "probes": [{"binary": "a", "symbol": "f"}]})",
       "name: expected a string, got number"},
      {R"({"description": [1], "probes": [{"binary": "a", "symbol": "f"}]})",
       "description: expected a string, got array"},
      {R"({"probes": [{"role": 7, "binary": "a", "symbol": "f"}]})",
       "probes[0].role: expected a string"},
      {R"({"probes": [{"binary": "a", "symbol": "f"},
                      {"binary": null, "symbol": "f"}]})",
       "probes[1].binary: expected a string, got null"},
      {R"({"probes": [{"binary": "a"}]})", "probes[0].symbol: missing"},
      {R"({"probes": [{"binary": "a", "symbol": "f",
                       "keys": [{"name": "x", "expr": "arg1", "format": 3}]}]})",
       "probes[0].keys[0].format: expected a string, got number"},
      {R"({"probes": [{"binary": "a", "symbol": "f",
                       "keys": [{"name": "x", "expr": "arg1"}, 7]}]})",
       "probes[0].keys[1]: expected an object"},
      {R"({"probes": [{"binary": "a", "symbol": "f",
                       "keys": [{"name": "x", "expr": {}}]}]})",
       "probes[0].keys[0].expr: expected a string, got object"},
      {R"({"probes": [{"binary": "a", "symbol": "f", "keys": {"a": 1}}]})",
       "probes[0].keys: expected an array, got object"},
      {R"({"probes": [{"binary": "a", "symbol": "f", "buffer": 1}]})",
       "probes[0].buffer: expected a string"},
      {R"({"probes": [{"binary": "a", "symbol": "f", "label": 1}]})",
       "probes[0].label: expected a string, got number"},
      {R"({"probes": {"binary": "a", "symbol": "f"}})",
       "probes: expected a non-empty array, got object"},
      {R"({"probes": []})", "probes: a non-empty array is required"},
      {R"({"probes": [null]})", "probes[0]: expected an object, got null"},
      {R"({"probes": [[]]})", "probes[0]: expected an object, got array"},
      {"null", "expected a JSON object, got null"},
      {"[]", "expected a JSON object, got array"},
      {"\"x\"", "expected a JSON object, got string"},
      {R"({"probes": [{"binary": "a", "symbol": "f", "asyncmask": 2}]})",
       "probes[0]: unknown field \"asyncmask\""},
      {R"({"probes": [{"binary": "", "symbol": "f"}]})",
       "probes[0].binary: empty"},
      {R"({"probes": [{"binary": "a", "symbol": "f",
                       "keys": [{"name": "x", "expr": "arg9"}]}]})",
       "probes[0].keys[0].expr: bad key expression"},
  };
  for (const Case& c : cases)
    expect_one_line_usage(parse_profile(c.json, "p.json"), c.where);
}

// Every value of a valid profile replaced in turn by a value of each other
// JSON type (the experiment that crashed 285 of 970 mutated profiles):
// each parse ends in a profile or in one usage line, never an exception.
TEST(ProfileTypes, StructuralMutationsNeverThrow) {
  const nlohmann::json base = nlohmann::json::parse(R"json({
    "name": "m", "description": "d",
    "probes": [
      {"role": "dispatch", "binary": "a", "symbol": "f",
       "keys": [{"name": "target", "expr": "*(arg1+0)", "format": "vtable"}]
},
      {"role": "enqueue", "binary": "a", "symbol": "g", "async_mask": 2,
       "keys": [{"name": "msg", "expr": "arg1", "format": "ptr"}]},
      {"role": "input.recv", "binary": "a", "symbol": "r", "buffer": "plain"}
    ]
})json");
  const nlohmann::json replacements[] = {nullptr,
                                         5,
                                         -1,
                                         1.5,
                                         true,
                                         "x",
                                         nlohmann::json::array(),
                                         nlohmann::json::object(),
                                         nlohmann::json::array({1, "a"}),
                                         uint64_t{1} << 40};
  const nlohmann::json flat = base.flatten();
  int parsed = 0, refused = 0;
  for (const auto& [pointer, value] : flat.items()) {
    // The value itself and each object or array containing it.
    nlohmann::json::json_pointer ptr(pointer);
    for (; !ptr.empty(); ptr = ptr.parent_pointer()) {
      for (const nlohmann::json& r : replacements) {
        nlohmann::json mutated = base;
        mutated[ptr] = r;
        Result<Profile> p = parse_profile(mutated.dump(), "m.json");
        if (p.ok()) {
          ++parsed;
          continue;
        }
        ++refused;
        EXPECT_EQ(p.status().kind(), ErrorKind::kUsage) << p.status().message();
        EXPECT_EQ(p.status().message().find('\n'), std::string::npos);
      }
    }
  }
  // The replacements that keep a valid profile (a string for a string)
  // parse; the rest are refused.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(refused, 200);
}

TEST(ProfileTypes, AsyncMaskIsTheAbi32BitField) {
  auto with_mask = [](const std::string& mask) {
    return parse_profile(R"({"probes": [{"role": "enqueue", "binary": "a",
                             "symbol": "f", "async_mask": )" +
                             mask + "}]}",
                         "p.json");
  };
  auto max = with_mask("4294967295");
  ASSERT_TRUE(max.ok()) << max.status().message();
  EXPECT_EQ(max->probes[0].async_mask, 0xffffffffu);
  static_assert(sizeof(lt_probe_cfg::async_mask) == 4);
  for (const char* bad : {"4294967296", "1099511627776", "-1", "1.5", "\"2\""})
    expect_one_line_usage(with_mask(bad),
                          "probes[0].async_mask: expected an "
                          "integer 0..4294967295");
}

TEST(ProfileTypes, NulInAStringIsRefusedAndShownEscaped) {
  auto p = parse_profile(
      R"({"probes": [{"binary": "a", "symbol": "main\u0000bar"}]})", "p.json");
  expect_one_line_usage(p, R"(probes[0].symbol: "main\0bar" contains a NUL)");
}

TEST(ProfileTypes, MoreProbesThanTheKernelTableHolds) {
  std::string json = R"({"probes": [)";
  for (int i = 0; i < 200; ++i)
    json += std::string(i ? "," : "") + R"({"binary": "a", "symbol": "f"})";
  json += "]}";
  expect_one_line_usage(parse_profile(json, "p.json"),
                        "probes: 200 probes; at most 32 can be attached");
  // Input roles are socket-call probes: no entry in the table.
  std::string input = R"({"probes": [)";
  for (int i = 0; i < 40; ++i)
    input += std::string(i ? "," : "") +
             R"({"role": "input.recv", "binary": "a", "symbol": "f"})";
  input += "]}";
  auto p = parse_profile(input, "p.json");
  EXPECT_TRUE(p.ok()) << p.status().message();
}

TEST(ProfileTypes, SyntaxErrorSaysWhere) {
  auto p = parse_profile(
      "{\"probes\": [\n  {\"binary\": \"a\" \"symbol\": 1}]}", "p.json");
  expect_one_line_usage(p, "p.json: not valid JSON at line 2");
  expect_one_line_usage(parse_profile(" \n", "p.json"), "empty file");
  // Found by fuzz_profile: a number past a double's range is not a syntax
  // error to the parser but its own exception (out_of_range.406).
  expect_one_line_usage(
      parse_profile(R"({"probes": [{"binary": "a", "symbol": "f",
                                    "async_mask": 77E777777}]})",
                    "p.json"),
      "p.json: not valid JSON: number overflow parsing '77E777777'");
}

// A temporary directory removed with its files.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/lt_profile_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ProfileFile, NonRegularFilesAreRefusedBeforeReading) {
  TempDir dir;
  std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string path;
    const char* what;
  };
  for (const Case& c : {Case{"/dev/zero",
                             "not a regular file (a character "
                             "device)"},
                        Case{fifo, "not a regular file (a FIFO)"},
                        Case{dir.path(), "not a regular file (a directory)"}}) {
    auto p = load_profile(c.path);
    expect_one_line_usage(p, c.path + ": " + c.what);
    EXPECT_NE(p.status().hint().find("refapp"), std::string::npos);
  }
}

TEST(ProfileFile, SizeLimit) {
  TempDir dir;
  std::string big = dir.file("big.json");
  std::ofstream(big).put(' ');
  std::filesystem::resize_file(big, kMaxProfileBytes + 1);
  expect_one_line_usage(load_profile(big),
                        big + ": 1048577 bytes, over the limit of 1048576");
  // At the limit a file is read (and judged on its content).
  std::filesystem::resize_file(big, kMaxProfileBytes);
  expect_one_line_usage(load_profile(big), "not valid JSON");
}

TEST(ProfileFile, MissingFileNamesTheBuiltins) {
  auto p = load_profile("/nonexistent/p.json");
  expect_one_line_usage(p, "open /nonexistent/p.json: No such file");
  EXPECT_NE(p.status().hint().find("refapp"), std::string::npos);
}

// A name given twice kept one value silently (the last): refused, both
// for two keys of one probe and for a field twice in one JSON object.
TEST(ProfileTypes, DuplicatesAreRefusedNotOverwritten) {
  expect_one_line_usage(
      parse_profile(R"({"probes": [{"binary": "a", "symbol": "f", "keys": [
          {"name": "what", "expr": "arg1", "format": "int"},
          {"name": "what", "expr": "arg2", "format": "int"}]}]})",
                    "p.json"),
      R"(probes[0].keys[1].name: "what": a key of this probe already has )"
      R"(that name)");
  for (const char* json :
       {R"({"probes": [{"binary": "a", "symbol": "f", "symbol": "g"}]})",
        R"({"name": "x", "name": "y", "probes": [{"binary": "a",
            "symbol": "f"}]})",
        R"({"probes": [{"binary": "a", "symbol": "f", "keys": [{"name": "k",
            "expr": "arg1", "expr": "arg2"}]}]})"})
    expect_one_line_usage(parse_profile(json, "p.json"), "given twice");
  // The same name in two objects is no duplicate.
  auto ok = parse_profile(R"({"probes": [{"binary": "a", "symbol": "f"},
                                         {"binary": "a", "symbol": "g"}]})",
                          "p.json");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
}  // namespace looptrace
