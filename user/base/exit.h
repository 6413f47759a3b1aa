// How `record` and `report` end: one line per failure on stderr, the exit
// code of the first (docs/looptrace.md EXIT STATUS).
#pragma once

#include <vector>

#include "base/status.h"

namespace looptrace {

// Exit status of a run whose --fail-if budgets were broken.
inline constexpr int kBudgetBroken = 3;

// "looptrace: error: ..." and a hint line; the status's exit code.
int fail(const Status& st);

// Every failure one line; the exit code of the first (0: none failed).
int report_failures(const std::vector<Status>& failures);

}  // namespace looptrace
