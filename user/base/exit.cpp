#include "base/exit.h"

#include <cstdio>

#include "base/log.h"

namespace looptrace {

int fail(const Status& st) {
  log::error("{}", st.message());
  if (!st.hint().empty())
    std::fprintf(stderr, "hint: %s\n", printable(st.hint()).c_str());
  return st.exit_code();
}

int report_failures(const std::vector<Status>& failures) {
  int rc = 0;
  for (const Status& st : failures) {
    if (st.ok()) continue;
    int code = fail(st);
    if (rc == 0) rc = code;
  }
  return rc;
}

}  // namespace looptrace
