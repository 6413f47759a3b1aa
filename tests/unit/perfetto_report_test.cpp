// The Perfetto / Chrome trace: it obeys the trace-event format's rules (as
// Perfetto's JSON importer applies them) and shows each finding at its
// time, on its thread, with its numbers.
#include "report/perfetto_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "findings_fixture.h"

namespace looptrace {
namespace {

using nlohmann::json;
using namespace fixture;

// A timestamp or duration in µs, back in ns (Perfetto rounds it so).
int64_t ns(const json& us) {
  return static_cast<int64_t>(std::llround(us.get<double>() * 1000.0));
}

// Every rule of the trace-event format this output relies on; returns the
// broken ones, one line each.
std::vector<std::string> check_trace(const json& trace) {
  std::vector<std::string> bad;
  auto fail = [&bad](const std::string& why, const json& ev) {
    bad.push_back(why + ": " + ev.dump());
  };
  if (!trace.is_object() || !trace.contains("traceEvents") ||
      !trace["traceEvents"].is_array())
    return {"no traceEvents array"};
  if (trace.contains("displayTimeUnit") && trace["displayTimeUnit"] != "ms" &&
      trace["displayTimeUnit"] != "ns")
    bad.push_back("displayTimeUnit is neither ms nor ns");
  const std::string kPhases = "BEXiIbensftMC";
  using Thread = std::pair<int64_t, int64_t>;
  // Duration events by thread, in file order (ties keep it, as Perfetto's
  // sorter does); async slices by (cat, id, name); flows by id.
  std::map<Thread, std::vector<const json*>> on_thread;
  std::map<std::tuple<std::string, uint64_t, std::string>, int64_t> open_async;
  struct Flow {
    int starts = 0, ends = 0;
    int64_t start_ts = 0, end_ts = 0;
  };
  std::map<uint64_t, Flow> flows_v2, flows_v1;
  for (const json& ev : trace["traceEvents"]) {
    if (!ev.is_object() || !ev.contains("ph") || !ev["ph"].is_string() ||
        ev["ph"].get<std::string>().size() != 1 ||
        kPhases.find(ev["ph"].get<std::string>()) == std::string::npos) {
      fail("bad ph", ev);
      continue;
    }
    const char ph = ev["ph"].get<std::string>()[0];
    if (!ev.contains("pid") || !ev["pid"].is_number_integer() ||
        !ev.contains("tid") || !ev["tid"].is_number_integer()) {
      fail("pid/tid not integers", ev);
      continue;
    }
    if (!ev.contains("name") || !ev["name"].is_string()) fail("no name", ev);
    if (ph == 'M') continue;
    if (!ev.contains("ts") || !ev["ts"].is_number() || ns(ev["ts"]) < 0) {
      fail("ts not a number >= 0", ev);
      continue;
    }
    const int64_t ts = ns(ev["ts"]);
    const Thread thread{ev["pid"].get<int64_t>(), ev["tid"].get<int64_t>()};
    if (ph == 'X' &&
        (!ev.contains("dur") || !ev["dur"].is_number() || ns(ev["dur"]) < 0))
      fail("X without dur >= 0", ev);
    if (ph == 'i' || ph == 'I') {
      if (ev.contains("s") && ev["s"] != "t" && ev["s"] != "p" &&
          ev["s"] != "g")
        fail("instant scope not t/p/g", ev);
    }
    if (ph == 'X' || ph == 'B' || ph == 'E' || ph == 'i' || ph == 'I')
      on_thread[thread].push_back(&ev);
    if (ph == 'b' || ph == 'e' || ph == 'n') {
      if (!ev.contains("id") || !ev["id"].is_number_unsigned() ||
          !ev.contains("cat")) {
        fail("async event without id and cat", ev);
        continue;
      }
      auto key = std::make_tuple(ev["cat"].get<std::string>(),
                                 ev["id"].get<uint64_t>(),
                                 ev["name"].get<std::string>());
      if (ph == 'b' && !open_async.emplace(key, ts).second)
        fail("async begin while one is open", ev);
      if (ph == 'e') {
        auto it = open_async.find(key);
        if (it == open_async.end())
          fail("async end without begin", ev);
        else if (ts < it->second)
          fail("async end before its begin", ev);
        else
          open_async.erase(it);
      }
    }
    if (ev.contains("bind_id")) {
      if (ph != 'X' && ph != 'B') fail("bind_id on a non-slice", ev);
      Flow& f = flows_v2[ev["bind_id"].get<uint64_t>()];
      const bool in = ev.value("flow_in", false);
      const bool out = ev.value("flow_out", false);
      if (!in && !out) fail("bind_id without a direction", ev);
      if (out && !in) f.starts++, f.start_ts = ts;
      if (in && !out) f.ends++, f.end_ts = ts;
    }
    if (ph == 's' || ph == 'f') {
      Flow& f = flows_v1[ev.value("id", uint64_t{0})];
      if (ph == 's') f.starts++, f.start_ts = ts;
      if (ph == 'f') f.ends++, f.end_ts = ts;
    }
  }
  for (const auto& [key, ts] : open_async)
    bad.push_back("async slice never ended: " + std::get<2>(key));
  for (const auto* flows : {&flows_v1, &flows_v2})
    for (const auto& [id, f] : *flows)
      if (f.starts != 1 || f.ends != 1 || f.end_ts < f.start_ts)
        bad.push_back("flow " + std::to_string(id) + " has " +
                      std::to_string(f.starts) + " starts and " +
                      std::to_string(f.ends) + " ends");
  // On each thread, slices nest: every E closes the last open B of its
  // name, and no slice ends inside another after starting within it (a
  // slice that does is moved off the thread's track by Perfetto).
  for (auto& [thread, events] : on_thread) {
    std::stable_sort(events.begin(), events.end(),
                     [](const json* x, const json* y) {
                       return ns((*x)["ts"]) < ns((*y)["ts"]);
                     });
    struct Open {
      std::string name;
      int64_t end;  // -1: a B waiting for its E
    };
    std::vector<Open> stack;
    for (const json* ev : events) {
      const char ph = (*ev)["ph"].get<std::string>()[0];
      const int64_t ts = ns((*ev)["ts"]);
      const std::string name = (*ev)["name"];
      // Closed on the left, open on the right: what ended by now is gone.
      while (!stack.empty() && stack.back().end >= 0 && stack.back().end <= ts)
        stack.pop_back();
      if (ph == 'E') {
        if (stack.empty() || stack.back().end != -1 ||
            (ev->contains("name") && stack.back().name != name))
          fail("E does not close the last open B of its thread", *ev);
        else
          stack.pop_back();
        continue;
      }
      if (ph == 'B') {
        stack.push_back({name, -1});
        continue;
      }
      const int64_t end = ts + (ph == 'X' ? ns((*ev)["dur"]) : 0);
      if (!stack.empty() && stack.back().end >= 0 && end > stack.back().end)
        fail("slice overlaps " + stack.back().name + " partly", *ev);
      stack.push_back({name, end});
    }
    for (const Open& o : stack)
      if (o.end == -1) bad.push_back("B never ended: " + o.name);
  }
  return bad;
}

json write(const TraceFixture& f) {
  std::ostringstream os;
  Status st = write_perfetto(os, f.found, f.ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return json::parse(os.str());
}

std::vector<json> events(const json& trace, const std::string& ph,
                         const std::string& cat = "") {
  std::vector<json> out;
  for (const json& ev : trace["traceEvents"])
    if (ev["ph"] == ph && (cat.empty() || ev.value("cat", "") == cat))
      out.push_back(ev);
  return out;
}

const json* named(const std::vector<json>& evs, const std::string& name) {
  for (const json& ev : evs)
    if (ev["name"] == name) return &ev;
  return nullptr;
}

TEST(PerfettoTraceCheck, CatchesBrokenTraces) {
  // The checker itself: each of these breaks one rule.
  auto broken = [](const char* events) {
    return check_trace(
        json::parse(std::string("{\"traceEvents\": [") + events + "]}"));
  };
  EXPECT_FALSE(
      broken(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":1})").empty());
  EXPECT_FALSE(broken(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":1},
                         {"ph":"B","name":"b","pid":1,"tid":1,"ts":2},
                         {"ph":"E","name":"a","pid":1,"tid":1,"ts":3},
                         {"ph":"E","name":"b","pid":1,"tid":1,"ts":4})")
                   .empty());
  EXPECT_FALSE(broken(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":1},
                         {"ph":"E","name":"a","pid":1,"tid":2,"ts":3})")
                   .empty());
  EXPECT_FALSE(broken(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},
                         {"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":5})")
                   .empty());
  EXPECT_FALSE(
      broken(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":-1})")
          .empty());
  EXPECT_FALSE(broken(R"({"ph":"b","name":"a","cat":"c","id":1,"pid":1,
                          "tid":1,"ts":1})")
                   .empty());
  EXPECT_FALSE(broken(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":0,
                          "bind_id":3,"flow_out":true})")
                   .empty());
  EXPECT_FALSE(
      broken(R"({"ph":"s","name":"a","id":4,"pid":1,"tid":1,"ts":1})").empty());
  EXPECT_FALSE(
      broken(R"({"ph":"Q","name":"a","pid":1,"tid":1,"ts":1})").empty());
  EXPECT_FALSE(
      broken(R"({"ph":"i","name":"a","pid":"x","tid":1,"ts":1})").empty());
  // And passes what is right.
  EXPECT_TRUE(broken(R"({"ph":"B","name":"a","pid":1,"tid":1,"ts":1},
                        {"ph":"X","name":"x","pid":1,"tid":1,"ts":1,"dur":1},
                        {"ph":"E","name":"a","pid":1,"tid":1,"ts":2},
                        {"ph":"X","name":"y","pid":1,"tid":1,"ts":2,"dur":0,
                         "bind_id":9,"flow_out":true},
                        {"ph":"X","name":"z","pid":1,"tid":2,"ts":3,"dur":0,
                         "bind_id":9,"flow_in":true})")
                  .empty());
}

TEST(PerfettoReport, ObeysTheTraceEventFormat) {
  TraceFixture f;
  json trace = write(f);
  std::vector<std::string> bad = check_trace(trace);
  for (const std::string& b : bad) ADD_FAILURE() << b;
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_EQ(trace["metadata"]["clock"], "CLOCK_MONOTONIC");
  // Tracing began before every event: times count from its start.
  EXPECT_EQ(trace["metadata"]["ts_base_ns"], kT0);
}

TEST(PerfettoReport, NamesEveryProcessAndThread) {
  TraceFixture f;
  json trace = write(f);
  std::map<std::pair<std::string, std::pair<int, int>>, std::string> names;
  for (const json& m : events(trace, "M"))
    names[{m["name"].get<std::string>(),
           {m["pid"].get<int>(), m["tid"].get<int>()}}] =
        m["args"]["name"].get<std::string>();
  EXPECT_EQ((names[{"process_name", {kPid, kPid}}]), "loopapp");
  EXPECT_EQ((names[{"thread_name", {kPid, kPid}}]), "loopapp");
  EXPECT_EQ((names[{"thread_name", {kPid, kWorker}}]), "worker");
  // The input sender's name was never seen: no made-up name.
  EXPECT_EQ(names.size(), 3u);
}

TEST(PerfettoReport, SpansAreSlicesOnTheirThreadWithTheirNumbers) {
  TraceFixture f;
  json trace = write(f);
  const int64_t base = static_cast<int64_t>(kT0);
  std::vector<json> dispatches = events(trace, "X", "dispatch");
  std::vector<json> idle = events(trace, "X", "idle");
  ASSERT_EQ(dispatches.size(), 5u);  // a, b, d, and the worker's e, f
  ASSERT_EQ(idle.size(), 1u);

  // Span a, named by its target as the reports name it.
  const SpanEvent& a = f.found.analysis.slow[0].span;
  const json* x = nullptr;
  for (const json& ev : dispatches)
    if (ns(ev["ts"]) == static_cast<int64_t>(a.start_ns) - base) x = &ev;
  ASSERT_NE(x, nullptr);
  EXPECT_EQ((*x)["name"], "StallHandler what=7");
  EXPECT_EQ((*x)["pid"], kPid);
  EXPECT_EQ((*x)["tid"], kPid);
  EXPECT_EQ(ns((*x)["dur"]), static_cast<int64_t>(a.duration_ns));
  const json& args = (*x)["args"];
  EXPECT_EQ(args["cpu_ns"], 80 * kMs);
  EXPECT_EQ(args["runq_ns"], 15 * kMs);
  EXPECT_EQ(args["steal_ns"], 1 * kMs);
  EXPECT_EQ(args["blocked_ns"], a.duration_ns - 96 * kMs);
  EXPECT_EQ(args["keys"]["what"], 7);
  EXPECT_EQ(args["keys"]["target"], "StallHandler");
  EXPECT_EQ(args["samples"], 10);
  EXPECT_EQ(args["in_flight"], false);
  EXPECT_TRUE(args["cut_short"].is_null());
  EXPECT_EQ(args["stack"][0], "busyLoop(int)+0x1a");

  const json* idle_x = &idle[0];
  EXPECT_EQ((*idle_x)["name"], "IdleHandler::queueIdle()");
  EXPECT_EQ(ns((*idle_x)["ts"]), 200 * static_cast<int64_t>(kMs));

  // The worker's: one cut short by its exit, one still running.
  int cut = 0, running = 0;
  for (const json& ev : dispatches) {
    if (ev["tid"] != kWorker) continue;
    cut += ev["args"]["cut_short"] == "exit";
    running += ev["args"]["in_flight"] == true;
  }
  EXPECT_EQ(cut, 1);
  EXPECT_EQ(running, 1);
}

TEST(PerfettoReport, StackSamplesAreInstantsWithTheirFrames) {
  TraceFixture f;
  json trace = write(f);
  std::vector<json> stacks = events(trace, "i", "stack");
  size_t groups = 0;
  for (const SlowSpan& s : f.found.analysis.slow) groups += s.stacks.size();
  ASSERT_EQ(stacks.size(), groups);
  const StackGroup& g = f.found.analysis.slow[0].stacks[0];
  const json* ev = named(stacks, "stack: busyLoop(int)");
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ((*ev)["s"], "t");
  EXPECT_EQ((*ev)["tid"], kPid);
  EXPECT_EQ(ns((*ev)["ts"]), static_cast<int64_t>(g.first_ns - kT0));
  EXPECT_EQ((*ev)["args"]["count"], 7);
  EXPECT_EQ((*ev)["args"]["span"], "StallHandler what=7");
  EXPECT_EQ((*ev)["args"]["frames"],
            json({"busyLoop(int)+0x1a",
                  "StallHandler::handleMessage(Message const&)+0x44",
                  "Handler::dispatchMessage(Message&)+0x30",
                  "Looper::loop()+0x80", "main+0x12"}));
}

TEST(PerfettoReport, BarriersAreAsyncSlicesAndStallsStandOut) {
  TraceFixture f;
  json trace = write(f);
  std::vector<json> begins = events(trace, "b", "barrier");
  std::vector<json> ends = events(trace, "e", "barrier");
  ASSERT_EQ(begins.size(), 3u);
  ASSERT_EQ(ends.size(), 3u);
  std::map<uint64_t, std::pair<const json*, const json*>> by_id;
  for (const json& b : begins) by_id[b["id"].get<uint64_t>()].first = &b;
  for (const json& e : ends) by_id[e["id"].get<uint64_t>()].second = &e;
  ASSERT_EQ(by_id.size(), 3u);
  for (const auto& [id, be] : by_id) {
    const json& b = *be.first;
    ASSERT_NE(be.second, nullptr);
    const json& e = *be.second;
    const uint32_t token = b["args"]["token"];
    const Barrier& want = f.found.barriers.barriers[token - 1];
    EXPECT_EQ(b["pid"], kPid);
    EXPECT_EQ(ns(b["ts"]), static_cast<int64_t>(want.posted_ns - kT0));
    // Held to its removal; a leaked one to the end of the trace.
    const uint64_t end = want.removed() ? want.removed_ns : kT0 + 5000 * kMs;
    EXPECT_EQ(ns(e["ts"]), static_cast<int64_t>(end - kT0)) << token;
    EXPECT_EQ(b["name"], std::string(want.stalled ? "STALLED " : "") +
                             "sync barriers on queue 0x7000");
    EXPECT_EQ(b["args"]["stalled"], want.stalled);
  }
}

TEST(PerfettoReport, SlowDeliveriesAreAsyncSlicesFromDueToDispatch) {
  TraceFixture f;
  json trace = write(f);
  std::vector<json> begins = events(trace, "b", "delivery");
  std::vector<json> ends = events(trace, "e", "delivery");
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ns(begins[0]["ts"]), 5 * static_cast<int64_t>(kMs));
  EXPECT_EQ(ns(ends[0]["ts"]), 135 * static_cast<int64_t>(kMs));
  EXPECT_EQ(begins[0]["name"], "slow deliveries (tid 100)");
  EXPECT_EQ(begins[0]["args"]["lag_ns"], 130 * kMs);
  // What ran instead: span a, which it waited behind.
  ASSERT_FALSE(begins[0]["args"]["running_instead"].empty());
  EXPECT_EQ(begins[0]["args"]["running_instead"][0]["target"],
            "StallHandler what=7");
}

// With --record-all the stream holds every span: each one is a slice, at
// its time, on its thread, named by its target, the nested ones inside
// their callers; the slow ones keep their full args.
TEST(PerfettoReport, EverySpanInTheStreamIsASlice) {
  TraceFixture f;
  DispatchOptions o;
  o.slow_ns = {10 * kMs, 10 * kMs, 10 * kMs};
  DispatchAnalyzer analyzer(o);
  std::set<int64_t> fast_starts;  // dispatches, ns after kT0
  uint64_t id = 0;
  // 400 dispatches of 1 ms every 2 ms, every tenth with a 0.3 ms one
  // nested in it; one slow dispatch; 100 idle handlers on the worker.
  for (uint64_t i = 0; i < 400; ++i) {
    SpanEvent e = span(kPid, "loopapp", LT_ROLE_DISPATCH, 2 * i, 1);
    e.span_id = ++id;
    e.keys = {kStallVtable + 0x10, i % 7, 0, 0};
    fast_starts.insert(static_cast<int64_t>(2 * i * kMs));
    if (i % 10 == 0) {
      SpanEvent in = e;
      in.span_id = ++id;
      in.depth = 1;
      in.start_ns += 100'000;
      in.duration_ns = 300'000;
      analyzer.consume(Event{in});
      fast_starts.insert(static_cast<int64_t>(2 * i * kMs + 100'000));
    }
    analyzer.consume(Event{e});
  }
  SpanEvent slow = span(kPid, "loopapp", LT_ROLE_DISPATCH, 900, 20);
  slow.span_id = ++id;
  analyzer.consume(Event{slow});
  for (uint64_t i = 0; i < 100; ++i) {
    SpanEvent e = span(kWorker, "worker", LT_ROLE_IDLE, 3 * i, 2);
    e.span_id = ++id;
    analyzer.consume(Event{e});
  }
  f.found = Findings{};
  f.found.analysis = analyzer.finish({}, Counters{});
  ASSERT_EQ(f.found.analysis.timeline.dropped, 0u);
  json trace = write(f);
  for (const std::string& bad : check_trace(trace)) ADD_FAILURE() << bad;
  std::vector<json> dispatches = events(trace, "X", "dispatch");
  std::vector<json> idle = events(trace, "X", "idle");
  ASSERT_EQ(dispatches.size(), 400u + 40 + 1);
  ASSERT_EQ(idle.size(), 100u);
  std::set<int64_t> seen;
  size_t full = 0;
  for (const json& d : dispatches) {
    const int64_t start = ns(d["ts"]);
    if (d["args"].contains("cpu_ns")) {  // the slow one, in full
      ++full;
      EXPECT_EQ(start, static_cast<int64_t>(900 * kMs));
      continue;
    }
    seen.insert(start);
    EXPECT_FALSE(d["args"]["slow"].get<bool>());
    EXPECT_EQ(ns(d["dur"]), d["args"]["depth"] == 1 ? 300'000 : 1'000'000);
    EXPECT_EQ(d["name"].get<std::string>().rfind("StallHandler what=", 0), 0u)
        << d.dump();
    EXPECT_EQ(d["tid"], kPid);
  }
  EXPECT_EQ(full, 1u);
  EXPECT_EQ(seen, fast_starts);
  for (const json& d : idle) {
    EXPECT_EQ(d["tid"], kWorker);
    EXPECT_EQ(d["name"], "IdleHandler::queueIdle()");
  }
  EXPECT_EQ(trace["metadata"]["timeline_spans_not_kept"], 0);
}

// Past kMaxTimelineSpans spans are counted, not kept, and the trace says
// how many.
TEST(PerfettoReport, SpansPastTheCapAreCounted) {
  TimelineBuilder b;
  SpanEvent e = span(kPid, "loopapp", LT_ROLE_DISPATCH, 0, 1);
  for (size_t i = 0; i < kMaxTimelineSpans + 3; ++i) {
    e.start_ns += 10;
    b.add(e);
  }
  DispatchAnalysis a;
  Timeline t = b.finish(a);
  EXPECT_EQ(t.spans.size(), kMaxTimelineSpans);
  EXPECT_EQ(t.dropped, 3u);
  EXPECT_EQ(t.targets.size(), 1u) << "one target, named once";
  TraceFixture f;
  f.found.analysis.timeline.dropped = t.dropped;
  EXPECT_EQ(write(f)["metadata"]["timeline_spans_not_kept"], 3);
}

TEST(PerfettoReport, InputEventsFlowThroughTheirStages) {
  TraceFixture f;
  json trace = write(f);
  std::vector<json> stages = events(trace, "X", "input");
  // The full event's four stages, the raw event's two, the lost one's one.
  ASSERT_EQ(stages.size(), 7u);
  std::map<uint64_t, std::vector<json>> flows;
  size_t unbound = 0;
  for (const json& s : stages) {
    EXPECT_EQ(s["dur"], 0);
    if (s.contains("bind_id"))
      flows[s["bind_id"].get<uint64_t>()].push_back(s);
    else
      ++unbound;
  }
  EXPECT_EQ(unbound, 1u) << "an event seen once has nothing to link";
  ASSERT_EQ(flows.size(), 2u);
  const InputEventInfo& full = f.found.input.events[0];
  for (const auto& [id, chain] : flows) {
    if (chain.size() != 4) {
      // The raw channel's: read on the worker, consumed by its dispatch.
      ASSERT_EQ(chain.size(), 2u);
      EXPECT_EQ(chain[0]["name"], "input received");
      EXPECT_EQ(chain[1]["name"], "input consumed");
      EXPECT_EQ(chain[0]["tid"], kWorker);
      continue;
    }
    const std::vector<std::tuple<std::string, int, uint64_t>> want = {
        {"input sent", kSenderTid, full.sent_ns},
        {"input received", kPid, full.received_ns},
        {"input consumed", kPid, full.finished_ns},
        {"input acknowledged", kSenderTid, full.finish_received_ns}};
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(chain[i]["name"], std::get<0>(want[i]));
      EXPECT_EQ(chain[i]["tid"], std::get<1>(want[i]));
      EXPECT_EQ(ns(chain[i]["ts"]),
                static_cast<int64_t>(std::get<2>(want[i]) - kT0));
      EXPECT_EQ(chain[i].value("flow_in", false), i > 0);
      EXPECT_EQ(chain[i].value("flow_out", false), i < 3);
      EXPECT_EQ(chain[i]["args"]["seq"], 1);
    }
  }
  // One async slice per event, from its first stage to its last, with the
  // JSON report's fields.
  std::vector<json> begins = events(trace, "b", "input");
  std::vector<json> ends = events(trace, "e", "input");
  ASSERT_EQ(begins.size(), 3u);
  ASSERT_EQ(ends.size(), 3u);
  const json* b = named(begins, "input events on socket:[5555]");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(ns((*b)["ts"]), static_cast<int64_t>(full.sent_ns - kT0));
  EXPECT_EQ((*b)["args"]["total_latency_dur"],
            full.finish_received_ns - full.sent_ns);
  EXPECT_EQ((*b)["args"]["seq"], 1);
  EXPECT_FALSE((*b)["args"].contains("event_time_ns")) << "not seen: left out";
  const json* e = nullptr;
  for (const json& ev : ends)
    if (ev["id"] == (*b)["id"]) e = &ev;
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ns((*e)["ts"]),
            static_cast<int64_t>(full.finish_received_ns - kT0));
}

// With frames traced the full event's flow goes on to the end of its next
// frame on the app's thread, in time order (here before the sender got the
// acknowledgement), and the async slice reaches it; the args have it.
TEST(PerfettoReport, InputFlowEndsAtItsFrameEnd) {
  TraceFixture f;
  f.found.input.frames = true;
  InputEventInfo& full = f.found.input.events[0];
  full.frame_end_ns = full.finished_ns + 1;
  ASSERT_LT(full.frame_end_ns, full.finish_received_ns);
  json trace = write(f);
  EXPECT_TRUE(check_trace(trace).empty()) << check_trace(trace)[0];
  std::vector<json> chain;
  for (const json& s : events(trace, "X", "input"))
    if (s.contains("bind_id") && s["args"]["channel"] == "socket:[5555]")
      chain.push_back(s);
  std::vector<std::string> names;
  for (const json& s : chain) names.push_back(s["name"]);
  ASSERT_EQ(names, (std::vector<std::string>{
                       "input sent", "input received", "input consumed",
                       "input frame end", "input acknowledged"}));
  EXPECT_EQ(chain[3]["tid"], kPid);
  EXPECT_EQ(ns(chain[3]["ts"]), static_cast<int64_t>(full.frame_end_ns - kT0));
  EXPECT_TRUE(chain[3].value("flow_in", false));
  EXPECT_TRUE(chain[3].value("flow_out", false));
  const std::vector<json> begins = events(trace, "b", "input");
  const json* b = named(begins, "input events on socket:[5555]");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ((*b)["args"]["frame_end_ns"], full.frame_end_ns);
  EXPECT_EQ((*b)["args"]["consume_to_frame_dur"], 1);
}

// Frames: per thread an expected track (expected start to deadline) and
// an actual one (start to end), a janky frame marked with its missed
// vsyncs and bucket in its args and by an instant at its deadline.
TEST(PerfettoReport, FramesAreExpectedAndActualSlicesPerThread) {
  constexpr uint64_t kUs = 1000, kRefresh = 16'666'667;
  TraceFixture f;
  f.found.has_frames = true;
  auto add = [&f](uint64_t expected, uint64_t start, uint64_t dur) {
    FrameSlice fr;
    fr.pid = kPid;
    fr.tid = kPid;
    fr.start_ns = kT0 + start;
    fr.duration_ns = dur;
    fr.timing = time_frame(kT0 + expected, kT0 + start, dur, kRefresh);
    f.found.frames.timeline.push_back(fr);
  };
  add(1000 * kUs, 1500 * kUs, 5000 * kUs);     // on time
  add(17000 * kUs, 18000 * kUs, 60000 * kUs);  // ran long: 4 vsyncs late
  f.found.frames.timeline_omitted = 2;
  json trace = write(f);
  std::vector<std::string> bad = check_trace(trace);
  for (const std::string& b : bad) ADD_FAILURE() << b;
  EXPECT_EQ(trace["metadata"]["frames_not_kept"], 2);
  std::vector<json> begins = events(trace, "b", "frame");
  std::vector<json> ends = events(trace, "e", "frame");
  ASSERT_EQ(begins.size(), 4u);
  ASSERT_EQ(ends.size(), 4u);
  std::vector<json> expected, actual;
  for (const json& b : begins) {
    EXPECT_EQ(b["pid"], kPid);
    EXPECT_EQ(b["tid"], kPid);
    const json* e = nullptr;
    for (const json& ev : ends)
      if (ev["id"] == b["id"]) e = &ev;
    ASSERT_NE(e, nullptr) << b.dump();
    json both = {{"b", b}, {"dur", ns((*e)["ts"]) - ns(b["ts"])}};
    if (b["name"] == "expected frames (tid 100)")
      expected.push_back(both);
    else if (b["name"] == "actual frames (tid 100)")
      actual.push_back(both);
    else
      ADD_FAILURE() << b.dump();
  }
  ASSERT_EQ(expected.size(), 2u);
  ASSERT_EQ(actual.size(), 2u);
  // Expected: one interval from the expected start.
  EXPECT_EQ(ns(expected[1]["b"]["ts"]), 17000 * static_cast<int64_t>(kUs));
  EXPECT_EQ(expected[1]["dur"], static_cast<int64_t>(kRefresh));
  // Actual: the frame itself, and what it missed.
  EXPECT_EQ(ns(actual[0]["b"]["ts"]), 1500 * static_cast<int64_t>(kUs));
  EXPECT_EQ(actual[0]["dur"], 5000 * static_cast<int64_t>(kUs));
  EXPECT_EQ(actual[0]["b"]["args"]["janky"], false);
  EXPECT_EQ(actual[0]["b"]["args"]["missed_vsyncs"], 0);
  const json& late = actual[1]["b"]["args"];
  EXPECT_EQ(actual[1]["dur"], 60000 * static_cast<int64_t>(kUs));
  EXPECT_EQ(late["janky"], true);
  // Ends at 78 ms, its deadline 33.67 ms: 44.3 ms past, 3 intervals.
  EXPECT_EQ(late["missed_vsyncs"], 3);
  EXPECT_EQ(late["bucket"], "middle");
  std::vector<json> marks = events(trace, "i", "frame");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0]["name"], "janky frame: missed 3 vsyncs (middle)");
  EXPECT_EQ(marks[0]["tid"], kPid);
  EXPECT_EQ(ns(marks[0]["ts"]), static_cast<int64_t>(17000 * kUs + kRefresh));
  // Without frames traced: no frame track.
  f.found.has_frames = false;
  EXPECT_TRUE(events(write(f), "b", "frame").empty());
}

TEST(PerfettoReport, EmptyRunIsAValidTrace) {
  Findings found;
  ReportContext ctx;
  std::ostringstream os;
  ASSERT_TRUE(write_perfetto(os, found, ctx).ok());
  json trace = json::parse(os.str());
  EXPECT_TRUE(check_trace(trace).empty());
  EXPECT_TRUE(trace["traceEvents"].empty());
}

TEST(PerfettoReport, NamesThatAreNotUtf8StillMakeJson) {
  TraceFixture f;
  f.found.analysis.threads[1].comm = "wor\xffker";
  std::ostringstream os;
  ASSERT_TRUE(write_perfetto(os, f.found, f.ctx).ok());
  json trace = json::parse(os.str());  // throws on invalid UTF-8
  EXPECT_TRUE(check_trace(trace).empty());
}

TEST(PerfettoReport, AFailedStreamIsAnError) {
  TraceFixture f;
  std::ostringstream os;
  os.setstate(std::ios::badbit);
  EXPECT_FALSE(write_perfetto(os, f.found, f.ctx).ok());
}

}  // namespace
}  // namespace looptrace
