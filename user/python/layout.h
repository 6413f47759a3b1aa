// The layout of one CPython version's structures that looptrace reads:
// where a thread's frames are (the kernel walks them, abi.h
// lt_py_offsets) and what a code object holds (userspace names it). One
// entry per supported version, generated from the interpreter's own
// headers by scripts/python-offsets.sh; a version without an entry is not
// read (its threads keep their native frames only).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "looptrace/abi.h"

namespace looptrace::python {

// Byte offsets of the fields of a code object and of the objects it points
// to (PyUnicode names, the PyBytes location table).
struct CodeLayout {
  uint16_t ob_type = 0;           // PyObject.ob_type
  uint16_t co_firstlineno = 0;    // int
  uint16_t co_filename = 0;       // PyUnicode *
  uint16_t co_name = 0;           // PyUnicode *
  uint16_t co_qualname = 0;       // PyUnicode *
  uint16_t co_linetable = 0;      // PyBytes *
  uint16_t co_code_adaptive = 0;  // the instructions, inline
  uint16_t bytes_size = 0;        // PyVarObject.ob_size
  uint16_t bytes_sval = 0;        // PyBytesObject.ob_sval
  uint16_t unicode_length = 0;    // PyASCIIObject.length
  uint16_t unicode_state = 0;     // PyASCIIObject.state (a bit field)
  uint16_t ascii_size = 0;        // sizeof(PyASCIIObject): ASCII text after it
  uint16_t compact_size = 0;      // sizeof(PyCompactUnicodeObject)
};

struct Layout {
  uint32_t major = 0;  // 3
  uint32_t minor = 0;  // 11
  lt_py_offsets frames{};
  CodeLayout code;
};

// The layout of the interpreter whose Py_Version (PY_VERSION_HEX:
// 0x030b02f0 is 3.11.2 final) is `version_hex`; nullptr for a version
// looptrace has no layout of. Any micro release of a minor version shares
// its layout (CPython keeps the ABI of these structures within one).
const Layout* layout_for(uint32_t version_hex);

// The offsets the kernel walks a thread's frames with: l.frames, and the
// window it copies each frame's fields from in one read (frame_window, 8
// bytes aligned, and frame_window_len, from there to the end of the last
// field). An error (one line) when a field is missing, a pointer field is
// not 8-byte aligned or the fields span more than LT_PY_FRAME_WINDOW bytes.
Result<lt_py_offsets> kernel_offsets(const Layout& l);

// The offsets the kernel reads a code object's names with (abi.h
// lt_py_code_offsets, LT_REC_PYCODE): l.code, and the window it copies a
// code object's key from (its first line, qualname and line table
// pointers) in one read. An error (one line) when a pointer is not 8-byte
// aligned, the first line not 4-byte aligned, or they span more than
// LT_PY_CODE_WINDOW bytes.
Result<lt_py_code_offsets> code_offsets(const Layout& l);

// "3.11.2" from a PY_VERSION_HEX.
std::string version_string(uint32_t version_hex);

// "3.11" for each known layout, comma-separated: for messages.
std::string known_versions();

}  // namespace looptrace::python
