// Budgets for lab runs: `--fail-if EXPR` states a condition on the run's
// numbers that makes it fail (exit 3), e.g. `dispatch.p99 > 16ms`.
//
// Grammar (docs/looptrace.md, BUDGETS):
//
//   budget := METRIC OP VALUE          spaces between tokens are optional
//   OP     := ">" | ">=" | "<" | "<=" | "==" | "!="
//   VALUE  := a duration ("16ms", "1.5s", "0") for a duration metric,
//             a whole number ("0", "100") for a count metric
//
// A budget is *broken* when its expression is true of the run, or when the
// run did not measure its metric at all ("no data": a lab script must not
// pass because nothing was traced).
//
// Metrics are read from the JSON report document (docs/json-schema.md), so a
// budget's value is a number the JSON shows, or the max/sum of several.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace {

enum class BudgetOp { kGt, kGe, kLt, kLe, kEq, kNe };
// ">", ">=", ...
const char* budget_op_text(BudgetOp op);

enum class MetricKind {
  kCount,     // a number of things; VALUE is a whole number
  kDuration,  // nanoseconds; VALUE is a duration with a unit
  kPercent,   // hundredths of a percent; VALUE is a percentage ("1%", "0.5%")
};

// One metric a budget may name, for the docs and for messages.
struct BudgetMetric {
  std::string name;  // "dispatch.p99"
  MetricKind kind;
  std::string meaning;  // one line
};
// Every metric, in the order the manual lists them.
const std::vector<BudgetMetric>& budget_metrics();

struct Budget {
  std::string text;    // normalized: "dispatch.p99 > 16ms"
  std::string metric;  // "dispatch.p99"
  MetricKind kind = MetricKind::kCount;
  BudgetOp op = BudgetOp::kGt;
  uint64_t limit = 0;      // ns for a duration metric, else a count
  std::string limit_text;  // as typed: "16ms"
};

// Parses one --fail-if expression. Errors are ErrorKind::kUsage, one line
// that quotes the expression and names the column and token at fault.
Result<Budget> parse_budget(const std::string& text);

// The same grammar over another set of metrics (`monitor --dump-if`): the
// option named in errors, its metrics, the hint listing them, an example.
struct ConditionGrammar {
  std::string option;
  std::vector<BudgetMetric> metrics;
  std::string hint;
  std::string example;
};
Result<Budget> parse_condition(const std::string& text,
                               const ConditionGrammar& g);

// Whether `v OP limit`.
bool budget_holds(BudgetOp op, uint64_t v, uint64_t limit);

struct BudgetOutcome {
  std::string expr;    // Budget::text
  std::string metric;  // Budget::metric
  MetricKind kind = MetricKind::kCount;
  BudgetOp op = BudgetOp::kGt;
  uint64_t limit = 0;
  std::string limit_text;
  bool known = false;   // the run measured the metric
  uint64_t value = 0;   // its value (ns or a count) when known
  bool broken = false;  // the expression is true, or !known
  // Where the value comes from ("pid 4242 tid 4243 refapp-loop0"), or why
  // there is none ("no data: no idle spans traced"); may be empty.
  std::string detail;
};

// Each budget against the report document (write_json_report's object
// without its streamed lists is enough: see findings_to_json()).
std::vector<BudgetOutcome> evaluate_budgets(const std::vector<Budget>& budgets,
                                            const nlohmann::json& report);

bool any_budget_broken(const std::vector<BudgetOutcome>& outcomes);

// The report's "budgets" array (docs/json-schema.md).
nlohmann::json budgets_to_json(const std::vector<BudgetOutcome>& outcomes);

// "looptrace: budget broken: dispatch.p99 = 23.1ms > 16ms (pid 4242 ...)";
// "looptrace: budget broken: idle.max > 50ms: no data (no idle spans ...)".
std::string budget_broken_line(const BudgetOutcome& outcome);
// One such line per broken budget, in the order given.
void write_broken_budgets(std::ostream& os,
                          const std::vector<BudgetOutcome>& outcomes);

}  // namespace looptrace
