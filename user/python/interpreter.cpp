#include "python/interpreter.h"

#include <fmt/format.h>

#include <set>

#include "elf/elf_file.h"

namespace looptrace::python {
namespace {

// A file that may hold CPython: python3.X or libpython3.X.so.
bool may_be_python(const std::string& path) {
  const std::string base = path.substr(path.rfind('/') + 1);
  return base.rfind("python3", 0) == 0 || base.rfind("libpython3", 0) == 0;
}

const elf::Symbol* find_function(const elf::ElfFile& f,
                                 const std::string& name) {
  for (const elf::Symbol& s : f.symbols())
    if (s.is_func && s.name == name) return &s;
  return nullptr;
}

// The process address of a symbol of `f`, mapped as `path`; 0 if none.
uint64_t symbol_address(const elf::ElfFile& f, const elf::Symbol* s,
                        const std::vector<MapEntry>& maps,
                        const std::string& path) {
  if (s == nullptr) return 0;
  auto off = f.vaddr_to_offset(s->vaddr);
  return off.ok() ? mapped_address(maps, path, *off) : 0;
}

// The interpreter in the file `path` (mapped in `maps`), opened through
// the process's root; nullopt when the file is no CPython.
Result<std::optional<Interpreter>> read_interpreter(
    uint32_t pid, const std::vector<MapEntry>& maps, const std::string& path) {
  auto f = elf::ElfFile::Open(fmt::format("/proc/{}/root{}", pid, path));
  if (!f.ok()) f = elf::ElfFile::Open(path);
  if (!f.ok()) return std::optional<Interpreter>();
  const elf::Symbol* runtime = f->find_object("_PyRuntime");
  if (runtime == nullptr) return std::optional<Interpreter>();
  const elf::Symbol* version = f->find_object("Py_Version");
  if (version == nullptr)
    return Status::Error(fmt::format(
        "{}: a CPython older than 3.11 (no Py_Version); Python frames are "
        "read for {} only",
        path, known_versions()));
  Interpreter in;
  in.path = path;
  auto hex = f->u32_at(version->vaddr);
  if (!hex.ok()) return hex.status();
  in.version_hex = *hex;
  in.layout = layout_for(in.version_hex);
  if (in.layout == nullptr)
    return Status::Error(fmt::format(
        "{}: CPython {}, whose layout looptrace does not know; Python frames "
        "are read for {} only",
        path, version_string(in.version_hex), known_versions()));
  auto frames = kernel_offsets(*in.layout);
  if (!frames.ok())
    return Status::Error(fmt::format("{}: {}; Python frames are not read", path,
                                     frames.status().message()));
  in.frames = *frames;
  auto code = code_offsets(*in.layout);
  if (!code.ok())
    return Status::Error(fmt::format("{}: {}; Python frames are not read", path,
                                     code.status().message()));
  in.code = *code;
  const elf::Symbol* eval = find_function(*f, "_PyEval_EvalFrameDefault");
  in.runtime = symbol_address(*f, runtime, maps, path);
  in.code_type = symbol_address(*f, f->find_object("PyCode_Type"), maps, path);
  in.function_type =
      symbol_address(*f, f->find_object("PyFunction_Type"), maps, path);
  in.method_type =
      symbol_address(*f, f->find_object("PyMethod_Type"), maps, path);
  in.eval_start = symbol_address(*f, eval, maps, path);
  in.eval_end = in.eval_start ? in.eval_start + eval->size : 0;
  if (!in.runtime || !in.code_type)
    return Status::Error(fmt::format(
        "{}: _PyRuntime or PyCode_Type is not mapped where expected", path));
  return std::optional<Interpreter>(in);
}

}  // namespace

uint64_t mapped_address(const std::vector<MapEntry>& maps,
                        const std::string& path, uint64_t file_offset) {
  for (const MapEntry& m : maps)
    if (m.path == path && file_offset >= m.pgoff &&
        file_offset - m.pgoff < m.end - m.start)
      return m.start + (file_offset - m.pgoff);
  return 0;
}

Result<std::optional<Interpreter>> find_interpreter(
    uint32_t pid, const std::vector<MapEntry>& maps) {
  std::set<std::string> seen;
  for (const MapEntry& m : maps) {
    if (!m.is_file() || !may_be_python(m.path) || !seen.insert(m.path).second)
      continue;
    auto in = read_interpreter(pid, maps, m.path);
    if (!in.ok() || *in) return in;
  }
  return std::optional<Interpreter>();
}

}  // namespace looptrace::python
