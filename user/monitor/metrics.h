// Prometheus metrics of a live event stream (looptrace monitor --metrics):
// one more sink of the monitor's pipeline. Every finished span goes into a
// histogram of its role, comm and profile; finished input events into one
// per Perfetto stage; the tracer's loss counters, the dumps written and
// the processes traced are set by the monitor. prometheus-cpp keeps them;
// civetweb (the server of prometheus-cpp's pull Exposer) serves /metrics
// in prometheus-cpp's text format, or in OpenMetrics when asked;
// docs/looptrace.md, MONITOR, lists the names, labels and buckets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/input.h"
#include "base/status.h"
#include "model/thresholds.h"
#include "trace/events.h"
#include "trace/stream.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

class CivetServer;

namespace looptrace {

struct MetricsOptions {
  // ADDR:PORT (numeric IPv4), :PORT or PORT (address 127.0.0.1).
  std::string listen;
  // A pid label on the span metrics (one series per process and comm).
  bool per_pid = false;
  // Label sets of the span metrics at most; a span whose set would be one
  // more is counted under comm="_other" (and pid="_other"), and in
  // looptrace_lost_events_total{reason="metrics_series_cap"}.
  size_t max_series = 2000;
  // Input events not yet final held for the input latency at most: past
  // it, those held are dropped (counted in
  // looptrace_lost_events_total{reason="input_pending_cap"}).
  size_t max_input_pending = 65536;
};

// The span histograms' and the input histogram's bucket bounds (seconds).
const std::vector<double>& metrics_buckets();

// The address civetweb is to listen on ("127.0.0.1:9100") for an
// option's value; a usage error naming it otherwise.
Result<std::string> metrics_listen_address(const std::string& value);

class MetricsSink : public EventSink {
 public:
  // Binds the address (options.listen) and serves /metrics; a busy or
  // bad address is one error line.
  static Result<std::unique_ptr<MetricsSink>> Start(
      const MetricsOptions& options);
  // Without a server (scraped with text() only, as the unit tests do).
  explicit MetricsSink(const MetricsOptions& options);
  ~MetricsSink() override;
  MetricsSink(const MetricsSink&) = delete;
  MetricsSink& operator=(const MetricsSink&) = delete;

  // From the pipeline's thread.
  void consume(const Event& ev) override;
  // From the monitor (any one thread), about once a second.
  void set_traced_processes(size_t n);
  void count_dump();
  // The tracer's counters so far (cumulative, as the loader sums them).
  void set_lost(const Counters& c);

  // The exposition a scrape gets: the text format 0.0.4, or OpenMetrics
  // 1.0 for a scraper that asks for it (Prometheus does).
  std::string text() const;
  std::string openmetrics() const;
  // The port served (0 without a server).
  int port() const;

 private:
  struct Series {
    prometheus::Histogram* duration = nullptr;
    prometheus::Counter* slow = nullptr;
  };
  // role name, comm, profile, pid ("" without per_pid).
  using SeriesKey = std::tuple<uint32_t, std::string, std::string, std::string>;

  void on_session(const SessionEvent& s);
  void on_span(const SpanEvent& s);
  Series& series(uint32_t role, const SpanEvent& s, const std::string& profile);
  bool is_frame(const SpanEvent& s) const;
  void on_input(const InputEventInfo& e);

  MetricsOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* spans_;
  prometheus::Family<prometheus::Counter>* slow_;
  prometheus::Family<prometheus::Histogram>* input_;
  prometheus::Family<prometheus::Counter>* lost_;
  prometheus::Counter* dumps_;
  prometheus::Gauge* traced_;
  std::vector<prometheus::Histogram*> stages_;
  std::map<SeriesKey, Series> series_;
  size_t own_series_ = 0;  // series_ less the _other ones
  // The session's: slow thresholds, each probe's profile and frame rule.
  Thresholds thresholds_;
  std::map<uint32_t, ProbeDef> probes_;
  InputOptions input_options_;
  std::unique_ptr<InputAnalyzer> input_analyzer_;
  // What each loss counter was at the last set_lost, by reason.
  std::map<std::string, uint64_t> lost_seen_;
  std::map<std::string, prometheus::Counter*> lost_counters_;
  // civetweb, the server prometheus-cpp's Exposer runs on, with a handler
  // of our own: prometheus-cpp 1.0's writes no OpenMetrics.
  class Handler;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;
};

}  // namespace looptrace
