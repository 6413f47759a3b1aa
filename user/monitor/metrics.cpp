#include "monitor/metrics.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <exception>
#include <utility>
#include <variant>

#include "analysis/input.h"
#include "base/text.h"
#include "monitor/openmetrics.h"

namespace looptrace {
namespace {

// A comm is at most 15 bytes from the kernel; a recording's may be
// anything.
constexpr size_t kMaxCommLabel = 64;
// Series of spans past the cap go here.
constexpr const char* kOther = "_other";

// The role label of a span role, and of frames.
constexpr uint32_t kFrameRole = LT_ROLE_MAX;
const char* role_label(uint32_t role) {
  switch (role) {
    case LT_ROLE_DISPATCH:
      return "dispatch";
    case LT_ROLE_IDLE:
      return "idle";
    case LT_ROLE_DELIVERY:
      return "delivery";
    default:
      return "frame";
  }
}

// The loss counters that say events are missing, by the reason the JSON
// report names them with (report_common.cpp lost_items), and the sink's
// own. Not the returns and dispatches whose entry or enqueue came before
// the attach (unmatched_returns, delivery_unmatched): every attach has
// some, and an alert on this metric is to mean a loss.
struct LostReason {
  const char* name;
  int counter;  // LT_CNT_*, or one of these:
};
constexpr int kHookMisses = -1, kDecodeErrors = -2, kOwn = -3;
constexpr LostReason kLostReasons[] = {
    {"ringbuf_full", LT_CNT_RB_FULL},
    {"hist_full", LT_CNT_HIST_FULL},
    {"depth_overflow", LT_CNT_DEPTH_OVERFLOW},
    {"abandoned", LT_CNT_ABANDONED},
    {"storage_fail", LT_CNT_STORAGE_FAIL},
    {"stack_failures", LT_CNT_STACK_FAIL},
    {"blocks_capped", LT_CNT_OFFCPU_CAPPED},
    {"watch_full", LT_CNT_WATCH_FULL},
    {"hook_misses", kHookMisses},
    {"decode_errors", kDecodeErrors},
    {"metrics_series_cap", kOwn},
    {"input_pending_cap", kOwn},
};

Status listen_error(const std::string& value, const std::string& why) {
  return Status::Error(
      fmt::format("--metrics {}: {}", printable(value, 80), why),
      ErrorKind::kUsage);
}

// Whether `addr` (civetweb's form) can be bound now: the error says why
// not (civetweb itself only says that it could not start).
Status try_bind(const std::string& value, const std::string& host,
                uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &in.sin_addr) != 1)
    return listen_error(value, "expected a numeric IPv4 address");
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Errno("--metrics: socket", errno);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&in), sizeof(in));
  int err = errno;
  close(fd);
  if (rc != 0)
    return Status::Error(fmt::format("--metrics {}: cannot listen: {}",
                                     printable(value, 80), strerror(err)));
  return Status::Ok();
}

}  // namespace

const std::vector<double>& metrics_buckets() {
  static const std::vector<double> b{0.001, 0.002, 0.004, 0.008, 0.016,
                                     0.032, 0.05,  0.1,   0.2,   0.5,
                                     0.7,   1,     2,     5};
  return b;
}

Result<std::string> metrics_listen_address(const std::string& value) {
  std::string host = "127.0.0.1";
  std::string port_text = value;
  if (size_t colon = value.rfind(':'); colon != std::string::npos) {
    host = value.substr(0, colon);
    port_text = value.substr(colon + 1);
    if (host.empty()) host = "127.0.0.1";
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(),
                                   port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() ||
      end != port_text.data() + port_text.size() || port == 0 || port > 65535)
    return listen_error(value,
                        "expected ADDR:PORT, :PORT or PORT with a "
                        "port from 1 to 65535");
  // Debian's civetweb, prometheus-cpp's server, listens on IPv4 only.
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) != 1)
    return listen_error(value,
                        "expected a numeric IPv4 address (no host "
                        "names, no IPv6)");
  return host + ":" + std::to_string(port);
}

MetricsSink::MetricsSink(const MetricsOptions& options)
    : options_(options), registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  spans_ = &BuildHistogram()
                .Name("looptrace_span_duration_seconds")
                .Help(
                    "Finished spans by role (dispatch, idle, delivery, "
                    "frame), thread name and profile")
                .Register(*registry_);
  slow_ = &BuildCounter()
               .Name("looptrace_slow_spans_total")
               .Help("Finished spans at or over their role's slow threshold")
               .Register(*registry_);
  input_ = &BuildHistogram()
                .Name("looptrace_input_latency_seconds")
                .Help(
                    "Input events' stage durations, by Perfetto's stage "
                    "names")
                .Register(*registry_);
  lost_ = &BuildCounter()
               .Name("looptrace_lost_events_total")
               .Help("Events the tracer or the metrics lost, by reason")
               .Register(*registry_);
  dumps_ = &BuildCounter()
                .Name("looptrace_dumps_total")
                .Help("Flight-recorder dumps written")
                .Register(*registry_)
                .Add({});
  traced_ = &BuildGauge()
                 .Name("looptrace_traced_processes")
                 .Help("Processes traced now")
                 .Register(*registry_)
                 .Add({});
  for (const LostReason& r : kLostReasons)
    lost_counters_[r.name] = &lost_->Add({{"reason", r.name}});
  for (int s = 0; s < kInputStages; ++s)
    stages_.push_back(&input_->Add(
        {{"stage", std::string(input_stage_name(static_cast<InputStage>(s)))}},
        metrics_buckets()));
}

// GET /metrics: the registry's families in the format the scraper asks
// for (Accept), as prometheus-cpp's own handler does for the text format.
// civetweb answers any other path with 404.
class MetricsSink::Handler : public CivetHandler {
 public:
  explicit Handler(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    const char* accept = mg_get_header(conn, "Accept");
    const bool om = accept && wants_openmetrics(accept);
    const auto families = registry_->Collect();
    const std::string body =
        om ? openmetrics_text(families)
           : prometheus::TextSerializer().Serialize(families);
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: "
              "%zu\r\nConnection: close\r\n\r\n",
              om ? kOpenMetricsType : kPrometheusTextType, body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

MetricsSink::~MetricsSink() {
  // The server first: no scrape runs while the metrics go.
  server_.reset();
  handler_.reset();
}

Result<std::unique_ptr<MetricsSink>> MetricsSink::Start(
    const MetricsOptions& options) {
  auto addr = metrics_listen_address(options.listen);
  if (!addr.ok()) return addr.status();
  const size_t colon = addr->rfind(':');
  std::string host = addr->substr(0, colon);
  LT_RETURN_IF_ERROR(
      try_bind(options.listen, host,
               static_cast<uint16_t>(std::stoi(addr->substr(colon + 1)))));
  auto sink = std::make_unique<MetricsSink>(options);
  sink->handler_ = std::make_unique<Handler>(sink->registry_);
  try {
    // One serving thread: a scrape is small, and a monitor is frugal.
    sink->server_ = std::make_unique<CivetServer>(
        std::vector<std::string>{"listening_ports", *addr, "num_threads", "1"});
  } catch (const std::exception& e) {
    return Status::Error(fmt::format("--metrics {}: cannot listen: {}",
                                     printable(options.listen, 80), e.what()));
  }
  sink->server_->addHandler("/metrics", sink->handler_.get());
  return sink;
}

int MetricsSink::port() const {
  if (!server_) return 0;
  auto ports = server_->getListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string MetricsSink::openmetrics() const {
  return openmetrics_text(registry_->Collect());
}

std::string MetricsSink::text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void MetricsSink::consume(const Event& ev) {
  if (const auto* s = std::get_if<SpanEvent>(&ev)) {
    on_span(*s);
  } else if (const auto* se = std::get_if<SessionEvent>(&ev)) {
    on_session(*se);
    return;
  } else if (!std::holds_alternative<IoEvent>(ev)) {
    return;
  }
  if (!input_analyzer_) return;
  input_analyzer_->consume(ev);
  if (input_analyzer_->pending() > options_.max_input_pending) {
    // Events never consumed (their acknowledgement lost, an app that
    // stopped reading) would be held for ever: start over.
    lost_counters_.at("input_pending_cap")
        ->Increment(static_cast<double>(input_analyzer_->pending()));
    input_analyzer_ = std::make_unique<InputAnalyzer>(input_options_);
  }
}

void MetricsSink::on_session(const SessionEvent& s) {
  thresholds_ = s.thresholds;
  for (const ProbeDef& p : s.probes) probes_[p.id] = p;
  if (!s.has_input || input_analyzer_) return;
  InputOptions o = input_options(s.probes, thresholds_);
  o.stream_only = true;
  o.on_final = [this](const InputEventInfo& e) { on_input(e); };
  input_options_ = std::move(o);
  input_analyzer_ = std::make_unique<InputAnalyzer>(input_options_);
}

bool MetricsSink::is_frame(const SpanEvent& s) const {
  // As the frame analysis tells (analysis/frames.cpp frame_source).
  if (s.role != LT_ROLE_DISPATCH && s.role != LT_ROLE_IDLE) return false;
  auto it = probes_.find(s.probe_id);
  if (it == probes_.end() || !it->second.frame) return false;
  const std::vector<std::string>& names = it->second.frame->names;
  if (names.empty()) return true;
  if (s.flags & LT_SPAN_KEY_STR_CUT) return false;
  return std::find(names.begin(), names.end(), s.key_str) != names.end();
}

void MetricsSink::on_span(const SpanEvent& s) {
  // Unfinished spans are not counted (their end is not known); a span of
  // a role that is no span's is a damaged record.
  if (s.unfinished() || s.role >= LT_ROLE_MAX) return;
  auto it = probes_.find(s.probe_id);
  static const std::string kNone;
  const std::string& profile = it == probes_.end() ? kNone : it->second.profile;
  const double seconds = static_cast<double>(s.duration_ns) / 1e9;
  Series& own = series(s.role, s, profile);
  own.duration->Observe(seconds);
  if (s.duration_ns >= thresholds_.slow_ns[s.role]) own.slow->Increment();
  if (is_frame(s)) series(kFrameRole, s, profile).duration->Observe(seconds);
}

MetricsSink::Series& MetricsSink::series(uint32_t role, const SpanEvent& s,
                                         const std::string& profile) {
  // Label values as text: a comm is any bytes (printable() escapes
  // controls and invalid UTF-8, which Prometheus refuses).
  SeriesKey key{role, printable(s.comm, kMaxCommLabel),
                printable(profile, kMaxCommLabel),
                options_.per_pid ? std::to_string(s.pid) : ""};
  auto it = series_.find(key);
  if (it == series_.end() && own_series_ >= options_.max_series) {
    lost_counters_.at("metrics_series_cap")->Increment();
    std::get<1>(key) = kOther;
    if (options_.per_pid) std::get<3>(key) = kOther;
    it = series_.find(key);
  }
  if (it != series_.end()) return it->second;
  if (std::get<1>(key) != kOther) ++own_series_;
  prometheus::Labels labels{{"role", role_label(role)},
                            {"comm", std::get<1>(key)},
                            {"profile", std::get<2>(key)}};
  if (options_.per_pid) labels["pid"] = std::get<3>(key);
  Series out;
  out.duration = &spans_->Add(labels, metrics_buckets());
  if (role != kFrameRole) out.slow = &slow_->Add(labels);
  return series_.emplace(std::move(key), out).first->second;
}

void MetricsSink::on_input(const InputEventInfo& e) {
  for (int s = 0; s < kInputStages; ++s)
    if (auto v = e.stage(static_cast<InputStage>(s)))
      stages_[s]->Observe(static_cast<double>(*v) / 1e9);
}

void MetricsSink::set_traced_processes(size_t n) {
  traced_->Set(static_cast<double>(n));
}

void MetricsSink::count_dump() { dumps_->Increment(); }

void MetricsSink::set_lost(const Counters& c) {
  for (const LostReason& r : kLostReasons) {
    if (r.counter == kOwn) continue;
    const uint64_t now = r.counter == kHookMisses     ? c.hook_misses
                         : r.counter == kDecodeErrors ? c.decode_errors
                                                      : c.bpf[r.counter];
    uint64_t& seen = lost_seen_[r.name];
    // The counters only grow; one that went back was started again (a new
    // tracer): all of it is new.
    const uint64_t added = now >= seen ? now - seen : now;
    if (added) lost_counters_.at(r.name)->Increment(static_cast<double>(added));
    seen = now;
  }
}

}  // namespace looptrace
