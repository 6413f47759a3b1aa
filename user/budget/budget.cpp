#include "budget/budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>

#include "analysis/input.h"
#include "base/duration.h"
#include "report/report_common.h"

namespace looptrace {
namespace {

using nlohmann::json;

// What one metric says about one report.
struct Measure {
  bool known = false;
  uint64_t value = 0;
  std::string detail;
};

Measure no_data(std::string why) {
  return {false, 0, "no data: " + std::move(why)};
}
Measure measured(uint64_t value, std::string detail = {}) {
  return {true, value, std::move(detail)};
}

using Eval = std::function<Measure(const json& report)>;

struct MetricImpl {
  BudgetMetric info;
  Eval eval;
};

// ---- reading the document defensively: a field that is missing or not a
// non-negative integer is "not there", never an exception.

std::optional<uint64_t> u64(const json& obj, std::string_view key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0)
    return static_cast<uint64_t>(it->get<int64_t>());
  return std::nullopt;
}

const json* member(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json* array_member(const json& obj, std::string_view key) {
  const json* a = member(obj, key);
  return a != nullptr && a->is_array() ? a : nullptr;
}

std::string str(const json& obj, std::string_view key) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

std::string thread_name(const json& t) {
  std::string s = fmt::format("pid {} tid {}", u64(t, "pid").value_or(0),
                              u64(t, "tid").value_or(0));
  std::string comm = str(t, "comm");
  if (!comm.empty()) s += " " + comm;
  return s;
}

// ---- span roles: threads[] entries and the slow lists ----

struct RoleInfo {
  const char* role;       // threads[].role
  const char* noun;       // for messages: "dispatch spans"
  const char* none;       // why a statistic is unknown
  const char* slow_list;  // the report's list of slow ones
  const char* duration;   // their length field
};

constexpr std::array<RoleInfo, 3> kRoles{{
    {"dispatch", "dispatch spans", "no dispatch spans traced",
     "slow_dispatches", "duration_ns"},
    {"idle", "idle handler runs", "no idle handler runs traced",
     "slow_idle_handlers", "duration_ns"},
    {"delivery", "delivery lags",
     "no deliveries traced (they need an enqueue probe)", "slow_deliveries",
     "lag_ns"},
}};

std::vector<const json*> role_threads(const json& report, const char* role) {
  std::vector<const json*> out;
  if (const json* threads = array_member(report, "threads"))
    for (const json& t : *threads)
      if (str(t, "role") == role) out.push_back(&t);
  return out;
}

// " (3 threads not listed)": the sums and maxima see the listed ones only.
std::string omitted_note(const json& report) {
  uint64_t n = u64(report, "threads_omitted").value_or(0);
  return n ? fmt::format(" ({} threads not listed)", n) : "";
}

// Sum of a threads[] field over the role's threads; 0 when it has none.
Measure role_sum(const json& report, const RoleInfo& r, const char* field) {
  if (array_member(report, "threads") == nullptr)
    return no_data("the report has no threads list");
  uint64_t sum = 0;
  std::vector<const json*> ts = role_threads(report, r.role);
  for (const json* t : ts) sum += u64(*t, field).value_or(0);
  return measured(
      sum, fmt::format("{} thread{}{}", ts.size(), ts.size() == 1 ? "" : "s",
                       omitted_note(report)));
}

// Slow spans the report knows of, listed or not (in flight and cut short
// included: threads[].slow_count leaves those out).
Measure role_slow(const json& report, const RoleInfo& r) {
  const json* list = array_member(report, r.slow_list);
  if (list == nullptr)
    return no_data(fmt::format("the report has no {}", r.slow_list));
  uint64_t omitted =
      u64(report, std::string(r.slow_list) + "_omitted").value_or(0);
  return measured(list->size() + omitted);
}

// The worst thread's percentile: a budget is about the worst loop.
Measure role_percentile(const json& report, const RoleInfo& r,
                        const char* field) {
  const json* worst = nullptr;
  uint64_t value = 0;
  for (const json* t : role_threads(report, r.role)) {
    if (u64(*t, "count").value_or(0) == 0) continue;
    std::optional<uint64_t> v = u64(*t, field);
    if (v && (worst == nullptr || *v > value)) worst = t, value = *v;
  }
  if (worst == nullptr) return no_data(r.none);
  return measured(value, thread_name(*worst) + omitted_note(report));
}

// The longest span: the threads' exact maxima, and the slow spans, which
// also hold the ones threads[] leaves out (a hang still running at the end,
// a span cut short by its thread's exit).
Measure role_max(const json& report, const RoleInfo& r) {
  const json* worst = nullptr;
  uint64_t value = 0;
  std::string how;
  for (const json* t : role_threads(report, r.role)) {
    if (u64(*t, "count").value_or(0) == 0) continue;
    std::optional<uint64_t> v = u64(*t, "max_ns");
    if (v && (worst == nullptr || *v > value)) worst = t, value = *v, how = "";
  }
  if (const json* list = array_member(report, r.slow_list)) {
    for (const json& s : *list) {
      std::optional<uint64_t> v = u64(s, r.duration);
      if (!v || (worst != nullptr && *v <= value)) continue;
      worst = &s, value = *v;
      const json* in_flight = member(s, "in_flight");
      how = in_flight != nullptr && in_flight->is_boolean() &&
                    in_flight->get<bool>()
                ? ", still running at the end"
            : !str(s, "cut_short").empty()
                ? ", cut short by " + str(s, "cut_short")
                : "";
    }
  }
  if (worst == nullptr) return no_data(r.none);
  return measured(value, thread_name(*worst) + how + omitted_note(report));
}

// ---- input: input_summary and input_channels[] ----

const char* const kNoInput = "the run traced no input (--input)";

std::string channel_name(const json& c) {
  return fmt::format("{} (pid {} {})", str(c, "channel"),
                     u64(c, "pid").value_or(0), str(c, "comm"));
}

// Sum of an input_channels[] field (or of one stage's field).
Measure input_sum(const json& report, const char* stage, const char* field) {
  if (member(report, "input_summary") == nullptr) return no_data(kNoInput);
  uint64_t sum = 0;
  if (const json* chans = array_member(report, "input_channels")) {
    for (const json& c : *chans) {
      const json* obj = &c;
      if (stage != nullptr) {
        const json* stages = member(c, "stages");
        obj = stages != nullptr ? member(*stages, stage) : nullptr;
      }
      if (obj != nullptr) sum += u64(*obj, field).value_or(0);
    }
  }
  uint64_t omitted =
      u64(*member(report, "input_summary"), "channels_not_listed").value_or(0);
  return measured(
      sum, omitted ? fmt::format("{} channels not listed", omitted) : "");
}

// The worst channel's stage statistic.
const char* const kNoFrames =
    "the run had no frame probes (the glib profile's GTK frame clock)";

Measure input_stage_max(const json& report, const char* stage,
                        const char* field) {
  if (member(report, "input_summary") == nullptr) return no_data(kNoInput);
  // Input to frame needs frames.
  if (std::string_view(stage).ends_with("_to_frame_dur") &&
      array_member(report, "frames") == nullptr)
    return no_data(kNoFrames);
  const json* worst = nullptr;
  uint64_t value = 0;
  if (const json* chans = array_member(report, "input_channels")) {
    for (const json& c : *chans) {
      const json* stages = member(c, "stages");
      const json* st = stages != nullptr ? member(*stages, stage) : nullptr;
      if (st == nullptr || u64(*st, "count").value_or(0) == 0) continue;
      std::optional<uint64_t> v = u64(*st, field);
      if (v && (worst == nullptr || *v > value)) worst = &c, value = *v;
    }
  }
  if (worst == nullptr)
    return no_data(fmt::format("no input event had a {}", stage));
  return measured(value, "channel " + channel_name(*worst));
}

// ---- frames: frames[] (per thread) ----

// Sum of a frames[] field.
Measure frames_sum(const json& report, const char* field) {
  const json* threads = array_member(report, "frames");
  if (threads == nullptr) return no_data(kNoFrames);
  uint64_t sum = 0;
  for (const json& t : *threads) sum += u64(t, field).value_or(0);
  return measured(sum, fmt::format("{} thread{}", threads->size(),
                                   threads->size() == 1 ? "" : "s"));
}

// The worst thread's statistic of its completed frames.
Measure frames_worst(const json& report, const char* field) {
  const json* threads = array_member(report, "frames");
  if (threads == nullptr) return no_data(kNoFrames);
  const json* worst = nullptr;
  uint64_t value = 0;
  for (const json& t : *threads) {
    // Only frames still drawing at the end: no completed one to measure.
    if (u64(t, "count").value_or(0) <= u64(t, "in_flight").value_or(0))
      continue;
    std::optional<uint64_t> v = u64(t, field);
    if (v && (worst == nullptr || *v > value)) worst = &t, value = *v;
  }
  if (worst == nullptr) return no_data("no frame was drawn");
  return measured(value, thread_name(*worst));
}

// Janky frames of all frames, in hundredths of a percent, rounded up: a
// budget of 1% is broken by 1 janky frame in 99.
Measure frames_janky_ratio(const json& report) {
  Measure janky = frames_sum(report, "janky");
  Measure count = frames_sum(report, "count");
  if (!janky.known) return janky;
  if (count.value == 0) return no_data("no frame was drawn");
  uint64_t j = std::min(janky.value, count.value);
  return measured((j * 10000 + count.value - 1) / count.value,
                  fmt::format("{} of {} frames", janky.value, count.value));
}

// ---- the table ----

using Metrics = std::vector<MetricImpl>;
constexpr MetricKind kCount = MetricKind::kCount;
constexpr MetricKind kDur = MetricKind::kDuration;
constexpr MetricKind kPct = MetricKind::kPercent;

void add(Metrics& m, std::string name, MetricKind kind, std::string meaning,
         Eval eval) {
  m.push_back({{std::move(name), kind, std::move(meaning)}, std::move(eval)});
}

// dispatch.*, idle.*, delivery.*, and slow.count.
void add_role_metrics(Metrics& m) {
  for (const RoleInfo& r : kRoles) {
    const std::string p = std::string(r.role) + ".";
    const std::string in = fmt::format("(threads[] of role {})", r.role);
    add(m, p + "count", kCount,
        fmt::format("{} completed, summed over threads {}", r.noun, in),
        [&r](const json& j) { return role_sum(j, r, "count"); });
    add(m, p + "slow", kCount,
        fmt::format("slow {}, in flight and cut short included (length of "
                    "{} + {}_omitted)",
                    r.noun, r.slow_list, r.slow_list),
        [&r](const json& j) { return role_slow(j, r); });
    add(m, p + "sum", kDur,
        fmt::format("total time of the {}, summed over threads (sum_ns)",
                    r.noun),
        [&r](const json& j) { return role_sum(j, r, "sum_ns"); });
    for (const char* pct : {"p50", "p90", "p99"}) {
      const std::string field = std::string(pct) + "_ns";
      add(m, p + pct, kDur,
          fmt::format("the worst thread's {} of {} (max of {} {})", pct, r.noun,
                      field, in),
          [&r, field](const json& j) {
            return role_percentile(j, r, field.c_str());
          });
    }
    add(m, p + "max", kDur,
        fmt::format("the longest of the {}: max of max_ns {} and of {}'s "
                    "{} (a hang still running at the end counts)",
                    r.noun, in, r.slow_list, r.duration),
        [&r](const json& j) { return role_max(j, r); });
  }
  add(m, "slow.count", kCount, "same as dispatch.slow",
      [](const json& j) { return role_slow(j, kRoles[0]); });
}

// input.*: the run's totals, then each stage's count and percentiles.
void add_input_metrics(Metrics& m) {
  add(m, "input.events", kCount, "input events traced (input_summary.events)",
      [](const json& j) -> Measure {
        const json* s = member(j, "input_summary");
        if (s == nullptr) return no_data(kNoInput);
        return measured(u64(*s, "events").value_or(0));
      });
  add(m, "input.unfinished", kCount,
      "input events never consumed while traced (sum of "
      "input_channels[].unfinished)",
      [](const json& j) { return input_sum(j, nullptr, "unfinished"); });
  add(m, "input.blamed", kCount,
      "input events that took --slow-input or longer (sum of "
      "input_channels[].blamed)",
      [](const json& j) { return input_sum(j, nullptr, "blamed"); });
  for (int s = 0; s < kInputStages; ++s) {
    const std::string stage(input_stage_name(static_cast<InputStage>(s)));
    const std::string p = "input." + stage + ".";
    add(m, p + "count", kCount,
        fmt::format("input events with a {} (sum of the channels' count)",
                    stage),
        [stage](const json& j) {
          return input_sum(j, stage.c_str(), "count");
        });
    for (const char* stat : {"p50", "p90", "p99", "max"}) {
      const std::string field = std::string(stat) + "_ns";
      add(m, p + stat, kDur,
          fmt::format("the worst channel's {} of {} (max of "
                      "input_channels[].stages.{}.{})",
                      stat, stage, stage, field),
          [stage, field](const json& j) {
            return input_stage_max(j, stage.c_str(), field.c_str());
          });
    }
  }
}

// frames.*: counts summed over threads, statistics of the worst thread.
void add_frame_metrics(Metrics& m) {
  for (const char* f : {"count", "janky", "frozen", "in_flight"})
    add(m, std::string("frames.") + f, kCount,
        fmt::format("frames' {} summed over threads (frames[].{})", f, f),
        [f](const json& j) { return frames_sum(j, f); });
  add(m, "frames.dropped", kCount,
      "dropped frames: missed vsyncs summed over threads "
      "(frames[].missed_vsyncs)",
      [](const json& j) { return frames_sum(j, "missed_vsyncs"); });
  add(m, "frames.janky_ratio", kPct,
      "janky frames of all frames, in percent (frames[].janky / count)",
      frames_janky_ratio);
  for (const char* stat : {"p50", "p90", "p99", "max"}) {
    const std::string field = std::string(stat) + "_ns";
    add(m, std::string("frames.") + stat, kDur,
        fmt::format("the worst thread's {} of frame durations (max of "
                    "frames[].{})",
                    stat, field),
        [field](const json& j) { return frames_worst(j, field.c_str()); });
  }
}

void add_barrier_metrics(Metrics& m) {
  for (const char* f :
       {"posted", "removed", "stalled", "leaked", "unknown_removes"}) {
    add(m, std::string("barrier.") + f, kCount,
        fmt::format("sync barriers {} (barrier_summary.{})", f, f),
        [f](const json& j) -> Measure {
          const json* s = member(j, "barrier_summary");
          if (s == nullptr) return no_data("the run had no barrier probes");
          return measured(u64(*s, f).value_or(0));
        });
  }
}

// The lost counters that mean lost events, summed, naming the nonzero ones.
Measure lost_sum(const json& j) {
  const json* lost = member(j, "lost");
  if (lost == nullptr || !lost->is_object())
    return no_data("the report has no lost counters");
  uint64_t sum = 0;
  std::string which;
  for (const auto& [k, v] : lost->items()) {
    if (k == "unseen_switches" || k == "blocks_capped" || k == "python_cut" ||
        k == "python_names_cut" || k == "js_cut")
      continue;
    uint64_t n = u64(*lost, k).value_or(0);
    sum += n;
    if (n) which += fmt::format("{}{} {}", which.empty() ? "" : ", ", k, n);
  }
  return measured(sum, which);
}

// lost, and lost.* for each counter.
void add_lost_metrics(Metrics& m) {
  add(m, "lost", kCount,
      "the sum of the counters in lost but unseen_switches, blocks_capped, "
      "python_cut, python_names_cut and js_cut (no event is lost there)",
      lost_sum);
  // One metric per counter the reports know, named as in the JSON.
  for (const report::LostItem& l : report::lost_items(DispatchAnalysis{})) {
    const char* key = l.json_key;
    add(m, std::string("lost.") + key, kCount,
        fmt::format("lost.{} alone", key), [key](const json& j) -> Measure {
          const json* lost = member(j, "lost");
          if (lost == nullptr || member(*lost, key) == nullptr)
            return no_data("the report has no lost counters");
          return measured(u64(*lost, key).value_or(0));
        });
  }
}

Metrics build_metrics() {
  Metrics m;
  add_role_metrics(m);
  add_input_metrics(m);
  add_frame_metrics(m);
  add_barrier_metrics(m);
  add_lost_metrics(m);
  return m;
}

const std::vector<MetricImpl>& metrics() {
  static const std::vector<MetricImpl> kMetrics = build_metrics();
  return kMetrics;
}

const MetricImpl* find_metric(std::string_view name) {
  for (const MetricImpl& m : metrics())
    if (m.info.name == name) return &m;
  return nullptr;
}

// ---- parsing ----

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min(
          {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The known metric closest to a misspelt one, if any is close: a few edits
// away, more for long names ("input.total_latency.max").
std::string closest_metric(std::string_view name,
                           const std::vector<BudgetMetric>& table) {
  // A name cut short: "slow" -> "slow.count", "lost.ringbuf" -> "..._full".
  for (const BudgetMetric& m : table)
    if (m.name.size() > name.size() &&
        m.name.compare(0, name.size(), name) == 0 &&
        (m.name[name.size()] == '.' || m.name[name.size()] == '_'))
      return m.name;
  std::string best;
  size_t best_d = std::max<size_t>(3, name.size() / 5) + 1;
  for (const BudgetMetric& m : table) {
    size_t d = edit_distance(name, m.name);
    if (d < best_d) best_d = d, best = m.name;
  }
  return best;
}

bool is_metric_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool is_op_char(char c) { return c == '<' || c == '>' || c == '=' || c == '!'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

struct Token {
  std::string_view text;
  size_t column = 0;  // 1-based
};

class Tokens {
 public:
  explicit Tokens(std::string_view s) : s_(s) {}
  // The next run of characters that `pred` accepts, after spaces.
  template <typename Pred>
  Token take(Pred pred) {
    skip_spaces();
    size_t start = i_;
    while (i_ < s_.size() && pred(s_[i_])) ++i_;
    return {s_.substr(start, i_ - start), start + 1};
  }
  // What is at the cursor (after spaces), up to the next space: for errors.
  Token peek() {
    skip_spaces();
    size_t end = i_;
    while (end < s_.size() && !is_space(s_[end])) ++end;
    return {s_.substr(i_, end - i_), i_ + 1};
  }
  bool at_end() {
    skip_spaces();
    return i_ == s_.size();
  }

 private:
  void skip_spaces() {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
  }
  std::string_view s_;
  size_t i_ = 0;
};

constexpr std::array<std::pair<std::string_view, BudgetOp>, 6> kOps{{
    {">=", BudgetOp::kGe},
    {"<=", BudgetOp::kLe},
    {"==", BudgetOp::kEq},
    {"!=", BudgetOp::kNe},
    {">", BudgetOp::kGt},
    {"<", BudgetOp::kLt},
}};

std::string found(const Token& t) {
  return t.text.empty() ? "the end of the expression"
                        : fmt::format("'{}'", t.text);
}

// A whole number for a count metric; the error says what is wrong with it.
Result<uint64_t> parse_count(std::string_view v) {
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return Status::Error("must be a whole number");
    if (n > (std::numeric_limits<uint64_t>::max() - (c - '0')) / 10)
      return Status::Error("is too large");
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// "16" has none, "16ms" and "16xs" have one (good or bad).
bool has_unit(std::string_view v) {
  return std::any_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

}  // namespace

const char* budget_op_text(BudgetOp op) {
  for (const auto& [text, o] : kOps)
    if (o == op) return text.data();
  return "?";
}

const std::vector<BudgetMetric>& budget_metrics() {
  static const std::vector<BudgetMetric> kInfo = [] {
    std::vector<BudgetMetric> out;
    for (const MetricImpl& m : metrics()) out.push_back(m.info);
    return out;
  }();
  return kInfo;
}

namespace {

// Each step of reading a budget takes its token from `toks` into `b`, or
// says what is wrong with it (parse_budget quotes the expression).

Status read_metric(Tokens& toks, const ConditionGrammar& g, Budget& b) {
  Token metric = toks.take(is_metric_char);
  if (metric.text.empty())
    return Status::Error(fmt::format("expected a metric at column {}, found {}",
                                     metric.column, found(toks.peek())));
  auto m = std::find_if(
      g.metrics.begin(), g.metrics.end(),
      [&](const BudgetMetric& x) { return x.name == metric.text; });
  if (m == g.metrics.end()) {
    std::string near = closest_metric(metric.text, g.metrics);
    Status st = Status::Error(fmt::format(
        "unknown metric '{}' at column {}{}", metric.text, metric.column,
        near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
    return st.with_hint(g.hint);
  }
  b.metric = m->name;
  b.kind = m->kind;
  return Status::Ok();
}

Status read_op(Tokens& toks, Budget& b) {
  Token op = toks.take(is_op_char);
  auto it = std::find_if(kOps.begin(), kOps.end(),
                         [&op](const auto& o) { return o.first == op.text; });
  if (it == kOps.end()) {
    Token at = op.text.empty() ? toks.peek() : op;
    return Status::Error(fmt::format(
        "expected an operator (> >= < <= == !=) at column {}, found {}{}",
        at.column, found(at), op.text == "=" ? " (compare with '==')" : ""));
  }
  b.op = it->second;
  return Status::Ok();
}

// "1%", "0.5%", "12.25%": at most 100, two decimals, as hundredths.
Result<uint64_t> parse_percent(std::string_view v) {
  if (v.size() < 2 || v.back() != '%')
    return Status::Error("needs a '%' (e.g. 1%)");
  v.remove_suffix(1);
  size_t dot = v.find('.');
  std::string_view whole = v.substr(0, dot);
  std::string_view frac =
      dot == std::string_view::npos ? "" : v.substr(dot + 1);
  auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || whole.size() > 3 || frac.size() > 2 || !digits(whole) ||
      !digits(frac) || (dot != std::string_view::npos && frac.empty()))
    return Status::Error("must be a percentage with at most two decimals");
  uint64_t n = 0;
  for (char c : whole) n = n * 10 + static_cast<uint64_t>(c - '0');
  n *= 100;
  for (size_t i = 0; i < 2; ++i)
    n += (i < frac.size() ? static_cast<uint64_t>(frac[i] - '0') : 0) *
         (i == 0 ? 10 : 1);
  if (n > 10000) return Status::Error("is above 100%");
  return n;
}

// The value as the metric's kind reads it: a duration, a whole number or a
// percentage.
Status read_limit(const Token& value, Budget& b) {
  if (b.kind == MetricKind::kPercent) {
    // A bare 0, as for durations.
    Result<uint64_t> n =
        value.text == "0" ? uint64_t{0} : parse_percent(value.text);
    if (!n.ok())
      return Status::Error(fmt::format(
          "{} is a percentage: '{}' at column {} "
          "{}",
          b.metric, value.text, value.column, n.status().message()));
    b.limit = *n;
    return Status::Ok();
  }
  if (b.kind == MetricKind::kCount) {
    Result<uint64_t> n = parse_count(value.text);
    if (!n.ok())
      return Status::Error(fmt::format("{} is a count: '{}' at column {} {}",
                                       b.metric, value.text, value.column,
                                       n.status().message()));
    b.limit = *n;
    return Status::Ok();
  }
  // A bare 0 is the same in every unit; any other number needs one.
  if (value.text == "0") {
    b.limit = 0;
    return Status::Ok();
  }
  Result<uint64_t> ns = parse_duration(value.text);
  if (!ns.ok() && !has_unit(value.text))
    return Status::Error(
        fmt::format("{} is a duration: '{}' at column {} needs a unit (ns, us, "
                    "ms, s), e.g. 16ms",
                    b.metric, value.text, value.column));
  if (!ns.ok())
    return Status::Error(fmt::format("{} is a duration: {} (at column {})",
                                     b.metric, ns.status().message(),
                                     value.column));
  b.limit = *ns;
  return Status::Ok();
}

// The value, which ends the expression.
Status read_value(Tokens& toks, Budget& b) {
  Token value =
      toks.take([](char c) { return !is_space(c) && !is_op_char(c); });
  if (value.text.empty())
    return Status::Error(
        fmt::format("expected a {} at column {}, found {}",
                    b.kind == MetricKind::kDuration  ? "duration (e.g. 16ms)"
                    : b.kind == MetricKind::kPercent ? "percentage (e.g. 1%)"
                                                     : "whole number",
                    value.column, found(toks.peek())));
  if (!toks.at_end()) {
    Token rest = toks.peek();
    return Status::Error(
        fmt::format("unexpected {} at column {} after the value", found(rest),
                    rest.column));
  }
  b.limit_text = std::string(value.text);
  return read_limit(value, b);
}

}  // namespace

Result<Budget> parse_budget(const std::string& text) {
  static const ConditionGrammar kBudgets{
      "--fail-if", budget_metrics(),
      "metrics: dispatch|idle|delivery.{count,slow,sum,p50,p90,p99,max}, "
      "slow.count, input.*, frames.*, barrier.*, lost, lost.* "
      "(docs/looptrace.md, BUDGETS)",
      "dispatch.p99 > 16ms"};
  return parse_condition(text, kBudgets);
}

Result<Budget> parse_condition(const std::string& text,
                               const ConditionGrammar& g) {
  auto error = [&text, &g](const Status& what) {
    // The message stays one line whatever was typed.
    std::string quoted;
    for (char c : text)
      quoted += c == '\n' ? "\\n" : c == '\r' ? "\\r" : std::string(1, c);
    Status st = Status::Error(
        fmt::format("{} '{}': {}", g.option, quoted, what.message()),
        ErrorKind::kUsage);
    if (!what.hint().empty()) st.with_hint(what.hint());
    return st;
  };
  if (text.find_first_of("\n\r") != std::string::npos)
    return error(Status::Error(
        fmt::format("one expression per {}, on one line", g.option)));
  Tokens toks(text);
  if (toks.at_end())
    return error(Status::Error(
        fmt::format("empty; expected METRIC OP VALUE, e.g. '{}'", g.example)));

  Budget b;
  Status st = read_metric(toks, g, b);
  if (st.ok()) st = read_op(toks, b);
  if (st.ok()) st = read_value(toks, b);
  if (!st.ok()) return error(st);
  b.text =
      fmt::format("{} {} {}", b.metric, budget_op_text(b.op), b.limit_text);
  return b;
}

bool budget_holds(BudgetOp op, uint64_t v, uint64_t limit) {
  switch (op) {
    case BudgetOp::kGt:
      return v > limit;
    case BudgetOp::kGe:
      return v >= limit;
    case BudgetOp::kLt:
      return v < limit;
    case BudgetOp::kLe:
      return v <= limit;
    case BudgetOp::kEq:
      return v == limit;
    case BudgetOp::kNe:
      return v != limit;
  }
  return false;
}

namespace {

std::string format_value(MetricKind kind, uint64_t v) {
  if (kind == MetricKind::kPercent)
    return fmt::format("{}.{:02}%", v / 100, v % 100);
  return kind == MetricKind::kDuration ? format_duration(v) : std::to_string(v);
}

const char* unit_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::kDuration:
      return "ns";
    case MetricKind::kPercent:
      return "basis_points";
    case MetricKind::kCount:
      break;
  }
  return "count";
}

}  // namespace

std::vector<BudgetOutcome> evaluate_budgets(const std::vector<Budget>& budgets,
                                            const nlohmann::json& report) {
  std::vector<BudgetOutcome> out;
  for (const Budget& b : budgets) {
    BudgetOutcome o;
    o.expr = b.text;
    o.metric = b.metric;
    o.kind = b.kind;
    o.op = b.op;
    o.limit = b.limit;
    o.limit_text = b.limit_text;
    const MetricImpl* m = find_metric(b.metric);
    Measure v = m != nullptr ? m->eval(report) : no_data("unknown metric");
    o.known = v.known;
    o.value = v.value;
    o.detail = std::move(v.detail);
    // Nothing measured is not a pass: the lab run did not see what it
    // asked about.
    o.broken = !o.known || budget_holds(b.op, o.value, b.limit);
    out.push_back(std::move(o));
  }
  return out;
}

bool any_budget_broken(const std::vector<BudgetOutcome>& outcomes) {
  return std::any_of(outcomes.begin(), outcomes.end(),
                     [](const BudgetOutcome& o) { return o.broken; });
}

nlohmann::json budgets_to_json(const std::vector<BudgetOutcome>& outcomes) {
  json out = json::array();
  for (const BudgetOutcome& o : outcomes)
    out.push_back({{"expr", o.expr},
                   {"metric", o.metric},
                   {"op", budget_op_text(o.op)},
                   {"unit", unit_name(o.kind)},
                   {"limit", o.limit},
                   {"value", o.known ? json(o.value) : json(nullptr)},
                   {"known", o.known},
                   {"broken", o.broken},
                   {"detail", o.detail}});
  return out;
}

std::string budget_broken_line(const BudgetOutcome& o) {
  if (!o.known)
    return fmt::format("looptrace: budget broken: {}: {}", o.expr, o.detail);
  return fmt::format("looptrace: budget broken: {} = {} {} {}{}", o.metric,
                     format_value(o.kind, o.value), budget_op_text(o.op),
                     o.limit_text,
                     o.detail.empty() ? "" : " (" + o.detail + ")");
}

void write_broken_budgets(std::ostream& os,
                          const std::vector<BudgetOutcome>& outcomes) {
  for (const BudgetOutcome& o : outcomes)
    if (o.broken) os << budget_broken_line(o) << '\n';
}

}  // namespace looptrace
