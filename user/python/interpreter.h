// A CPython interpreter in a process: found in its mappings (the python3.X
// executable, or libpython3.X.so for an embedder), its version read from
// the file's Py_Version and checked against the layouts looptrace has.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/mapping.h"
#include "python/layout.h"

namespace looptrace::python {

struct Interpreter {
  std::string path;          // the ELF file that holds it
  uint32_t version_hex = 0;  // its Py_Version
  const Layout* layout = nullptr;
  lt_py_offsets frames{};     // the kernel's: kernel_offsets(*layout)
  lt_py_code_offsets code{};  // the kernel's: code_offsets(*layout)
  uint64_t runtime = 0;       // _PyRuntime in the process
  uint64_t code_type = 0;     // PyCode_Type in the process: what a code is
  // PyFunction_Type and PyMethod_Type: what a loop's Python callback is.
  uint64_t function_type = 0;
  uint64_t method_type = 0;
  // _PyEval_EvalFrameDefault in the process: a native frame there runs
  // Python frames.
  uint64_t eval_start = 0;
  uint64_t eval_end = 0;
};

// The interpreter `maps` (pid's mappings) show; nullopt when they show none.
// An error (one line) for a CPython whose version looptrace has no layout
// of, or whose file lacks what is needed.
Result<std::optional<Interpreter>> find_interpreter(
    uint32_t pid, const std::vector<MapEntry>& maps);

// The address at which the file mapped as `path` in `maps` has its virtual
// address `vaddr`; 0 when no mapping holds it. `file_offset`: vaddr's
// offset in the file.
uint64_t mapped_address(const std::vector<MapEntry>& maps,
                        const std::string& path, uint64_t file_offset);

}  // namespace looptrace::python
