// CPython 3.11's location table (co_linetable; Objects/locations.md in
// CPython): which source line each instruction of a code object comes
// from, as _PyCode_CheckLineNumber / PyCode_Addr2Line read it.
#pragma once

#include <cstdint>
#include <string_view>

namespace looptrace::python {

// The line of the instruction at byte offset `offset` in the code, whose
// first line is `firstlineno`; -1 when the table gives it no line (or does
// not reach it). The table comes from a traced process: a malformed one
// ends the walk, never reads past its end.
int line_at(std::string_view table, int firstlineno, uint64_t offset);

}  // namespace looptrace::python
