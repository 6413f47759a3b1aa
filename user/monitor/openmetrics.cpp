#include "monitor/openmetrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace looptrace {
namespace {

void put_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v < 0 ? "-Inf" : "+Inf";
  } else {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, ec == std::errc() ? end : buf);
  }
}

void put_number(std::string& out, uint64_t v) { out += std::to_string(v); }

// OpenMetrics escapes the same three characters in label values and help.
void put_escaped(std::string& out, const std::string& s) {
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

using Labels = std::vector<prometheus::ClientMetric::Label>;

void put_sample(std::string& out, const std::string& name,
                const std::string& suffix, const Labels& labels,
                const char* extra_name, const std::string& extra_value) {
  out += name;
  out += suffix;
  if (!labels.empty() || extra_name) {
    out += '{';
    bool first = true;
    for (const auto& l : labels) {
      if (!first) out += ',';
      first = false;
      out += l.name;
      out += "=\"";
      put_escaped(out, l.value);
      out += '"';
    }
    if (extra_name) {
      if (!first) out += ',';
      out += extra_name;
      out += "=\"";
      out += extra_value;
      out += '"';
    }
    out += '}';
  }
  out += ' ';
}

std::string number_text(double v) {
  std::string s;
  put_number(s, v);
  return s;
}

const char* type_name(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    default:
      return "unknown";
  }
}

}  // namespace

std::string openmetrics_text(
    const std::vector<prometheus::MetricFamily>& families) {
  std::string out;
  for (const prometheus::MetricFamily& f : families) {
    // A counter's family is named without `_total`; its samples have it.
    std::string family = f.name;
    const bool counter = f.type == prometheus::MetricType::Counter;
    std::string total;
    if (counter) {
      total = "_total";
      if (family.size() > 6 && family.ends_with("_total"))
        family.resize(family.size() - 6);
    }
    out += "# TYPE " + family + " " + type_name(f.type) + "\n";
    if (!f.help.empty()) {
      out += "# HELP " + family + " ";
      put_escaped(out, f.help);
      out += '\n';
    }
    for (const prometheus::ClientMetric& m : f.metric) {
      switch (f.type) {
        case prometheus::MetricType::Counter:
          put_sample(out, family, total, m.label, nullptr, "");
          put_number(out, m.counter.value);
          out += '\n';
          break;
        case prometheus::MetricType::Gauge:
          put_sample(out, family, "", m.label, nullptr, "");
          put_number(out, m.gauge.value);
          out += '\n';
          break;
        case prometheus::MetricType::Histogram: {
          bool inf = false;
          for (const auto& b : m.histogram.bucket) {
            inf = inf || std::isinf(b.upper_bound);
            put_sample(out, family, "_bucket", m.label, "le",
                       number_text(b.upper_bound));
            put_number(out, b.cumulative_count);
            out += '\n';
          }
          // OpenMetrics requires the +Inf bucket: every sample is in it.
          if (!inf) {
            put_sample(out, family, "_bucket", m.label, "le", "+Inf");
            put_number(out, m.histogram.sample_count);
            out += '\n';
          }
          put_sample(out, family, "_count", m.label, nullptr, "");
          put_number(out, m.histogram.sample_count);
          out += '\n';
          put_sample(out, family, "_sum", m.label, nullptr, "");
          put_number(out, m.histogram.sample_sum);
          out += '\n';
          break;
        }
        case prometheus::MetricType::Summary:
          for (const auto& q : m.summary.quantile) {
            put_sample(out, family, "", m.label, "quantile",
                       number_text(q.quantile));
            put_number(out, q.value);
            out += '\n';
          }
          put_sample(out, family, "_count", m.label, nullptr, "");
          put_number(out, m.summary.sample_count);
          out += '\n';
          put_sample(out, family, "_sum", m.label, nullptr, "");
          put_number(out, m.summary.sample_sum);
          out += '\n';
          break;
        default:
          put_sample(out, family, "", m.label, nullptr, "");
          put_number(out, m.untyped.value);
          out += '\n';
          break;
      }
    }
  }
  out += "# EOF\n";
  return out;
}

bool wants_openmetrics(std::string_view accept) {
  double om = -1, text = -1;
  while (!accept.empty()) {
    size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view()
                                             : accept.substr(comma + 1);
    auto trim = [](std::string_view s) {
      while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
      while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
      return s;
    };
    size_t semi = range.find(';');
    std::string_view type = trim(range.substr(0, semi));
    double q = 1;
    while (semi != std::string_view::npos) {
      range = range.substr(semi + 1);
      semi = range.find(';');
      std::string_view param = trim(range.substr(0, semi));
      if (param.starts_with("q=")) {
        std::string v(param.substr(2));
        char* end = nullptr;
        double parsed = std::strtod(v.c_str(), &end);
        q = end && *end == '\0' ? parsed : 0;
      }
    }
    if (type == "application/openmetrics-text")
      om = std::max(om, q);
    else if (type == "text/plain" || type == "text/*" || type == "*/*")
      text = std::max(text, q);
  }
  return om > 0 && om > text;
}

}  // namespace looptrace
