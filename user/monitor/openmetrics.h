// The OpenMetrics 1.0 text exposition of prometheus-cpp's metric families,
// for a scraper that asks for it (Prometheus prefers it). prometheus-cpp
// 1.0 (Debian 12's) only writes the Prometheus text format 0.0.4; the two
// carry the same series (names, labels, values), so a scrape stores the
// same data whichever it gets.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

namespace looptrace {

inline constexpr const char* kOpenMetricsType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
inline constexpr const char* kPrometheusTextType =
    "text/plain; version=0.0.4; charset=utf-8";

// The families in OpenMetrics text: a counter family's name without its
// `_total` (its samples keep it), histograms with `_bucket` (the `+Inf`
// one included), `_count` and `_sum`, label values and help escaped, and
// the closing `# EOF`.
std::string openmetrics_text(
    const std::vector<prometheus::MetricFamily>& families);

// Whether an HTTP Accept header prefers OpenMetrics to the text format:
// its application/openmetrics-text range has a higher quality than any
// range the text format matches (text/plain, text/*, */*).
bool wants_openmetrics(std::string_view accept);

}  // namespace looptrace
