// The monitor's Prometheus metrics (monitor/metrics.h) from synthetic event
// streams, read back as a scrape gets them: every finished span counted
// once, in cumulative buckets; hostile thread names escaped; the series cap;
// loss counters as deltas; input stages; the listen address.
#include "monitor/metrics.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "looptrace/abi.h"
#include "monitor/openmetrics.h"

namespace looptrace {
namespace {

constexpr uint64_t kMs = 1'000'000;

SessionEvent session(bool input = false) {
  SessionEvent s;
  s.thresholds.slow_ns = {16 * kMs, 50 * kMs, 16 * kMs};
  ProbeDef d;
  d.id = 0;
  d.role = LT_ROLE_DISPATCH;
  d.profile = "refapp";
  ProbeDef f;
  f.id = 1;
  f.role = LT_ROLE_DISPATCH;
  f.profile = "gtk";
  f.frame = ProbeDef::FrameMatch{{"frame-clock"}};
  s.probes = {d, f};
  s.has_input = input;
  return s;
}

SpanEvent span(uint64_t dur_ns, const std::string& comm = "app",
               uint32_t pid = 100, uint32_t probe = 0,
               uint32_t role = LT_ROLE_DISPATCH) {
  static uint64_t id = 0;
  SpanEvent s;
  s.pid = pid;
  s.tid = pid;
  s.comm = comm;
  s.span_id = ++id;
  s.start_ns = 1000 * kMs + id * 1000 * kMs;
  s.duration_ns = dur_ns;
  s.probe_id = probe;
  s.role = role;
  return s;
}

// The value of the sample `name{labels}` in an exposition, as written.
std::optional<std::string> sample(const std::string& text,
                                  const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  return std::nullopt;
}

double value(const std::string& text, const std::string& series) {
  auto v = sample(text, series);
  EXPECT_TRUE(v) << series << " not in:\n" << text;
  return v ? std::stod(*v) : -1;
}

// Durations of each bucket's span sent: 0.5 ms (le 0.001), 1 ms exactly (le
// 0.001: a bound is inclusive), 3 ms (le 0.004), 99 ms and 100 ms (le 0.1),
// 150 ms (le 0.2), 7 s (+Inf only).
const std::vector<uint64_t> kDurations = {
    kMs / 2, 1 * kMs, 3 * kMs, 99 * kMs, 100 * kMs, 150 * kMs, 7000 * kMs};

TEST(MetricsTest, SpansFillCumulativeBucketsAndCountEachOnce) {
  MetricsSink m({});
  m.consume(session());
  for (uint64_t d : kDurations) m.consume(span(d));
  // Not finished: in flight at the stop, cut short by the thread's exit.
  SpanEvent in_flight = span(200 * kMs);
  in_flight.in_flight = true;
  m.consume(in_flight);
  SpanEvent cut = span(300 * kMs);
  cut.flags = LT_SPAN_EXIT;
  m.consume(cut);
  const std::string t = m.text();
  auto bucket = [&](const char* le) {
    // prometheus-cpp writes labels in name order, le last.
    return value(t,
                 "looptrace_span_duration_seconds_bucket{comm=\"app\","
                 "profile=\"refapp\",role=\"dispatch\",le=\"" +
                     std::string(le) + "\"}");
  };
  EXPECT_EQ(bucket("0.001"), 2);
  EXPECT_EQ(bucket("0.002"), 2);
  EXPECT_EQ(bucket("0.004"), 3);
  EXPECT_EQ(bucket("0.05"), 3);
  EXPECT_EQ(bucket("0.1"), 5);
  EXPECT_EQ(bucket("0.2"), 6);
  EXPECT_EQ(bucket("5"), 6);
  EXPECT_EQ(bucket("+Inf"), 7);
  // Every bucket listed, each at least the one before.
  double prev = 0;
  for (double b : metrics_buckets()) {
    std::ostringstream le;
    le << b;
    double v = bucket(le.str().c_str());
    EXPECT_GE(v, prev) << le.str();
    prev = v;
  }
  const std::string lbl = "{comm=\"app\",profile=\"refapp\",role=\"dispatch\"}";
  EXPECT_EQ(value(t, "looptrace_span_duration_seconds_count" + lbl), 7);
  EXPECT_NEAR(value(t, "looptrace_span_duration_seconds_sum" + lbl),
              (0.5 + 1 + 3 + 99 + 100 + 150 + 7000) / 1000.0, 1e-9);
  // Slow: at or over --slow (16 ms): 99, 100, 150 ms, 7 s.
  EXPECT_EQ(value(t, "looptrace_slow_spans_total" + lbl), 4);
}

TEST(MetricsTest, RolesFramesAndProfilesHaveTheirOwnSeries) {
  MetricsSink m({});
  m.consume(session());
  m.consume(span(20 * kMs, "app", 100, 0, LT_ROLE_IDLE));  // under 50 ms
  SpanEvent frame = span(20 * kMs, "gtk", 200, 1);
  frame.key_str = "frame-clock";
  m.consume(frame);
  SpanEvent other = span(20 * kMs, "gtk", 200, 1);
  other.key_str = "idle-source";
  m.consume(other);
  // A name cut short is not the name.
  SpanEvent cut = span(20 * kMs, "gtk", 200, 1);
  cut.key_str = "frame-clock";
  cut.flags = LT_SPAN_KEY_STR_CUT;
  m.consume(cut);
  const std::string t = m.text();
  EXPECT_EQ(value(t,
                  "looptrace_span_duration_seconds_count{comm=\"app\","
                  "profile=\"refapp\",role=\"idle\"}"),
            1);
  EXPECT_EQ(value(t,
                  "looptrace_slow_spans_total{comm=\"app\","
                  "profile=\"refapp\",role=\"idle\"}"),
            0);
  // A frame is a dispatch too: counted under both.
  EXPECT_EQ(value(t,
                  "looptrace_span_duration_seconds_count{comm=\"gtk\","
                  "profile=\"gtk\",role=\"dispatch\"}"),
            3);
  EXPECT_EQ(value(t,
                  "looptrace_span_duration_seconds_count{comm=\"gtk\","
                  "profile=\"gtk\",role=\"frame\"}"),
            1);
  EXPECT_FALSE(sample(t,
                      "looptrace_slow_spans_total{comm=\"gtk\","
                      "profile=\"gtk\",role=\"frame\"}"));
  // No pid label without per_pid.
  EXPECT_EQ(t.find("pid="), std::string::npos);
}

TEST(MetricsTest, HostileCommsAreEscapedValidUtf8) {
  MetricsSink m({});
  m.consume(session());
  const std::string evil = std::string("a\"b\\c\nd\xff\xfe") + '\0' + "e";
  m.consume(span(1 * kMs, evil));
  m.consume(span(1 * kMs, evil));
  const std::string t = m.text();
  // printable(): \n -> \n, 0xff -> \xff, NUL -> \0 (as text); then the
  // text format escapes the quote and each backslash.
  EXPECT_EQ(value(t,
                  "looptrace_span_duration_seconds_count{comm=\"a\\\"b\\\\"
                  "c\\\\nd\\\\xff\\\\xfe\\\\0e\",profile=\"refapp\",role="
                  "\"dispatch\"}"),
            2);
  // No line breaks inside a sample and nothing but valid UTF-8.
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    EXPECT_TRUE(line[0] == '#' || line.rfind("looptrace_", 0) == 0) << line;
  }
  for (unsigned char c : t) EXPECT_LT(c, 0x80u);
}

TEST(MetricsTest, SeriesPastTheCapGoToOtherAndAreCounted) {
  MetricsOptions o;
  o.max_series = 3;
  o.per_pid = true;
  MetricsSink m(o);
  m.consume(session());
  for (uint32_t pid = 1; pid <= 10; ++pid)
    for (int i = 0; i < 2; ++i) m.consume(span(1 * kMs, "p", pid));
  const std::string t = m.text();
  for (uint32_t pid = 1; pid <= 3; ++pid)
    EXPECT_EQ(value(t,
                    "looptrace_span_duration_seconds_count{comm=\"p\","
                    "pid=\"" +
                        std::to_string(pid) +
                        "\",profile=\"refapp\",role=\"dispatch\"}"),
              2);
  EXPECT_FALSE(sample(t,
                      "looptrace_span_duration_seconds_count{comm=\"p\","
                      "pid=\"4\",profile=\"refapp\",role=\"dispatch\"}"));
  // The rest together: the sum over series stays exact.
  EXPECT_EQ(value(t,
                  "looptrace_span_duration_seconds_count{comm=\"_other\","
                  "pid=\"_other\",profile=\"refapp\",role=\"dispatch\"}"),
            14);
  EXPECT_EQ(value(t,
                  "looptrace_lost_events_total{reason="
                  "\"metrics_series_cap\"}"),
            14);
}

TEST(MetricsTest, LostCountersAddWhatTheTracerLostSinceTheLastCall) {
  MetricsSink m({});
  const std::string rb = "looptrace_lost_events_total{reason=\"ringbuf_full\"}";
  EXPECT_EQ(value(m.text(), rb), 0);
  Counters c;
  c.bpf[LT_CNT_RB_FULL] = 5;
  c.hook_misses = 2;
  c.bpf[LT_CNT_SAMPLES] = 1000;  // not a loss
  m.set_lost(c);
  m.set_lost(c);  // the same totals again: nothing new
  c.bpf[LT_CNT_RB_FULL] = 12;
  c.decode_errors = 1;
  m.set_lost(c);
  const std::string t = m.text();
  EXPECT_EQ(value(t, rb), 12);
  EXPECT_EQ(value(t, "looptrace_lost_events_total{reason=\"hook_misses\"}"), 2);
  EXPECT_EQ(value(t, "looptrace_lost_events_total{reason=\"decode_errors\"}"),
            1);
  EXPECT_EQ(t.find("samples"), std::string::npos);
  m.count_dump();
  m.count_dump();
  m.set_traced_processes(3);
  const std::string u = m.text();
  EXPECT_EQ(value(u, "looptrace_dumps_total"), 2);
  EXPECT_EQ(value(u, "looptrace_traced_processes"), 3);
}

// A raw read consumed by the dispatch around it: its handling latency.
TEST(MetricsTest, InputEventsFillTheirStages) {
  MetricsSink m({});
  m.consume(session(/*input=*/true));
  IoEvent r;
  r.pid = r.tid = 300;
  r.comm = "xclient";
  r.ts_ns = r.exit_ns = 10 * kMs;
  r.enter_ns = r.ts_ns - 1000;
  r.inode = 500;
  r.peer_inode = 501;
  r.bytes = 32;
  r.chan = LT_CHAN_RAW;
  r.depth = 1;
  r.span_start_ns = 9 * kMs;
  r.span_id = 7;
  m.consume(r);
  SpanEvent s = span(5 * kMs, "xclient", 300);  // 9 to 14 ms
  s.span_id = 7;
  s.start_ns = 9 * kMs;
  s.flags = LT_SPAN_INPUT;
  m.consume(s);
  const std::string h =
      "looptrace_input_latency_seconds_count{stage=\"handling_latency_dur\"}";
  EXPECT_EQ(value(m.text(), h), 0);  // not final before the stream moves on
  m.consume(span(1 * kMs, "xclient", 300));  // 3 s later
  const std::string t = m.text();
  EXPECT_EQ(value(t, h), 1);
  EXPECT_NEAR(value(t,
                    "looptrace_input_latency_seconds_sum{stage="
                    "\"handling_latency_dur\"}"),
              0.004, 1e-12);
  EXPECT_EQ(value(t,
                  "looptrace_input_latency_seconds_bucket{stage="
                  "\"handling_latency_dur\",le=\"0.004\"}"),
            1);
  EXPECT_EQ(value(t,
                  "looptrace_input_latency_seconds_bucket{stage="
                  "\"handling_latency_dur\",le=\"0.002\"}"),
            0);
  EXPECT_EQ(value(t,
                  "looptrace_input_latency_seconds_count{stage="
                  "\"total_latency_dur\"}"),
            0);
  // Counted once, however far the stream goes on.
  m.consume(span(1 * kMs, "xclient", 300));
  EXPECT_EQ(value(m.text(), h), 1);
}

TEST(MetricsTest, InputEventsNeverConsumedAreDroppedPastTheCap) {
  MetricsOptions o;
  o.max_input_pending = 10;
  MetricsSink m(o);
  m.consume(session(true));
  IoEvent r;
  r.pid = r.tid = 300;
  r.inode = 500;
  r.chan = LT_CHAN_RAW;
  for (int i = 1; i <= 11; ++i) {
    r.ts_ns = r.exit_ns = i * kMs;  // read, never consumed
    m.consume(r);
  }
  EXPECT_EQ(value(m.text(),
                  "looptrace_lost_events_total{reason="
                  "\"input_pending_cap\"}"),
            11);
}

TEST(MetricsTest, ListenAddress) {
  EXPECT_EQ(*metrics_listen_address("9100"), "127.0.0.1:9100");
  EXPECT_EQ(*metrics_listen_address(":9100"), "127.0.0.1:9100");
  EXPECT_EQ(*metrics_listen_address("0.0.0.0:80"), "0.0.0.0:80");
  for (const char* bad :
       {"", ":", "host:9100", "1.2.3.4:0", "1.2.3.4:65536", "9100x", "::1:9100",
        "[::1]:9100", "1.2.3:9100", "[::1]:-1"}) {
    auto r = metrics_listen_address(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().kind(), ErrorKind::kUsage) << bad;
    EXPECT_NE(r.status().message().find("--metrics"), std::string::npos);
  }
}

// The server: bound to the address given, a busy port is one error line.
TEST(MetricsTest, BusyPortIsAnError) {
  MetricsOptions o;
  o.listen = "127.0.0.1:0";
  EXPECT_FALSE(MetricsSink::Start(o).ok());
  std::optional<std::unique_ptr<MetricsSink>> first;
  int port = 0;
  for (int p = 39100; p < 39200 && !first; ++p) {
    o.listen = "127.0.0.1:" + std::to_string(p);
    auto s = MetricsSink::Start(o);
    if (s.ok()) {
      first = std::move(*s);
      port = p;
    }
  }
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)->port(), port);
  auto again = MetricsSink::Start(o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("Address already in use"),
            std::string::npos)
      << again.status().message();
}

// OpenMetrics, for a scraper that asks: the same samples as the text
// format, line for line, with a counter family named without `_total`,
// every histogram's +Inf bucket, and `# EOF` last.
TEST(MetricsTest, OpenMetricsHasTheTextFormatsSamples) {
  MetricsSink m({});
  m.consume(session());
  for (uint64_t ms : {1, 3, 20, 150, 700}) m.consume(span(ms * kMs));
  m.count_dump();
  m.set_traced_processes(2);
  const std::string text = m.text();
  const std::string om = m.openmetrics();
  std::set<std::string> om_lines;
  std::istringstream in(om);
  std::string line, last;
  while (std::getline(in, line)) {
    om_lines.insert(line);
    last = line;
  }
  EXPECT_EQ(last, "# EOF");
  std::istringstream tin(text);
  size_t samples = 0;
  while (std::getline(tin, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_TRUE(om_lines.count(line)) << line;
  }
  EXPECT_GT(samples, 20u);
  EXPECT_TRUE(om_lines.count("# TYPE looptrace_slow_spans counter"));
  EXPECT_TRUE(om_lines.count("# TYPE looptrace_dumps counter"));
  EXPECT_TRUE(om_lines.count("looptrace_dumps_total 1"));
  EXPECT_TRUE(om_lines.count("# TYPE looptrace_traced_processes gauge"));
  EXPECT_TRUE(
      om_lines.count("# TYPE looptrace_span_duration_seconds histogram"));
  EXPECT_TRUE(om_lines.count(
      "looptrace_span_duration_seconds_bucket{comm=\"app\",profile="
      "\"refapp\",role=\"dispatch\",le=\"+Inf\"} 5"));
  EXPECT_EQ(om.find("_total counter"), std::string::npos);
}

TEST(MetricsTest, OpenMetricsEscapesHostileComms) {
  MetricsSink m({});
  m.consume(session());
  m.consume(span(1 * kMs, std::string("a\"b\\c\nd")));
  const std::string om = m.openmetrics();
  // printable() made the line feed a backslash and an n; OpenMetrics
  // escapes the quote and each backslash.
  EXPECT_NE(om.find("looptrace_span_duration_seconds_count{comm=\"a\\\"b\\\\"
                    "c\\\\nd\",profile=\"refapp\",role=\"dispatch\"} 1"),
            std::string::npos)
      << om;
  for (unsigned char c : om) EXPECT_LT(c, 0x80u);
}

TEST(MetricsTest, OpenMetricsOnlyWhenTheScraperPrefersIt) {
  // Prometheus 2's own Accept header.
  EXPECT_TRUE(wants_openmetrics(
      "application/openmetrics-text;version=1.0.0,application/"
      "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,"
      "*/*;q=0.1"));
  EXPECT_FALSE(wants_openmetrics("*/*"));  // curl
  EXPECT_FALSE(wants_openmetrics("text/plain; version=0.0.4"));
  EXPECT_FALSE(wants_openmetrics("application/openmetrics-text; q=0"));
  EXPECT_FALSE(wants_openmetrics(
      "text/plain;q=0.9, application/openmetrics-text;q=0.5"));
  EXPECT_TRUE(wants_openmetrics(
      " application/openmetrics-text ; version=1.0.0 , text/plain;q=0.2"));
  EXPECT_FALSE(wants_openmetrics(""));
}

}  // namespace
}  // namespace looptrace
