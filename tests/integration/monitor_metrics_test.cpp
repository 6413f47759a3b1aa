// looptrace monitor --metrics scraped by a real Prometheus server (Debian's
// `prometheus`, started here on a loopback port, scraping every second):
// its own query API returns the reference app's exact dispatch count and
// the count under 100 ms, as the app's log has them; promtool accepts the
// text exposition, and Prometheus's Accept header gets OpenMetrics.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace lt_test {
namespace {

using json = nlohmann::json;

// A loopback port nothing listens on now (the kernel's choice).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// GET url with curl; nullopt if it failed.
std::optional<std::string> http_get(const std::string& url,
                                    const std::string& query = "",
                                    const std::vector<std::string>& opts = {}) {
  std::vector<std::string> argv = {"curl", "-sS", "--max-time", "5", "-f"};
  argv.insert(argv.end(), opts.begin(), opts.end());
  if (!query.empty()) {
    argv.insert(argv.end(), {"-G", "--data-urlencode", "query=" + query});
  }
  argv.push_back(url);
  RunResult r = run(argv, 10000);
  if (r.exit_code != 0) return std::nullopt;
  return r.out;
}

// An instant query's single value, if the result has exactly one sample.
std::optional<double> prom_value(int port, const std::string& query) {
  auto body = http_get(
      "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query", query);
  if (!body) return std::nullopt;
  json j = json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return {};
  const json& res = j["data"]["result"];
  if (!res.is_array() || res.size() != 1) return std::nullopt;
  return std::stod(res[0]["value"][1].get<std::string>());
}

bool have_prometheus() {
  return access("/usr/bin/prometheus", X_OK) == 0 &&
         access("/usr/bin/promtool", X_OK) == 0 &&
         access("/usr/bin/curl", X_OK) == 0;
}

TEST(MonitorMetrics, PrometheusCountsEveryDispatchAndThoseUnder100ms) {
  LT_REQUIRE_BPF();
  LT_REQUIRE_INSTALLED(have_prometheus(), "prometheus, promtool and curl");
  TempDir dir;
  const int metrics_port = free_port(), prom_port = free_port();
  ASSERT_GT(metrics_port, 0);
  ASSERT_GT(prom_port, 0);
  ASSERT_NE(metrics_port, prom_port);
  const std::string metrics_url =
      "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics";
  write_file(dir.file("prometheus.yml"),
             "global:\n"
             "  scrape_interval: 1s\n"
             "  evaluation_interval: 1s\n"
             "scrape_configs:\n"
             "  - job_name: looptrace\n"
             "    static_configs:\n"
             "      - targets: ['127.0.0.1:" +
                 std::to_string(metrics_port) + "']\n");
  Process prom(
      {"/usr/bin/prometheus", "--config.file=" + dir.file("prometheus.yml"),
       "--storage.tsdb.path=" + dir.file("tsdb"),
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port),
       "--log.level=warn"},
      dir.file("prom.out"), dir.file("prom.err"));

  // 300 triggers 10 ms apart and one 150 ms stall, after a delay in which
  // the monitor attaches.
  const std::string log = dir.file("truth.jsonl");
  Process app({refapp_bin(), "--messages", "300", "--rate", "100", "--stall",
               "busy:150@1000", "--start-delay", "6000", "--log-slow", "100",
               "--log", log},
              dir.file("app.out"), dir.file("app.err"));
  ASSERT_TRUE(wait_for_text(dir.file("app.err"), "ready pid=", 5000))
      << read_file(dir.file("app.err"));
  Process lt({looptrace_bin(), "monitor", "-p", std::to_string(app.pid()),
              "--metrics", "127.0.0.1:" + std::to_string(metrics_port)},
             dir.file("lt.out"), dir.file("lt.err"));
  // Its probes are in place when it says how to stop it (its attach line
  // comes with the process's first event).
  ASSERT_TRUE(wait_for_text(dir.file("lt.err"), "to stop", 20000))
      << read_file(dir.file("lt.err"));
  ASSERT_FALSE(wait_for_text(log, "\"start\"", 1))
      << "the monitor attached after the scenario began: no exact count";
  ASSERT_EQ(app.wait(60000), 0) << read_file(dir.file("app.err"));

  // The app's own counts: every dispatch, and those of 100 ms or more.
  auto truth = read_jsonl(log);
  auto summary = events(truth, "summary");
  ASSERT_EQ(summary.size(), 1u);
  uint64_t dispatches = 0;
  for (const json& t : summary[0]["threads"])
    dispatches += t["dispatches"].get<uint64_t>();
  ASSERT_EQ(dispatches, 301u) << "300 triggers and the stall";
  uint64_t slow = 0;
  for (const char* kind : {"stall", "slow"})
    for (const json& e : events(truth, kind))
      if (e["duration_ns"].get<uint64_t>() > 100'000'000) ++slow;
  ASSERT_GE(slow, 1u) << "the 150 ms stall";

  // What Prometheus stored, once its scrapes have caught up (the monitor
  // keeps serving the exited process's counts).
  const std::string count_q =
      "sum(looptrace_span_duration_seconds_count{role=\"dispatch\","
      "profile=\"refapp\"})";
  const std::string fast_q =
      "sum(looptrace_span_duration_seconds_bucket{role=\"dispatch\","
      "profile=\"refapp\",le=\"0.1\"})";
  std::optional<double> count, fast;
  for (int i = 0; i < 30; ++i) {
    count = prom_value(prom_port, count_q);
    fast = prom_value(prom_port, fast_q);
    if (count && *count == static_cast<double>(dispatches)) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  ASSERT_TRUE(count) << read_file(dir.file("prom.err"));
  EXPECT_EQ(*count, static_cast<double>(dispatches))
      << http_get(metrics_url).value_or("(no scrape)");
  ASSERT_TRUE(fast);
  EXPECT_EQ(*fast, static_cast<double>(dispatches - slow));
  // Prometheus's own view of the target: up.
  EXPECT_EQ(prom_value(prom_port, "up{job=\"looptrace\"}"), 1.0);

  // promtool checks the exposition (it reads it on stdin).
  auto body = http_get(metrics_url);
  ASSERT_TRUE(body);
  write_file(dir.file("metrics.txt"), *body);
  RunResult check =
      run({"sh", "-c", "promtool check metrics < " + dir.file("metrics.txt")});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  // Asked as Prometheus 2.42 asks (its scrapes above got the same), the
  // exposition is OpenMetrics: its content type, `# EOF` last, and the
  // spans' samples of the text format in it (they no longer change: the
  // app has exited; the gauges may between two scrapes), the values to
  // their last digit (prometheus-cpp writes 16 significant digits,
  // OpenMetrics here the shortest exact form).
  auto om = http_get(metrics_url, "",
                     {"-D", dir.file("om.headers"), "-H",
                      "Accept: application/openmetrics-text;version=1.0.0,"
                      "application/openmetrics-text;version=0.0.1;q=0.75,"
                      "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"});
  ASSERT_TRUE(om);
  EXPECT_NE(read_file(dir.file("om.headers"))
                .find("Content-Type: application/openmetrics-text; "
                      "version=1.0.0"),
            std::string::npos)
      << read_file(dir.file("om.headers"));
  ASSERT_GE(om->size(), 6u);
  EXPECT_EQ(om->substr(om->size() - 6), "# EOF\n");
  std::istringstream text_lines(*body);
  std::string line;
  size_t compared = 0;
  while (std::getline(text_lines, line)) {
    if (line.rfind("looptrace_span_duration_seconds", 0) != 0) continue;
    const size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    const std::string series = line.substr(0, space + 1);
    const size_t at = om->find("\n" + series);
    ASSERT_NE(at, std::string::npos) << line;
    const double want = std::stod(line.substr(space + 1));
    const double got = std::stod(om->substr(at + 1 + series.size()));
    EXPECT_NEAR(got, want, std::abs(want) * 1e-15) << line;
    ++compared;
  }
  EXPECT_GT(compared, 15u);

  lt.signal(SIGINT);
  EXPECT_EQ(lt.wait(20000), 0) << read_file(dir.file("lt.err"));
  prom.signal(SIGTERM);
  prom.wait(20000);
}

// A bad --metrics value is a usage error, a port in use an error: one line
// each, before anything is traced.
TEST(MonitorMetrics, BadOrBusyAddressIsOneErrorLine) {
  LT_REQUIRE_BPF();
  auto expect_error = [](const RunResult& r, int code,
                         const std::string& needle) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_EQ(r.err.rfind("looptrace: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
  };
  for (const char* bad : {"localhost:9464", "127.0.0.1:0", "127.0.0.1:99999",
                          "[::1]:9464", "9464x"})
    expect_error(run({looptrace_bin(), "monitor", "--metrics", bad}, 20000), 2,
                 std::string("--metrics ") + bad);
  expect_error(run({looptrace_bin(), "monitor", "--metrics-per-pid"}, 20000), 2,
               "--metrics-per-pid needs --metrics");
  // A port someone listens on.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string busy = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  expect_error(run({looptrace_bin(), "monitor", "--metrics", busy}, 20000), 1,
               "--metrics " + busy + ": cannot listen: Address already in use");
  close(fd);
}

}  // namespace
}  // namespace lt_test
