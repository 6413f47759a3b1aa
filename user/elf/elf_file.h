// One ELF file opened read-only: its symbols, load segments and build-id.
// This is the address model the uprobe resolver and the symbolizer share:
// file offset <-> virtual address through PT_LOAD, vaddr -> symbol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

// libelf's handle; declared here so the header does not pull in <libelf.h>.
struct Elf;

namespace looptrace::elf {

struct Symbol {
  std::string name;       // as in the symbol table, without "@VERSION"
  std::string demangled;  // == name when it is not a C++ mangled name
  uint64_t vaddr = 0;
  uint64_t size = 0;
  bool is_func = false;      // STT_FUNC; otherwise STT_OBJECT
  bool from_dynsym = false;  // present in .dynsym (exported)
  // A non-default symbol version ("memcpy@GLIBC_2.2.5", kept for old
  // binaries): it symbolizes, but a bare name never resolves to it.
  bool hidden_version = false;
};

// A PT_LOAD program header.
struct Segment {
  uint64_t vaddr = 0;
  uint64_t memsz = 0;
  uint64_t offset = 0;
  uint64_t filesz = 0;
  bool executable = false;  // PF_X
};

class ElfFile {
 public:
  // What Open reads: everything, or the headers alone (segments, build-id,
  // debuglink; no symbols(): a 100 MB binary opens in a millisecond), or
  // the headers and the exported symbols (.dynsym only: symbols() holds no
  // .symtab entry, has_symtab() stays false).
  enum class Read { kAll, kHeaders, kDynsym };
  // Errors: "open /x: No such file or directory", "/x: not an ELF file".
  static Result<ElfFile> Open(const std::string& path, Read what = Read::kAll);
  // An image in memory (a [vdso] read from /proc/PID/mem, the ELF inside
  // .gnu_debugdata); name stands for the path in messages. fd() is -1.
  static Result<ElfFile> FromMemory(std::string name, std::vector<char> bytes);

  ElfFile(ElfFile&& other) noexcept;
  ElfFile& operator=(ElfFile&& other) noexcept;
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;
  ~ElfFile();

  const std::string& path() const { return path_; }
  // ET_DYN: a shared library or a PIE executable; loaded at a random base.
  bool is_dyn() const { return is_dyn_; }
  // Hex of the NT_GNU_BUILD_ID note; empty when the file has none.
  const std::string& build_id() const { return build_id_; }
  bool has_symtab() const { return has_symtab_; }
  // The file descriptor stays open for the object's lifetime; the
  // symbolizer relies on this to read files of processes that have exited.
  int fd() const { return fd_; }
  // .gnu_debuglink: the separate debug file's name and the CRC-32 of its
  // contents; empty name when the file has none.
  const std::string& debuglink() const { return debuglink_; }
  uint32_t debuglink_crc() const { return debuglink_crc_; }

  // The bytes of the first section called name as they are in the file;
  // nullopt when there is none (or it has no bytes in the file). Valid for
  // the object's lifetime.
  std::optional<std::string_view> section_bytes(std::string_view name) const;

  // Adds symbols found elsewhere (a separate debug file, MiniDebugInfo)
  // for symbol lookup by address; duplicates of symbols held are merged.
  void merge_symbols(const std::vector<Symbol>& more);

  // Defined FUNC and OBJECT symbols with a nonzero address from .symtab and
  // .dynsym, one entry per (name, vaddr), sorted by vaddr.
  const std::vector<Symbol>& symbols() const { return symbols_; }
  const std::vector<Segment>& segments() const { return segments_; }

  // Through the PT_LOAD that contains the address (with file backing).
  Result<uint64_t> vaddr_to_offset(uint64_t vaddr) const;
  Result<uint64_t> offset_to_vaddr(uint64_t offset) const;
  // True when the file offset lies in the file part of an executable PT_LOAD.
  bool offset_is_executable(uint64_t offset) const;

  // The symbol containing vaddr, or nullptr. FUNC wins over OBJECT and the
  // innermost wins over an enclosing one; a size-0 symbol (hand-written
  // assembly) covers addresses shortly after it when nothing else does.
  const Symbol* find_symbol_by_vaddr(uint64_t vaddr) const;
  // The data symbol (not a function, not a hidden version) named `name`,
  // or nullptr: a table or a variable the file exports.
  const Symbol* find_object(const std::string& name) const;

  // The 8-byte address the loaded file holds at `vaddr` (a function
  // pointer in a table): from the dynamic relocation of that slot
  // (R_X86_64_RELATIVE: the addend; R_X86_64_64 / GLOB_DAT: the symbol's
  // value plus the addend), else the file's own bytes there (a non-PIE
  // executable). Errors: no relocation and no file bytes there, or a
  // relocation against a symbol the file does not define.
  Result<uint64_t> pointer_at(uint64_t vaddr) const;
  // The name of the symbol another object supplies for the slot at
  // `vaddr` (a GOT entry: its R_X86_64_JUMP_SLOT or GLOB_DAT relocation
  // against an undefined symbol), or nullopt: a PLT stub's target.
  std::optional<std::string> imported_at(uint64_t vaddr) const;
  // The 4 bytes the file holds at `vaddr` (a `const unsigned` such as
  // glib_major_version), as the file has them: no relocation is applied.
  Result<uint32_t> u32_at(uint64_t vaddr) const;
  // n bytes of the file at `vaddr`, all inside one segment's file part (a
  // function's code, to decode).
  Status read_bytes(uint64_t vaddr, void* out, size_t n) const;

 private:
  ElfFile(std::string path, int fd, Elf* elf);
  Status load(Read what = Read::kAll);
  // Every header table, loadable segment and section lies inside the file.
  Status check_extents() const;
  Status load_symbols(bool dynsym_only = false);
  void load_build_id();
  void load_debuglink();
  // Sorts all_, merges duplicates into symbols_ and builds max_end_.
  void index_symbols(std::vector<Symbol> all);
  const Segment* segment_for_offset(uint64_t offset) const;

  std::string path_;
  int fd_ = -1;
  // The image of FromMemory; libelf reads it in place. Its heap buffer
  // does not move when the object does.
  std::vector<char> bytes_;
  Elf* elf_ = nullptr;
  bool is_dyn_ = false;
  bool has_symtab_ = false;
  std::string build_id_;
  std::string debuglink_;
  uint32_t debuglink_crc_ = 0;
  std::vector<Segment> segments_;
  std::vector<Symbol> symbols_;
  // max_end_[i] = max(vaddr + size) over symbols_[0..i]; bounds the
  // backwards walk in find_symbol_by_vaddr.
  std::vector<uint64_t> max_end_;
};

}  // namespace looptrace::elf
